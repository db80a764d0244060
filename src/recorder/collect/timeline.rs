//! The profile's ordering: what the collector is told arrives from three
//! rings and the drain's released events, each in its own order; it is
//! applied in the kernel's time order, so that a sample is unwound against
//! the mappings of its moment and counted under the test of its moment.

use std::collections::{BTreeMap, VecDeque};

use crate::event::Pid;
use crate::recorder::wire::{Hit, Mark, Sample, Seen, Wait, Wakeup};

/// One thing that happened, to be applied in time order.
pub(super) enum Happened {
    Fork {
        parent: Pid,
        child: Pid,
    },
    /// A new program, whose test is what its command line or environment
    /// says, not what its old program marked.
    Exec(Pid),
    Seen(Seen),
    Sample(Sample),
    Hit(Hit),
    Mark(Mark),
    /// A long wait, applied when it ran again; the waker of one.
    Wait(Wait),
    Wakeup(Wakeup),
    /// A process that exited at `at`, applied [`FORGET_AFTER`] later.
    Exit {
        pid: Pid,
        at: u64,
    },
}

/// How long after its exit a process's mappings are forgotten: samples
/// and probe hits come on rings of their own, and one the drain read late
/// must still find them.
pub(super) const FORGET_AFTER: u64 = 1_000_000_000;

impl Happened {
    /// Of things at the same time, the tree changes before the mappings,
    /// and the mappings before the samples that may run in them.
    fn rank(&self) -> u8 {
        match self {
            Happened::Fork { .. } | Happened::Exec(_) | Happened::Seen(Seen::Exec { .. }) => 0,
            Happened::Seen(_) => 1,
            // In the order read: a process's marks and hits share a ring.
            Happened::Sample(_)
            | Happened::Hit(_)
            | Happened::Mark(_)
            | Happened::Wait(_)
            | Happened::Wakeup(_) => 2,
            Happened::Exit { .. } => 3,
        }
    }
}

/// Where a thing waits in the order: (time, rank, arrival).
type Key = (u64, u8, u64);

/// Slots of [`Timeline`] allocated at a time: its slots grow without
/// moving those already held.
const CHUNK: usize = 1024;

/// What is not yet applied, by (time, rank, arrival).
///
/// Each ring's records come in time order, so most things come later than
/// all that waits: those are queued at the back of a run, and only the
/// others are sorted into a tree. Either holds only where each thing
/// waits: a hit or a sample is a few hundred bytes, which keeping a
/// `BTreeMap` sorted would move at every insert.
#[derive(Default)]
pub(super) struct Timeline {
    run: VecDeque<(Key, u32)>,
    tree: BTreeMap<Key, u32>,
    /// What waits, in slots used again once taken.
    held: Vec<Box<[Option<Happened>]>>,
    free: Vec<u32>,
    /// Slots made so far.
    made: u32,
    arrivals: u64,
}

impl Timeline {
    /// Holds `happened`, which is applied at `at`.
    pub(super) fn wait(&mut self, at: u64, happened: Happened) {
        let key = (at, happened.rank(), self.arrivals);
        self.arrivals += 1;
        let slot = self.free.pop().unwrap_or_else(|| self.make_slot());
        *self.slot(slot) = Some(happened);
        match self.run.back() {
            Some(&(last, _)) if last > key => {
                self.tree.insert(key, slot);
            }
            _ => self.run.push_back((key, slot)),
        }
    }

    /// The first thing that happened, with its time, if by `at`.
    pub(super) fn next_upto(&mut self, at: u64) -> Option<(u64, Happened)> {
        let in_run = self.run.front().map(|&(key, _)| key);
        let in_tree = self.tree.first_key_value().map(|(&key, _)| key);
        // No two keys are equal (their arrivals differ).
        let first = in_run.into_iter().chain(in_tree).min()?;
        if first.0 > at {
            return None;
        }
        let (_, slot) = match in_tree == Some(first) {
            true => self.tree.pop_first(),
            false => self.run.pop_front(),
        }?;
        self.free.push(slot);
        Some((first.0, self.slot(slot).take()?))
    }

    fn make_slot(&mut self) -> u32 {
        if self.made as usize == self.held.len() * CHUNK {
            self.held.push((0..CHUNK).map(|_| None).collect());
        }
        self.made += 1;
        self.made - 1
    }

    fn slot(&mut self, slot: u32) -> &mut Option<Happened> {
        let slot = slot as usize;
        &mut self.held[slot / CHUNK][slot % CHUNK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whose it is: an exec's pid, an exit's pid (applied after it).
    fn pid(happened: &Happened) -> Pid {
        match happened {
            Happened::Exec(pid) | Happened::Exit { pid, .. } => *pid,
            _ => unreachable!("only execs and exits are made here"),
        }
    }

    fn take(timeline: &mut Timeline, upto: u64) -> Vec<(u64, Pid)> {
        std::iter::from_fn(|| timeline.next_upto(upto))
            .map(|(time, happened)| (time, pid(&happened)))
            .collect()
    }

    #[test]
    fn what_waits_comes_out_in_time_order_whatever_order_it_came_in() {
        let mut timeline = Timeline::default();
        // Two rings read in turn, each in its own order; an exit ranks
        // after an exec at the same time.
        let came = [(5, 1), (6, 2), (9, 3), (1, 4), (6, 5), (12, 6), (2, 7)];
        for (at, pid) in came {
            timeline.wait(at, Happened::Exec(pid));
        }
        timeline.wait(6, Happened::Exit { pid: 8, at: 0 });
        timeline.wait(6, Happened::Exec(9));
        assert_eq!(
            take(&mut timeline, 6),
            [(1, 4), (2, 7), (5, 1), (6, 2), (6, 5), (6, 9), (6, 8)]
        );
        assert!(take(&mut timeline, 8).is_empty());
        timeline.wait(10, Happened::Exec(10));
        assert_eq!(take(&mut timeline, 100), [(9, 3), (10, 10), (12, 6)]);
    }

    #[test]
    fn slots_are_used_again_past_a_chunk() {
        let mut timeline = Timeline::default();
        for round in 0..3u64 {
            // Backwards, so that every other one goes to the tree.
            let times: Vec<u64> = (0..2_500)
                .map(|i| round * 10_000 + (i * 7_919) % 2_500)
                .collect();
            for (i, &at) in times.iter().enumerate() {
                timeline.wait(at, Happened::Exec(i as Pid));
            }
            let out: Vec<u64> = take(&mut timeline, u64::MAX)
                .into_iter()
                .map(|(t, _)| t)
                .collect();
            let mut sorted = times.clone();
            sorted.sort_unstable();
            assert_eq!(out, sorted);
        }
        assert_eq!(timeline.made, 2_500);
        assert_eq!(timeline.held.len(), 3);
    }
}
