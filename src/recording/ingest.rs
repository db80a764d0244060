//! `ingest`: extracts one process tree from a raw (system-wide) recording.
//!
//! The tree is found from the fork events: the root is followed from the
//! start, and a fork from a followed process makes its child followed.
//! Events of processes that are not (yet) followed are held back, because
//! a child's first events can arrive before the fork that created it (from
//! another CPU's buffer, or from older recorders); when that fork arrives
//! they are written right after it. Held-back events that no fork claims
//! within a bounded window are dropped, so memory depends on the number of
//! live processes and the event rate, never on the length of the input.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, BufRead, Write};

use crate::event::{Header, Pid, Record, Trailer};
use crate::recording::{ReadError, Reader, Writer};

/// How long (in recording time) an event of an unfollowed process waits
/// for a fork that makes it part of the tree. Reordering between CPU
/// buffers is a matter of milliseconds.
const WINDOW_NS: u64 = 1_000_000_000;

/// At most this many events wait at once, whatever their age, to bound
/// memory when the whole machine is busy.
const MAX_WAITING: usize = 50_000;

/// Why a recording could not be ingested.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IngestError {
    /// The input is not a readable recording.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The input has no header, so it was not written by `proctrace record`.
    #[error("{0}: no header: ingest needs a recording made with `proctrace record --raw`")]
    NoHeader(String),
    /// Writing the output failed.
    #[error("writing the output: {0}")]
    Write(#[from] io::Error),
}

/// Writes the events of `root` and its descendants from `reader` to `out`
/// as an ordinary recording: a header for `root`, the events renumbered
/// from 0 and a trailer. Returns the trailer written.
pub fn ingest<R: BufRead, W: Write>(
    reader: &mut Reader<R>,
    root: Pid,
    out: W,
) -> Result<Trailer, IngestError> {
    let header = match reader.next().transpose()? {
        Some(Record::Header(header)) => header,
        _ => return Err(IngestError::NoHeader(reader.name().to_string())),
    };
    let mut writer = Writer::new(out);
    writer.write(&Record::Header(Header {
        raw: false,
        root_pid: root,
        ..header
    }))?;
    let mut tree = Tree::new(root);
    let mut raw_trailer = None;
    for record in reader {
        match record? {
            Record::Trailer(trailer) => raw_trailer = Some(trailer),
            Record::Header(_) => {}
            event => tree.accept(event, &mut writer)?,
        }
    }
    let trailer = tree.trailer(raw_trailer, writer.written() - 1);
    writer.write(&Record::Trailer(trailer.clone()))?;
    writer.flush()?;
    Ok(trailer)
}

/// The followed processes and the events waiting for a fork.
struct Tree {
    root: Pid,
    root_exit: Option<(Option<i32>, Option<i32>)>,
    followed: HashSet<Pid>,
    /// Events waiting for a pid to be followed, each with its arrival number.
    waiting: HashMap<Pid, VecDeque<(u64, Record)>>,
    /// (arrival number, timestamp, pid) of waiting events, oldest first.
    arrivals: VecDeque<(u64, u64, Pid)>,
    arrived: u64,
    newest: u64,
    next_seq: u64,
}

impl Tree {
    fn new(root: Pid) -> Self {
        Tree {
            root,
            root_exit: None,
            followed: HashSet::from([root]),
            waiting: HashMap::new(),
            arrivals: VecDeque::new(),
            arrived: 0,
            newest: 0,
            next_seq: 0,
        }
    }

    fn accept<W: Write>(&mut self, event: Record, out: &mut Writer<W>) -> io::Result<()> {
        self.newest = self.newest.max(event.timestamp().unwrap_or(0));
        // A stack, so that a fork's waiting events are written right after it.
        let mut todo = vec![event];
        while let Some(event) = todo.pop() {
            // An ordinary recording starts with the root's first exec: its
            // fork came before proctrace followed it. Leaving the fork out
            // here keeps an ingested recording the same as an ordinary one.
            if matches!(&event, Record::Fork(fork) if fork.child_pid == self.root) {
                continue;
            }
            if !self.claims(&event) {
                self.wait(event);
                continue;
            }
            if let Some(child) = self.follow(&event) {
                let held = self.waiting.remove(&child).unwrap_or_default();
                todo.extend(held.into_iter().rev().map(|(_, event)| event));
            }
            self.write(event, out)?;
        }
        self.expire();
        Ok(())
    }

    /// Whether the event belongs to the tree as far as is known now.
    fn claims(&self, event: &Record) -> bool {
        match event {
            Record::Fork(fork) => self.followed.contains(&fork.parent_pid),
            _ => event.pid().is_some_and(|pid| self.followed.contains(&pid)),
        }
    }

