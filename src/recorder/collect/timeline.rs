//! The profile's ordering: what the collector is told arrives from three
//! rings and the drain's released events, each in its own order; it is
//! applied in the kernel's time order, so that a sample is unwound against
//! the mappings of its moment and counted under the test of its moment.

use std::collections::BTreeMap;

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

/// What is not yet applied, by (time, rank, arrival).
#[derive(Default)]
pub(super) struct Timeline {
    waiting: BTreeMap<(u64, u8, u64), Happened>,
    arrivals: u64,
}

impl Timeline {
    /// Holds `happened`, which is applied at `at`.
    pub(super) fn wait(&mut self, at: u64, happened: Happened) {
        let key = (at, happened.rank(), self.arrivals);
        self.arrivals += 1;
        self.waiting.insert(key, happened);
    }

    /// What happened up to `at`, in order, with its time.
    pub(super) fn take_upto(&mut self, at: u64) -> impl Iterator<Item = (u64, Happened)> {
        let later = self.waiting.split_off(&(at, u8::MAX, u64::MAX));
        let ready = std::mem::replace(&mut self.waiting, later);
        ready
            .into_iter()
            .map(|((time, _, _), happened)| (time, happened))
    }
}
