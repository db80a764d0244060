//! Lingering processes: the tree's processes that outlive the process that
//! started them, or the root. In a test suite that is a leak: a background
//! process a test forgot, holding open what its runner waits on.
//!
//! [`Lineage`] follows the event stream on the drain thread: who is alive,
//! who started whom, and since when each process outlives its parent.

use std::collections::{BTreeSet, HashMap};

use super::notice::{Lingerer, Notice};
use crate::event::{Fd, Lingering, Pid, Record};
use crate::inspect::held_fds;

#[derive(Debug)]
struct Node {
    parent: Option<Pid>,
    command: String,
    exited: bool,
    /// Children still in the lineage (alive, or with live descendants).
    children: Vec<Pid>,
    /// Whose exit it outlives, and since when.
    outliving: Option<(Pid, u64)>,
    reported: bool,
    /// When its last event (Fork, Exec) happened.
    last_event: u64,
}

/// The live part of the tree, with enough history to name ancestors:
/// an exited process is kept while it has descendants that run on.
#[derive(Debug)]
pub(crate) struct Lineage {
    root: Pid,
    nodes: HashMap<Pid, Node>,
    /// (since, pid) of processes outliving their parent or the root.
    outliving: BTreeSet<(u64, Pid)>,
    root_fds: Vec<Fd>,
    root_exited: bool,
}

impl Lineage {
    pub fn new(root: Pid) -> Self {
        let root_node = Node {
            parent: None,
            command: String::new(),
            exited: false,
            children: Vec::new(),
            outliving: None,
            reported: false,
            last_event: 0,
        };
        Lineage {
            root,
            nodes: HashMap::from([(root, root_node)]),
            outliving: BTreeSet::new(),
            root_fds: Vec::new(),
            root_exited: false,
        }
    }

    /// Follows one event; says so when the root exits before its tree.
    pub fn observe(&mut self, record: &Record) -> Option<Notice> {
        match record {
            Record::Fork(fork) => self.fork(fork.parent_pid, fork.child_pid, fork.timestamp),
            Record::Exec(exec) => {
                if exec.pid == self.root && self.root_fds.is_empty() {
                    self.root_fds = exec.fds.clone();
                }
                if let Some(node) = self.nodes.get_mut(&exec.pid) {
                    node.command = exec.cmdline.clone();
                    node.last_event = exec.timestamp;
                }
            }
            Record::Exit(exit) => return self.exit(exit.pid, exit.timestamp),
            _ => {}
        }
        None
    }

    fn fork(&mut self, parent: Pid, child: Pid, at: u64) {
        let command = self
            .nodes
            .get(&parent)
            .map(|p| p.command.clone())
            .unwrap_or_default();
        if let Some(p) = self.nodes.get_mut(&parent) {
            p.children.push(child);
        }
        let node = Node {
            parent: Some(parent),
            command,
            exited: false,
            children: Vec::new(),
            outliving: None,
            reported: false,
            last_event: at,
        };
        self.nodes.insert(child, node);
    }

    fn exit(&mut self, pid: Pid, at: u64) -> Option<Notice> {
        let children = match self.nodes.get_mut(&pid) {
            Some(node) => {
                node.exited = true;
                node.children.clone()
            }
            None => return None,
        };
        for child in children {
            self.outlives(child, pid, at);
        }
        let notice = (pid == self.root).then(|| self.root_exit(at)).flatten();
        self.forget(pid);
        notice
    }

    fn root_exit(&mut self, at: u64) -> Option<Notice> {
        self.root_exited = true;
        let alive = self.alive();
        for &pid in &alive {
            self.outlives(pid, self.root, at);
        }
        (!alive.is_empty())
            .then(|| Notice::RootExited(alive.iter().map(|&pid| self.describe(pid)).collect()))
    }

    fn outlives(&mut self, pid: Pid, outlived: Pid, since: u64) {
        if let Some(node) = self.nodes.get_mut(&pid) {
            if !node.exited && node.outliving.is_none() {
                node.outliving = Some((outlived, since));
                self.outliving.insert((since, pid));
            }
        }
    }

    /// Drops an exited process, and exited ancestors, once no descendant
    /// of theirs runs on.
    fn forget(&mut self, mut pid: Pid) {
        while let Some(node) = self.nodes.get(&pid) {
            if !node.exited || !node.children.is_empty() {
                return;
            }
            let parent = node.parent;
            if let Some((_, since)) = node.outliving {
                self.outliving.remove(&(since, pid));
            }
            self.nodes.remove(&pid);
            let Some(parent) = parent else { return };
            match self.nodes.get_mut(&parent) {
                Some(p) => p.children.retain(|&c| c != pid),
                None => return,
            }
            pid = parent;
        }
    }

    /// The processes of the tree that run, as the events so far say.
    pub fn alive(&self) -> Vec<Pid> {
        let mut alive: Vec<Pid> = self
            .nodes
            .iter()
            .filter(|(_, n)| !n.exited)
            .map(|(&pid, _)| pid)
            .collect();
        alive.sort_unstable();
        alive
    }

