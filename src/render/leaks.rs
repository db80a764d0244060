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
//! Who had what open comes from [`crate::analysis::held`].

use std::io::{self, Write};

use super::Options;
use crate::analysis::testname::test_of;
use crate::analysis::{held, left_behind, outlived, HeldFile, Others, Outlived};
use crate::event::Lingering;
use crate::processes::Processes;
use crate::recording::Recording;
use crate::text::visible;
use crate::text::{count, fd_list, seconds};

/// Writes every process that outlived the process that started it (and
/// every one `record --linger` reported), or that there were none.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    let outlived = outlived(processes);
    let leaks = left_behind(processes, &outlived);
    let lingering = processes.lingering().next().is_some();
    let cut = "a process cut off before its exit, or after its parent's, is not known to have \
               outlived it";
    if let Some(note) = super::cut_note(recording, cut) {
        writeln!(out, "{note}")?;
    }
    if leaks.is_empty() {
        let before = if recording.is_cut() {
            " before the cut"
        } else {
            ""
        };
        return writeln!(
            out,
            "no process outlived the process that started it{before}"
        );
    }
    writeln!(
        out,
        "{} outlived the process that started {}",
        count(leaks.len(), "process", "processes"),
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
    let since = if process.attached() {
        "running when attached"
    } else {
        "forked"
    };
    writeln!(
        out,
        "  lived:         {} ({since} at +{})",
        super::wall(&process, end),
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
    let found = held(processes, index, record);
    for file in &found.files {
        write_held(processes, record, file, out)?;
    }
    write_unrecorded(processes, &found.unrecorded, out)
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

/// Writes one held file and who else had it.
fn write_held(
    processes: &Processes,
    record: &Lingering,
    held: &HeldFile,
    out: &mut dyn Write,
) -> io::Result<()> {
    let inherited = held
        .root_fd
        .map(|fd| format!(", inherited from the root's fd {fd}"))
        .unwrap_or_default();
    writeln!(
        out,
        "  holds {} → {}{inherited}",
        fd_list(&held.fds),
        visible(&held.file.target)
    )?;
    match &held.others {
        Others::NotAsked => {}
        Others::Running(running) => {
            for holder in running {
                writeln!(
                    out,
                    "    also {} of {}, running when the leak was found",
                    fd_list(&holder.fds),
                    who(processes, holder.index)
                )?;
            }
        }
        Others::Nobody if held.unanswered() => {
            writeln!(out, "    no other process is known to have it open")?;
        }
        Others::Nobody => {}
        Others::Ancestors(ancestors) => {
            // Where it came from is the next best clue (bats' fd 3 is the
            // stdout of bats-exec-suite).
            writeln!(
                out,
                "    no running process is known to have it open; its ancestors had it:"
            )?;
            for holder in ancestors {
                let state = match processes.get(holder.index).exit {
                    Some(exit) if exit.timestamp <= record.timestamp => {
                        format!("exited at +{}", seconds(exit.timestamp))
                    }
                    _ => "running when the leak was found".to_string(),
                };
                writeln!(
                    out,
                    "      {} of {} ({state})",
                    fd_list(&holder.fds),
                    name(processes, holder.index)
                )?;
            }
        }
    }
    Ok(())
}

/// Names the running processes whose descriptors nobody recorded, since one
/// of them may hold the other end of a pipe that no known process holds.
fn write_unrecorded(
    processes: &Processes,
    unknown: &[usize],
    out: &mut dyn Write,
) -> io::Result<()> {
    if unknown.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  may hold the other end (never exec'd, so what they had open is not recorded):"
    )?;
    for &i in unknown {
        writeln!(
            out,
            "    {}, running when the leak was found",
            who(processes, i)
        )?;
    }
    Ok(())
}

/// A process in a few words: `1834 cat`, or `1831 <fork> bats` for one
/// that never exec'd and so ran its parent's program.
fn name(processes: &Processes, index: usize) -> String {
    let process = processes.get(index);
    format!("{} {}", process.pid, visible(&processes.name(index)))
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
