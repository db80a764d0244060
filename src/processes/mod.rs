//! The process table: what each process of a recording did, derived once
//! from the events and shared by every renderer that thinks in processes.
//!
//! The table is built while the recording streams by, and owns only what
//! the renderers use: a recording of a million events does not fit in
//! memory as events, its processes do. Text lives in one buffer, and the
//! execs, children and session changes of all processes in one list per
//! kind, grouped by process.

use std::borrow::Cow;
use std::fmt;

use nix::sys::signal::Signal;
use serde::ser::{Serialize, Serializer};

mod attempts;
mod builder;
mod command;
mod storage;

pub(crate) use builder::Builder;
pub use builder::Growing;
pub use command::{command_group_of, fold_volatile};
use storage::{ExecRow, Grouped, Row, Strings, Text};

use crate::event::{
    Fd, Lingering, OnHang, Pid, Resources, SetPgid, SetSid, Snapshot, TestAttempt, UsedBefore,
};
use crate::text::shell_join;

/// One process: everything between its fork and its exit, as a view into
/// the [`Processes`] table.
#[derive(Debug, Clone, Copy)]
pub struct Process<'a> {
    /// Its pid (unique in the table only together with the time: pids are reused).
    pub pid: Pid,
    /// The pid of its parent, as far as the events tell.
    pub parent_pid: Option<Pid>,
    /// Index of the parent in the table, if the parent was recorded.
    pub parent: Option<usize>,
    /// When it was forked; the root and processes whose fork was lost
    /// have no fork.
    pub fork: Option<u64>,
    /// Its successful execs, in order.
    pub execs: Execs<'a>,
    /// Its exit; `None` while it was still running at the end.
    pub exit: Option<Ended>,
    /// Why `record --linger` reported it lingering, if it did.
    pub lingering: Option<&'a Lingering>,
    /// What it used, if its Exit says (recordings before proctrace read it
    /// do not, nor processes still running at the end).
    pub resources: Option<&'a Resources>,
    /// Its setsid and setpgid calls, in order.
    pub session_changes: &'a [SessionChange],
    /// The processes it forked, in order.
    pub children: Children<'a>,
    row: &'a Row,
    /// The recording was cut short ([`Processes::is_cut`]).
    cut: bool,
}

/// The exit of a process: when, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// Nanoseconds since the recording started.
    pub timestamp: u64,
    /// The exit status; `None` when a signal killed the process.
    pub exit_code: Option<i32>,
    /// The signal that killed it; `None` when it exited.
    pub signal: Option<i32>,
    /// Whether the signal dumped core.
    pub core_dumped: bool,
}

/// A process became a session leader or changed its process group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionChange {
    /// It called setsid().
    SetSid(SetSid),
    /// Its process group changed.
    SetPgid(SetPgid),
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it.
    Killed {
        /// The signal number.
        signal: i32,
        /// Whether it dumped core.
        core_dumped: bool,
    },
    /// It exited, but the recording does not say how (original proctrace).
    Ended,
    /// It had not exited when the recording ended.
    Running,
    /// The recording was cut short before its exit, if it had one: how
    /// it ended is unknown.
    CutOff,
}

impl Outcome {
    /// Whether the recording holds its end: not still running, nor cut off.
    pub fn ended(self) -> bool {
        !matches!(self, Outcome::Running | Outcome::CutOff)
    }

    /// Whether it failed: a non-zero exit code or a signal.
    pub fn failed(self) -> bool {
        match self {
            Outcome::Exited(code) => code != 0,
            Outcome::Killed { .. } => true,
            Outcome::Ended | Outcome::Running | Outcome::CutOff => false,
        }
    }
}

