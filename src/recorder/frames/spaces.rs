//! The executable mappings of each process over time, from what
//! [`crate::recorder::watch::MmapWatch`] announces and the recording's forks: which
//! modules a sample at a given time could have run in.
//!
//! Announcements arrive ring by ring, so out of time order across CPUs;
//! everything is kept sorted by time and a fork is resolved only when
//! asked, so the order of the calls does not matter.
//!
//! A process's history is forgotten once it has exited and no process
//! forked from it still needs the mappings it was forked with: a suite
//! of a million short processes keeps only the live ones'.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash, Hasher};

use crate::event::Pid;
use crate::recorder::wire::{Mapping, Seen};

/// The address spaces of the tree's processes.
#[derive(Debug, Default)]
pub(crate) struct AddressSpaces {
    spaces: HashMap<Pid, Space>,
    /// How many starts of other processes fork from each pid: its history
    /// is kept while any does.
    forked_from: HashMap<Pid, u32>,
    /// Processes gone but still forked from, and when they exited.
    retiring: HashMap<Pid, u64>,
}

/// One pid's history: the mappings it made, and where its address space
/// started over (a fork, with the parent's mappings, or an exec, empty).
#[derive(Debug, Default)]
struct Space {
    /// Sorted by time; equal times keep their order of arrival.
    mappings: Vec<Mapping>,
    /// Sorted by `since`.
    starts: Vec<Start>,
    /// How often it changed: what [`AddressSpaces::version`] is made of.
    changes: u64,
}

#[derive(Debug, Clone, Copy)]
struct Start {
    since: u64,
    /// Forked from this process, whose mappings at `since` it starts with.
    parent: Option<Pid>,
}

impl AddressSpaces {
    /// An empty history.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Takes in what the watch announced.
    pub(crate) fn seen(&mut self, seen: Seen) {
        match seen {
            Seen::Exec { pid, time } => self.exec(pid, time),
            Seen::Mapped(mapping) => self.add(mapping),
        }
    }

    /// `pid` exec'd at `time` (as [`Seen::Exec`] stamps it: before the
    /// new program's mappings): what it had mapped before no longer
    /// applies from then on.
    pub(crate) fn exec(&mut self, pid: Pid, time: u64) {
        self.space(pid).start(Start {
            since: time,
            parent: None,
        });
    }

    /// `parent` forked `child` at `time`: the child starts with the
    /// parent's mappings of that moment, which the kernel does not
    /// announce again. A pid used again later is a new process from its
    /// fork on.
    pub(crate) fn fork(&mut self, parent: Pid, child: Pid, time: u64) {
        self.space(child).start(Start {
            since: time,
            parent: Some(parent),
        });
        *self.forked_from.entry(parent).or_default() += 1;
    }

    /// `pid` exited at `time`, and every sample it took has been placed:
    /// its history up to then is forgotten once no process forked from
    /// it needs it, and with it the claims its own forks held on its
    /// ancestors'. A later process with the same pid keeps its own.
    pub(crate) fn exit(&mut self, pid: Pid, time: u64) {
        let mut gone = vec![(pid, time)];
        while let Some((pid, time)) = gone.pop() {
            if self.forked_from.get(&pid).is_some_and(|&n| n > 0) {
                self.retiring.insert(pid, time);
                continue;
            }
            self.retiring.remove(&pid);
            self.forked_from.remove(&pid);
            for parent in self.forget(pid, time) {
                let Some(n) = self.forked_from.get_mut(&parent) else {
                    continue;
                };
                *n = n.saturating_sub(1);
                if let Some(&at) = self.retiring.get(&parent).filter(|_| *n == 0) {
                    gone.push((parent, at));
                }
            }
        }
    }

