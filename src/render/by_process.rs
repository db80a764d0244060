//! `by-process`: each process's events under a heading naming it.

use std::io::{self, Write};

use super::events;
use super::Options;
use crate::processes::Process;
use crate::recording::Recording;
use crate::text::visible;

/// Writes one block per process, in the order they were created.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let events = events(recording)?;
    let processes = &recording.processes;
    let mut lines = events.lines();
    for (i, process) in processes.all().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(out, "{}", visible(&heading(&process)))?;
        for event in events.of_process(i) {
            lines.write(event, out)?;
        }
    }
    Ok(())
}

fn heading(process: &Process) -> String {
    match (process.first_command(), process.parent_pid) {
        (Some(command), _) => format!("PID {}: {command}", process.pid),
        (None, Some(parent)) => format!("PID {}, forked from {parent}", process.pid),
        (None, None) => format!("PID {}", process.pid),
    }
}
