//! Lingering processes: the tree's processes that outlive the process that
//! started them, or the root. In a test suite that is a leak: a background
//! process a test forgot, holding open what its runner waits on.
//!
//! [`Lineage`] follows the event stream on the drain thread: who is alive,
//! who started whom, and since when each process outlives its parent.

use std::collections::{BTreeSet, HashMap};
use std::ffi::{CStr, CString};
use std::sync::Arc;

use nix::dir::Dir;
use nix::fcntl::{readlinkat, AtFlags};
use nix::sys::stat::fstatat;

use super::proc_stat::ProcDir;
use super::snapshot::Taken;
use crate::analysis::waits::Known;
use crate::event::{Access, Fd, FdKind, HeldFd, Lingering, Pid, Record};

/// A lingering process, for people: its command and the chain of commands
/// that started it, from the root down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lingerer {
    /// The process.
    pub pid: Pid,
    /// What it runs.
    pub command: String,
    /// The commands of its ancestors, the root first, its parent last.
    pub ancestry: Vec<(Pid, String)>,
}

/// What a recording has to say while it runs, beyond its events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The root exited while these processes of its tree still run.
    RootExited(Vec<Lingerer>),
    /// A process has lingered for the `--linger` time.
    Lingering(Lingerer),
    /// A snapshot of the live tree was taken, whole: its records also
    /// follow among the events, once the events before it are out.
    Snapshot(Arc<Taken>),
    /// `--timeout` expired: the tree is being ended, first with this
    /// signal (`--timeout-signal`).
    TimedOut {
        /// The signal sent first.
        signal: i32,
    },
    /// The kernel has dropped events since the last count: these are the
    /// totals so far (checked about once a second).
    Lost {
        /// Events dropped with the buffer full.
        buffer_full: u64,
        /// Processes not followed with the tracking map full.
        tracking_full: u64,
    },
    /// A lingering process was sent a signal (`--kill-lingering`).
    Killed {
        /// The process.
        pid: Pid,
        /// The signal sent.
        signal: i32,
    },
}

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
            let fds =
                ProcDir::open(pid).map_or_else(Vec::new, |dir| held_fds(&dir, &self.root_fds));
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
    pub fn known(&self, pid: Pid, parent: Option<Pid>, command: Option<&str>) -> Known {
        let node = self.nodes.get(&pid);
        let parent = node.map_or(parent, |n| n.parent);
        // A process that has not exec'd yet runs its parent's command.
        let runs = node
            .or_else(|| self.nodes.get(&parent?))
            .map(|n| n.command.as_str());
        Known {
            parent,
            command: command.or(runs).unwrap_or_default().to_owned(),
            test: None,
        }
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

/// How a descriptor was opened, from the mode of its `/proc/PID/fd/N`
/// link itself (`lstat`): the kernel gives it the owner's read and write
/// bits of the open file's mode (tid_fd_update_inode), for a tenth of the
/// cost of reading its fdinfo, which counts in a snapshot of thousands.
fn fd_access(link_mode: u32) -> Option<Access> {
    match (link_mode & 0o400 != 0, link_mode & 0o200 != 0) {
        (true, true) => Some(Access::ReadWrite),
        (true, false) => Some(Access::Read),
        (false, true) => Some(Access::Write),
        (false, false) => None,
    }
}

/// The descriptors `pid` holds now, from /proc, each matched against the
/// descriptors the root started with.
pub(crate) fn held_fds(proc: &ProcDir, root_fds: &[Fd]) -> Vec<HeldFd> {
    // Each call is made relative to the fd directory: a snapshot of
    // thousands of processes makes three per descriptor, and the walk
    // from /proc down to it would cost as much as the call.
    let Some(mut dir) = proc.dir("fd") else {
        return Vec::new();
    };
    let names: Vec<CString> = dir
        .iter()
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_owned())
        .filter(|name| name.as_bytes() != b"." && name.as_bytes() != b"..")
        .collect();
    let mut held: Vec<HeldFd> = names
        .iter()
        .filter_map(|name| held_fd(&dir, name, root_fds))
        .collect();
    held.sort_by_key(|h| h.fd.fd);
    held
}

/// One descriptor of an fd directory: what it refers to, and how.
fn held_fd(dir: &Dir, name: &CStr, root_fds: &[Fd]) -> Option<HeldFd> {
    let fd: i32 = name.to_str().ok()?.parse().ok()?;
    let target = readlinkat(dir, name).ok()?.to_string_lossy().into_owned();
    // stat follows the link to the open file itself.
    let meta = fstatat(dir, name, AtFlags::empty()).ok()?;
    let fd = Fd {
        fd,
        kind: FdKind::of(meta.st_mode, libc::major(meta.st_rdev)),
        target,
        dev: meta.st_dev,
        ino: meta.st_ino,
    };
    let root_fd = root_fds.iter().find(|r| r.same_file(&fd)).map(|r| r.fd);
    let link = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok();
    let access = link.and_then(|l| fd_access(l.st_mode));
    Some(HeldFd {
        fd,
        root_fd,
        access,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    pub(crate) use crate::event::tests::fork;
    use crate::event::Exit;

    /// An Exit record with status 0, for the drain's tests too.
    pub(crate) fn exit(pid: Pid, timestamp: u64) -> Record {
        Record::Exit(Exit {
            seq: 0,
            timestamp,
            pid,
            ppid: 1,
            pgid: 1,
            sid: None,
            exit_code: Some(0),
            signal: None,
            core_dumped: false,
            resources: None,
        })
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
