//! `diff`: two runs compared ([`crate::analysis::diff`]), for people.

use std::io::{self, Write};

use crate::analysis::diff::{Diff, Lone, Pair, Side, Slower};
use crate::text::visible;
use crate::text::{seconds, shorten};

/// Writes the differences for people: each section only when it has
/// something, each list cut at `limit` entries.
pub fn write_diff(diff: &Diff, limit: usize, out: &mut dyn Write) -> io::Result<()> {
    for (name, run) in [("A", &diff.a), ("B", &diff.b)] {
        writeln!(
            out,
            "{name}: {} ({}, {}, {} processes{})",
            visible(run.command.as_deref().unwrap_or("?")),
            run.status.as_deref().unwrap_or("status unknown"),
            seconds(run.wall_ns),
            run.processes,
            match run.lost {
                Some(0) => String::new(),
                Some(lost) => format!(", {lost} events lost"),
                None => ", cut short".to_owned(),
            }
        )?;
    }
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
                writeln!(out, "      with {}", shorten(&visible(name), Some(100)))?;
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
    let title = format!("Slower in B ({})", when.join(" and "));
    pairs(&title, &diff.slower, out)
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
    shorten(&visible(&side.command), Some(WIDTH))
}

fn test_note(test: Option<&String>) -> String {
    test.map(|t| format!("  [test: {}]", visible(t)))
        .unwrap_or_default()
}