    /// Starts following a claimed fork's child; returns it.
    fn follow(&mut self, event: &Record) -> Option<Pid> {
        let Record::Fork(fork) = event else {
            return None;
        };
        self.followed.insert(fork.child_pid);
        Some(fork.child_pid)
    }

    fn write<W: Write>(&mut self, mut event: Record, out: &mut Writer<W>) -> io::Result<()> {
        if let Record::Exit(exit) = &event {
            // Its pid may be reused by a process outside the tree.
            self.followed.remove(&exit.pid);
            if exit.pid == self.root {
                self.root_exit = Some((exit.exit_code, exit.signal));
            }
        }
        event.set_seq(self.next_seq);
        self.next_seq += 1;
        out.write(&event)
    }

    /// Holds back an event until the process it depends on is followed:
    /// a fork waits for its parent, anything else for its own process.
    fn wait(&mut self, event: Record) {
        let key = match &event {
            Record::Fork(fork) => Some(fork.parent_pid),
            _ => event.pid(),
        };
        let Some(pid) = key else { return };
        let timestamp = event.timestamp().unwrap_or(0);
        self.arrived += 1;
        self.arrivals.push_back((self.arrived, timestamp, pid));
        self.waiting
            .entry(pid)
            .or_default()
            .push_back((self.arrived, event));
    }

    /// Drops waiting events that are too old or too many, oldest first.
    fn expire(&mut self) {
        while let Some(&(arrival, timestamp, pid)) = self.arrivals.front() {
            let too_old = self.newest.saturating_sub(timestamp) > WINDOW_NS;
            if !too_old && self.arrivals.len() <= MAX_WAITING {
                break;
            }
            self.arrivals.pop_front();
            // Absent if a fork claimed the pid's events in the meantime.
            if let Some(queue) = self.waiting.get_mut(&pid) {
                if queue.front().is_some_and(|(a, _)| *a == arrival) {
                    queue.pop_front();
                }
                if queue.is_empty() {
                    self.waiting.remove(&pid);
                }
            }
        }
    }

    /// The output's trailer: the raw recording's losses and end, this
    /// tree's event count and root status.
    fn trailer(&self, raw: Option<Trailer>, events: u64) -> Trailer {
        let (root_exit_code, root_signal) = self.root_exit.unwrap_or_default();
        let interrupted = raw.as_ref().is_none_or(|t| t.interrupted);
        let raw = raw.unwrap_or(Trailer {
            end_timestamp: self.newest,
            ..Trailer::default()
        });
        Trailer {
            events,
            interrupted,
            root_exit_code,
            root_signal,
            ..raw
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Exit, Fork};

    fn fork(timestamp: u64, parent_pid: Pid, child_pid: Pid) -> Record {
        Record::Fork(Fork {
            seq: 0,
            timestamp,
            parent_pid,
            child_pid,
            parent_pgid: parent_pid,
            child_pgid: None,
            child_sid: None,
            child_ppid: None,
        })
    }

    fn exit(timestamp: u64, pid: Pid) -> Record {
        Record::Exit(Exit {
            seq: 0,
            timestamp,
            pid,
            ppid: 1,
            pgid: pid,
            sid: None,
            exit_code: Some(0),
            signal: None,
            core_dumped: false,
            resources: None,
        })
    }

    fn pids_written(events: &[Record]) -> Vec<Pid> {
        let mut tree = Tree::new(10);
        let mut writer = Writer::new(Vec::new());
        for event in events {
            tree.accept(event.clone(), &mut writer).unwrap();
        }
        let out = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        out.lines()
            .map(|l| serde_json::from_str::<Record>(l).unwrap().pid().unwrap())
            .collect()
    }

    #[test]
    fn events_before_their_fork_follow_it_grandchildren_too() {
        let events = [
            exit(5, 12),     // grandchild, before its fork
            fork(4, 11, 12), // child forks grandchild, before the child's fork
            fork(3, 10, 11), // root forks child
            exit(6, 11),
            fork(7, 99, 100), // not in the tree
            exit(8, 100),
        ];
        assert_eq!(pids_written(&events), [11, 12, 12, 11]);
    }

    #[test]
    fn unclaimed_events_expire_by_age_and_by_count() {
        let mut tree = Tree::new(10);
        let mut writer = Writer::new(io::sink());
        for pid in 0..(MAX_WAITING as Pid + 10) {
            tree.accept(exit(1, 1000 + pid), &mut writer).unwrap();
        }
        assert_eq!(tree.arrivals.len(), MAX_WAITING);
        assert_eq!(tree.waiting.len(), MAX_WAITING);
        tree.accept(exit(2 + WINDOW_NS, 5), &mut writer).unwrap();
        assert_eq!(tree.arrivals.len(), 1);
        assert_eq!(tree.waiting.len(), 1);
    }
}
