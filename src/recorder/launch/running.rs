//! Following processes that already run: seed the map with each one, then
//! with its current descendants, parent before children.
//!
//! A process is seeded before its children list is read, so a child forked
//! after that is added by the kernel itself, and one forked before is in
//! the list: no order of events can slip between the two.

use std::collections::{HashSet, VecDeque};
use std::fs;
use std::time::{Duration, Instant};

use crate::event::{Attached, Pid};
use crate::inspect::attached;
use crate::inspect::process::{life, Life};
use crate::recorder::error::RecordError;

/// How long a process caught inside exit() while it was seeded may take to
/// finish exiting, before the seeds are checked once more.
const EXIT_SETTLE: Duration = Duration::from_millis(50);
/// The longest a seed still inside exit() is waited for.
const EXITING_WAIT: Duration = Duration::from_secs(2);

/// Running processes to follow, with all their present and future descendants.
#[derive(Debug, Clone)]
pub struct Attach {
    pids: Vec<Pid>,
}

impl Attach {
    /// Checks that every pid names a running process.
    pub fn new(pids: &[Pid]) -> Result<Self, RecordError> {
        if let Some(&missing) = pids.iter().find(|&&pid| life(pid) == Life::Gone) {
            return Err(RecordError::NoSuchProcess(missing));
        }
        Ok(Attach {
            pids: pids.to_vec(),
        })
    }

    /// The first pid given, which the recording is named after.
    pub fn root(&self) -> Pid {
        self.pids[0]
    }

    /// The root's command line, from /proc.
    pub fn command(&self) -> Vec<String> {
        attached(self.root(), 0).map_or_else(Vec::new, |root| root.argv)
    }

    /// Seeds the whole present tree; returns each process followed, as
    /// `/proc` showed it just before, parents first, each with the time
    /// `at`.
    pub fn start(
        &self,
        at: u64,
        track: impl Fn(Pid) -> Result<bool, RecordError>,
        untrack: impl Fn(Pid),
    ) -> Result<Vec<Attached>, RecordError> {
        let mut queue: VecDeque<Pid> = self.pids.iter().copied().collect();
        let mut listed = HashSet::new();
        let mut seeded = Vec::new();
        let mut found = Vec::new();
        while let Some(pid) = queue.pop_front() {
            if !listed.insert(pid) {
                continue;
            }
            // Read before the kernel follows it: an exec after that is
            // an event of its own.
            found.extend(attached(pid, at));
            // A child listed between its fork and the kernel's seeing it
            // is followed from its fork, and told by its Fork.
            match track(pid)? {
                true => seeded.push(pid),
                false => found.retain(|a| a.pid != pid),
            }
            queue.extend(children(pid));
        }
        // A seed whose exit already ran in the kernel before it was seeded
        // would keep the recording waiting forever. One still inside
        // exit() is waited for: on a loaded machine it can stay there for
        // longer than the settling time.
        let deadline = Instant::now() + EXITING_WAIT;
        std::thread::sleep(EXIT_SETTLE);
        let mut left = seeded;
        loop {
            left.retain(|&pid| match life(pid) {
                Life::Running => false,
                Life::Exiting => true,
                Life::Gone => {
                    untrack(pid);
                    found.retain(|a| a.pid != pid);
                    false
                }
            });
            if left.is_empty() || Instant::now() >= deadline {
                return Ok(found);
            }
            std::thread::sleep(EXIT_SETTLE / 5);
        }
    }
}

/// Children of every thread of `pid` (a thread's children list holds the
/// processes that thread forked).
fn children(pid: Pid) -> Vec<Pid> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<Pid>>()
        })
        .collect()
}