    /// Drops `pid`'s history up to `time`; the parents its dropped starts
    /// forked from.
    fn forget(&mut self, pid: Pid, time: u64) -> Vec<Pid> {
        let Some(space) = self.spaces.get_mut(&pid) else {
            return Vec::new();
        };
        let starts = space.starts.partition_point(|s| s.since <= time);
        let parents = space
            .starts
            .drain(..starts)
            .filter_map(|s| s.parent)
            .collect();
        let mappings = space.mappings.partition_point(|m| m.time <= time);
        space.mappings.drain(..mappings);
        space.changes += 1;
        if space.starts.is_empty() && space.mappings.is_empty() {
            self.spaces.remove(&pid);
        }
        parents
    }

    /// How many processes have a history kept.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.spaces.len()
    }

    /// A mapping made by `mapping.pid` at `mapping.time`.
    pub(crate) fn add(&mut self, mapping: Mapping) {
        let space = self.space(mapping.pid);
        let at = space.mappings.partition_point(|m| m.time <= mapping.time);
        space.mappings.insert(at, mapping);
        space.changes += 1;
    }

    /// What tells one [`AddressSpaces::index_at`] for `pid` from
    /// another, and from when it holds: the index at any time from the
    /// second on is the same while the first is, so a caller can keep it
    /// rather than index the mappings at every sample. Made of how often
    /// each space `pid`'s mappings come from changed.
    pub(crate) fn version(&self, pid: Pid, time: u64) -> (u64, u64) {
        let mut hasher = foldhash::fast::FixedState::default().build_hasher();
        for step in self.line(pid, time) {
            (step.pid, step.space.changes).hash(&mut hasher);
        }
        let since = self.spaces.get(&pid).map_or(0, Space::latest);
        (hasher.finish(), since)
    }

    /// The mappings in force in `pid` at `time`: those made since its
    /// address space last started over, with the ones it was forked with,
    /// each address held by the latest made over it. A mapping later ones
    /// cover whole is left out (the kernel replaced it).
    pub(crate) fn index_at(&self, pid: Pid, time: u64) -> Index {
        let mut held: BTreeMap<u64, (u64, u32)> = BTreeMap::new();
        let mut mappings = Vec::new();
        for mapping in self.newest_first(pid, time) {
            let gaps = uncovered(&held, mapping.start, mapping.end);
            if gaps.is_empty() {
                continue;
            }
            let id = mappings.len() as u32;
            mappings.push(mapping.clone());
            held.extend(gaps.into_iter().map(|(start, end)| (start, (end, id))));
        }
        let ranges = held.into_iter().map(|(s, (e, id))| (s, e, id)).collect();
        Index { ranges, mappings }
    }

    fn space(&mut self, pid: Pid) -> &mut Space {
        self.spaces.entry(pid).or_default()
    }

    /// The mappings that may be in force in `pid` at `time`, latest first:
    /// its own since its last start, then, for a fork, its parent's at
    /// the fork, and so on up the line of forks.
    fn newest_first(&self, pid: Pid, time: u64) -> impl Iterator<Item = &Mapping> {
        self.line(pid, time).flat_map(|step| {
            let from = step.start.map_or(0, |s| s.since);
            step.space.between(from, step.time).iter().rev()
        })
    }

    /// The spaces `pid`'s mappings at `time` come from: its own, then for
    /// a fork its parent's at the fork, and so on up the line of forks.
    fn line(&self, pid: Pid, time: u64) -> impl Iterator<Item = Step<'_>> {
        let first = self.step(pid, time, u64::MAX);
        std::iter::successors(first, move |step| match step.start {
            Some(Start {
                since,
                parent: Some(parent),
            }) => self.step(parent, since, since),
            _ => None,
        })
    }

    /// `pid`'s space as of `time`, its start before `before`: each step up
    /// goes to a strictly earlier start, so a line of forks that loops
    /// (pids used again, times out of order) still ends.
    fn step(&self, pid: Pid, time: u64, before: u64) -> Option<Step<'_>> {
        let space = self.spaces.get(&pid)?;
        let start = space.start_at(time).filter(|s| s.since < before);
        Some(Step {
            pid,
            space,
            start,
            time,
        })
    }
}

