//! `diff`: two runs compared ([`crate::analysis::diff`]), for people.

use std::io::{self, Write};

use crate::analysis::diff::{Diff, HitShift, Lone, Moved, Pair, Side, Slower, SlowerTest};
use crate::text::visible;
use crate::text::{count, seconds, shorten, shorten_command};

/// Functions listed each way in the CPU section: what moved most; the
/// rest is said in one line, and `--json` has it all.
const MOVED: usize = 10;
/// Columns a function's name may take there.
const FUNCTION_WIDTH: usize = 80;

/// Writes the differences for people: each section only when it has
/// something, each list cut at `limit` entries; then, when both runs have
/// a CPU profile, the functions whose share moved most.
pub fn write_diff(diff: &Diff, limit: usize, out: &mut dyn Write) -> io::Result<()> {
    write_processes(diff, limit, out)?;
    write_one_off_cpu(diff, out)?;
    write_cpu(diff, out)?;
    match &diff.hits {
        Some(hits) => write_hits(hits, out),
        None => Ok(()),
    }
}

/// The two runs, a line each, and what a cut one lacks.
fn write_runs(diff: &Diff, out: &mut dyn Write) -> io::Result<()> {
    for (name, run) in [("A", &diff.a), ("B", &diff.b)] {
        writeln!(
            out,
            "{name}: {} ({}, {}, {}{})",
            visible(run.command.as_deref().unwrap_or("?")),
            run.status.as_deref().unwrap_or("status unknown"),
            seconds(run.wall_ns),
            count(run.processes, "process", "processes"),
            match run.lost {
                Some(0) => String::new(),
                Some(lost) => format!(", {lost} events lost"),
                None => ", cut short".to_owned(),
            }
        )?;
    }
    for (name, run) in [("A", &diff.a), ("B", &diff.b)] {
        if run.cut {
            writeln!(
                out,
                "{name} is cut short (no trailer): its processes after the cut are missing (\
                 \"Only in\" the other run), and those cut off before an exit are compared by \
                 no status or time."
            )?;
        }
    }
    Ok(())
}

fn write_processes(diff: &Diff, limit: usize, out: &mut dyn Write) -> io::Result<()> {
    write_runs(diff, out)?;
    if !diff.differs() {
        return writeln!(out, "\nNo differences beyond the thresholds.");
    }
    let pairs = |title: &str, list: &[Pair], out: &mut dyn Write| {
        section(title, list, limit, out, |pair, out| {
            let (a, b) = (&pair.a, &pair.b);
            writeln!(
                out,
                "  {}: {} → {}, {} → {} (pid {} → {}){}",
                command(b),
                a.status,
                b.status,
                seconds(a.duration_ns),
                seconds(b.duration_ns),
                a.pid,
                b.pid,
                test_note(b.test.as_ref().or(a.test.as_ref()))
            )?;
            write_under(&pair.path, out)
        })
    };
    let lones = |title: &str, list: &[Lone], out: &mut dyn Write| {
        section(title, list, limit, out, |lone, out| {
            let p = &lone.process;
            let more = match lone.descendants {
                0 => String::new(),
                1 => ", and 1 descendant".to_owned(),
                n => format!(", and {n} descendants"),
            };
            let outlived = if lone.outlived {
                ", outlived its parent"
            } else {
                ""
            };
            writeln!(
                out,
                "  {}: {}, {} (pid {}){outlived}{more}{}",
                command(p),
                p.status,
                seconds(p.duration_ns),
                p.pid,
                test_note(p.test.as_ref())
            )?;
            write_under(&lone.path, out)?;
            for name in &lone.named {
                writeln!(
                    out,
                    "      with {}",
                    shorten_command(&visible(name), Some(100))
                )?;
            }
            if lone.descendants > lone.named.len() {
                writeln!(
                    out,
                    "      … and {} more",
                    lone.descendants - lone.named.len()
                )?;
            }
            Ok(())
        })
    };
    pairs("Ended differently", &diff.status_changed, out)?;
    lones(
        "Outlived its parent or still running in A only",
        &diff.hung_only_in_a,
        out,
    )?;
    lones(
        "Outlived its parent or still running in B only",
        &diff.hung_only_in_b,
        out,
    )?;
    lones("Only in A", &diff.only_in_a, out)?;
    lones("Only in B", &diff.only_in_b, out)?;
    let when: Vec<String> = diff.slower_when.iter().map(Slower::to_string).collect();
    let when = when.join(" and ");
    pairs(&format!("Slower in B ({when})"), &diff.slower, out)?;
    let Some(waits) = &diff.waits else {
        return Ok(());
    };
    let title = format!("Tests slower in B, by what grew most ({when})");
    section(&title, &waits.slower, limit, out, |test, out| {
        writeln!(out, "  {}", slower_test(test))
    })
}

