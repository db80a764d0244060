//! Chains of wakers (`record --off-cpu`): a wait ended by a process of
//! the tree is explained by what that process was waiting on meanwhile,
//! and so on ("woken by sh 12, which waited 3 s on a pipe for cc 14,
//! which waited 3 s on the disk"). Followed through the long waits the
//! recording kept one by one, as the hang answer follows its graph.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::event::{LongWait, Pid, WaitReason};

/// Links a chain follows at most: past a few, a chain says no more
/// than its last link does.
const MAX_LINKS: usize = 4;

/// What a waker was itself waiting on while the wait it ended lasted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainLink {
    /// The waker (a process of the tree).
    pub pid: Pid,
    /// It, named as the views name a waker: `sh 12`.
    pub name: String,
    /// What it waited on.
    pub reason: WaitReason,
    /// How much of the wait before it this wait covered, in nanoseconds.
    pub ns: u64,
    /// Who ended this wait in turn, named, where a process of the tree
    /// did.
    pub waker: Option<String>,
}

/// The long waits by the thread that waited: indexed once for all the
/// chains of a view, which look a thread's waits up at each link.
pub struct LongWaits<'w> {
    by_tid: HashMap<Pid, Vec<&'w LongWait>>,
}

impl<'w> LongWaits<'w> {
    pub fn new(waits: &'w [LongWait]) -> LongWaits<'w> {
        let mut by_tid: HashMap<Pid, Vec<&'w LongWait>> = HashMap::new();
        for wait in waits {
            by_tid.entry(wait.tid).or_default().push(wait);
        }
        LongWaits { by_tid }
    }

    fn of(&self, tid: Pid) -> impl Iterator<Item = &'w LongWait> + '_ {
        self.by_tid.get(&tid).into_iter().flatten().copied()
    }
}

/// The chain behind the longest wait of `threads` that `waker` ended:
/// empty where the recording kept none of them one by one, or where the
/// waker was not waiting for most of it (it was running, so it is the
/// end of the chain).
pub fn chain(
    long_waits: &LongWaits,
    threads: &HashSet<Pid>,
    waker: Pid,
    name: &dyn Fn(Pid, Pid) -> String,
) -> Vec<ChainLink> {
    let first = threads
        .iter()
        .flat_map(|&tid| long_waits.of(tid))
        .filter(|w| w.waker_pid == Some(waker))
        .max_by_key(|w| (span(w), w.off, w.tid));
    let Some(first) = first else {
        return Vec::new();
    };
    let mut links = Vec::new();
    let mut seen = HashSet::from([first.pid]);
    let mut current = first;
    while links.len() < MAX_LINKS {
        let Some(next) = covering(long_waits, current) else {
            break;
        };
        links.push(ChainLink {
            pid: next.pid,
            name: name(next.pid, next.tid),
            reason: next.reason,
            ns: overlap(current, next),
            waker: next.waker_pid.zip(next.waker_tid).map(|(p, t)| name(p, t)),
        });
        if !seen.insert(next.pid) {
            break;
        }
        current = next;
    }
    links
}

/// How long a wait lasted until it was woken.
fn span(wait: &LongWait) -> u64 {
    wait.woken.unwrap_or(wait.on).saturating_sub(wait.off)
}

/// How much of `wait` (until it was woken) `other` covered.
fn overlap(wait: &LongWait, other: &LongWait) -> u64 {
    let end = wait.woken.unwrap_or(wait.on);
    let other_end = other.woken.unwrap_or(other.on);
    end.min(other_end).saturating_sub(wait.off.max(other.off))
}

/// The wait of the thread that woke `wait` that covered most of it, if
/// it covered at least half.
fn covering<'w>(long_waits: &LongWaits<'w>, wait: &LongWait) -> Option<&'w LongWait> {
    let best = long_waits
        .of(wait.waker_tid?)
        .max_by_key(|w| (overlap(wait, w), w.off))?;
    (overlap(wait, best) * 2 >= span(wait)).then_some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(tid: Pid, reason: WaitReason, off: u64, woken: u64, waker: Option<Pid>) -> LongWait {
        LongWait {
            pid: tid,
            tid,
            reason,
            off,
            woken: Some(woken),
            on: woken + 10,
            waker_pid: waker,
            waker_tid: waker,
        }
    }

    fn named(pid: Pid, _: Pid) -> String {
        format!("p{pid}")
    }

    #[test]
    fn a_chain_follows_the_wakers_waits_that_covered_the_wait() {
        let waits = [
            wait(1, WaitReason::Child, 100, 1_000, Some(2)),
            wait(2, WaitReason::Pipe, 50, 990, Some(3)),
            wait(3, WaitReason::Sleep, 120, 980, None),
            // Too short to explain the wait before it.
            wait(3, WaitReason::Disk, 10, 40, None),
        ];
        let links = chain(&LongWaits::new(&waits), &HashSet::from([1]), 2, &named);
        let said: Vec<(Pid, WaitReason, u64)> =
            links.iter().map(|l| (l.pid, l.reason, l.ns)).collect();
        assert_eq!(
            said,
            [(2, WaitReason::Pipe, 890), (3, WaitReason::Sleep, 860)]
        );
    }

    #[test]
    fn a_waker_that_mostly_ran_ends_the_chain() {
        let waits = [
            wait(1, WaitReason::Pipe, 100, 1_000, Some(2)),
            wait(2, WaitReason::Sleep, 100, 400, None),
        ];
        assert!(chain(&LongWaits::new(&waits), &HashSet::from([1]), 2, &named).is_empty());
    }

    #[test]
    fn a_circle_of_wakers_ends_where_it_comes_back() {
        let waits = [
            wait(1, WaitReason::Pipe, 100, 1_000, Some(2)),
            wait(2, WaitReason::Pipe, 100, 1_000, Some(1)),
        ];
        let links = chain(&LongWaits::new(&waits), &HashSet::from([1]), 2, &named);
        let said: Vec<(&str, Option<&str>)> = links
            .iter()
            .map(|l| (l.name.as_str(), l.waker.as_deref()))
            .collect();
        assert_eq!(said, [("p2", Some("p1")), ("p1", Some("p2"))]);
    }
}
