//! The wait-for graph of one snapshot of the live tree: who waits for
//! whom, the culprits, the deadlocks, and the chains from the root down,
//! with processes that share a parent, a command and a wait folded into
//! one group.
//!
//! A process waits for another when one of its threads waits on something
//! the other can end: the other end of a pipe or FIFO, the peer of a
//! socket, a lock it holds, or, for wait4/waitid and a shell's SIGCHLD
//! wait, its children. A process that waits for no process of the tree
//! (asleep, stopped, on a futex, on a socket to another machine) and that
//! something waits for is a culprit; so is a chain's top when it waits on
//! something proctrace cannot follow. Processes that wait for each other
//! in a cycle are a deadlock.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

pub use futex::ThreadCycle;

use super::loops::{loop_at, Loop};
use super::testname::test_of;
use crate::event::{
    Access, CpuUse, FdKind, Outsider, Peer, Pid, Snapshot, SnapshotCause, ThreadWait, WaitHow,
    WaitOn,
};
use crate::processes::Processes;
use crate::syscalls;

/// One snapshot, analysed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hang {
    /// When the snapshot was taken (nanoseconds since the start).
    pub timestamp: u64,
    /// Why it was taken.
    pub cause: SnapshotCause,
    /// Its processes, in the snapshot's order; everything else refers to
    /// them by position.
    pub processes: Vec<Blocked>,
    /// The chains from the tops down, one entry per line.
    pub chains: Vec<ChainLine>,
    /// The culprits, folded into groups.
    pub culprits: Vec<Vec<usize>>,
    /// The cycles of processes waiting for each other.
    pub deadlocks: Vec<Vec<usize>>,
    /// For each process, who waits for it on something it holds: the
    /// waiter, which of its waits, and the descriptors it is held through.
    pub waiters: Vec<Vec<(usize, usize, Vec<i32>)>>,
    /// The cycles of threads of one process waiting for each other.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thread_deadlocks: Vec<ThreadCycle>,
    /// The command's last line of output at the snapshot, where
    /// `record --command-output` kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// One process of a snapshot and what it waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Blocked {
    /// The process.
    pub pid: Pid,
    /// Its parent, if the recording knows it.
    pub parent: Option<Pid>,
    /// The command it ran at the snapshot.
    pub command: String,
    /// The test it belongs to, if a runner says.
    pub test: Option<String>,
    /// Scheduler state: R, S, D, T...
    pub state: char,
    /// Nanoseconds it had been alive.
    pub alive: u64,
    /// Nanoseconds since its last event.
    pub quiet: u64,
    /// The call its main thread is blocked in, if any.
    pub call: Option<String>,
    /// Its main thread's wait channel.
    pub wchan: Option<String>,
    /// What its threads wait on, each resolved to the processes that can
    /// end the wait.
    pub waits: Vec<Wait>,
    /// What could not be read of it.
    pub notes: Vec<String>,
    /// The names of its threads that futex waits are about, by tid.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub thread_names: BTreeMap<Pid, String>,
    /// The command it keeps starting, if it loops: then it is the culprit,
    /// not the attempt or the pause it waits for at the moment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub looping: Option<Loop>,
    /// The CPU it used, where it was running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuUse>,
    /// Its threads' Python frames, the innermost first, by tid: what
    /// `py-spy dump` shows, for those that run CPython.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub python: BTreeMap<Pid, Vec<String>>,
}

/// One wait of one thread, resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// The thread.
    pub tid: Pid,
    /// The call it is blocked in.
    pub call: String,
    /// What it waits on.
    pub on: WaitOn,
    /// The processes of the snapshot that can end it (never itself), with
    /// the descriptors through which they can.
    pub holders: Vec<(usize, Vec<i32>)>,
    /// Processes outside the tree that hold what it waits on, where no
    /// process of the tree does (a server the suite did not start).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outsiders: Vec<Outsider>,
    /// Its own descriptors that can end it: a pipe read to end-of-file
    /// by a process that kept its write end open, a lock it holds itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub own: Vec<i32>,
    /// Its holders are only candidates: the other processes that map the
    /// futex word it waits on, which records no owner.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub candidates: bool,
}