/// `test_x: 1.000s → 2.200s (+1.200s), of which +1.100s socket in
/// recv_all woken by postgres 99 (outside the tree)`.
fn slower_test(test: &SlowerTest) -> String {
    let name = |text: &str| shorten(&visible(text), Some(FUNCTION_WIDTH));
    let (function, waker) = (test.function.as_deref(), test.waker.as_deref());
    format!(
        "{}: {} → {} (+{}), of which +{} {}{}",
        name(&test.test),
        seconds(test.a_wall_ns),
        seconds(test.b_wall_ns),
        seconds(test.b_wall_ns - test.a_wall_ns),
        seconds(test.grew_ns),
        test.part.name(),
        super::wait_place(function, waker, name)
    )
}

/// Why the tests' waits are not compared when one run followed them.
fn write_one_off_cpu(diff: &Diff, out: &mut dyn Write) -> io::Result<()> {
    let only = match (diff.a.off_cpu, diff.b.off_cpu) {
        (true, false) => "A",
        (false, true) => "B",
        _ => return Ok(()),
    };
    writeln!(
        out,
        "\nWaits of {only} only: record both runs with --off-cpu to compare what the tests \
         waited on."
    )
}

/// The functions whose self share of the CPU samples grew and shrank
/// most, or why there are none to name.
fn write_cpu(diff: &Diff, out: &mut dyn Write) -> io::Result<()> {
    let Some(shift) = &diff.cpu else {
        let only = match (diff.a.cpu_samples, diff.b.cpu_samples) {
            (Some(_), None) => "A",
            (None, Some(_)) => "B",
            _ => return Ok(()),
        };
        return writeln!(
            out,
            "\nCPU profile of {only} only: record both runs with --cpu-profile to compare them."
        );
    };
    writeln!(
        out,
        "\nCPU share by function, % of each run's self samples (A: {}, B: {}):",
        count(shift.a_samples, "sample", "samples"),
        count(shift.b_samples, "sample", "samples")
    )?;
    if shift.a_samples == 0 || shift.b_samples == 0 {
        return writeln!(out, "  a run without samples has no shares to compare");
    }
    if shift.grew.is_empty() && shift.shrank.is_empty() {
        return writeln!(out, "  every function's share is the same");
    }
    write_moved("grew", &shift.grew, out)?;
    write_moved("shrank", &shift.shrank, out)
}

/// The probes whose hits changed most, in all and per test, and what
/// could not be compared.
fn write_hits(hits: &HitShift, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nProbe hits, A → B:")?;
    for (run, only) in [("A", &hits.only_in_a), ("B", &hits.only_in_b)] {
        if !only.is_empty() {
            writeln!(out, "  only in {run}: {}", visible(&only.join(", ")))?;
        }
    }
    if hits.changed.is_empty() {
        return writeln!(out, "  the same in both runs ({} compared)", hits.same);
    }
    writeln!(
        out,
        "  changed most ({} of {}; {} the same):",
        MOVED.min(hits.changed.len()),
        hits.changed.len(),
        hits.same
    )?;
    for change in hits.changed.iter().take(MOVED) {
        let test = change.test.as_deref().map_or("in all".into(), |t| {
            format!("in {}", shorten(&visible(t), Some(FUNCTION_WIDTH)))
        });
        writeln!(
            out,
            "    {:+} hits  {}  {test}  {} → {}",
            i128::from(change.b) - i128::from(change.a),
            visible(&change.probe),
            change.a,
            change.b
        )?;
    }
    if hits.changed.len() > MOVED {
        writeln!(
            out,
            "    … and {} more that changed (--json has them all)",
            hits.changed.len() - MOVED
        )?;
    }
    Ok(())
}