impl Outcome {
    /// At most 12 columns, for a narrow column: `exit 1`, `SIGTERM`,
    /// `SIGSEGV core`.
    pub fn short(self) -> String {
        match self {
            Outcome::Killed {
                signal,
                core_dumped,
            } => {
                let name = Signal::try_from(signal)
                    .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned());
                if core_dumped {
                    format!("{name} core")
                } else {
                    name
                }
            }
            Outcome::Running => "running".to_owned(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Outcome::Exited(code) => write!(f, "exit {code}"),
            Outcome::Killed {
                signal,
                core_dumped,
            } => {
                match Signal::try_from(signal) {
                    Ok(sig) => write!(f, "killed by {}", sig.as_str())?,
                    Err(_) => write!(f, "killed by signal {signal}")?,
                }
                if core_dumped {
                    f.write_str(" (core dumped)")?;
                }
                Ok(())
            }
            Outcome::Ended => f.write_str("exited"),
            Outcome::Running => f.write_str("still running"),
            Outcome::CutOff => f.write_str("cut off"),
        }
    }
}

impl<'a> Process<'a> {
    /// When it started: its fork, or its first event when the fork is missing.
    pub fn start(&self) -> u64 {
        self.row.start
    }

    /// When it ended: its exit, or `recording_end` if it was still running.
    pub fn end(&self, recording_end: u64) -> u64 {
        self.exit.map_or(recording_end, |e| e.timestamp)
    }

    /// How long it ran (until `recording_end` if it never exited).
    pub fn duration(&self, recording_end: u64) -> u64 {
        self.end(recording_end).saturating_sub(self.start())
    }

    /// Whether it had started and not yet exited at time `at`.
    pub fn running_at(&self, at: u64) -> bool {
        self.start() <= at && self.exit.is_none_or(|e| e.timestamp > at)
    }

    /// Whether it was already running when `record --pid` attached: its
    /// start is the attach, and it ran for longer than its times say.
    pub fn attached(&self) -> bool {
        self.execs.first().is_some_and(|exec| exec.attached)
    }

    /// A short name for what it ended up running: its last exec's
    /// [`program`](ExecView::program).
    pub fn program(&self) -> Option<&'a str> {
        self.execs.last().map(|exec| exec.program())
    }

    /// The descriptors under which it started a program with `file` open,
    /// over all its execs, in order and each once.
    pub fn fds_of(&self, file: &Fd) -> Vec<i32> {
        let mut fds: Vec<i32> = Vec::new();
        for fd in self.execs.iter().flat_map(|e| e.fds) {
            if fd.same_file(file) && !fds.contains(&fd.fd) {
                fds.push(fd.fd);
            }
        }
        fds.sort_unstable();
        fds
    }

    /// How it ended.
    pub fn outcome(&self) -> Outcome {
        match self.exit {
            None if self.cut => Outcome::CutOff,
            None => Outcome::Running,
            Some(Ended {
                signal: Some(signal),
                core_dumped,
                ..
            }) => Outcome::Killed {
                signal,
                core_dumped,
            },
            Some(Ended {
                exit_code: Some(code),
                ..
            }) => Outcome::Exited(code),
            Some(_) => Outcome::Ended,
        }
    }

    /// The command of its first exec: what it was started to run.
    pub fn first_command(&self) -> Option<Cow<'a, str>> {
        self.execs.first().map(|e| command_line(&e))
    }

    /// The command of its last exec: what it ended up running.
    pub fn last_command(&self) -> Option<Cow<'a, str>> {
        self.execs.last().map(|e| command_line(&e))
    }

    /// Its process group at the end: the last group its events show.
    pub fn pgid(&self) -> Option<Pid> {
        self.row.get(Row::PGID, self.row.pgid)
    }

    /// Its session at the end: the last session its events show.
    pub fn sid(&self) -> Option<Pid> {
        self.row.get(Row::SID, self.row.sid)
    }

    /// Each exec with the time it ran until: the next exec, the exit, or
    /// `recording_end`.
    pub fn exec_spans(&self, recording_end: u64) -> impl Iterator<Item = (ExecView<'a>, u64)> {
        let ends = self.execs.iter().skip(1).map(|e| e.timestamp);
        let last = std::iter::once(self.end(recording_end));
        self.execs.iter().zip(ends.chain(last))
    }
}

