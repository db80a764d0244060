//! A snapshot as the recorder hands it on, and its wait-for analysis.
//!
//! The recorder's one edge to [`crate::analysis`]: `--on-hang` runs its
//! command for each culprit of a snapshot while the tree still runs, so
//! the recorder needs the hang's culprits before any view does.

use crate::analysis::hang::{Hang, Known};
use crate::analysis::loops::{loop_at, Loop};
use crate::event::{Pid, Snapshot, SnapshotCause};
use crate::processes::Processes;

/// One snapshot of the live tree, whole: every live process's record, and
/// what the recorder knew of each process when it was taken. The same
/// records are written to the recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// When it was taken (nanoseconds since the recording started).
    pub timestamp: u64,
    /// Why it was taken.
    pub cause: SnapshotCause,
    /// One record per live process.
    pub records: Vec<Snapshot>,
    /// For each record, its process's parent and command as the recorder
    /// knew them (no test names: those need the recorded environments).
    pub known: Vec<Known>,
}

impl Taken {
    /// A snapshot's `records`, each with its process's parent and command
    /// as the recorder knew them (`known`, in the same order).
    pub(crate) fn new(
        timestamp: u64,
        cause: SnapshotCause,
        records: Vec<Snapshot>,
        known: impl IntoIterator<Item = (Option<Pid>, String)>,
    ) -> Taken {
        let known = known.into_iter().map(|(parent, command)| Known {
            parent,
            command,
            test: None,
        });
        Taken {
            timestamp,
            cause,
            records,
            known: known.collect(),
        }
    }

    /// The wait-for analysis from what the recorder knew: who waits for
    /// whom, the culprits and the deadlocks (`None` without records).
    pub fn hang(&self) -> Option<Hang> {
        Hang::of(&self.known.iter().zip(&self.records).collect::<Vec<_>>())
    }

    /// The wait-for analysis against `processes`, a tree recorded at
    /// least up to a moment before the snapshot, which also names the
    /// tests and the loops. A process it does not have running yet is
    /// taken as the recorder knew it.
    pub fn hang_in(&self, processes: &Processes) -> Option<Hang> {
        let (known, loops): (Vec<Known>, Vec<Option<Loop>>) = self
            .records
            .iter()
            .zip(&self.known)
            .map(|(s, known)| {
                let found = processes.find(s.pid, s.timestamp);
                match found.filter(|&i| processes.get(i).running_at(s.timestamp)) {
                    Some(i) => (
                        Known::of(processes, Some(i), s.timestamp),
                        loop_at(processes, i, s.timestamp),
                    ),
                    None => (known.clone(), None),
                }
            })
            .unzip();
        Hang::with_loops(&known.iter().zip(&self.records).collect::<Vec<_>>(), loops)
    }

    /// The culprits of the snapshot, each once, by pid.
    pub(crate) fn culprits(&self) -> Vec<Pid> {
        let Some(hang) = self.hang() else {
            return Vec::new();
        };
        let mut pids: Vec<Pid> = hang
            .culprits
            .iter()
            .flatten()
            .map(|&at| hang.processes[at].pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }
}
