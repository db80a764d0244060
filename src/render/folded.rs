//! The process tree as collapsed stacks ([`crate::stacks::folded`]): one
//! line per process, `root;parent;process weight`, its frames the programs
//! from the root down. The weight is the process's own share: its CPU
//! time, or the wall time none of its children was running.

use std::io::{self, Write};

use super::{Missing, Options, Weight};
use crate::processes::Processes;
use crate::recording::Recording;
use crate::stacks::folded;

/// Writes one line per process with a non-zero weight, in tree order.
pub fn render(recording: &Recording, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    each_stack(processes, options.weight, |stack, weight| {
        writeln!(out, "{stack} {weight}")
    })
}

/// Calls `each` with every process's stack, in tree order, and its weight
/// in microseconds (what the tools show as samples) where that is not 0.
pub(super) fn each_stack(
    processes: &Processes,
    weight: Weight,
    mut each: impl FnMut(&str, u64) -> io::Result<()>,
) -> io::Result<()> {
    let end = processes.end();
    let mut stack: Vec<String> = Vec::new();
    for (index, depth) in processes.depth_first() {
        stack.truncate(depth);
        stack.push(frame(processes, index));
        let process = processes.get(index);
        let ns = match weight {
            Weight::Cpu => process.resources.map_or(0, |r| r.cpu_ns),
            Weight::Wall => {
                // Saturating: a hostile recording's times may add up
                // past u64.
                let children = process
                    .children
                    .iter()
                    .map(|child| processes.get(child).duration(end))
                    .fold(0, u64::saturating_add);
                process.duration(end).saturating_sub(children)
            }
        };
        if ns >= 1_000 {
            each(&stack.join(";"), ns / 1_000)?;
        }
    }
    Ok(())
}

/// [`Missing::Weights`] when no process weighs anything: no line to write.
pub(super) fn weightless(processes: &Processes, weight: Weight) -> Option<Missing> {
    let mut any = false;
    let _ = each_stack(processes, weight, |_, _| {
        any = true;
        Ok(())
    });
    (!any).then_some(Missing::Weights(weight))
}

/// A process as one frame: its [`name`](Processes::name).
fn frame(processes: &Processes, index: usize) -> String {
    folded::frame(&processes.name(index))
}
