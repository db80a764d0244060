//! The critical path: the processes the run was waiting for, from its
//! start to its end.

use std::cmp::Reverse;

use serde::Serialize;

use crate::processes::Processes;

/// One process on the critical path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Link {
    /// The process's index in the table.
    pub index: usize,
    /// Its own share: the part of the run's time spent in it that no
    /// process below it on the path covers.
    pub own_ns: u64,
    /// The part of the run the path spends in it and below it: its own
    /// share and those of the links under it.
    pub covered_ns: u64,
}

/// The critical path of a run: its links' own shares add up to the wall
/// time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CriticalPath {
    /// The run's wall time ([`Processes::wall_time`]).
    pub wall_ns: u64,
    /// The processes on it, in the order they started.
    pub links: Vec<Link>,
}

/// Works back from the end of the run. In each process, from the end of
/// its window, the path takes the child whose subtree ended last before
/// that point (a child's descendants reparented away, such as a daemon,
/// end its subtree after the child), descends into it over the child's
/// start to that end, and goes on in the parent from the child's start.
/// What no child covers is the process's own share, so the shares tile
/// the run's wall time exactly.
pub fn critical_path(processes: &Processes) -> CriticalPath {
    let wall_ns = processes.wall_time();
    let end = processes.end();
    let last_end = subtree_ends(processes);
    let top = processes.roots().max_by_key(|&i| (last_end[i], Reverse(i)));
    let mut own = vec![None; processes.len()];
    // Each window is independent of the others: a work list, not
    // recursion, so a deep chain of forks cannot exhaust the stack.
    let mut work: Vec<(usize, u64, u64)> = top
        .map(|root| (root, end - wall_ns, end))
        .into_iter()
        .collect();
    while let Some((index, from, to)) = work.pop() {
        let mut children: Vec<(u64, u64, usize)> = processes
            .get(index)
            .children
            .iter()
            .map(|c| (processes.get(c).start().max(from), last_end[c], c))
            .filter(|&(start, end, _)| end > start)
            .collect();
        children.sort_by_key(|&(start, end, c)| (Reverse(end), start, c));
        let mut at = to;
        let mut share = 0;
        for (start, end, child) in children {
            if end > at {
                continue;
            }
            if end <= from {
                break;
            }
            share += at - end;
            work.push((child, start, end));
            at = start;
        }
        own[index] = Some((share + at.saturating_sub(from), to - from));
    }
    let mut links: Vec<Link> = own
        .iter()
        .enumerate()
        .filter_map(|(index, own)| {
            own.map(|(own_ns, covered_ns)| Link {
                index,
                own_ns,
                covered_ns,
            })
        })
        .collect();
    links.sort_by_key(|l| (processes.get(l.index).start(), l.index));
    CriticalPath { wall_ns, links }
}

/// For each process, when the last process of its subtree ended.
fn subtree_ends(processes: &Processes) -> Vec<u64> {
    let end = processes.end();
    let mut last: Vec<u64> = processes.all().map(|p| p.end(end)).collect();
    // Children come after their parent in tree order: backwards, each
    // subtree is complete before its parent takes it in.
    for (index, _) in processes.depth_first().into_iter().rev() {
        if let Some(parent) = processes.get(index).parent {
            last[parent] = last[parent].max(last[index]);
        }
    }
    last
}