/// The processes a process forked, by their indices in the table.
#[derive(Debug, Clone, Copy)]
pub struct Children<'a>(&'a [u32]);

impl Children<'_> {
    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Their indices, in the order they were forked.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = usize> + ExactSizeIterator + '_ {
        self.0.iter().map(|&child| child as usize)
    }
}

/// The execs of one process.
#[derive(Debug, Clone, Copy)]
pub struct Execs<'a> {
    rows: &'a [ExecRow],
    table: &'a Processes,
}

impl<'a> Execs<'a> {
    /// How many there are.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the process never exec'd.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The first exec.
    pub fn first(&self) -> Option<ExecView<'a>> {
        self.rows.first().map(|row| row.view(self.table))
    }

    /// The last exec.
    pub fn last(&self) -> Option<ExecView<'a>> {
        self.rows.last().map(|row| row.view(self.table))
    }

    /// All of them, in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = ExecView<'a>> + ExactSizeIterator {
        let (rows, table) = (self.rows, self.table);
        rows.iter().map(move |row| row.view(table))
    }
}

/// One exec of a process: what the table keeps of an [`Exec`](crate::event::Exec) event.
#[derive(Debug, Clone, Copy)]
pub struct ExecView<'a> {
    /// Nanoseconds since the recording started.
    pub timestamp: u64,
    /// Its process group.
    pub pgid: Pid,
    /// Its session.
    pub sid: Option<Pid>,
    /// The path that was executed, as passed to execve.
    pub filename: &'a str,
    /// The new program's arguments.
    pub argv: Argv<'a>,
    /// argv was longer than proctrace copies, so the last entries are cut.
    pub argv_truncated: bool,
    /// No exec the recording saw: the program the process was already
    /// running when `record --pid` attached, read from `/proc` then, with
    /// the attach's time.
    pub attached: bool,
    /// The file descriptors the new program started with.
    pub fds: &'a [Fd],
    /// What the process had used when the program started, where the
    /// recording says.
    pub used_before: Option<UsedBefore>,
    /// The recorded command line where it is not `shell_join(argv)`.
    cmdline: Option<&'a str>,
    /// The recorded environment variables, name then value.
    env: Argv<'a>,
}

impl<'a> ExecView<'a> {
    /// A short name for what it runs, for lists that name many processes:
    /// the program's file name, or the script's when the program is an
    /// interpreter (`bash /usr/libexec/bats-core/bats-exec-test ...` is
    /// `bats-exec-test`, which says more than `bash`).
    pub fn program(&self) -> &'a str {
        const INTERPRETERS: [&str; 10] = [
            "sh", "bash", "dash", "zsh", "env", "python", "python3", "perl", "ruby", "node",
        ];
        let base = |word: &'a str| word.rsplit('/').next().unwrap_or(word);
        let mut words = self.argv.iter().map(base);
        let first = words.next().unwrap_or_else(|| base(self.filename));
        // `python3.11` and `perl5.36` are their interpreters too.
        let unversioned = first.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        let interpreter = INTERPRETERS.contains(&first) || INTERPRETERS.contains(&unversioned);
        match self.argv.get(1) {
            Some(script) if interpreter && !script.starts_with('-') => base(script),
            _ => first,
        }
    }

    /// The argument after the first `flag` (`--exact NAME`'s name).
    pub fn arg_after(&self, flag: &str) -> Option<&'a str> {
        let mut args = self.argv.iter();
        args.by_ref().find(|&arg| arg == flag)?;
        args.next()
    }

    /// The value of environment variable `name`, if the recording kept it
    /// (see [`Exec::env`](crate::event::Exec::env)).
    pub fn env(&self, name: &str) -> Option<&'a str> {
        let mut words = self.env.iter();
        std::iter::from_fn(|| Some((words.next()?, words.next()?)))
            .find_map(|(n, value)| (n == name).then_some(value))
    }

    /// The recorded command line: `argv` as one shell-quoted line.
    pub fn cmdline(&self) -> Cow<'a, str> {
        match self.cmdline {
            Some(line) => Cow::Borrowed(line),
            None => Cow::Owned(shell_join(&self.argv.iter().collect::<Vec<_>>())),
        }
    }
}

