//! `leaks`: the processes that outlived the process that started them
//! (found from the exits, with or without `record --linger`), and why
//! anything would wait for them.
//!
//! A runner that waits for a pipe to close (bats waits for its fd 3) hangs
//! as long as any process holds the pipe's write end. So for each lingering
//! process this names who started it (the test), how long it lived and how
//! it ended, and, for every pipe or socket it held, which other processes
//! of the tree had the same one open: the other end is who waits.
//!
//! The descriptors of other processes are those the snapshot of the live
//! tree taken when the leak was found shows (recordings of this version);
//! in older recordings, those they *started* with (the Exec records'): a
//! process that opened the pipe after its exec, or never exec'd, is then
//! not known to hold it, and the view says so rather than guess.

use super::Options;
use std::io::{self, Write};

use crate::analysis::{left_behind, outlived, Outlived};
use crate::event::{FdKind, HeldFd, Lingering, Snapshot};
use crate::processes::Processes;
use crate::recording::Recording;
use crate::testname::test_of;
use crate::text::visible;
use crate::text::{fd_list, seconds};

/// Writes every process that outlived the process that started it (and
/// every one `record --linger` reported), or that there were none.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    let outlived = outlived(processes);
    let leaks = left_behind(processes, &outlived);
    let lingering = processes.lingering().next().is_some();
    if leaks.is_empty() {
        return writeln!(out, "no process outlived the process that started it");
    }
    let plural = if leaks.len() == 1 { "" } else { "es" };
    writeln!(
        out,
        "{} process{plural} outlived the process that started {}",
        leaks.len(),
        if leaks.len() == 1 { "it" } else { "them" }
    )?;
    if !lingering {
        writeln!(
            out,
            "(record --linger also ends such processes and records what they held open)"
        )?;
    }
    for index in leaks {
        writeln!(out)?;
        let found = outlived.iter().find(|o| o.index == index);
        write_process(processes, index, found, out)?;
    }
    Ok(())
}

fn write_process(
    processes: &Processes,
    index: usize,
    found: Option<&Outlived>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let process = processes.get(index);
    let end = processes.end();
    let ancestors = processes.ancestors(index);
    writeln!(
        out,
        "{} {}",
        process.pid,
        visible(&processes.describe(index))
    )?;
    if let Some(test) = test_of(processes, index) {
        writeln!(out, "  test:          {}", visible(&test))?;
    }
    // Each ancestor with what it ran when it started the next one down:
    // the chain of commands that led to the leak.
    for (i, &ancestor) in ancestors.iter().enumerate() {
        let next = ancestors.get(i + 1).copied().unwrap_or(index);
        let label = if i == 0 { "started under:" } else { "" };
        writeln!(
            out,
            "  {label:<14} {} {}",
            processes.get(ancestor).pid,
            visible(&processes.describe_at(ancestor, processes.get(next).start()))
        )?;
    }
    writeln!(
        out,
        "  lived:         {} (forked at +{})",
        seconds(process.duration(end)),
        seconds(process.start())
    )?;
    match (process.lingering, found) {
        (Some(record), _) => write_outlived_record(processes, index, record, out)?,
        (None, Some(found)) => writeln!(
            out,
            "  outlived:      {} (its parent) by {}",
            name(processes, found.parent),
            seconds(found.by_ns)
        )?,
        (None, None) => {}
    }
    if let Some(after) = found.and_then(|f| f.after_command_ns) {
        writeln!(
            out,
            "  ran on:        {} after the command ended",
            seconds(after)
        )?;
    }
    let ended = match process.exit {
        Some(exit) => format!("{} at +{}", process.outcome(), seconds(exit.timestamp)),
        None => "still running at the end of the recording".to_string(),
    };
    writeln!(out, "  ended:         {ended}")?;
    let Some(record) = process.lingering else {
        return Ok(());
    };
    let mut unanswered = false;
    for group in same_files(&record.fds) {
        unanswered |= write_held(processes, index, record, &group, out)?;
    }
    // A snapshot has every live process's descriptors: none is unknown.
    if unanswered && snapshot_at(processes, record.timestamp).is_empty() {
        write_unrecorded(processes, index, record, out)?;
    }
    Ok(())
}

/// What `record --linger` said the process outlived, and by how long.
fn write_outlived_record(
    processes: &Processes,
    index: usize,
    record: &Lingering,
    out: &mut dyn Write,
) -> io::Result<()> {
    let process = processes.get(index);
    let outlived = processes.find(record.outlived, record.since);
    let relation = if process.parent_pid == Some(record.outlived) {
        " (its parent)"
    } else if outlived.is_some_and(|o| processes.get(o).parent.is_none()) {
        " (the root)"
    } else {
        ""
    };
    let outlived = match outlived {
        Some(o) => name(processes, o),
        None => record.outlived.to_string(),
    };
    writeln!(
        out,
        "  outlived:      {outlived}{relation} by {}",
        seconds(process.end(processes.end()).saturating_sub(record.since))
    )
}

/// The held descriptors, those on one file together, in descriptor order.
fn same_files(fds: &[HeldFd]) -> Vec<Vec<&HeldFd>> {
    let mut groups: Vec<Vec<&HeldFd>> = Vec::new();
    for held in fds {
        match groups.iter_mut().find(|g| g[0].fd.same_file(&held.fd)) {
            Some(group) => group.push(held),
            None => groups.push(vec![held]),
        }
    }
    groups
}