/// One line of a chain: a process, or a group of alike processes that
/// wait for nothing, reached from `from`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainLine {
    /// How deep in the chain (1: a top).
    pub depth: usize,
    /// The process, or the group's members.
    pub members: Vec<usize>,
    /// The waiter it was reached from.
    pub from: Option<usize>,
    /// Whether it was shown before, or closes a cycle.
    pub seen: Seen,
    /// Whether it (the group) is a culprit.
    pub culprit: bool,
}

/// Whether a chain's line shows a process for the first time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Seen {
    /// First shown here.
    First,
    /// Shown above.
    Above,
    /// On the chain above: these pids, from it back to itself, are a cycle.
    Cycle(Vec<Pid>),
}

/// What a recording knows of a snapshot's process besides its record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Known {
    /// Its parent, if known.
    pub parent: Option<Pid>,
    /// The command it ran at the snapshot.
    pub command: String,
    /// The test it belongs to, if a runner says.
    pub test: Option<String>,
}

impl Known {
    /// What `processes` knows of the process at `index` (if known) at `at`.
    pub fn of(processes: &Processes, index: Option<usize>, at: u64) -> Known {
        let Some(i) = index else {
            return Known::default();
        };
        Known {
            parent: processes.get(i).parent_pid,
            command: processes.describe_at(i, at),
            test: test_of(processes, i),
        }
    }
}

impl Blocked {
    /// Whether any of its waits resolves to a process.
    pub fn waits_for_someone(&self) -> bool {
        self.waits.iter().any(|w| !w.holders.is_empty())
    }

    /// Whether it is stopped (SIGSTOP, a debugger).
    pub fn stopped(&self) -> bool {
        matches!(self.state, 't' | 'T')
    }
}

impl Hang {
    /// The analysis of one snapshot's records, each with its process's
    /// index in `processes` if known.
    pub fn new(processes: &Processes, snapshot: &[(Option<usize>, &Snapshot)]) -> Option<Hang> {
        let known: Vec<_> = snapshot
            .iter()
            .map(|&(index, s)| Known::of(processes, index, s.timestamp))
            .collect();
        let loops: Vec<Option<Loop>> = snapshot
            .iter()
            .map(|&(index, s)| index.and_then(|i| loop_at(processes, i, s.timestamp)))
            .collect();
        let snapshot = known.iter().zip(snapshot.iter().map(|(_, s)| *s));
        Hang::with_loops(&snapshot.collect::<Vec<_>>(), loops)
    }

    /// The analysis of one snapshot's records, each with what the
    /// recording knows of its process.
    pub fn of(snapshot: &[(&Known, &Snapshot)]) -> Option<Hang> {
        Hang::with_loops(snapshot, Vec::new())
    }

