//! `summary`: the few numbers to look at first.

use std::io::{self, Write};

use super::Options;
use crate::analysis::testname::{runner_check, RunnerCheck};
use crate::analysis::{failures, outlived, slowest, Outlived};
use crate::processes::{Outcome, Processes};
use crate::recording::Recording;
use crate::text::shell_join;
use crate::text::visible;
use crate::text::{count, seconds, shorten, shorten_command};

/// How many of the slowest processes are listed.
const SLOWEST: usize = 5;
/// Processes a list shows before `… and N more`.
const LISTED: usize = 10;

/// Writes the summary.
pub fn render(recording: &Recording, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    if let Some(header) = &recording.header {
        writeln!(
            out,
            "Command:    {} (PID {})",
            shell_join(&header.command),
            header.root_pid
        )?;
    }
    writeln!(out, "Wall time:  {}", super::run_wall(processes))?;
    let outlived = outlived(processes);
    write_command_end(processes, &outlived, out)?;
    writeln!(
        out,
        "Processes:  {} ({})",
        processes.len(),
        count(processes.exec_count(), "exec", "execs")
    )?;
    if let Some(attached) = super::attached_line(processes) {
        writeln!(out, "Attached:   {attached}")?;
    }
    writeln!(out, "Lost:       {}", super::lost(recording))?;
    let cut_off: Vec<usize> = processes
        .all()
        .enumerate()
        .filter(|(_, p)| p.outcome() == Outcome::CutOff)
        .map(|(i, _)| i)
        .collect();
    if let Some(note) = super::cut_note(recording, &cut_meaning(cut_off.len())) {
        writeln!(out, "Cut:        {note}")?;
    }
    let check = runner_check(processes);
    write_runner_check(&check, out)?;

    let slowest = slowest(processes, SLOWEST);
    write_list(processes, "Slowest", &slowest, options, out)?;
    writeln!(out)?;
    super::profile::write_critical_path(recording, options, out)?;
    write_failures(processes, options, out)?;
    let running: Vec<usize> = processes
        .all()
        .enumerate()
        .filter(|(_, p)| p.outcome() == Outcome::Running)
        .map(|(i, _)| i)
        .collect();
    let title = "Still running at the end";
    write_list(processes, title, &running, options, out)?;
    write_list(processes, "Cut off before an exit", &cut_off, options, out)?;
    write_outlived(processes, &outlived, options, out)?;
    write_runner_disagreements(processes, &check, options, out)?;
    write_hang(processes, options, out)
}

/// What the cut means for the numbers above and the lists below, with
/// `cut_off` processes left without an exit.
pub(super) fn cut_meaning(cut_off: usize) -> String {
    format!(
        "what came after the cut is missing; processes `cut off` before an exit: {cut_off} (their \
         wall times are lower bounds, ≥)"
    )
}

/// How many tests the runner's own probes named, and whether the
/// command lines agree.
fn write_runner_check(check: &RunnerCheck, out: &mut dyn Write) -> io::Result<()> {
    match super::runner_check_line(check) {
        Some(line) => writeln!(out, "Tests:      {line}"),
        None => Ok(()),
    }
}

/// The tests the runner named otherwise than their command lines, and
/// those whose verdict contradicts their exit status, each cut to
/// [`LISTED`].
fn write_runner_disagreements(
    processes: &Processes,
    check: &RunnerCheck,
    options: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    let named = check
        .named_otherwise
        .iter()
        .map(|(index, runner, inferred)| {
            let inferred = inferred.as_deref().unwrap_or("no test");
            let pid = processes.get(*index).pid;
            format!("  {pid:>7}  {runner}  (command line: {inferred})")
        });
    let title = "Named by the runner, not so by their command line";
    write_titled(title, check.named_otherwise.len(), named, options, out)?;
    let judged = check.judged_otherwise.iter().map(|(index, result)| {
        let process = processes.get(*index);
        format!(
            "  {:>7}  {result} but {}  {}",
            process.pid,
            process.outcome(),
            processes.describe(*index)
        )
    });
    let title = "Judged by the runner against their exit status";
    write_titled(title, check.judged_otherwise.len(), judged, options, out)
}

