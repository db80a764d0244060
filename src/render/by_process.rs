//! `by-process`: each process's events under a heading naming it.

use std::io::{self, Write};

use super::write_json;
use crate::processes::{Process, Processes};
use crate::text::visible;

/// Writes one block per process, in the order they were created.
pub fn render(processes: &Processes, out: &mut dyn Write) -> io::Result<()> {
    for (i, process) in processes.all().iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(out, "{}", visible(&heading(process)))?;
        for event in &process.events {
            write_json(out, event)?;
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
