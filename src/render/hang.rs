//! `hang`: for each snapshot of the live tree, who waits for whom, from
//! the root down to the processes nothing else waits on: the culprits.
//!
//! A process waits for another when it is blocked reading a pipe whose
//! write ends the other holds (or writing one whose read ends it holds),
//! or in wait4/waitid for its children. A stopped process, or one blocked
//! in anything else (a sleep, a socket, a lock), waits for nothing the
//! tree shows: if anything waits for it, it is a culprit.

use std::io::{self, Write};

use crate::event::{FdKind, Snapshot, SnapshotCause};
use crate::processes::Processes;
use crate::testname::test_of;
use crate::text::visible;
use crate::text::{fd_list, seconds, shorten};

/// Columns a command gets in a line of the chain.
const COMMAND_WIDTH: usize = 60;

/// Writes every snapshot's wait-for chains, or that the recording has none.
pub fn render(processes: &Processes, out: &mut dyn Write) -> io::Result<()> {
    let snapshots = processes.snapshots();
    if snapshots.is_empty() {
        return writeln!(
            out,
            "no snapshot of the live tree (record with --timeout, --hang-after or --linger, \
             or send proctrace SIGUSR1)"
        );
    }
    for (i, snapshot) in snapshots.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let snapshot: Vec<_> = snapshot.iter().map(|&(i, s)| (Some(i), s)).collect();
        for line in explain(processes, &snapshot) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// The lines that explain one snapshot: a heading, the chains from the
/// root down, then one line per culprit. `snapshot` holds the records of
/// one snapshot, each with its process's index in `processes` if known.
pub fn explain(processes: &Processes, snapshot: &[(Option<usize>, &Snapshot)]) -> Vec<String> {
    let Some((_, first)) = snapshot.first() else {
        return Vec::new();
    };
    let graph = Graph::new(processes, snapshot);
    let mut lines = vec![format!(
        "snapshot at +{} ({}): {} process{} alive",
        seconds(first.timestamp),
        cause(first.cause),
        snapshot.len(),
        if snapshot.len() == 1 { "" } else { "es" }
    )];
    let mut walk = Walk {
        graph: &graph,
        lines: &mut lines,
        shown: vec![false; snapshot.len()],
        stack: Vec::new(),
        culprits: Vec::new(),
    };
    // Then what no chain reached: orphans, and what nothing shown waits on.
    for at in graph.roots().into_iter().chain(0..snapshot.len()) {
        if !walk.shown[at] {
            walk.visit(at, None, 1);
        }
    }
    let culprits = std::mem::take(&mut walk.culprits);
    for at in culprits {
        lines.push(format!("culprit: {}", graph.culprit(at)));
    }
    lines
}

/// The heading and culprits of the last snapshot, for `summary`: empty
/// for a recording without snapshots.
pub(super) fn last_culprits(processes: &Processes) -> Vec<String> {
    let lines = last_explained(processes);
    let Some((heading, rest)) = lines.split_first() else {
        return Vec::new();
    };
    std::iter::once(heading)
        .chain(rest.iter().filter(|l| l.starts_with("culprit: ")))
        .cloned()
        .collect()
}

/// The [`explain`] lines of the last snapshot: empty for a recording
/// without snapshots.
pub(super) fn last_explained(processes: &Processes) -> Vec<String> {
    let Some(last) = processes.snapshots().pop() else {
        return Vec::new();
    };
    let last: Vec<_> = last.into_iter().map(|(i, s)| (Some(i), s)).collect();
    explain(processes, &last)
}

/// Why a snapshot was taken, in words.
fn cause(cause: SnapshotCause) -> String {
    match cause {
        SnapshotCause::Signal(signal) => {
            let name =
                nix::sys::signal::Signal::try_from(signal).map_or("a signal", |s| s.as_str());
            format!("proctrace got {name}")
        }
        SnapshotCause::Timeout => "--timeout expired".into(),
        SnapshotCause::Quiet => "no event for the --hang-after time".into(),
        SnapshotCause::Linger => "a process lingered".into(),
    }
}

/// What one process waits for.
enum Wait {
    /// Blocked on a pipe; the others are the processes holding its other
    /// end, with their descriptors.
    Pipe {
        fd: i32,
        target: String,
        reading: bool,
        others: Vec<(usize, Vec<i32>)>,
    },
    /// In wait4/waitid for its children that run.
    Children(Vec<usize>),
    /// Waits for nothing the tree shows.
    Nothing,
}

impl Wait {
    fn targets(&self) -> Vec<usize> {
        match self {
            Wait::Pipe { others, .. } => others.iter().map(|(at, _)| *at).collect(),
            Wait::Children(children) => children.clone(),
            Wait::Nothing => Vec::new(),
        }
    }
}

/// The processes of one snapshot and what each waits for, by position.
struct Graph<'a> {
    processes: &'a Processes,
    nodes: &'a [(Option<usize>, &'a Snapshot)],
    waits: Vec<Wait>,
}

