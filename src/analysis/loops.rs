//! Repetition as a hang's answer: a process that keeps starting the same
//! command (a retry loop, `until curl …; do sleep 1; done`, a test
//! polling for a file) is what a snapshot of it is stuck on, not the
//! `sleep` or the attempt it happens to wait for at that moment.
//!
//! Found from the recording's own events: the children a process forked,
//! each named by its command with what changes from run to run folded
//! ([`fold_volatile`]), so that a counter, a port or a temporary name does
//! not split a loop.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::processes::{command_line, fold_volatile, Process, Processes};

/// Finished runs of one command, at least, that make a loop.
pub const LOOP_RUNS: usize = 3;
/// However slow a loop's rhythm, a run ended this recently keeps it going.
const LOOP_SLACK_NS: u64 = 1_000_000_000;

/// A loop of one process: the runs of one command it keeps starting, the
/// last of them ended recently by the loop's own rhythm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loop {
    /// The command of its last run.
    pub command: String,
    /// The command with what changes from run to run folded: what makes
    /// two loops alike.
    pub key: String,
    /// Runs that had ended by the snapshot.
    pub runs: usize,
    /// From the first run's start to the last run's end (nanoseconds).
    pub span: u64,
    /// How the runs ended (`exit 7`, `killed by SIGTERM`), each with how
    /// many ended so, the most frequent first.
    pub endings: Vec<(String, usize)>,
}

/// The loop the process at `index` runs at `at`, if it runs one: the
/// command it started at least [`LOOP_RUNS`] times, whose runs all failed
/// (a retry loop) or all succeeded (a poll, whose test the shell runs
/// itself) since the last that ended otherwise; a failing loop wins over
/// the `sleep` between its attempts. A loop is still going when every
/// command started since its first run is one of the loop's (the attempt,
/// the pause) and its last run ended within twice its period (at least a
/// second) before `at`: an attempt that has hung for longer than that is
/// itself the answer.
pub fn loop_at(processes: &Processes, index: usize, at: u64) -> Option<Loop> {
    let children: Vec<(Process, String)> = processes
        .get(index)
        .children
        .iter()
        .map(|c| processes.get(c))
        .filter(|c| c.start() <= at)
        .filter_map(|c| {
            let exec = c.execs.iter().rev().find(|e| e.timestamp <= at)?;
            let key = fold_volatile(&exec.argv.iter().collect::<Vec<_>>().join(" "));
            Some((c, key))
        })
        .collect();
    let mut by_key: HashMap<&str, Vec<Process>> = HashMap::new();
    for (child, key) in &children {
        by_key.entry(key.as_str()).or_default().push(*child);
    }
    let mut found: Vec<(bool, Loop)> = by_key
        .into_iter()
        .filter_map(|(key, runs)| streak(&runs, at).map(|s| (key, s)))
        .filter(|(_, streak)| going(&children, streak, at))
        .map(|(key, streak)| (streak[0].outcome().failed(), describe(key, &streak)))
        .collect();
    let order = |(a, x): &(bool, Loop), (b, y): &(bool, Loop)| {
        b.cmp(a).then(y.runs.cmp(&x.runs)).then(x.key.cmp(&y.key))
    };
    found.sort_by(order);
    found.into_iter().next().map(|(_, l)| l)
}

/// The trailing finished runs of one command that ended alike (all
/// failed, or all succeeded), if there are enough to make a loop.
fn streak<'a>(runs: &[Process<'a>], at: u64) -> Option<Vec<Process<'a>>> {
    let ended = |p: &Process| p.exit.is_some_and(|e| e.timestamp <= at);
    let finished: Vec<Process> = runs.iter().copied().filter(ended).collect();
    let failed = finished.last()?.outcome().failed();
    let alike = finished
        .iter()
        .rev()
        .take_while(|p| p.outcome().failed() == failed)
        .count();
    let streak = finished[finished.len() - alike..].to_vec();
    (streak.len() >= LOOP_RUNS).then_some(streak)
}

/// Whether the loop of `streak` is still going at `at`: see [`loop_at`].
fn going(children: &[(Process, String)], streak: &[Process], at: u64) -> bool {
    let first = streak[0].start();
    let last = streak[streak.len() - 1];
    // Saturating: a hostile recording's times need not be in order.
    let period = last.start().saturating_sub(first) / (streak.len() as u64 - 1);
    let ended = last.exit.map_or(at, |e| e.timestamp);
    if at.saturating_sub(ended) > period.saturating_mul(2).max(LOOP_SLACK_NS) {
        return false;
    }
    let mut since: HashMap<&str, usize> = HashMap::new();
    for (_, key) in children.iter().filter(|(c, _)| c.start() >= first) {
        *since.entry(key).or_default() += 1;
    }
    since.values().all(|&n| n >= 2)
}

fn describe(key: &str, streak: &[Process]) -> Loop {
    let mut endings: Vec<(String, usize)> = Vec::new();
    for run in streak {
        let ending = run.outcome().to_string();
        match endings.iter_mut().find(|(e, _)| *e == ending) {
            Some((_, n)) => *n += 1,
            None => endings.push((ending, 1)),
        }
    }
    endings.sort_by(|(_, a), (_, b)| b.cmp(a));
    let last = streak[streak.len() - 1];
    let end = last.exit.map_or(last.start(), |e| e.timestamp);
    Loop {
        command: last
            .execs
            .last()
            .map(|e| command_line(&e).into_owned())
            .unwrap_or_default(),
        key: key.to_owned(),
        runs: streak.len(),
        span: end.saturating_sub(streak[0].start()),
        endings,
    }
}

#[cfg(test)]
mod tests;