    /// [`Hang::of`], with the loop each process runs, if any (`loops` in
    /// the snapshot's order; missing ones are none), from
    /// [`super::loops::loop_at`].
    pub fn with_loops(snapshot: &[(&Known, &Snapshot)], loops: Vec<Option<Loop>>) -> Option<Hang> {
        let (_, first) = snapshot.first()?;
        let records: Vec<&Snapshot> = snapshot.iter().map(|(_, s)| *s).collect();
        let mut blocked: Vec<Blocked> = snapshot.iter().map(|(k, s)| describe(k, s)).collect();
        let loops = loops.into_iter().chain(std::iter::repeat(None));
        blocked
            .iter_mut()
            .zip(loops)
            .for_each(|(b, l)| b.looping = l);
        let index = Index::new(&blocked, &records);
        for (at, s) in records.iter().enumerate() {
            blocked[at].waits = waits_of(s)
                .into_iter()
                .map(|(tid, call, on)| {
                    let (holders, own) = index.holders(at, &on, &records);
                    let outsiders = match on.peer_target(&s.fds) {
                        Some(target) if holders.is_empty() => {
                            s.outsiders.get(&target).cloned().unwrap_or_default()
                        }
                        _ => Vec::new(),
                    };
                    Wait {
                        tid,
                        call,
                        on,
                        holders,
                        outsiders,
                        own,
                        candidates: false,
                    }
                })
                .collect();
        }
        futex::add_candidates(&mut blocked, &records);
        // A process waiting on anything but its children is out of its loop.
        for b in &mut blocked {
            if b.waits.iter().any(|w| w.on.how != WaitHow::Children) {
                b.looping = None;
            }
        }
        let mut hang = Hang {
            timestamp: first.timestamp,
            cause: first.cause,
            processes: blocked,
            chains: Vec::new(),
            culprits: Vec::new(),
            deadlocks: Vec::new(),
            waiters: Vec::new(),
            thread_deadlocks: Vec::new(),
            output: first.output.clone(),
        };
        hang.waiters = hang.find_waiters();
        hang.deadlocks = hang.cycles();
        hang.thread_deadlocks = futex::thread_cycles(&hang, &index);
        hang.culprits = hang.group(hang.culprit_positions());
        hang.chains = Chains::walk(&hang);
        Some(hang)
    }

    /// The processes position `at` waits for, each once.
    pub fn targets(&self, at: usize) -> Vec<usize> {
        let mut seen = std::collections::HashSet::new();
        let waits = self.processes[at].waits.iter();
        let holders = waits.flat_map(|w| w.holders.iter().map(|(h, _)| *h));
        holders.filter(|h| seen.insert(*h)).collect()
    }

    /// The tops of the chains: processes whose parent is not in the
    /// snapshot, the recording's root first.
    fn tops(&self) -> Vec<usize> {
        let pids: HashMap<Pid, usize> = self.pids();
        let mut tops: Vec<usize> = (0..self.processes.len())
            .filter(|&at| {
                self.processes[at]
                    .parent
                    .is_none_or(|p| !pids.contains_key(&p))
            })
            .collect();
        tops.sort_by_key(|&at| self.processes[at].parent.is_some());
        tops
    }

    fn pids(&self) -> HashMap<Pid, usize> {
        let pids = self.processes.iter().enumerate();
        pids.map(|(at, p)| (p.pid, at)).collect()
    }

    /// Positions that are culprits: waited for, or a top, and waiting for
    /// no process; a top qualifies only when it waits on something
    /// proctrace cannot follow or that no process of the tree holds (a
    /// server outside it), else it is just the command, asleep.
    fn culprit_positions(&self) -> Vec<usize> {
        let mut waiters = vec![Vec::new(); self.processes.len()];
        for at in 0..self.processes.len() {
            self.targets(at)
                .into_iter()
                .for_each(|t| waiters[t].push(at));
        }
        let tops = self.tops();
        let looper = self.loopers();
        // The attempt or the pause of a loop, that only the loop waits for.
        let inside_loop = |at: usize| {
            looper[at].is_some_and(|l| waiters[at].iter().all(|&w| w == l || looper[w] == Some(l)))
        };
        let mut culprits: Vec<usize> = (0..self.processes.len())
            .filter(|&at| !self.processes[at].waits_for_someone())
            .filter(|&at| {
                // Every wait but one for its children leads out of the
                // tree: it has no holder in it.
                let unresolved = self.processes[at]
                    .waits
                    .iter()
                    .any(|w| !matches!(w.on.peer, Peer::Children { .. }));
                !waiters[at].is_empty() || (unresolved && tops.contains(&at))
            })
            .filter(|&at| !inside_loop(at))
            .collect();
        culprits
            .extend((0..self.processes.len()).filter(|&at| self.processes[at].looping.is_some()));
        culprits.sort_by_key(|&at| self.processes[at].pid);
        culprits.dedup();
        culprits
    }

