//! Futex waits in the wait-for graph. A word that names its owner (a
//! lock) or the thread a join waits for is resolved like any holder, by
//! the thread's process. A word in shared memory that names nobody (a
//! semaphore, a condition) is waited on the other processes that map
//! it: the candidates. Threads of one process that wait for each other's
//! locks in a cycle are a deadlock of threads.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::{cycles_of, Blocked, Hang, Index};
use crate::event::{Mapped, Peer, Pid, Snapshot};

/// Threads of one process that wait for each other in a cycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadCycle {
    /// The process, by position.
    pub process: usize,
    /// The threads of the cycle, lowest tid first.
    pub tids: Vec<Pid>,
}

/// A futex word in shared memory: its object and where in it.
type SharedWord = (Mapped, u64);

/// The shared word a wait is on, when the word names no owner.
fn ownerless(peer: &Peer) -> Option<SharedWord> {
    match *peer {
        Peer::Futex {
            owner: None,
            shared: Some(object),
            offset,
        } => Some((object, offset)),
        _ => None,
    }
}

/// Gives each wait on a shared word that names no owner its candidates:
/// the processes that map the word's object, but not the waiter, not
/// another waiter on the same word, and not a process that waits, along
/// the chain, for the waiter (it cannot be the one to wake it).
pub(super) fn add_candidates(blocked: &mut [Blocked], snapshot: &[&Snapshot]) {
    let mut waiting: HashMap<SharedWord, HashSet<usize>> = HashMap::new();
    for (at, p) in blocked.iter().enumerate() {
        for word in p.waits.iter().filter_map(|w| ownerless(&w.on.peer)) {
            waiting.entry(word).or_default().insert(at);
        }
    }
    if waiting.is_empty() {
        return;
    }
    let mut mappers: HashMap<Mapped, Vec<usize>> = HashMap::new();
    for (at, s) in snapshot.iter().enumerate() {
        s.maps
            .iter()
            .for_each(|&m| mappers.entry(m).or_default().push(at));
    }
    let waiters = waiters_of(blocked);
    let mut found = Vec::new();
    for (at, p) in blocked.iter().enumerate() {
        let words = p.waits.iter().enumerate();
        let words: Vec<(usize, SharedWord)> = words
            .filter_map(|(w, wait)| Some((w, ownerless(&wait.on.peer)?)))
            .collect();
        if words.is_empty() {
            continue;
        }
        let behind = waiting_for(&waiters, at);
        for (w, word) in words {
            let mapping = mappers.get(&word.0).into_iter().flatten();
            let candidates = mapping
                .filter(|&c| !waiting[&word].contains(c) && !behind[*c])
                .map(|&c| (c, Vec::new()));
            found.push((at, w, candidates.collect()));
        }
    }
    for (at, w, candidates) in found {
        let wait = &mut blocked[at].waits[w];
        wait.candidates = true;
        wait.holders = candidates;
    }
}

/// For each process, the processes that wait for it.
fn waiters_of(blocked: &[Blocked]) -> Vec<Vec<usize>> {
    let mut waiters = vec![Vec::new(); blocked.len()];
    for (at, p) in blocked.iter().enumerate() {
        for (holder, _) in p.waits.iter().flat_map(|w| &w.holders) {
            waiters[*holder].push(at);
        }
    }
    waiters
}

/// Which processes wait for `at`, directly or along a chain; `at` too.
fn waiting_for(waiters: &[Vec<usize>], at: usize) -> Vec<bool> {
    let mut behind = vec![false; waiters.len()];
    let mut next = vec![at];
    while let Some(at) = next.pop() {
        if !std::mem::replace(&mut behind[at], true) {
            next.extend(&waiters[at]);
        }
    }
    behind
}