/// Writes one held file and who else had it; returns whether it is a pipe
/// or socket that no running process is known to hold the other end of.
fn write_held(
    processes: &Processes,
    index: usize,
    record: &Lingering,
    group: &[&HeldFd],
    out: &mut dyn Write,
) -> io::Result<bool> {
    let file = &group[0].fd;
    let numbers: Vec<i32> = group.iter().map(|h| h.fd.fd).collect();
    let inherited = group
        .iter()
        .find_map(|h| h.root_fd)
        .map(|fd| format!(", inherited from the root's fd {fd}"))
        .unwrap_or_default();
    writeln!(
        out,
        "  holds {} → {}{inherited}",
        fd_list(&numbers),
        visible(&file.target)
    )?;
    // Everybody has /dev/null and the terminal: naming them explains nothing.
    if matches!(file.kind, FdKind::Device | FdKind::Tty | FdKind::Dir) {
        return Ok(false);
    }
    let ancestors = processes.ancestors(index);
    // What a process held when the leak was found, if a snapshot says;
    // else what it started with.
    let seen = snapshot_at(processes, record.timestamp);
    let holders: Vec<(usize, Vec<i32>)> = (0..processes.len())
        .filter(|&i| i != index)
        .map(|i| match seen.iter().find(|(j, _)| *j == i) {
            Some((_, s)) => (
                i,
                s.fds
                    .iter()
                    .filter(|h| h.fd.same_file(file))
                    .map(|h| h.fd.fd)
                    .collect(),
            ),
            None => (i, processes.get(i).fds_of(file)),
        })
        .filter(|(_, fds)| !fds.is_empty())
        .collect();
    let (theirs, ours): (Vec<_>, Vec<_>) = holders
        .into_iter()
        .partition(|(i, _)| !ancestors.contains(i));
    // Only processes still running when the leak was found can be what
    // waits for it; the ones that had exited (other tests, say) are not
    // to blame.
    let running: Vec<_> = theirs
        .into_iter()
        .filter(|(i, _)| processes.get(*i).running_at(record.timestamp))
        .collect();
    for (i, fds) in &running {
        writeln!(
            out,
            "    also {} of {}, running when the leak was found",
            fd_list(fds),
            who(processes, *i)
        )?;
    }
    if !running.is_empty() {
        return Ok(false);
    }
    let waitable = matches!(file.kind, FdKind::Pipe | FdKind::Socket);
    if ours.is_empty() {
        if waitable {
            writeln!(out, "    no other process is known to have it open")?;
        }
        return Ok(waitable);
    }
    // Nothing else running is known to hold it: where it came from is the
    // next best clue (bats' fd 3 is the stdout of bats-exec-suite).
    writeln!(
        out,
        "    no running process is known to have it open; its ancestors had it:"
    )?;
    for (i, fds) in &ours {
        let state = match processes.get(*i).exit {
            Some(exit) if exit.timestamp <= record.timestamp => {
                format!("exited at +{}", seconds(exit.timestamp))
            }
            _ => "running when the leak was found".to_string(),
        };
        writeln!(
            out,
            "      {} of {} ({state})",
            fd_list(fds),
            name(processes, *i)
        )?;
    }
    Ok(waitable)
}

/// Names the running processes whose descriptors nobody recorded, since one
/// of them may hold the other end of a pipe that no known process holds.
fn write_unrecorded(
    processes: &Processes,
    index: usize,
    record: &Lingering,
    out: &mut dyn Write,
) -> io::Result<()> {
    let unknown: Vec<usize> = (0..processes.len())
        .filter(|&i| i != index && !processes.ancestors(i).contains(&index))
        .filter(|&i| {
            let process = processes.get(i);
            process.execs.is_empty() && process.running_at(record.timestamp)
        })
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  may hold the other end (never exec'd, so what they had open is not recorded):"
    )?;
    for i in unknown {
        writeln!(
            out,
            "    {}, running when the leak was found",
            who(processes, i)
        )?;
    }
    Ok(())
}

/// A process in two words: `1834 cat`, or `1831 <fork>` for one that
/// never exec'd and so ran its parent's program.
fn name(processes: &Processes, index: usize) -> String {
    let process = processes.get(index);
    let program = process.program().unwrap_or("<fork>");
    format!("{} {}", process.pid, visible(program))
}

/// A process and its parent: `1834 cat (started by 1832 bats-format-cat)`.
fn who(processes: &Processes, index: usize) -> String {
    match processes.get(index).parent {
        Some(parent) => format!(
            "{} (started by {})",
            name(processes, index),
            name(processes, parent)
        ),
        None => name(processes, index),
    }
}

/// The first snapshot of the live tree taken when a lingerer was found at
/// `at` or later (`record --linger` takes one): empty if there is none.
fn snapshot_at(processes: &Processes, at: u64) -> Vec<(usize, &Snapshot)> {
    processes
        .snapshots()
        .into_iter()
        .find(|s| s[0].1.timestamp >= at)
        .unwrap_or_default()
}
