//! `summary`: the few numbers to look at first.

use std::io::{self, Write};

use super::{seconds, shorten, Options};
use crate::event::shell_join;
use crate::processes::{Outcome, Process, Processes};
use crate::recording::Recording;
use crate::text::visible;

/// How many of the slowest processes are listed.
const SLOWEST: usize = 5;

/// Writes the summary.
pub fn render(
    recording: &Recording,
    processes: &Processes,
    options: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    if let Some(header) = &recording.header {
        writeln!(
            out,
            "Command:    {} (PID {})",
            shell_join(&header.command),
            header.root_pid
        )?;
    }
    writeln!(out, "Wall time:  {}", seconds(processes.wall_time()))?;
    let execs: usize = processes.all().map(|p| p.execs.len()).sum();
    writeln!(out, "Processes:  {} ({execs} execs)", processes.len())?;
    writeln!(out, "Lost:       {}", lost(recording))?;

    let listed = |keep: fn(&Process) -> bool| -> Vec<usize> {
        let all = processes.all().enumerate();
        all.filter(|(_, p)| keep(p)).map(|(i, _)| i).collect()
    };
    let slowest = slowest(processes, SLOWEST);
    let failed = listed(|p| p.outcome().failed());
    let running = listed(|p| p.outcome() == Outcome::Running);
    write_list(processes, "Slowest", &slowest, options, out)?;
    writeln!(out)?;
    super::profile::write_critical_path(processes, options, out)?;
    write_list(processes, "Failed", &failed, options, out)?;
    write_list(
        processes,
        "Still running at the end",
        &running,
        options,
        out,
    )?;
    write_lingering(processes, options, out)?;
    write_hang(processes, options, out)
}

/// The culprits of the last snapshot of the live tree, if one was taken
/// (`render -d hang` has the chains).
fn write_hang(processes: &Processes, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let lines = super::hang::last_culprits(processes);
    let Some((heading, culprits)) = lines.split_first() else {
        return Ok(());
    };
    writeln!(out, "\nHang ({heading}):")?;
    for culprit in culprits {
        let line = format!("  {}", culprit.trim_start_matches("culprit: "));
        writeln!(out, "{}", shorten(&line, options.width))?;
    }
    Ok(())
}

/// Writes the processes `record --linger` reported, each with who started
/// it; nothing for recordings made without `--linger` or without leaks.
fn write_lingering(processes: &Processes, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let lingering: Vec<usize> = processes.lingering().map(|(index, _)| index).collect();
    if lingering.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nLingering ({}):", lingering.len())?;
    for index in lingering {
        let process = processes.get(index);
        // Past subshells: `( cmd & )` should name the test, not a fork of it.
        let starter = processes.starter(index).map(|s| {
            format!(
                "  ← started by {} {}",
                processes.get(s).pid,
                processes.describe_at(s, process.start())
            )
        });
        let line = format!(
            "  {:>7}  {}{}",
            process.pid,
            processes.describe(index),
            starter.unwrap_or_default()
        );
        writeln!(out, "{}", shorten(&visible(&line), options.width))?;
    }
    Ok(())
}

/// The indices of the `count` processes that ran longest, longest first.
pub(super) fn slowest(processes: &Processes, count: usize) -> Vec<usize> {
    let end = processes.end();
    let mut slowest: Vec<usize> = (0..processes.len()).collect();
    slowest.sort_by_key(|&i| std::cmp::Reverse(processes.get(i).duration(end)));
    slowest.truncate(count);
    slowest
}

/// What the trailer says was lost.
pub(super) fn lost(recording: &Recording) -> String {
    match &recording.trailer {
        None => "unknown (no trailer)".to_string(),
        Some(t) if t.lost == 0 => "no events lost".to_string(),
        Some(t) => format!(
            "{} events ({} buffer full, {} untracked processes)",
            t.lost, t.lost_buffer_full, t.lost_tracking_full
        ),
    }
}

/// Writes a titled list of processes: duration, pid, outcome, command.
fn write_list(
    processes: &Processes,
    title: &str,
    list: &[usize],
    options: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "\n{title} ({}):", list.len())?;
    for &index in list {
        let process = processes.get(index);
        let line = format!(
            "  {:>9}  {:>7}  {:<17}  {}",
            seconds(process.duration(processes.end())),
            process.pid,
            process.outcome().to_string(),
            processes.describe(index)
        );
        writeln!(out, "{}", shorten(&visible(&line), options.width))?;
    }
    Ok(())
}