/// The arguments of an exec.
#[derive(Debug, Clone, Copy)]
pub struct Argv<'a> {
    strings: Strings<'a>,
    len: usize,
}

impl<'a> Argv<'a> {
    /// How many arguments there are.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The argument at `index`.
    pub fn get(&self, index: usize) -> Option<&'a str> {
        self.iter().nth(index)
    }

    /// The arguments, in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a str> {
        self.strings.take(self.len)
    }
}

impl Serialize for Argv<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

/// The display line of an exec: its command line, else its argv, else
/// the file it executed; ending in ` …` where the recorder cut argv, so
/// that no view shows a cut command as whole.
pub fn command_line<'a>(exec: &ExecView<'a>) -> Cow<'a, str> {
    let cmdline = exec.cmdline();
    let line = if !cmdline.is_empty() {
        cmdline
    } else if !exec.argv.is_empty() {
        Cow::Owned(shell_join(&exec.argv.iter().collect::<Vec<_>>()))
    } else {
        Cow::Borrowed(exec.filename)
    };
    if exec.argv_truncated {
        Cow::Owned(format!("{line} …"))
    } else {
        line
    }
}

/// A recording with more processes, execs or descriptors than the table
/// counts (2^32 of each).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("more than 2^32 processes, execs or descriptors")]
pub struct TooLarge;

/// Every process of a recording, in the order they were created.
#[derive(Debug, Clone)]
pub struct Processes {
    rows: Vec<Row>,
    execs: Grouped<ExecRow>,
    children: Grouped<u32>,
    session_changes: Grouped<SessionChange>,
    /// By process index, each process once.
    lingering: Vec<(u32, Lingering)>,
    /// By process index: what each process used, where its Exit says.
    resources: Vec<(u32, Resources)>,
    /// In recording order: the records of one snapshot are adjacent.
    snapshots: Vec<(u32, Snapshot)>,
    /// In recording order.
    on_hang: Vec<OnHang>,
    /// The runner's test attempts, each with its process where placed,
    /// by process index (the unplaced last).
    attempts: Vec<(Option<u32>, TestAttempt)>,
    text: Text,
    fds: Vec<Fd>,
    /// End of the recording, for processes that never exited.
    end: u64,
    /// The recording was cut short: its end is its last event's.
    cut: bool,
}

/// The item of process `index` in a list sorted by process index.
fn of_process<T>(list: &[(u32, T)], index: usize) -> Option<&T> {
    list.binary_search_by_key(&index, |(i, _)| *i as usize)
        .ok()
        .map(|at| &list[at].1)
}

