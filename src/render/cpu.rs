//! `cpu`: where the CPU went inside the processes (`record --cpu-profile`):
//! the hottest functions by the samples taken in them (self) and under
//! them (total), for the whole run, then per command and per test. Every
//! list is cut short and says what it left out, and every share says what
//! it is of: the commands and the tests are shares of the run's samples,
//! each one's functions shares of its own.

use std::collections::HashSet;
use std::io::{self, Write};

use super::{Missing, Options};
use crate::analysis::{hotspots, Hot, HotGroup};
use crate::event::{Pid, SampleClock};
use crate::recording::Recording;
use crate::text::{count, shorten, visible};

/// Functions listed for the whole run.
const TOP: usize = 25;
/// Groups listed per table, and functions per group.
const GROUPS: usize = 10;
const GROUP_TOP: usize = 5;

/// Writes the hottest functions.
pub fn render(recording: &Recording, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let headline = headline(recording).ok_or(Missing::CpuProfile)?;
    writeln!(out, "CPU profile: {headline}")?;
    let hot = hotspots(&recording.profile, &recording.processes);
    if let Some(note) = super::cut_note(recording, CUT_SAMPLES) {
        writeln!(out, "{note}")?;
    }
    writeln!(out)?;
    let run = Base {
        of: "the run's",
        samples: hot.samples,
    };
    write_functions(out, &hot.functions, TOP, run, "", options)?;
    write_groups(out, "command", &hot.by_command, run, options)?;
    if !hot.by_test.is_empty() {
        write_groups(out, "test", &hot.by_test, run, options)?;
    }
    Ok(())
}

/// What a list's shares are of: `of` names it (`the run's`, `its`).
#[derive(Clone, Copy)]
struct Base {
    of: &'static str,
    samples: u64,
}

/// What the CPU views say of a recording whose tree was never sampled.
pub(super) const NO_SAMPLE: &str = "no sample of the tree was taken (it used too little CPU)";
/// What a recording cut short means for its samples.
pub(super) const CUT_SAMPLES: &str =
    "samples are written at a recording's end, so those of the cut part are missing";

/// The profile in one line, `1184 samples of 4 processes at 999 Hz
/// (cpu-clock), 0 lost`; `None` without one.
pub(super) fn headline(recording: &Recording) -> Option<String> {
    let profile = recording.header.as_ref()?.cpu_profile?;
    let samples = &recording.profile.samples;
    let processes: HashSet<Pid> = samples.iter().map(|s| s.pid).collect();
    let lost = match &recording.trailer {
        Some(trailer) => trailer.lost_samples.to_string(),
        None => "unknown".to_owned(),
    };
    Some(format!(
        "{} of {} at {} Hz ({}), {} lost",
        count(recording.profile.total(), "sample", "samples"),
        count(processes.len() as u64, "process", "processes"),
        profile.hz,
        clock_name(profile.clock),
        lost
    ))
}

fn clock_name(clock: SampleClock) -> &'static str {
    match clock {
        SampleClock::Cycles => "cycles",
        _ => "cpu-clock",
    }
}

/// The first `top` functions, with their shares of `base`.
fn write_functions(
    out: &mut dyn Write,
    functions: &[Hot],
    top: usize,
    base: Base,
    indent: &str,
    options: Options,
) -> io::Result<()> {
    let of = base.samples;
    writeln!(
        out,
        "{indent}{:>6} {:>6}  function  (% of {} samples)",
        "self", "total", base.of
    )?;
    for hot in functions.iter().take(top) {
        let line = format!(
            "{indent}{:>6} {:>6}  {}  ({})",
            share(hot.self_samples, of),
            share(hot.total_samples, of),
            visible(&hot.function),
            visible(file_name(&hot.module))
        );
        writeln!(out, "{}", shorten(&line, options.width))?;
    }
    let left = functions.len().saturating_sub(top);
    if left > 0 {
        let samples = sum(functions[top..].iter().map(|h| h.self_samples));
        writeln!(
            out,
            "{indent}… {left} more {} with {} of {} samples",
            if left == 1 { "function" } else { "functions" },
            share(samples, of),
            base.of
        )?;
    }
    Ok(())
}

/// The busiest groups, each with its hottest functions: their shares of
/// the run's samples, and where the groups do not cover them all (the
/// samples outside any test), how much they do.
fn write_groups(
    out: &mut dyn Write,
    kind: &str,
    groups: &[HotGroup],
    run: Base,
    options: Options,
) -> io::Result<()> {
    let total = run.samples;
    let covered = sum(groups.iter().map(|g| g.samples));
    let outside = if covered < total {
        format!(", {} in {kind}s", share(covered, total))
    } else {
        String::new()
    };
    writeln!(
        out,
        "\nBy {kind} ({} of {}), % of {} samples{outside}:",
        GROUPS.min(groups.len()),
        groups.len(),
        run.of
    )?;
    for group in groups.iter().take(GROUPS) {
        let line = format!(
            "  {} {}: {}, {}",
            share(group.samples, total),
            visible(&group.name),
            count(group.samples, "sample", "samples"),
            count(group.processes as u64, "process", "processes")
        );
        writeln!(out, "{}", shorten(&line, options.width))?;
        let own = Base {
            of: "its",
            samples: group.samples,
        };
        write_functions(out, &group.functions, GROUP_TOP, own, "    ", options)?;
    }
    if groups.len() > GROUPS {
        let samples = sum(groups[GROUPS..].iter().map(|g| g.samples));
        writeln!(
            out,
            "  … {} more {kind}s with {} of {} samples",
            groups.len() - GROUPS,
            share(samples, total),
            run.of
        )?;
    }
    Ok(())
}

/// Sample counts added up, saturating: a hostile recording's may not fit.
fn sum(counts: impl Iterator<Item = u64>) -> u64 {
    counts.fold(0, u64::saturating_add)
}

/// `12.3%` of `of`.
fn share(part: u64, of: u64) -> String {
    format!("{:.1}%", part as f64 * 100.0 / of.max(1) as f64)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