    /// For each position, its nearest ancestor in the snapshot that loops.
    fn loopers(&self) -> Vec<Option<usize>> {
        let pids = self.pids();
        let parent = |at: usize| {
            self.processes[at]
                .parent
                .and_then(|p| pids.get(&p).copied())
        };
        let nearest = |at: usize| {
            let mut up = parent(at);
            // Bounded: the parents a hostile recording gives may cycle.
            for _ in 0..self.processes.len() {
                let above = up?;
                if self.processes[above].looping.is_some() {
                    return Some(above);
                }
                up = parent(above);
            }
            None
        };
        (0..self.processes.len()).map(nearest).collect()
    }

    /// Folds positions that share a parent, a command, a test and what
    /// they do into groups, in order of their first member.
    pub fn group(&self, positions: Vec<usize>) -> Vec<Vec<usize>> {
        self.group_where(positions, |_| true, true)
    }

    /// [`Hang::group`], where only positions `foldable` says may share a
    /// group; the others each have one of their own, in their place.
    /// Without `by_parent`, alike processes of different parents fold too:
    /// the children of a folded group, whose parents are alike.
    fn group_where(
        &self,
        positions: Vec<usize>,
        foldable: impl Fn(usize) -> bool,
        by_parent: bool,
    ) -> Vec<Vec<usize>> {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut by_key: HashMap<String, usize> = HashMap::new();
        for at in positions {
            if !foldable(at) {
                groups.push(vec![at]);
                continue;
            }
            let g = *by_key.entry(self.key(at, by_parent)).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[g].push(at);
        }
        groups
    }

    /// What makes two processes alike: everything a line says but the pid
    /// (and, without `by_parent`, the parent).
    fn key(&self, at: usize, by_parent: bool) -> String {
        let p = &self.processes[at];
        let parent = p.parent.filter(|_| by_parent);
        if let Some(looping) = &p.looping {
            return format!("{:?}", (parent, &p.command, &p.test, &looping.key));
        }
        let held = &self.waiters[at];
        let waits: Vec<(&str, &WaitOn, Vec<usize>)> = p
            .waits
            .iter()
            .map(|w| {
                (
                    w.call.as_str(),
                    &w.on,
                    w.holders.iter().map(|h| h.0).collect(),
                )
            })
            .collect();
        format!(
            "{:?}",
            (parent, &p.command, &p.test, p.state, &p.call, &p.wchan, waits, held)
        )
    }

    /// [`Hang::waiters`], worked out from every wait's holders.
    fn find_waiters(&self) -> Vec<Vec<(usize, usize, Vec<i32>)>> {
        let mut waiters = vec![Vec::new(); self.processes.len()];
        for (waiter, p) in self.processes.iter().enumerate() {
            for (w, wait) in p.waits.iter().enumerate() {
                if matches!(wait.on.how, WaitHow::Children | WaitHow::Exit) {
                    continue;
                }
                for (holder, fds) in &wait.holders {
                    waiters[*holder].push((waiter, w, fds.clone()));
                }
            }
        }
        waiters
    }

    /// The strongly connected parts of more than one process (Tarjan's),
    /// each from its lowest pid.
    fn cycles(&self) -> Vec<Vec<usize>> {
        let mut found = cycles_of(self.processes.len(), &|at| self.targets(at));
        for cycle in &mut found {
            cycle.sort_by_key(|&at| self.processes[at].pid);
        }
        found.sort_by_key(|c| self.processes[c[0]].pid);
        found
    }
}