/// One space of a line of forks, as [`AddressSpaces::line`] walks it.
struct Step<'a> {
    pid: Pid,
    space: &'a Space,
    /// Its start in force at `time`.
    start: Option<Start>,
    time: u64,
}

impl Space {
    fn start(&mut self, start: Start) {
        let at = self.starts.partition_point(|s| s.since <= start.since);
        self.starts.insert(at, start);
        self.changes += 1;
    }

    /// When it last changed: its last start or mapping.
    fn latest(&self) -> u64 {
        let mapped = self.mappings.last().map_or(0, |m| m.time);
        let started = self.starts.last().map_or(0, |s| s.since);
        mapped.max(started)
    }

    /// The last start at or before `time`.
    fn start_at(&self, time: u64) -> Option<Start> {
        let at = self.starts.partition_point(|s| s.since <= time);
        at.checked_sub(1).map(|i| self.starts[i])
    }

    /// The mappings made from `from` to `to`, both included.
    fn between(&self, from: u64, to: u64) -> &[Mapping] {
        let first = self.mappings.partition_point(|m| m.time < from);
        let last = self.mappings.partition_point(|m| m.time <= to);
        self.mappings.get(first..last).unwrap_or_default()
    }
}

/// The mappings of one process at one time by address, as
/// [`AddressSpaces::index_at`] made them: a sample's every frame is looked
/// up by binary search rather than through the process's history.
#[derive(Debug)]
pub(crate) struct Index {
    /// Disjoint `[start, end)` by start, each with the mapping holding it.
    ranges: Vec<(u64, u64, u32)>,
    /// Those that hold some address, latest first.
    mappings: Vec<Mapping>,
}

impl Index {
    /// The mappings in force, by start address: where one covers only
    /// part of another, both are listed and [`Index::at`] says which
    /// holds an address.
    pub(crate) fn modules(&self) -> Vec<&Mapping> {
        let mut modules: Vec<&Mapping> = self.mappings.iter().collect();
        modules.sort_by_key(|m| (m.start, m.end));
        modules
    }

    /// The mapping that holds `addr`.
    pub(crate) fn at(&self, addr: u64) -> Option<&Mapping> {
        let i = (self.ranges.partition_point(|&(start, _, _)| start <= addr)).checked_sub(1)?;
        let (_, end, id) = self.ranges[i];
        (addr < end).then(|| &self.mappings[id as usize])
    }
}

