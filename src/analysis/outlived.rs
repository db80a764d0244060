//! The processes that outlived the process that started them: daemons,
//! background jobs and leaks, found from the exits alone.

use serde::Serialize;

use crate::processes::Processes;

/// How long a process must run on after its parent to have outlived it:
/// a tree that one signal ends (a CI timeout, Ctrl-C) has its exits a few
/// milliseconds apart, in any order.
pub const OUTLIVED_MIN_NS: u64 = 100_000_000;

/// A process that was still running when its parent exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Outlived {
    /// The process's index in the table.
    pub index: usize,
    /// Its parent's index: the process it outlived.
    pub parent: usize,
    /// How long it ran on after its parent's exit (until the end of the
    /// recording if it never exited).
    pub by_ns: u64,
    /// How long it ran on after the command (the root) exited, if it did.
    pub after_command_ns: Option<u64>,
}

/// Every process that outlived its parent by more than [`OUTLIVED_MIN_NS`],
/// in the order they started;
/// only the topmost of a subtree that did, as its descendants went with
/// it. `record --linger` is not needed: the exits tell. With it, the
/// recording also has the moment it was found and what it held.
pub fn outlived(processes: &Processes) -> Vec<Outlived> {
    let end = processes.end();
    let command_end = processes
        .roots()
        .next()
        .and_then(|root| processes.get(root).exit)
        .map(|e| e.timestamp);
    let mut found: Vec<Outlived> = Vec::new();
    let mut under_leak = vec![false; processes.len()];
    for (index, _) in processes.depth_first() {
        let process = processes.get(index);
        let Some(parent) = process.parent else {
            continue;
        };
        if under_leak[parent] {
            under_leak[index] = true;
            continue;
        }
        let Some(parent_exit) = processes.get(parent).exit else {
            continue;
        };
        let ended = process.end(end);
        if ended > parent_exit.timestamp.saturating_add(OUTLIVED_MIN_NS) {
            under_leak[index] = true;
            found.push(Outlived {
                index,
                parent,
                by_ns: ended - parent_exit.timestamp,
                after_command_ns: command_end.filter(|&c| ended > c).map(|c| ended - c),
            });
        }
    }
    found.sort_by_key(|o| (processes.get(o.index).start(), o.index));
    found
}

/// The processes left behind: those that outlived their parent and those
/// `record --linger` reported, each once, in the order they started.
pub fn left_behind(processes: &Processes, outlived: &[Outlived]) -> Vec<usize> {
    let mut left: Vec<usize> = outlived.iter().map(|o| o.index).collect();
    left.extend(processes.lingering().map(|(index, _)| index));
    left.sort_by_key(|&i| (processes.get(i).start(), i));
    left.dedup();
    left
}