/// The strongly connected parts of more than one node of the graph of
/// `nodes` nodes whose edges `targets` gives (Tarjan's).
fn cycles_of(nodes: usize, targets: &dyn Fn(usize) -> Vec<usize>) -> Vec<Vec<usize>> {
    let mut tarjan = Tarjan {
        targets,
        index: vec![None; nodes],
        low: vec![0; nodes],
        on_stack: vec![false; nodes],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for at in 0..nodes {
        if tarjan.index[at].is_none() {
            tarjan.visit(at);
        }
    }
    tarjan.found
}

struct Tarjan<'h> {
    targets: &'h dyn Fn(usize) -> Vec<usize>,
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: usize,
    found: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, at: usize) {
        self.index[at] = Some(self.next);
        self.low[at] = self.next;
        self.next += 1;
        self.stack.push(at);
        self.on_stack[at] = true;
        for target in (self.targets)(at) {
            match self.index[target] {
                None => {
                    self.visit(target);
                    self.low[at] = self.low[at].min(self.low[target]);
                }
                Some(index) if self.on_stack[target] => self.low[at] = self.low[at].min(index),
                Some(_) => {}
            }
        }
        if Some(self.low[at]) == self.index[at] {
            let mut part = Vec::new();
            while let Some(member) = self.stack.pop() {
                self.on_stack[member] = false;
                part.push(member);
                if member == at {
                    break;
                }
            }
            if part.len() > 1 {
                self.found.push(part);
            }
        }
    }
}

/// A walk down the graph from the tops, one [`ChainLine`] per line.
struct Chains<'h> {
    hang: &'h Hang,
    links: Vec<ChainLine>,
    shown: Vec<bool>,
    stack: Vec<usize>,
    culprit: Vec<bool>,
}

impl Chains<'_> {
    fn walk(hang: &Hang) -> Vec<ChainLine> {
        let mut culprit = vec![false; hang.processes.len()];
        hang.culprits
            .iter()
            .flatten()
            .for_each(|&at| culprit[at] = true);
        let mut chains = Chains {
            hang,
            links: Vec::new(),
            shown: vec![false; hang.processes.len()],
            stack: Vec::new(),
            culprit,
        };
        // Then what no chain reached: what nothing shown waits on.
        for at in hang.tops().into_iter().chain(0..hang.processes.len()) {
            if !chains.shown[at] {
                chains.visit(vec![at], None, 1);
            }
        }
        chains.links
    }

    fn visit(&mut self, members: Vec<usize>, from: Option<usize>, depth: usize) {
        let at = members[0];
        let seen = if let Some(on) = self.stack.iter().position(|&s| s == at) {
            let pids = self.stack[on..].iter().chain([&at]);
            Seen::Cycle(pids.map(|&s| self.hang.processes[s].pid).collect())
        } else if self.shown[at] {
            Seen::Above
        } else {
            Seen::First
        };
        let first = seen == Seen::First;
        self.links.push(ChainLine {
            depth,
            culprit: first && self.culprit[at],
            members: members.clone(),
            from,
            seen,
        });
        if !first {
            return;
        }
        members.iter().for_each(|&m| self.shown[m] = true);
        self.stack.push(at);
        for group in self.fold(&members) {
            self.visit(group, Some(at), depth + 1);
        }
        self.stack.pop();
    }

    /// What the members of a line wait for, not yet shown, folded into
    /// groups of alike ones (1,000 waiters on one lock; the children of
    /// 1,000 alike loops, whatever their parent); the others stay one per
    /// line, in their order.
    fn fold(&self, members: &[usize]) -> Vec<Vec<usize>> {
        let mut targets: Vec<usize> = Vec::new();
        for t in members.iter().flat_map(|&m| self.hang.targets(m)) {
            if !targets.contains(&t) {
                targets.push(t);
            }
        }
        let foldable = |t: usize| !self.shown[t] && !self.stack.contains(&t);
        self.hang.group_where(targets, foldable, members.len() == 1)
    }
}