/// The parts of `[start, end)` that no range of `held` (disjoint, by
/// start, with their ends) covers.
fn uncovered(held: &BTreeMap<u64, (u64, u32)>, start: u64, end: u64) -> Vec<(u64, u64)> {
    if start >= end {
        return Vec::new();
    }
    let reach = held.range(..start).next_back().map(|(_, &(e, _))| e);
    let mut from = reach.map_or(start, |e| e.max(start));
    let mut gaps = Vec::new();
    for (&s, &(e, _)) in held.range(start..end) {
        if s > from {
            gaps.push((from, s));
        }
        from = from.max(e);
    }
    if from < end {
        gaps.push((from, end));
    }
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(pid: Pid, time: u64, start: u64, end: u64, path: &str) -> Mapping {
        Mapping {
            pid,
            time,
            start,
            end,
            file_offset: 0,
            path: path.into(),
            dev: None,
            ino: None,
            build_id: None,
        }
    }

    fn paths(modules: Vec<&Mapping>) -> Vec<&str> {
        modules.into_iter().map(|m| m.path.as_str()).collect()
    }

    #[test]
    fn a_mapping_applies_from_its_time() {
        let mut spaces = AddressSpaces::new();
        spaces.exec(1, 10);
        spaces.add(mapping(1, 12, 0x1000, 0x2000, "sh"));
        spaces.add(mapping(1, 11, 0x5000, 0x6000, "ld.so"));
        assert!(spaces.index_at(1, 10).modules().is_empty());
        assert_eq!(paths(spaces.index_at(1, 11).modules()), ["ld.so"]);
        assert_eq!(paths(spaces.index_at(1, 20).modules()), ["sh", "ld.so"]);
        assert!(
            spaces.index_at(2, 20).modules().is_empty(),
            "an unknown pid"
        );
    }

    #[test]
    fn an_exec_starts_over() {
        let mut spaces = AddressSpaces::new();
        spaces.exec(1, 10);
        spaces.add(mapping(1, 11, 0x1000, 0x2000, "sh"));
        // The new program's mapping may arrive before the exec (another
        // CPU's ring read first).
        spaces.add(mapping(1, 31, 0x3000, 0x4000, "true"));
        spaces.exec(1, 30);
        assert_eq!(paths(spaces.index_at(1, 29).modules()), ["sh"]);
        assert!(spaces.index_at(1, 30).modules().is_empty());
        assert_eq!(paths(spaces.index_at(1, 40).modules()), ["true"]);
    }

    #[test]
    fn a_child_starts_with_its_parents_mappings_of_the_fork() {
        let mut spaces = AddressSpaces::new();
        spaces.exec(1, 10);
        spaces.add(mapping(1, 11, 0x1000, 0x2000, "sh"));
        spaces.fork(1, 2, 20);
        spaces.add(mapping(1, 21, 0x7000, 0x8000, "later, parent only"));
        spaces.add(mapping(2, 22, 0x9000, 0xa000, "child only"));
        // A grandchild has its parent's mappings, and its grandparent's.
        spaces.fork(2, 3, 23);
        assert_eq!(
            paths(spaces.index_at(2, 30).modules()),
            ["sh", "child only"]
        );
        assert_eq!(
            paths(spaces.index_at(3, 30).modules()),
            ["sh", "child only"]
        );
        assert_eq!(
            paths(spaces.index_at(1, 30).modules()),
            ["sh", "later, parent only"]
        );
        spaces.exec(2, 40);
        spaces.add(mapping(2, 41, 0x1000, 0x2000, "true"));
        assert_eq!(paths(spaces.index_at(2, 50).modules()), ["true"]);
        assert_eq!(
            paths(spaces.index_at(3, 50).modules()),
            ["sh", "child only"]
        );
    }

    #[test]
    fn a_pid_used_again_is_a_new_process() {
        let mut spaces = AddressSpaces::new();
        spaces.exec(1, 1);
        spaces.add(mapping(1, 2, 0x1000, 0x2000, "sh"));
        spaces.fork(1, 5, 3);
        spaces.exec(5, 4);
        spaces.add(mapping(5, 5, 0x3000, 0x4000, "old"));
        spaces.fork(1, 5, 100);
        assert_eq!(paths(spaces.index_at(5, 50).modules()), ["old"]);
        assert_eq!(paths(spaces.index_at(5, 150).modules()), ["sh"]);
    }

    #[test]
    fn later_mappings_replace_what_they_cover() {
        let mut spaces = AddressSpaces::new();
        spaces.exec(1, 0);
        spaces.add(mapping(1, 1, 0x1000, 0x3000, "libfoo"));
        spaces.add(mapping(1, 2, 0x5000, 0x6000, "libbar"));
        spaces.add(mapping(1, 3, 0x1000, 0x2000, "jit a"));
        spaces.add(mapping(1, 4, 0x2000, 0x3000, "jit b"));
        spaces.add(mapping(1, 5, 0x5800, 0x7000, "jit c"));
        // libfoo is covered by the two halves; libbar only in part.
        assert_eq!(
            paths(spaces.index_at(1, 10).modules()),
            ["jit a", "jit b", "libbar", "jit c"]
        );
        let now = spaces.index_at(1, 10);
        assert_eq!(now.at(0x5100).unwrap().path, "libbar");
        assert_eq!(now.at(0x5900).unwrap().path, "jit c");
        assert_eq!(now.at(0x6fff).unwrap().path, "jit c");
        assert_eq!(now.at(0x1fff).unwrap().path, "jit a");
        assert!(now.at(0x4000).is_none());
        assert!(now.at(0x7000).is_none());
        assert!(now.at(0xfff).is_none());
        assert_eq!(spaces.index_at(1, 2).at(0x1800).unwrap().path, "libfoo");
    }

    #[test]
    fn a_mapping_made_inside_another_splits_it() {
        let mut spaces = AddressSpaces::new();
        spaces.exec(1, 0);
        spaces.add(mapping(1, 1, 0x1000, 0x4000, "libfoo"));
        spaces.add(mapping(1, 2, 0x2000, 0x3000, "jit"));
        spaces.add(mapping(1, 3, 0x0800, 0x1800, "jit 2"));
        let now = spaces.index_at(1, 10);
        let at = |addr| now.at(addr).map(|m| m.path.as_str());
        assert_eq!(at(0x0800), Some("jit 2"));
        assert_eq!(at(0x17ff), Some("jit 2"));
        assert_eq!(at(0x1800), Some("libfoo"));
        assert_eq!(at(0x2800), Some("jit"));
        assert_eq!(at(0x3000), Some("libfoo"));
        assert_eq!(at(0x3fff), Some("libfoo"));
        assert_eq!(at(0x4000), None);
    }

    #[test]
    fn an_exited_process_is_forgotten_once_no_fork_of_it_needs_it() {
        let mut spaces = AddressSpaces::new();
        spaces.exec(1, 1);
        spaces.add(mapping(1, 2, 0x1000, 0x2000, "sh"));
        spaces.fork(1, 2, 3);
        spaces.fork(2, 3, 4);
        spaces.exit(1, 10);
        spaces.exit(2, 11);
        // The grandchild, still running, was forked with both histories.
        assert_eq!(spaces.kept(), 3);
        assert_eq!(paths(spaces.index_at(3, 12).modules()), ["sh"]);
        spaces.exit(3, 13);
        assert_eq!(spaces.kept(), 0);
        assert_eq!(spaces.forked_from.len() + spaces.retiring.len(), 0);
    }

    #[test]
    fn a_pid_used_again_keeps_its_own_history() {
        let mut spaces = AddressSpaces::new();
        spaces.exec(5, 1);
        spaces.add(mapping(5, 2, 0x1000, 0x2000, "old"));
        spaces.exec(5, 20);
        spaces.add(mapping(5, 21, 0x3000, 0x4000, "new"));
        spaces.exit(5, 10);
        assert_eq!(paths(spaces.index_at(5, 30).modules()), ["new"]);
        spaces.exit(5, 30);
        assert_eq!(spaces.kept(), 0);
    }

    #[test]
    fn a_loop_of_forks_ends() {
        let mut spaces = AddressSpaces::new();
        spaces.add(mapping(1, 1, 0x1000, 0x2000, "a"));
        spaces.add(mapping(2, 1, 0x3000, 0x4000, "b"));
        spaces.fork(1, 2, 5);
        spaces.fork(2, 1, 5);
        assert_eq!(paths(spaces.index_at(1, 10).modules()), ["b"]);
    }

    #[test]
    fn uncovered_parts_are_what_no_later_range_covers() {
        let held: BTreeMap<u64, (u64, u32)> = [(10, (20, 0)), (20, (25, 1)), (30, (40, 2))].into();
        assert!(uncovered(&held, 12, 18).is_empty());
        assert!(
            uncovered(&held, 10, 25).is_empty(),
            "touching ranges cover together"
        );
        assert_eq!(uncovered(&held, 15, 35), [(25, 30)]);
        assert_eq!(uncovered(&held, 5, 45), [(5, 10), (25, 30), (40, 45)]);
        assert!(uncovered(&held, 50, 50).is_empty());
        assert!(uncovered(&held, 60, 50).is_empty());
    }
}