/// `  grew most (10 of 31):`, then one line a function and one for the
/// rest, with the points they moved together.
fn write_moved(way: &str, list: &[Moved], out: &mut dyn Write) -> io::Result<()> {
    if list.is_empty() {
        return writeln!(out, "  no function's share {way}");
    }
    writeln!(
        out,
        "  {way} most ({} of {}):",
        MOVED.min(list.len()),
        list.len()
    )?;
    for moved in list.iter().take(MOVED) {
        // The name is what gets long (C++, Rust generics): cut it, not
        // the shares after it.
        writeln!(
            out,
            "    {:+5.1} points  {}  ({})  {:.1}% → {:.1}%",
            moved.points,
            shorten(&visible(&moved.function), Some(FUNCTION_WIDTH)),
            visible(file_name(&moved.module)),
            moved.a_share,
            moved.b_share
        )?;
    }
    if list.len() > MOVED {
        let rest = &list[MOVED..];
        let points: f64 = rest.iter().map(|m| m.points).sum();
        writeln!(
            out,
            "    … and {} more that {way}, {points:+.1} points together (--json has them all)",
            rest.len()
        )?;
    }
    Ok(())
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Writes a titled list, cut at `limit` entries.
fn section<T>(
    title: &str,
    list: &[T],
    limit: usize,
    out: &mut dyn Write,
    mut entry: impl FnMut(&T, &mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    if list.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n{title} ({}):", list.len())?;
    for item in list.iter().take(limit) {
        entry(item, out)?;
    }
    if list.len() > limit {
        writeln!(
            out,
            "  … and {} more (--json has them all)",
            list.len() - limit
        )?;
    }
    Ok(())
}

/// `    under make › cc`: the nearest ancestors of a path's last group.
fn write_under(path: &[String], out: &mut dyn Write) -> io::Result<()> {
    const SHOWN: usize = 3;
    let ancestors = &path[..path.len().saturating_sub(1)];
    if ancestors.is_empty() {
        return Ok(());
    }
    let skipped = ancestors.len().saturating_sub(SHOWN);
    let shown: Vec<String> = ancestors[skipped..]
        .iter()
        .map(|g| visible(g).into_owned())
        .collect();
    let lead = if skipped > 0 { "… › " } else { "" };
    writeln!(out, "      under {lead}{}", shown.join(" › "))
}

/// What a process ran, on one line of reasonable length.
fn command(side: &Side) -> String {
    const WIDTH: usize = 100;
    shorten_command(&visible(&side.command), Some(WIDTH))
}

fn test_note(test: Option<&String>) -> String {
    test.map(|t| format!("  [test: {}]", visible(t)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::write_diff;
    use crate::analysis::diff::{CpuShift, Diff, Moved, Part, Run, Slower, SlowerTest, WaitShift};
    use crate::event::WaitReason;

    fn run(cpu_samples: Option<u64>) -> Run {
        Run {
            command: Some("./hot".into()),
            status: Some("exit 0".into()),
            wall_ns: 1_000_000_000,
            processes: 1,
            lost: Some(0),
            cut: false,
            cpu_samples,
            off_cpu: false,
        }
    }

    fn diff(a: Option<u64>, b: Option<u64>, cpu: Option<CpuShift>) -> String {
        written(&blank(a, b, cpu), 50)
    }

    fn written(diff: &Diff, limit: usize) -> String {
        let mut out = Vec::new();
        write_diff(diff, limit, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn blank(a: Option<u64>, b: Option<u64>, cpu: Option<CpuShift>) -> Diff {
        Diff {
            a: run(a),
            b: run(b),
            slower_when: Slower::DEFAULT.to_vec(),
            status_changed: Vec::new(),
            only_in_a: Vec::new(),
            only_in_b: Vec::new(),
            slower: Vec::new(),
            hung_only_in_a: Vec::new(),
            hung_only_in_b: Vec::new(),
            cpu,
            hits: None,
            waits: None,
        }
    }

    fn moved(function: &str, a_share: f64, b_share: f64) -> Moved {
        Moved {
            function: function.into(),
            module: "/usr/bin/hot".into(),
            a_samples: 0,
            a_share,
            b_samples: 0,
            b_share,
            points: b_share - a_share,
        }
    }

    #[test]
    fn the_cpu_section_names_ten_each_way_and_says_what_it_left_out() {
        let grew: Vec<Moved> = (0..12)
            .map(|i| moved(&format!("f{i}"), 1.0, 1.0 + f64::from(12 - i)))
            .collect();
        let shift = CpuShift {
            a_samples: 400,
            b_samples: 1,
            grew,
            shrank: vec![moved("spin_a", 75.0, 25.0)],
        };
        let text = diff(Some(400), Some(1), Some(shift));
        let section = text.split_once("\nCPU share").unwrap().1;
        assert_eq!(
            section,
            " by function, % of each run's self samples (A: 400 samples, B: 1 sample):\n  \
             grew most (10 of 12):\n    \
             +12.0 points  f0  (hot)  1.0% → 13.0%\n    \
             +11.0 points  f1  (hot)  1.0% → 12.0%\n    \
             +10.0 points  f2  (hot)  1.0% → 11.0%\n     \
             +9.0 points  f3  (hot)  1.0% → 10.0%\n     \
             +8.0 points  f4  (hot)  1.0% → 9.0%\n     \
             +7.0 points  f5  (hot)  1.0% → 8.0%\n     \
             +6.0 points  f6  (hot)  1.0% → 7.0%\n     \
             +5.0 points  f7  (hot)  1.0% → 6.0%\n     \
             +4.0 points  f8  (hot)  1.0% → 5.0%\n     \
             +3.0 points  f9  (hot)  1.0% → 4.0%\n    \
             … and 2 more that grew, +3.0 points together (--json has them all)\n  \
             shrank most (1 of 1):\n    \
             -50.0 points  spin_a  (hot)  75.0% → 25.0%\n",
            "{text}"
        );
        // Shares are no difference: the exit status stays 0.
        assert!(text.contains("No differences beyond the thresholds."));
    }

    #[test]
    fn one_profile_or_none_is_said_or_left_out() {
        assert!(diff(Some(10), None, None).ends_with(
            "\nCPU profile of A only: record both runs with --cpu-profile to compare them.\n"
        ));
        assert!(diff(None, Some(10), None).contains("CPU profile of B only"));
        assert!(!diff(None, None, None).contains("CPU"));
        let empty = CpuShift {
            a_samples: 10,
            b_samples: 0,
            grew: Vec::new(),
            shrank: Vec::new(),
        };
        assert!(diff(Some(10), Some(0), Some(empty))
            .ends_with("  a run without samples has no shares to compare\n"));
    }

    #[test]
    fn slower_tests_say_what_grew_and_are_cut_at_the_limit() {
        let test = |name: &str, part, function: Option<&str>| SlowerTest {
            test: name.into(),
            a_wall_ns: 1_000_000_000,
            b_wall_ns: 2_200_000_000,
            part,
            grew_ns: 1_100_000_000,
            function: function.map(Into::into),
            waker: function.map(|_| "postgres 99 (outside the tree)".into()),
        };
        let mut diff = blank(None, None, None);
        diff.a.off_cpu = true;
        diff.b.off_cpu = true;
        diff.waits = Some(WaitShift {
            slower: vec![
                test("test_x", Part::Wait(WaitReason::Socket), Some("recv_all")),
                test("test_y", Part::Cpu, None),
                test("test_z", Part::Cpu, None),
            ],
            compared: 5,
        });
        let text = written(&diff, 2);
        let section = text.split_once("\nTests slower").unwrap().1;
        assert_eq!(
            section,
            " in B, by what grew most (2x and +0.100s) (3):\n  \
             test_x: 1.000s → 2.200s (+1.200s), of which +1.100s socket in recv_all woken by \
             postgres 99 (outside the tree)\n  \
             test_y: 1.000s → 2.200s (+1.200s), of which +1.100s CPU\n  \
             … and 1 more (--json has them all)\n",
            "{text}"
        );
        diff.b.off_cpu = false;
        diff.waits = None;
        assert!(written(&diff, 2).ends_with(
            "\nWaits of A only: record both runs with --off-cpu to compare what the tests \
             waited on.\n"
        ));
    }
}