/// A process as the recording knows it at the snapshot, its waits still
/// unresolved.
fn describe(known: &Known, s: &Snapshot) -> Blocked {
    let main = s.threads.iter().find(|t| t.tid == s.pid);
    let legacy_call = s
        .syscall
        .and_then(|nr| syscalls::name_in(syscalls::X86_64, nr));
    let call = match main {
        Some(main) => main
            .call
            .clone()
            .or_else(|| main.syscall.map(|nr| format!("syscall {nr}"))),
        None if s.threads.is_empty() => legacy_call
            .map(str::to_owned)
            .or_else(|| s.syscall.map(|nr| format!("syscall {nr}"))),
        None => None,
    };
    Blocked {
        pid: s.pid,
        parent: known.parent,
        command: known.command.clone(),
        test: known.test.clone(),
        state: s.state,
        alive: s.alive,
        quiet: s.quiet,
        call,
        wchan: main.map_or_else(|| s.wchan.clone(), |m| m.wchan.clone()),
        waits: Vec::new(),
        notes: s.notes.clone(),
        thread_names: s
            .threads
            .iter()
            .filter_map(|t| Some((t.tid, t.name.clone()?)))
            .collect(),
        looping: None,
        cpu: s.cpu,
        python: s
            .threads
            .iter()
            .filter(|t| !t.python.is_empty())
            .map(|t| (t.tid, t.python.clone()))
            .collect(),
    }
}

/// Every thread's waits: `(tid, call, what)`. A recording made before
/// threads were read has the main thread's call and first argument only,
/// as x86-64 numbers: its pipe reads and writes and its waits for
/// children are decoded from those.
fn waits_of(s: &Snapshot) -> Vec<(Pid, String, WaitOn)> {
    if matches!(s.state, 'T' | 't') {
        return Vec::new();
    }
    let threads = if s.threads.is_empty() {
        legacy_thread(s).into_iter().collect()
    } else {
        s.threads.clone()
    };
    threads
        .into_iter()
        .flat_map(|t| {
            let call = t.call.unwrap_or_default();
            t.on.into_iter().map(move |on| (t.tid, call.clone(), on))
        })
        .collect()
}

fn legacy_thread(s: &Snapshot) -> Option<ThreadWait> {
    let call = syscalls::name_in(syscalls::X86_64, s.syscall?)?;
    let arg = s.syscall_arg?;
    let fd = |how| {
        let held = s.fds.iter().find(|h| i64::from(h.fd.fd) == arg)?;
        (held.fd.kind == FdKind::Pipe).then(|| WaitOn {
            fd: Some(held.fd.fd),
            how,
            what: held.fd.target.clone(),
            peer: Peer::File {
                dev: held.fd.dev,
                ino: held.fd.ino,
            },
        })
    };
    let children = |pid: Option<Pid>| {
        Some(WaitOn {
            fd: None,
            how: WaitHow::Children,
            what: "its children".into(),
            peer: Peer::Children { pid },
        })
    };
    let on = match call {
        "read" | "readv" | "pread64" | "preadv" => fd(WaitHow::Read),
        "write" | "writev" | "pwrite64" | "pwritev" => fd(WaitHow::Write),
        "wait4" => children((arg > 0).then_some(arg as Pid)),
        "waitid" | "rt_sigsuspend" | "pause" | "rt_sigtimedwait" => children(None),
        _ => None,
    };
    Some(ThreadWait {
        tid: s.pid,
        state: s.state,
        name: None,
        wchan: s.wchan.clone(),
        syscall: s.syscall,
        call: Some(call.to_owned()),
        on: on.into_iter().collect(),
        python: Vec::new(),
    })
}

/// A descriptor a process holds: its position, the fd, and how it was opened.
type End = (usize, i32, Option<Access>);

/// Who can end a wait: other processes, each with its descriptors, and
/// the waiter's own descriptors.
type Holders = (Vec<(usize, Vec<i32>)>, Vec<i32>);

/// Who holds what, in one snapshot.
struct Index {
    /// (dev, ino) -> (position, fd, access).
    files: HashMap<(u64, u64), Vec<End>>,
    /// Socket inode -> (position, fd).
    sockets: HashMap<u64, Vec<(usize, i32)>>,
    children: HashMap<Pid, Vec<usize>>,
    pids: HashMap<Pid, usize>,
    /// The process of each thread, by tid.
    tids: HashMap<Pid, usize>,
}