impl Processes {
    /// All processes, in the order they were created.
    pub fn all(&self) -> impl ExactSizeIterator<Item = Process<'_>> + DoubleEndedIterator {
        (0..self.rows.len()).map(|index| self.get(index))
    }

    /// How many processes there are.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the recording has no process at all.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The process at `index`.
    pub fn get(&self, index: usize) -> Process<'_> {
        let row = &self.rows[index];
        Process {
            pid: row.pid,
            parent_pid: row.get(Row::PARENT_PID, row.parent_pid),
            parent: row.parent(),
            fork: row.get(Row::FORK, row.fork),
            execs: Execs {
                rows: self.execs.of(index),
                table: self,
            },
            exit: row.exit(),
            lingering: of_process(&self.lingering, index),
            resources: of_process(&self.resources, index),
            session_changes: self.session_changes.of(index),
            children: Children(self.children.of(index)),
            row,
            cut: self.cut,
        }
    }

    /// Indices of the processes whose parent was not recorded: the root,
    /// and orphans of lost events.
    pub fn roots(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.rows.len()).filter(|&i| self.rows[i].parent().is_none())
    }

    /// The ancestors of the process at `index` that were recorded, the
    /// topmost first, its parent last.
    pub fn ancestors(&self, index: usize) -> Vec<usize> {
        let mut chain = Vec::new();
        let mut at = self.rows[index].parent();
        while let Some(parent) = at {
            chain.push(parent);
            at = self.rows[parent].parent();
        }
        chain.reverse();
        chain
    }

    /// The process under `pid` at time `at` (pids are reused).
    pub fn find(&self, pid: Pid, at: u64) -> Option<usize> {
        (0..self.rows.len())
            .rev()
            .find(|&i| self.rows[i].pid == pid && self.rows[i].start <= at)
    }

    /// The nearest ancestor of the process at `index` that ran a program
    /// of its own: who started it, seen past the subshells (processes that
    /// never exec'd) a shell forks for `( ... ) &` and pipelines.
    pub fn starter(&self, index: usize) -> Option<usize> {
        let ancestors = self.ancestors(index);
        let with_exec = ancestors
            .iter()
            .rev()
            .find(|&&a| !self.execs.of(a).is_empty());
        with_exec.or(ancestors.last()).copied()
    }

    /// The processes reported lingering (`record --linger`), in the order
    /// they were created.
    pub fn lingering(&self) -> impl Iterator<Item = (usize, &Lingering)> + '_ {
        self.lingering.iter().map(|(index, l)| (*index as usize, l))
    }

    /// The snapshots of the live tree, each as its processes' records in
    /// recording order, with the index of each process.
    pub fn snapshots(&self) -> Vec<Vec<(usize, &Snapshot)>> {
        let mut all: Vec<Vec<(usize, &Snapshot)>> = Vec::new();
        for (index, snapshot) in &self.snapshots {
            match all.last_mut() {
                Some(last) if last[0].1.timestamp == snapshot.timestamp => {
                    last.push((*index as usize, snapshot))
                }
                _ => all.push(vec![(*index as usize, snapshot)]),
            }
        }
        all
    }

    /// The test attempts a runner's probes told, each with the process
    /// that ran it where it was found, by process (those not found last).
    pub fn attempts(&self) -> impl Iterator<Item = (Option<usize>, &TestAttempt)> + '_ {
        self.attempts
            .iter()
            .map(|(index, attempt)| (index.map(|i| i as usize), attempt))
    }

    /// The last test attempt the process at `index` ran, as its runner
    /// told it.
    pub fn attempt_of(&self, index: usize) -> Option<&TestAttempt> {
        let at = self
            .attempts
            .partition_point(|(i, _)| i.is_some_and(|i| i as usize <= index));
        match at.checked_sub(1).map(|at| &self.attempts[at]) {
            Some((Some(i), attempt)) if *i as usize == index => Some(attempt),
            _ => None,
        }
    }

    /// What `record --on-hang` printed, in recording order.
    pub fn on_hang(&self) -> &[OnHang] {
        &self.on_hang
    }

    /// The execs the recording saw, in all: not the programs of the
    /// processes attached to ([`ExecView::attached`]).
    pub fn exec_count(&self) -> usize {
        let attached = |row: &&ExecRow| row.set & ExecRow::ATTACHED != 0;
        self.execs.items.iter().filter(|row| !attached(row)).count()
    }

    /// Whether the recording was cut short (a header and no trailer:
    /// proctrace was killed, or the file truncated): its end is its last
    /// event's, what came after is missing, and a process without an exit
    /// may have ended ([`Outcome::CutOff`]).
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// Nanoseconds from the start to the end of the recording.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Nanoseconds from the first process's start to the end of the
    /// recording: how long the run took.
    pub fn wall_time(&self) -> u64 {
        let first = self.rows.iter().map(|r| r.start).min().unwrap_or(0);
        self.end.saturating_sub(first)
    }

    /// Every process in tree order, each with its depth (0 for the roots):
    /// a parent, then its children's subtrees in the order they were forked.
    pub fn depth_first(&self) -> Vec<(usize, usize)> {
        // An explicit stack: a long chain of forks must not exhaust the
        // call stack.
        let mut order = Vec::with_capacity(self.rows.len());
        let mut stack: Vec<(usize, usize)> = self.roots().map(|i| (i, 0)).collect();
        stack.reverse();
        while let Some((index, depth)) = stack.pop() {
            order.push((index, depth));
            let children = self.children.of(index);
            stack.extend(
                children
                    .iter()
                    .rev()
                    .map(|&child| (child as usize, depth + 1)),
            );
        }
        order
    }

    /// A one-line description of the process at `index`: what it was
    /// started to run and, if it exec'd again, what it ended up running;
    /// `<fork>` and the inherited command if it never exec'd. The long
    /// form of [`name`](Self::name): the two always agree.
    pub fn describe(&self, index: usize) -> String {
        let process = self.get(index);
        // One exec is its own first and last: one command line to make.
        let last = (process.execs.len() > 1).then(|| process.last_command());
        match (process.first_command(), last.flatten()) {
            (Some(first), Some(last)) if first != last => format!("{first} → {last}"),
            (Some(first), _) => first.into_owned(),
            (None, _) => forked(
                self.exec_at(index, process.start())
                    .map(|e| command_line(&e)),
            ),
        }
    }

    /// The process at `index` in a word or two, for the lists, stacks and
    /// labels that name many processes: the [`program`](ExecView::program)
    /// it ended up running or, if it never exec'd, `<fork>` and the one it
    /// inherited (`<fork> mp.py`), as [`describe`](Self::describe) says it
    /// at length.
    pub fn name(&self, index: usize) -> String {
        let process = self.get(index);
        match process.program() {
            Some(program) => program.to_owned(),
            None => forked(self.exec_at(index, process.start()).map(|e| e.program())),
        }
    }

    /// [`command_at`](Self::command_at) for display: `<fork>` marks a
    /// process that had not exec'd yet and ran its parent's program.
    pub fn describe_at(&self, index: usize, at: u64) -> String {
        let process = self.get(index);
        let command = self.command_at(index, at);
        if process.execs.iter().any(|e| e.timestamp <= at) {
            command.unwrap_or_default().into_owned()
        } else {
            forked(command)
        }
    }

    /// What the process at `index` was running at time `at`: its exec
    /// current then or, before it exec'd, what it inherited from its parent.
    pub fn command_at(&self, index: usize, at: u64) -> Option<Cow<'_, str>> {
        self.exec_at(index, at).map(|exec| command_line(&exec))
    }

    /// The exec the process at `index` ran at time `at`: its own current
    /// then or, before its first, the one its nearest ancestor ran when it
    /// forked.
    pub fn exec_at(&self, index: usize, at: u64) -> Option<ExecView<'_>> {
        // A loop, not recursion: a long chain of forks must not exhaust
        // the call stack.
        let (mut index, mut at) = (index, at);
        loop {
            let process = self.get(index);
            if let Some(exec) = process.execs.iter().rev().find(|e| e.timestamp <= at) {
                return Some(exec);
            }
            (index, at) = (process.parent?, process.start());
        }
    }
}

