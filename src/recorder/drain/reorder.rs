//! Restoring one causal order: events are held until no earlier one can
//! still arrive, then given out in timestamp order, numbered; an event of
//! a process after its exit is dropped at the source.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::event::{Pid, Record};

/// The pids whose Exit has been given out, until a Fork reuses them.
///
/// The kernel can report an event of a process after its exit: a parent's
/// `setpgid(child, ...)` succeeds on a child that is already a zombie (bash
/// does this for every job), and its hook runs after the child's exit hook.
/// Such an event says nothing about a process that is gone, and would bring
/// it back to life for every reader: it is dropped here, at the source.
#[derive(Default)]
struct Departed(HashSet<Pid>);

impl Departed {
    /// Follows one event in release order; true when it comes after its
    /// process's Exit and must not be given out.
    fn is_late(&mut self, record: &Record) -> bool {
        match record {
            Record::Fork(fork) => {
                self.0.remove(&fork.child_pid);
                false
            }
            Record::Exit(exit) => !self.0.insert(exit.pid),
            // About a process as its snapshot saw it, since maybe gone.
            Record::OnHang(_) => false,
            other => other.pid().is_some_and(|pid| self.0.contains(&pid)),
        }
    }
}

/// Holds events until no earlier one can still arrive, then gives them out
/// in timestamp order, numbered. The ring buffer is already ordered; perf
/// buffers are per CPU, so their events interleave only here.
#[derive(Default)]
pub(super) struct Reorder {
    pending: BTreeMap<(u64, u64), Record>,
    arrivals: u64,
    next_seq: u64,
    departed: Departed,
}

impl Reorder {
    pub(super) fn push(&mut self, record: Record) {
        let timestamp = record.timestamp().unwrap_or(0);
        self.pending.insert((timestamp, self.arrivals), record);
        self.arrivals += 1;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// When the last Fork or Exec of `pid` held back happened.
    pub(super) fn last_event(&self, pid: Pid) -> Option<u64> {
        let events = self
            .pending
            .values()
            .filter(|r| matches!(r, Record::Fork(_) | Record::Exec(_)));
        events
            .filter(|r| r.pid() == Some(pid))
            .filter_map(Record::timestamp)
            .max()
    }

    /// What the Forks and Execs held back say: each process's parent,
    /// and the command of its latest exec.
    pub(super) fn held(&self) -> HashMap<Pid, (Option<Pid>, Option<&str>)> {
        let mut held: HashMap<Pid, (Option<Pid>, Option<&str>)> = HashMap::new();
        for record in self.pending.values() {
            match record {
                Record::Fork(fork) => {
                    held.entry(fork.child_pid).or_default().0 = Some(fork.parent_pid)
                }
                Record::Exec(exec) => held.entry(exec.pid).or_default().1 = Some(&exec.cmdline),
                _ => {}
            }
        }
        held
    }

    /// The children of the forks held back.
    pub(super) fn forked(&self) -> impl Iterator<Item = Pid> + '_ {
        self.pending.values().filter_map(|record| match record {
            Record::Fork(fork) => Some(fork.child_pid),
            _ => None,
        })
    }

    pub(super) fn take_until(&mut self, cutoff: Option<u64>) -> Vec<Record> {
        let later = match cutoff {
            Some(cutoff) => self.pending.split_off(&(cutoff, u64::MAX)),
            None => BTreeMap::new(),
        };
        let ready = std::mem::replace(&mut self.pending, later);
        ready
            .into_values()
            .filter(|record| !self.departed.is_late(record))
            .map(|mut record| {
                record.set_seq(self.next_seq);
                self.next_seq += 1;
                record
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SetSid;

    fn setsid(timestamp: u64, pid: Pid) -> Record {
        Record::SetSid(SetSid {
            seq: 0,
            timestamp,
            pid,
            sid: pid,
        })
    }

    #[test]
    fn reorder_releases_in_timestamp_order_up_to_the_cutoff() {
        let mut reorder = Reorder::default();
        for (ts, pid) in [(30, 3), (10, 1), (20, 2), (10, 4)] {
            reorder.push(setsid(ts, pid));
        }
        let first: Vec<_> = reorder
            .take_until(Some(20))
            .iter()
            .map(|r| (r.seq(), r.pid()))
            .collect();
        assert_eq!(
            first,
            [(Some(0), Some(1)), (Some(1), Some(4)), (Some(2), Some(2))]
        );
        let rest: Vec<_> = reorder
            .take_until(None)
            .iter()
            .map(|r| (r.seq(), r.pid()))
            .collect();
        assert_eq!(rest, [(Some(3), Some(3))]);
    }

    #[test]
    fn events_after_an_exit_are_dropped_until_the_pid_is_forked_again() {
        use crate::recorder::lineage::tests::{exit, fork};
        let mut fork = fork(1, 7);
        fork.set_timestamp(40);
        let mut reorder = Reorder::default();
        for record in [
            setsid(10, 7),
            exit(7, 20),
            setsid(30, 7),
            fork,
            setsid(50, 7),
        ] {
            reorder.push(record);
        }
        let released: Vec<_> = reorder
            .take_until(None)
            .iter()
            .map(|r| (r.seq(), r.kind(), r.timestamp()))
            .collect();
        assert_eq!(
            released,
            [
                (Some(0), "SetSID", Some(10)),
                (Some(1), "Exit", Some(20)),
                (Some(2), "Fork", Some(40)),
                (Some(3), "SetSID", Some(50)),
            ]
        );
    }
}
