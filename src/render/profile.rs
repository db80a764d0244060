//! `profile`: where the time went. Commands grouped by what they ran (the
//! program and its arguments with file names, numbers and repeats folded:
//! `gcc -c *.c`), the same by test, each by total wall time, CPU, count
//! and peak RSS; then the critical path, the chain of processes that set
//! the run's wall time, with what each waited on (`record --off-cpu`).

use std::io::{self, Write};

use std::collections::HashMap;

use super::Options;
use crate::analysis::{critical_path, group_usage, wall_by_process, Peak, Usage, WallSplit};
use crate::recording::Recording;
use crate::text::visible;
use crate::text::{glance, seconds, shorten, shorten_command};

/// Groups listed in each table.
const TOP: usize = 15;
/// Links of the critical path listed: those with the largest own shares.
const PATH_LINKS: usize = 15;
/// Widest a critical path line gets when no terminal sets the width: its
/// commands can be linker lines of kilobytes.
const PATH_WIDTH: usize = 160;
/// Reasons named of what a process of the critical path waited on.
const PATH_REASONS: usize = 3;
/// Where a link's waits start: under its pid, past the times.
const WAITS_INDENT: &str = "                          ";

/// Writes the profile.
pub fn render(recording: &Recording, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    let cut = "a process's CPU and peak RSS come with its exit, so those `cut off` before theirs \
               count none, and their wall times are lower bounds (≥)";
    if let Some(note) = super::cut_note(recording, cut) {
        writeln!(out, "{note}\n")?;
    }
    let usage = group_usage(processes);
    write_table(out, "Commands", &usage.by_command, options)?;
    if !usage.by_test.is_empty() {
        write_table(out, "Tests", &usage.by_test, options)?;
    }
    write_critical_path(recording, options, out)
}

/// The top groups, as [`group_usage`] orders them.
fn write_table(
    out: &mut dyn Write,
    title: &str,
    groups: &[(String, Usage)],
    options: Options,
) -> io::Result<()> {
    let total = groups.len();
    writeln!(out, "{title} by CPU ({} of {total}):", TOP.min(total))?;
    writeln!(
        out,
        "  {:>9} {:>9} {:>6} {:>6} {:>9}  what",
        "cpu", "wall", "count", "failed", "peak rss"
    )?;
    for (name, group) in groups.iter().take(TOP) {
        let line = format!(
            "  {:>9} {:>9} {:>6} {:>6} {:>9}  {}",
            seconds(group.cpu_ns),
            seconds(group.wall_ns),
            group.count,
            group.failed,
            mebibytes(group.max_rss),
            visible(name)
        );
        writeln!(out, "{}", shorten_command(&line, options.width))?;
    }
    writeln!(out)
}

/// The processes the run waited for, in the order they started, each
/// with its own share; the shares add up to the wall time in the heading.
/// The [`PATH_LINKS`] links that cover the most of the run (with what is
/// below them on the path) are listed, and what the others' own shares
/// add up to: the outline of a long path, as `configure` and `make` over
/// their hundreds of steps. With `record --off-cpu`, each link says under
/// it what its time went to: its CPU and what it waited on most.
pub(super) fn write_critical_path(
    recording: &Recording,
    options: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    let processes = &recording.processes;
    let path = critical_path(processes);
    let end = processes.end();
    let walls = recording
        .off_cpu()
        .then(|| wall_by_process(&recording.profile, processes));
    writeln!(
        out,
        "Critical path ({}, the own shares add up to it):",
        seconds(path.wall_ns)
    )?;
    let mut largest: Vec<usize> = (0..path.links.len()).collect();
    largest.sort_by_key(|&i| (std::cmp::Reverse(path.links[i].covered_ns), i));
    let (shown, left_out) = largest.split_at(largest.len().min(PATH_LINKS));
    let mut shown = shown.to_vec();
    shown.sort_unstable();
    for link in shown.iter().map(|&i| path.links[i]) {
        let process = processes.get(link.index);
        let line = format!(
            "  {:>9} {:>9} own  {} {}",
            super::wall(&process, end),
            seconds(link.own_ns),
            process.pid,
            visible(&processes.describe(link.index))
        );
        let width = options.width.unwrap_or(PATH_WIDTH);
        writeln!(out, "{}", shorten_command(&line, Some(width)))?;
        if let Some(walls) = &walls {
            let waits = format!("{WAITS_INDENT}{}", link_waits(walls, link.index));
            writeln!(out, "{}", shorten(&waits, options.width))?;
        }
    }
    if !left_out.is_empty() {
        let rest: u64 = left_out.iter().map(|&i| path.links[i].own_ns).sum();
        writeln!(
            out,
            "  … and {} more, {} own together",
            left_out.len(),
            seconds(rest)
        )?;
    }
    Ok(())
}

/// `1ms CPU; waited 211ms child, 698µs runnable`: a link's main thread,
/// and its other threads' CPU alongside.
fn link_waits(walls: &HashMap<usize, WallSplit>, index: usize) -> String {
    let Some(split) = walls.get(&index) else {
        return "nothing recorded on or off the CPU".to_owned();
    };
    let waits = super::top_waits(&split.waits, PATH_REASONS, |w| {
        format!("{} {}", glance(w.ns), w.reason.name())
    });
    let mut text = format!("{} CPU", glance(split.cpu_ns));
    if !waits.is_empty() {
        text.push_str(&format!("; waited {}", waits.join(", ")));
    }
    if let Some(others) = super::alongside(split) {
        text.push_str(&format!(" ({others})"));
    }
    text
}

/// `12.3M`, or `≤12.3M` for an upper bound.
fn mebibytes(peak: Option<Peak>) -> String {
    let (mark, bytes) = match peak {
        None | Some(Peak::Exact(0) | Peak::AtMost(0)) => return "-".into(),
        Some(Peak::Exact(bytes)) => ("", bytes),
        Some(Peak::AtMost(bytes)) => ("≤", bytes),
    };
    format!("{mark}{:.1}M", bytes as f64 / f64::from(1 << 20))
}