    /// Processes that have outlived their parent or the root for `linger`
    /// nanoseconds by `now`, each reported once.
    pub fn newly_lingering(&mut self, now: u64, linger: u64) -> Vec<Lingering> {
        let due: Vec<(u64, Pid)> = self
            .outliving
            .iter()
            .take_while(|(since, _)| since + linger <= now)
            .copied()
            .collect();
        let mut found = Vec::new();
        for (since, pid) in due {
            self.outliving.remove(&(since, pid));
            let Some(node) = self.nodes.get_mut(&pid) else {
                continue;
            };
            if node.exited || node.reported {
                continue;
            }
            node.reported = true;
            let outlived = node.outliving.map_or(self.root, |(p, _)| p);
            let fds = held_fds(pid, &self.root_fds);
            found.push(Lingering {
                seq: 0,
                timestamp: now,
                pid,
                outlived,
                since,
                fds,
            });
        }
        found
    }

    /// Whether the root is gone and every process left has been reported
    /// lingering: nothing more to wait for.
    pub fn only_lingerers_left(&self) -> bool {
        self.root_exited && self.nodes.values().all(|n| n.exited || n.reported)
    }

    /// The lingering processes reported so far that still run.
    pub fn lingerers(&self) -> Vec<Pid> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.reported && !n.exited)
            .map(|(&pid, _)| pid)
            .collect()
    }

    /// When the last event of `pid` happened, if it is known.
    pub fn last_event(&self, pid: Pid) -> Option<u64> {
        self.nodes.get(&pid).map(|n| n.last_event)
    }

    /// The descriptors the root started with.
    pub fn root_fds(&self) -> &[Fd] {
        &self.root_fds
    }

    /// What the lineage knows of `pid`: its parent and its command, with
    /// the `parent` and the `command` of events still held back, if any.
    pub fn known(
        &self,
        pid: Pid,
        parent: Option<Pid>,
        command: Option<&str>,
    ) -> (Option<Pid>, String) {
        let node = self.nodes.get(&pid);
        let parent = node.map_or(parent, |n| n.parent);
        // A process that has not exec'd yet runs its parent's command.
        let runs = node
            .or_else(|| self.nodes.get(&parent?))
            .map(|n| n.command.as_str());
        (parent, command.or(runs).unwrap_or_default().to_owned())
    }

    /// A process, with the commands of its ancestors.
    pub fn describe(&self, pid: Pid) -> Lingerer {
        let command = |pid: Pid| {
            self.nodes
                .get(&pid)
                .map(|n| n.command.clone())
                .unwrap_or_default()
        };
        let mut ancestry = Vec::new();
        let mut at = self.nodes.get(&pid).and_then(|n| n.parent);
        while let Some(ancestor) = at {
            ancestry.push((ancestor, command(ancestor)));
            at = self.nodes.get(&ancestor).and_then(|n| n.parent);
        }
        ancestry.reverse();
        Lingerer {
            pid,
            command: command(pid),
            ancestry,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::event::tests::exit_with;
    pub(crate) use crate::event::tests::fork;

    /// An Exit record with status 0, for the drain's tests too.
    pub(crate) fn exit(pid: Pid, timestamp: u64) -> Record {
        exit_with(pid, timestamp, Some(0), None)
    }

    #[test]
    fn an_orphan_lingers_once_its_linger_time_has_passed() {
        let mut lineage = Lineage::new(10);
        for record in [fork(10, 11), fork(11, 12), exit(11, 1_000)] {
            assert_eq!(lineage.observe(&record), None);
        }
        assert!(lineage.newly_lingering(1_500, 1_000).is_empty());
        let found = lineage.newly_lingering(2_000, 1_000);
        assert_eq!(
            found
                .iter()
                .map(|l| (l.pid, l.outlived, l.since))
                .collect::<Vec<_>>(),
            [(12, 11, 1_000)]
        );
        assert!(
            lineage.newly_lingering(9_000, 1_000).is_empty(),
            "reported once"
        );
        let who = lineage.describe(12);
        assert_eq!(
            who.ancestry.iter().map(|(pid, _)| *pid).collect::<Vec<_>>(),
            [10, 11]
        );
    }

    #[test]
    fn the_root_exiting_early_is_a_notice_and_everything_left_outlives_it() {
        let mut lineage = Lineage::new(10);
        lineage.observe(&fork(10, 11));
        let Some(Notice::RootExited(alive)) = lineage.observe(&exit(10, 500)) else {
            panic!("no notice")
        };
        assert_eq!(alive.iter().map(|l| l.pid).collect::<Vec<_>>(), [11]);
        assert!(!lineage.only_lingerers_left());
        assert_eq!(lineage.newly_lingering(600, 100).len(), 1);
        assert!(lineage.only_lingerers_left());
    }

    #[test]
    fn exited_branches_are_forgotten() {
        let mut lineage = Lineage::new(10);
        for record in [fork(10, 11), fork(11, 12), exit(12, 5), exit(11, 6)] {
            lineage.observe(&record);
        }
        assert_eq!(lineage.nodes.len(), 1);
        assert!(lineage.outliving.is_empty());
    }
}
