//! Placing a runner's test attempts on the processes that ran them.

use std::collections::{HashMap, HashSet};

use super::Processes;
use crate::event::{Pid, TestAttempt};

/// Each attempt with the process that ran it, sorted by process, those
/// not found last: the process its pid named when the test started
/// (pids are reused), else, for a runner that names no pid, the newest
/// child of the runner then that ran the test by name (`--exact NAME`).
pub(super) fn place(
    processes: &Processes,
    attempts: Vec<TestAttempt>,
) -> Vec<(Option<u32>, TestAttempt)> {
    if attempts.is_empty() {
        return Vec::new();
    }
    let mut by_pid: HashMap<Pid, Vec<usize>> = HashMap::new();
    for (index, process) in processes.all().enumerate() {
        by_pid.entry(process.pid).or_default().push(index);
    }
    let at_time = |pid: Pid, at: u64| {
        let indices = by_pid.get(&pid)?;
        indices
            .iter()
            .rev()
            .find(|&&i| processes.get(i).start() <= at)
            .copied()
    };
    let mut taken = HashSet::new();
    let mut placed: Vec<(Option<u32>, TestAttempt)> = attempts
        .into_iter()
        .map(|attempt| {
            let at = attempt.start.or(attempt.end).unwrap_or(u64::MAX);
            let index = match attempt.test_pid {
                Some(pid) => at_time(pid, at),
                None => at_time(attempt.pid, at)
                    .and_then(|runner| ran_by_name(processes, runner, &attempt, at, &taken)),
            };
            if let Some(index) = index {
                taken.insert(index);
            }
            (index.and_then(|i| u32::try_from(i).ok()), attempt)
        })
        .collect();
    placed.sort_by_key(|(index, _)| index.unwrap_or(u32::MAX));
    placed
}

/// The newest child of `runner` started by `at` that ran the attempt's
/// test by name, and no other attempt yet.
fn ran_by_name(
    processes: &Processes,
    runner: usize,
    attempt: &TestAttempt,
    at: u64,
    taken: &HashSet<usize>,
) -> Option<usize> {
    let runs = |child: usize| {
        let process = processes.get(child);
        process.execs.iter().any(|exec| {
            exec.arg_after("--exact")
                .is_some_and(|name| attempt.names(name))
        })
    };
    let children = processes.get(runner).children;
    let found = children.iter().rev().find(|&child| {
        !taken.contains(&child) && processes.get(child).start() <= at && runs(child)
    });
    found
}