/// When the command itself ended, if processes ran on after it: the run's
/// wall time then is theirs, not the command's.
fn write_command_end(
    processes: &Processes,
    outlived: &[Outlived],
    out: &mut dyn Write,
) -> io::Result<()> {
    let Some(root) = processes.roots().next().map(|r| processes.get(r)) else {
        return Ok(());
    };
    let Some(exit) = root.exit else {
        return Ok(());
    };
    let after: Vec<&Outlived> = outlived
        .iter()
        .filter(|o| o.after_command_ns.is_some())
        .collect();
    let ran_on = match after.len() {
        0 => String::new(),
        n => format!(
            "; {} on after it, until +{}",
            count(n, "process ran", "processes ran"),
            seconds(processes.end())
        ),
    };
    writeln!(
        out,
        "Ended:      +{} ({}){ran_on}",
        seconds(exit.timestamp),
        root.outcome()
    )
}

/// The failures, those that reached the command's status first, each kind
/// cut to [`LISTED`].
fn write_failures(processes: &Processes, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let failures = failures(processes);
    let kinds = [
        ("Failed, up to the command's status", &failures.propagated),
        ("Failed, but the parent carried on", &failures.handled),
    ];
    for (title, list) in kinds {
        write_list(processes, title, list, options, out)?;
    }
    Ok(())
}

/// The culprits of the last snapshot of the live tree, if one was taken
/// (`render -d hang` has the chains).
fn write_hang(processes: &Processes, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let lines = super::hang::last_culprits(processes);
    let Some((heading, culprits)) = lines.split_first() else {
        return Ok(());
    };
    if culprits.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nHang ({heading}):")?;
    for culprit in culprits {
        let line = format!("  {}", culprit.trim_start_matches("culprit: "));
        writeln!(out, "{}", shorten(&line, options.width))?;
    }
    Ok(())
}

/// Writes the processes that outlived the process that started them,
/// with or without `record --linger`, each with who started it.
fn write_outlived(
    processes: &Processes,
    outlived: &[Outlived],
    options: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    if outlived.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nOutlived their parent ({}):", outlived.len())?;
    for found in outlived.iter().take(LISTED) {
        let process = processes.get(found.index);
        // Past subshells: `( cmd & )` should name the test, not a fork of it.
        let starter = processes.starter(found.index).map(|s| {
            format!(
                "  ← started by {} {}",
                processes.get(s).pid,
                processes.describe_at(s, process.start())
            )
        });
        let line = format!(
            "  {:>7}  by {}  {}{}",
            process.pid,
            seconds(found.by_ns),
            processes.describe(found.index),
            starter.unwrap_or_default()
        );
        writeln!(out, "{}", shorten_command(&visible(&line), options.width))?;
    }
    write_left_out(outlived.len(), out)
}

/// `  … and 12 more` under a list cut to [`LISTED`].
fn write_left_out(total: usize, out: &mut dyn Write) -> io::Result<()> {
    if total > LISTED {
        writeln!(out, "  … and {} more", total - LISTED)?;
    }
    Ok(())
}

/// Writes a titled list of processes, at most [`LISTED`]: duration, pid,
/// outcome, command; nothing for an empty list.
fn write_list(
    processes: &Processes,
    title: &str,
    list: &[usize],
    options: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    let lines = list.iter().map(|&index| {
        let process = processes.get(index);
        format!(
            "  {:>9}  {:>7}  {:<17}  {}",
            super::wall(&process, processes.end()),
            process.pid,
            process.outcome().to_string(),
            processes.describe(index)
        )
    });
    write_titled(title, list.len(), lines, options, out)
}

/// Writes a titled list of `count` lines: the first [`LISTED`], each cut
/// to the width, and how many it left out; nothing for an empty one.
fn write_titled(
    title: &str,
    count: usize,
    lines: impl Iterator<Item = String>,
    options: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    if count == 0 {
        return Ok(());
    }
    writeln!(out, "\n{title} ({count}):")?;
    for line in lines.take(LISTED) {
        writeln!(out, "{}", shorten_command(&visible(&line), options.width))?;
    }
    write_left_out(count, out)
}