/// The cycles of threads of one process that wait for each other, by
/// the owners their futex words name.
pub(super) fn thread_cycles(hang: &Hang, index: &Index) -> Vec<ThreadCycle> {
    let mut found = Vec::new();
    for (at, p) in hang.processes.iter().enumerate() {
        // The threads of `at` a futex wait names, and who each waits for.
        let mut tids: Vec<Pid> = Vec::new();
        let mut edges: Vec<(Pid, Pid)> = Vec::new();
        for wait in &p.waits {
            let Peer::Futex {
                owner: Some(owner), ..
            } = wait.on.peer
            else {
                continue;
            };
            if index.tids.get(&owner) == Some(&at) {
                tids.extend([wait.tid, owner]);
                edges.push((wait.tid, owner));
            }
        }
        if edges.is_empty() {
            continue;
        }
        tids.sort_unstable();
        tids.dedup();
        let node = |tid: Pid| tids.binary_search(&tid).unwrap_or_default();
        let targets = |n: usize| {
            let from = edges.iter().filter(|(waiter, _)| *waiter == tids[n]);
            from.map(|&(_, owner)| node(owner)).collect()
        };
        // A thread that waits for a lock it holds is a cycle of one.
        let selves = edges.iter().filter(|(waiter, owner)| waiter == owner);
        let selves = selves.map(|&(tid, _)| vec![node(tid)]);
        for cycle in cycles_of(tids.len(), &targets).into_iter().chain(selves) {
            let mut cycle: Vec<Pid> = cycle.into_iter().map(|n| tids[n]).collect();
            cycle.sort_unstable();
            found.push(ThreadCycle {
                process: at,
                tids: cycle,
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::hang::Known;
    use crate::event::{ThreadWait, WaitHow, WaitOn};

    const SEM: Mapped = Mapped { dev: 1, ino: 77 };

    fn snapshot(pid: Pid, threads: Vec<(Pid, WaitHow, Peer)>, maps: Vec<Mapped>) -> Snapshot {
        let threads = threads.into_iter().map(|(tid, how, peer)| ThreadWait {
            tid,
            state: 'S',
            name: Some(format!("t{tid}")),
            wchan: None,
            syscall: None,
            call: Some(
                if how == WaitHow::Children {
                    "wait4"
                } else {
                    "futex"
                }
                .into(),
            ),
            on: vec![WaitOn {
                fd: None,
                how,
                what: "the word".into(),
                peer,
            }],
            python: Vec::new(),
        });
        Snapshot {
            threads: threads.collect(),
            maps,
            ..super::super::tests::snapshot(pid, Vec::new(), "futex", Vec::new())
        }
    }

    fn word(owner: Option<Pid>, shared: Option<Mapped>) -> Peer {
        Peer::Futex {
            owner,
            shared,
            offset: 0,
        }
    }

    fn analyse(records: &[(Option<Pid>, Snapshot)]) -> Hang {
        let known: Vec<Known> = records
            .iter()
            .map(|(parent, _)| Known {
                parent: *parent,
                ..Known::default()
            })
            .collect();
        let pairs: Vec<(&Known, &Snapshot)> =
            known.iter().zip(records.iter().map(|r| &r.1)).collect();
        Hang::of(&pairs).unwrap()
    }

    #[test]
    fn the_candidates_of_an_ownerless_word_are_its_other_mappers_that_wait_for_nobody_on_it() {
        let sem = || (WaitHow::Futex, word(None, Some(SEM)));
        let children = (WaitHow::Children, Peer::Children { pid: Some(3) });
        let hang = analyse(&[
            // The parent maps it and waits for the first waiter.
            (
                None,
                snapshot(1, vec![(1, children.0, children.1)], vec![SEM]),
            ),
            (Some(1), snapshot(2, Vec::new(), vec![SEM])),
            (
                Some(1),
                snapshot(
                    3,
                    vec![{
                        let (h, p) = sem();
                        (3, h, p)
                    }],
                    vec![SEM],
                ),
            ),
            (
                Some(1),
                snapshot(
                    4,
                    vec![{
                        let (h, p) = sem();
                        (4, h, p)
                    }],
                    vec![SEM],
                ),
            ),
        ]);
        // The parent waits for pid 3, so it cannot wake it; pid 4 it may.
        let holders = |at: usize| {
            let wait = &hang.processes[at].waits[0];
            assert!(wait.candidates);
            wait.holders.iter().map(|h| h.0).collect::<Vec<_>>()
        };
        assert_eq!(holders(2), [1]);
        assert_eq!(holders(3), [0, 1]);
        assert_eq!(hang.culprits, vec![vec![1]]);
        assert!(hang.deadlocks.is_empty());
    }

    #[test]
    fn threads_waiting_for_each_others_locks_and_one_for_its_own_are_cycles() {
        let lock = |owner| (WaitHow::Futex, word(Some(owner), None));
        let threads = [
            (11, lock(12)),
            (12, lock(11)),
            (13, lock(13)),
            (10, lock(11)),
        ];
        let threads = threads
            .into_iter()
            .map(|(tid, (how, peer))| (tid, how, peer));
        let hang = analyse(&[(None, snapshot(10, threads.collect(), Vec::new()))]);
        let tids: Vec<&[Pid]> = hang.thread_deadlocks.iter().map(|c| &c.tids[..]).collect();
        assert_eq!(tids, [&[11, 12][..], &[13][..]]);
        assert!(hang.processes[0].waits.iter().all(|w| w.holders.is_empty()));
    }
}