impl<'a> Graph<'a> {
    fn new(processes: &'a Processes, nodes: &'a [(Option<usize>, &'a Snapshot)]) -> Self {
        let mut graph = Graph {
            processes,
            nodes,
            waits: Vec::new(),
        };
        graph.waits = (0..nodes.len()).map(|at| graph.wait_of(at)).collect();
        graph
    }

    fn snapshot(&self, at: usize) -> &'a Snapshot {
        self.nodes[at].1
    }

    fn parent_pid(&self, at: usize) -> Option<i32> {
        self.nodes[at]
            .0
            .and_then(|i| self.processes.get(i).parent_pid)
    }

    fn wait_of(&self, at: usize) -> Wait {
        let s = self.snapshot(at);
        let (Some(nr), Some(arg)) = (s.syscall, s.syscall_arg) else {
            return Wait::Nothing;
        };
        if matches!(s.state, 'T' | 't') {
            return Wait::Nothing;
        }
        let reading = match syscall_name(nr) {
            Some("read" | "readv" | "pread64" | "preadv") => true,
            Some("write" | "writev" | "pwrite64" | "pwritev") => false,
            Some("wait4" | "waitid") => {
                // wait4's first argument is the pid waited for (-1: any).
                let only = (syscall_name(nr) == Some("wait4") && arg > 0).then_some(arg);
                let children = (0..self.nodes.len())
                    .filter(|&c| self.parent_pid(c) == Some(s.pid))
                    .filter(|&c| only.is_none_or(|p| i64::from(self.snapshot(c).pid) == p))
                    .collect();
                return Wait::Children(children);
            }
            // dash's `wait` (and other shells') sleeps for SIGCHLD: with
            // children alive, it is them it waits for.
            Some("rt_sigsuspend" | "pause" | "rt_sigtimedwait") => {
                let children: Vec<usize> = (0..self.nodes.len())
                    .filter(|&c| self.parent_pid(c) == Some(s.pid))
                    .collect();
                return if children.is_empty() {
                    Wait::Nothing
                } else {
                    Wait::Children(children)
                };
            }
            _ => return Wait::Nothing,
        };
        let Some(held) = s.fds.iter().find(|h| i64::from(h.fd.fd) == arg) else {
            return Wait::Nothing;
        };
        if held.fd.kind != FdKind::Pipe {
            return Wait::Nothing;
        }
        // The other end: who can write what it reads, or read what it writes.
        let others = (0..self.nodes.len())
            .filter_map(|o| {
                let fds: Vec<i32> = self
                    .snapshot(o)
                    .fds
                    .iter()
                    .filter(|h| h.fd.same_file(&held.fd))
                    .filter(|h| {
                        h.access
                            .is_some_and(|a| if reading { a.writes() } else { a.reads() })
                    })
                    .map(|h| h.fd.fd)
                    .collect();
                (!fds.is_empty()).then_some((o, fds))
            })
            .collect();
        Wait::Pipe {
            fd: held.fd.fd,
            target: held.fd.target.clone(),
            reading,
            others,
        }
    }

    /// Where the chains start: the processes whose parent is not in the
    /// snapshot, the recording's root first.
    fn roots(&self) -> Vec<usize> {
        let pids: Vec<i32> = self.nodes.iter().map(|(_, s)| s.pid).collect();
        let mut roots: Vec<usize> = (0..self.nodes.len())
            .filter(|&at| self.parent_pid(at).is_none_or(|p| !pids.contains(&p)))
            .collect();
        roots.sort_by_key(|&at| self.parent_pid(at).is_some());
        roots
    }

    /// `PID command`, the command it ran at the snapshot.
    fn name(&self, at: usize) -> String {
        let (index, s) = self.nodes[at];
        let command =
            index.map_or_else(String::new, |i| self.processes.describe_at(i, s.timestamp));
        let command = shorten(&visible(&command), Some(COMMAND_WIDTH));
        format!("{} {command}", s.pid).trim_end().to_string()
    }

    fn test(&self, at: usize) -> Option<String> {
        self.nodes[at]
            .0
            .and_then(|i| test_of(self.processes, i))
            .map(|t| visible(&t).into_owned())
    }

    /// What the process is doing: the call it is blocked in, or its state.
    fn doing(&self, at: usize) -> String {
        let s = self.snapshot(at);
        let wchan = s.wchan.as_deref().map(|w| format!(" ({})", visible(w)));
        let wchan = wchan.unwrap_or_default();
        if matches!(s.state, 'T' | 't') {
            return format!("stopped{wchan}");
        }
        let call = s.syscall.map(|nr| match syscall_name(nr) {
            Some(name) => name.to_string(),
            None => format!("syscall {nr}"),
        });
        match (&self.waits[at], call) {
            (Wait::Pipe { fd, target, .. }, Some(call)) => {
                format!("blocked in {call}(fd {fd}) on {}{wchan}", visible(target))
            }
            (Wait::Children(_), Some(call)) => format!("waits in {call} for its children"),
            (Wait::Nothing, Some(call)) => format!("blocked in {call}{wchan}"),
            (_, None) if s.state == 'R' => "running".to_string(),
            (_, None) => format!("state {}{wchan}", s.state),
        }
    }

    /// One line saying what a culprit is, what it holds, and who waits.
    fn culprit(&self, at: usize) -> String {
        let mut line = self.name(at);
        if let Some(test) = self.test(at) {
            line.push_str(&format!(" (test \"{test}\")"));
        }
        line.push_str(&format!(", {}", self.doing(at)));
        for (waiter, wait) in self.waits.iter().enumerate() {
            if let Wait::Pipe {
                target,
                reading,
                others,
                ..
            } = wait
            {
                if let Some((_, fds)) = others.iter().find(|(o, _)| *o == at) {
                    let (end, verb) = if *reading {
                        ("write", "reads")
                    } else {
                        ("read", "writes")
                    };
                    line.push_str(&format!(
                        "; holds {} ({end} end of {}) that {} {verb}",
                        fd_list(fds),
                        visible(target),
                        self.name(waiter)
                    ));
                }
            }
        }
        line
    }
}

/// A walk down the wait-for graph, writing one line per process.
struct Walk<'g, 'a> {
    graph: &'g Graph<'a>,
    lines: &'g mut Vec<String>,
    shown: Vec<bool>,
    stack: Vec<usize>,
    culprits: Vec<usize>,
}

impl Walk<'_, '_> {
    /// Writes `at` (reached from `from`, if by an edge) and what it waits for.
    fn visit(&mut self, at: usize, from: Option<usize>, depth: usize) {
        let graph = self.graph;
        let indent = "  ".repeat(depth);
        if let Some(on_stack) = self.stack.iter().position(|&s| s == at) {
            let cycle: Vec<String> = self.stack[on_stack..]
                .iter()
                .chain([&at])
                .map(|&s| graph.snapshot(s).pid.to_string())
                .collect();
            self.lines.push(format!(
                "{indent}↺ {} (a cycle: {})",
                graph.name(at),
                cycle.join(" → ")
            ));
            return;
        }
        if self.shown[at] {
            self.lines
                .push(format!("{indent}{} (see above)", graph.name(at)));
            return;
        }
        self.shown[at] = true;
        let mut line = format!("{indent}{}", graph.name(at));
        let parent_test = from.and_then(|f| graph.test(f));
        if let Some(test) = graph.test(at).filter(|t| Some(t) != parent_test.as_ref()) {
            line.push_str(&format!(" [test \"{test}\"]"));
        }
        if let Some((_, fds)) = from.and_then(|f| match &graph.waits[f] {
            Wait::Pipe { others, .. } => others.iter().find(|(o, _)| *o == at),
            _ => None,
        }) {
            line.push_str(&format!(" with {}", fd_list(fds)));
        }
        let s = graph.snapshot(at);
        let targets = graph.waits[at].targets();
        line.push_str(&format!(
            " (alive {}, quiet {}) {}",
            seconds(s.alive),
            seconds(s.quiet),
            graph.doing(at)
        ));
        match graph.waits[at] {
            Wait::Pipe { reading, .. } => {
                let end = if reading { "write" } else { "read" };
                let holders = if targets.is_empty() {
                    " no process of the tree"
                } else {
                    ":"
                };
                line.push_str(&format!("; its {end} end is held by{holders}"));
            }
            Wait::Children(_) if !targets.is_empty() => line.push(':'),
            _ => {}
        }
        if targets.is_empty() && from.is_some() {
            line.push_str("  ← culprit");
            self.culprits.push(at);
        }
        self.lines.push(line);
        self.stack.push(at);
        for target in targets {
            self.visit(target, Some(at), depth + 1);
        }
        self.stack.pop();
    }
}

/// The name of an x86-64 system call a blocked process may be in.
fn syscall_name(nr: i64) -> Option<&'static str> {
    Some(match nr {
        0 => "read",
        1 => "write",
        7 => "poll",
        17 => "pread64",
        18 => "pwrite64",
        19 => "readv",
        20 => "writev",
        23 => "select",
        34 => "pause",
        35 => "nanosleep",
        43 => "accept",
        45 => "recvfrom",
        47 => "recvmsg",
        61 => "wait4",
        72 => "fcntl",
        73 => "flock",
        128 => "rt_sigtimedwait",
        130 => "rt_sigsuspend",
        202 => "futex",
        230 => "clock_nanosleep",
        232 => "epoll_wait",
        247 => "waitid",
        270 => "pselect6",
        271 => "ppoll",
        281 => "epoll_pwait",
        288 => "accept4",
        295 => "preadv",
        296 => "pwritev",
        _ => return None,
    })
}