impl Index {
    fn new(blocked: &[Blocked], snapshot: &[&Snapshot]) -> Index {
        let mut index = Index {
            files: HashMap::new(),
            sockets: HashMap::new(),
            children: HashMap::new(),
            pids: HashMap::new(),
            tids: HashMap::new(),
        };
        for (at, s) in snapshot.iter().enumerate() {
            index.pids.insert(s.pid, at);
            let tids = s.threads.iter().map(|t| t.tid).chain([s.pid]);
            index.tids.extend(tids.map(|tid| (tid, at)));
            if let Some(parent) = blocked[at].parent {
                index.children.entry(parent).or_default().push(at);
            }
            for held in &s.fds {
                let file = (held.fd.dev, held.fd.ino);
                let entry = (at, held.fd.fd, held.access);
                index.files.entry(file).or_default().push(entry);
                if held.fd.kind == FdKind::Socket {
                    let entry = (at, held.fd.fd);
                    index.sockets.entry(held.fd.ino).or_default().push(entry);
                }
            }
        }
        index
    }

    /// The processes other than `at` that can end its wait `on`, and the
    /// descriptors of `at` itself that could.
    fn holders(&self, at: usize, on: &WaitOn, snapshot: &[&Snapshot]) -> Holders {
        let mut holders: BTreeMap<usize, Vec<i32>> = BTreeMap::new();
        let mut add = |holder: usize, fd: Option<i32>| {
            holders.entry(holder).or_default().extend(fd);
        };
        match &on.peer {
            Peer::File { dev, ino } => {
                let ends = self.files.get(&(*dev, *ino)).into_iter().flatten();
                for &(holder, fd, access) in ends {
                    let other_end = match on.how {
                        WaitHow::Read => access.is_some_and(Access::writes),
                        WaitHow::Write => access.is_some_and(Access::reads),
                        _ => true,
                    };
                    if other_end {
                        add(holder, Some(fd));
                    }
                }
            }
            Peer::Socket { ino } => {
                let ends = self.sockets.get(ino).into_iter().flatten();
                ends.for_each(|&(holder, fd)| add(holder, Some(fd)));
            }
            Peer::Lock { pid, dev, ino } => match self.pids.get(pid) {
                Some(&holder) => {
                    let fds = snapshot[holder].fds.iter();
                    let fds = fds.filter(|h| h.fd.dev == *dev && h.fd.ino == *ino);
                    fds.for_each(|h| add(holder, Some(h.fd.fd)));
                }
                // The lock outlived the process that took it: a child that
                // inherited the open file holds it, unless it waits too.
                None => {
                    let ends = self.files.get(&(*dev, *ino)).into_iter().flatten();
                    for &(holder, fd, _) in ends {
                        if !waits_on_lock(snapshot[holder], *dev, *ino) {
                            add(holder, Some(fd));
                        }
                    }
                }
            },
            Peer::Children { pid: Some(pid) } => {
                self.pids.get(pid).into_iter().for_each(|&p| add(p, None));
            }
            Peer::Children { pid: None } => {
                let children = self.children.get(&snapshot[at].pid).into_iter().flatten();
                children.for_each(|&c| add(c, None));
            }
            Peer::Futex { owner, .. } => {
                let holder = owner.and_then(|tid| self.tids.get(&tid));
                holder.into_iter().for_each(|&p| add(p, None));
            }
            Peer::Unresolved { .. } => {}
        }
        let own = holders.remove(&at).unwrap_or_default();
        (holders.into_iter().collect(), own)
    }
}

fn waits_on_lock(s: &Snapshot, dev: u64, ino: u64) -> bool {
    let waits = s.threads.iter().flat_map(|t| &t.on);
    waits
        .into_iter()
        .any(|w| matches!(w.peer, Peer::Lock { dev: d, ino: i, .. } if d == dev && i == ino))
}

mod futex;
#[cfg(test)]
pub(crate) mod tests;
