//! `by-process`: each process's events under a heading naming it.

use std::io::{self, Write};

use super::events;
use crate::processes::{group_starts, Process};
use crate::recording::Recording;

/// Writes one block per process, in the order they were created.
pub fn render(recording: &Recording, out: &mut dyn Write) -> io::Result<()> {
    let events = events(recording)?;
    let processes = &recording.processes;
    // The events of each process together, in causal order: a counting
    // sort by process. `ends[p]` counts up from where those of `p` start
    // to where they end.
    let mut ends = group_starts(events.processes().iter().copied(), processes.len());
    let mut grouped = vec![0_u32; events.len()];
    for (index, &process) in (0..).zip(events.processes()) {
        grouped[ends[process as usize] as usize] = index;
        ends[process as usize] += 1;
    }
    let mut lines = events.lines();
    let mut start = 0;
    for (i, process) in processes.all().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(out, "{}", heading(&process))?;
        for &event in &grouped[start..ends[i] as usize] {
            lines.write(event as usize, out)?;
        }
        start = ends[i] as usize;
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