/// A process that had not exec'd, running what it inherited: `<fork>
/// sh -c …`, or `<fork>` where nothing says what.
fn forked<T: fmt::Display>(inherited: Option<T>) -> String {
    match inherited {
        Some(inherited) => format!("<fork> {inherited}").trim_end().to_string(),
        None => "<fork>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::tests::fork_at;
    use crate::event::{Exec, Record};

    fn exec(pid: Pid, timestamp: u64, argv: &[&str], cmdline: Option<&str>) -> Record {
        let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
        Record::Exec(Exec {
            seq: 0,
            timestamp,
            pid,
            ppid: 1,
            pgid: pid,
            sid: None,
            filename: format!("/bin/{}", argv[0]),
            cmdline: cmdline.map_or_else(|| shell_join(&argv), str::to_string),
            argv,
            argv_truncated: false,
            argv_raw: Default::default(),
            filename_raw: None,
            fds: Vec::new(),
            fds_truncated: false,
            env: Default::default(),
            used_before: None,
        })
    }

    #[test]
    fn execs_keep_their_text_whatever_its_length() {
        let long = "x".repeat(20_000);
        let mut builder = Builder::default();
        for event in [
            exec(1, 1, &["sh", "-c", &long], None),
            fork_at(5, 1, 2),
            exec(2, 6, &["env", "a b"], Some("recorded otherwise")),
            exec(2, 7, &["true"], None),
        ] {
            builder.add(&event).unwrap();
        }
        let table = builder.finish(Some(10), false);
        assert_eq!(table.len(), 2);
        let root = table.get(0);
        let first = root.execs.first().unwrap();
        assert_eq!(first.filename, "/bin/sh");
        assert_eq!(first.argv.iter().collect::<Vec<_>>(), ["sh", "-c", &long]);
        assert_eq!(first.cmdline(), format!("sh -c {long}"));
        let child = table.get(1);
        assert_eq!((child.parent, child.fork), (Some(0), Some(5)));
        assert_eq!(root.children.iter().collect::<Vec<_>>(), [1]);
        let commands: Vec<_> = child.execs.iter().map(|e| command_line(&e)).collect();
        assert_eq!(commands, ["recorded otherwise", "true"]);
        assert_eq!(child.execs.first().unwrap().argv.get(1), Some("a b"));
        assert_eq!(table.describe(1), "recorded otherwise → true");
    }

    #[test]
    fn a_fork_is_named_by_what_it_inherited_in_every_form() {
        let mut builder = Builder::default();
        for event in [
            exec(1, 1, &["python3.11", "mp.py", "7"], None),
            fork_at(2, 1, 2),
            fork_at(3, 2, 3),
            fork_at(4, 1, 4),
            exec(4, 5, &["sleep", "1"], None),
        ] {
            builder.add(&event).unwrap();
        }
        let table = builder.finish(Some(10), false);
        let names: Vec<String> = (0..4).map(|i| table.name(i)).collect();
        assert_eq!(names, ["mp.py", "<fork> mp.py", "<fork> mp.py", "sleep"]);
        assert_eq!(table.describe(2), "<fork> python3.11 mp.py 7");
        assert_eq!(table.command_group(2), "<fork> mp.py N");
        // Before its exec, the last fork ran its parent's program.
        assert_eq!(table.describe_at(3, 4), "<fork> python3.11 mp.py 7");
        assert_eq!(table.describe_at(3, 5), "sleep 1");
    }

    #[test]
    fn execs_keep_their_variables_after_their_command_line() {
        let mut builder = Builder::default();
        let Record::Exec(mut with_env) = exec(1, 1, &["env", "a b"], Some("other")) else {
            unreachable!()
        };
        with_env.env = [("A", "1"), ("B", "")]
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .into();
        for event in [Record::Exec(with_env), exec(1, 2, &["true"], None)] {
            builder.add(&event).unwrap();
        }
        let table = builder.finish(Some(3), false);
        let execs: Vec<_> = table.get(0).execs.iter().collect();
        assert_eq!(
            (execs[0].env("A"), execs[0].env("B")),
            (Some("1"), Some(""))
        );
        assert_eq!((execs[0].env("a b"), execs[0].env("other")), (None, None));
        assert_eq!(execs[0].cmdline(), "other");
        assert_eq!(execs[1].env("A"), None);
    }
}
