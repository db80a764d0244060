//! The process table: what each process of a recording did, derived once
//! from the events and shared by every renderer that thinks in processes.
//!
//! The table is built while the recording streams by, and owns only what
//! the renderers use: a recording of a million events does not fit in
//! memory as events, its processes do. Text lives in one buffer, and the
//! execs, children and session changes of all processes in one list per
//! kind, grouped by process.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use nix::sys::signal::Signal;
use serde::ser::{Serialize, Serializer};

use crate::event::{shell_join, Exec, Exit, Fd, Lingering, Pid, Record, SetPgid, SetSid, Snapshot};

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
    /// Its setsid and setpgid calls, in order.
    pub session_changes: &'a [SessionChange],
    /// The processes it forked, in order.
    pub children: Children<'a>,
    row: &'a Row,
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
}

impl Outcome {
    /// Whether it failed: a non-zero exit code or a signal.
    pub fn failed(self) -> bool {
        match self {
            Outcome::Exited(code) => code != 0,
            Outcome::Killed { .. } => true,
            Outcome::Ended | Outcome::Running => false,
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

    /// A short name for what it runs, for lists that name many processes:
    /// the program's file name, or the script's when the program is an
    /// interpreter (`bash /usr/libexec/bats-core/bats-exec-test ...` is
    /// `bats-exec-test`, which says more than `bash`).
    pub fn program(&self) -> Option<&'a str> {
        const INTERPRETERS: [&str; 10] = [
            "sh", "bash", "dash", "zsh", "env", "python", "python3", "perl", "ruby", "node",
        ];
        let exec = self.execs.last()?;
        let base = |word: &'a str| word.rsplit('/').next().unwrap_or(word);
        let mut words = exec.argv.iter().map(base);
        let first = words.next().unwrap_or_else(|| base(exec.filename));
        match exec.argv.get(1) {
            Some(script) if INTERPRETERS.contains(&first) && !script.starts_with('-') => {
                Some(base(script))
            }
            _ => Some(first),
        }
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

/// One exec of a process: what the table keeps of an [`Exec`] event.
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
    /// The file descriptors the new program started with.
    pub fds: &'a [Fd],
    /// The recorded command line where it is not `shell_join(argv)`.
    cmdline: Option<&'a str>,
    /// The recorded environment variables, name then value.
    env: Argv<'a>,
}

impl<'a> ExecView<'a> {
    /// The value of environment variable `name`, if the recording kept it
    /// (see [`Exec::env`]).
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
/// the file it executed.
pub fn command_line<'a>(exec: &ExecView<'a>) -> Cow<'a, str> {
    let cmdline = exec.cmdline();
    if !cmdline.is_empty() {
        cmdline
    } else if !exec.argv.is_empty() {
        Cow::Owned(shell_join(&exec.argv.iter().collect::<Vec<_>>()))
    } else {
        Cow::Borrowed(exec.filename)
    }
}

/// What the table keeps of each process besides its lists, packed (a
/// table holds hundreds of thousands): an optional field is there when
/// its bit in `set` is.
#[derive(Debug, Clone, Default)]
struct Row {
    start: u64,
    fork: u64,
    exit: u64,
    pid: Pid,
    parent_pid: Pid,
    parent: u32,
    pgid: Pid,
    sid: Pid,
    exit_code: i32,
    signal: i32,
    set: u16,
}

impl Row {
    const PARENT_PID: u16 = 1;
    const PARENT: u16 = 1 << 1;
    const FORK: u16 = 1 << 2;
    const EXIT: u16 = 1 << 3;
    const PGID: u16 = 1 << 4;
    const SID: u16 = 1 << 5;
    const EXIT_CODE: u16 = 1 << 6;
    const SIGNAL: u16 = 1 << 7;
    const CORE_DUMPED: u16 = 1 << 8;

    fn get<T>(&self, bit: u16, value: T) -> Option<T> {
        (self.set & bit != 0).then_some(value)
    }

    /// Sets `field` to `value` if there is one, marking it there.
    fn put<T>(set: &mut u16, bit: u16, field: &mut T, value: Option<T>) {
        if let Some(value) = value {
            *field = value;
            *set |= bit;
        }
    }

    fn parent(&self) -> Option<usize> {
        self.get(Row::PARENT, self.parent as usize)
    }

    fn exit(&self) -> Option<Ended> {
        self.get(Row::EXIT, ()).map(|()| Ended {
            timestamp: self.exit,
            exit_code: self.get(Row::EXIT_CODE, self.exit_code),
            signal: self.get(Row::SIGNAL, self.signal),
            core_dumped: self.set & Row::CORE_DUMPED != 0,
        })
    }

    fn set_exit(&mut self, exit: &Exit) {
        let set = &mut self.set;
        Row::put(set, Row::EXIT, &mut self.exit, Some(exit.timestamp));
        Row::put(set, Row::EXIT_CODE, &mut self.exit_code, exit.exit_code);
        Row::put(set, Row::SIGNAL, &mut self.signal, exit.signal);
        if exit.core_dumped {
            *set |= Row::CORE_DUMPED;
        }
    }
}

/// What the table keeps of an exec; its strings are in [`Text`]: the
/// filename, the arguments, the command line if it is not
/// `shell_join(argv)`, then the environment's names and values.
#[derive(Debug, Clone)]
struct ExecRow {
    timestamp: u64,
    strings: Run,
    argc: u32,
    /// Where its descriptors start in [`Processes::fds`], and how many.
    fds: u32,
    fd_count: u32,
    pgid: Pid,
    sid: Pid,
    /// [`ExecRow::SID`]...
    set: u16,
    /// Environment variables kept.
    env_count: u16,
}

impl ExecRow {
    const SID: u16 = 1;
    const ARGV_TRUNCATED: u16 = 1 << 1;
    const CMDLINE: u16 = 1 << 2;

    fn view<'a>(&'a self, table: &'a Processes) -> ExecView<'a> {
        let mut strings = table.text.strings(self.strings);
        let filename = strings.next().unwrap_or_default();
        let argc = self.argc as usize;
        let fds = self.fds as usize;
        let has_cmdline = self.set & ExecRow::CMDLINE != 0;
        let mut env = strings;
        for _ in 0..argc + usize::from(has_cmdline) {
            env.next();
        }
        ExecView {
            timestamp: self.timestamp,
            pgid: self.pgid,
            sid: (self.set & ExecRow::SID != 0).then_some(self.sid),
            filename,
            argv: Argv { strings, len: argc },
            argv_truncated: self.set & ExecRow::ARGV_TRUNCATED != 0,
            fds: &table.fds[fds..fds + self.fd_count as usize],
            cmdline: if has_cmdline { strings.nth(argc) } else { None },
            env: Argv {
                strings: env,
                len: 2 * usize::from(self.env_count),
            },
        }
    }
}

/// Strings, one after the other in one buffer, their lengths apart and
/// LEB128-coded (one byte each, for most): read in order from where a
/// run of them starts.
#[derive(Debug, Clone, Default)]
struct Text {
    buffer: String,
    lengths: Vec<u8>,
}

/// Where a run of strings starts in [`Text`].
#[derive(Debug, Clone, Copy)]
struct Run {
    buffer: usize,
    lengths: usize,
}

impl Text {
    /// Where the strings pushed next start.
    fn run(&self) -> Run {
        Run {
            buffer: self.buffer.len(),
            lengths: self.lengths.len(),
        }
    }

    fn push(&mut self, text: &str) {
        self.buffer.push_str(text);
        let mut len = text.len();
        while len >= 0x80 {
            self.lengths.push((len & 0x7f) as u8 | 0x80);
            len >>= 7;
        }
        self.lengths.push(len as u8);
    }

    fn strings(&self, run: Run) -> Strings<'_> {
        Strings {
            buffer: &self.buffer[run.buffer..],
            lengths: &self.lengths[run.lengths..],
        }
    }
}

/// The strings of a [`Text`] from a [`Run`] on.
#[derive(Debug, Clone, Copy)]
struct Strings<'a> {
    buffer: &'a str,
    lengths: &'a [u8],
}

impl<'a> Iterator for Strings<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let mut len = 0;
        let mut shift = 0;
        loop {
            let (&byte, rest) = self.lengths.split_first()?;
            self.lengths = rest;
            len |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            if byte < 0x80 {
                break;
            }
        }
        let (string, rest) = self.buffer.split_at(len);
        self.buffer = rest;
        Some(string)
    }
}

/// Items of all processes, those of each process together and in order.
#[derive(Debug, Clone)]
struct Grouped<T> {
    items: Vec<T>,
    /// Where the items of each process start in `items`, and the end.
    starts: Vec<u32>,
}

impl<T> Grouped<T> {
    /// Groups `items`, each given with its process and in order; there
    /// are fewer than 2^32 (the builder checks).
    ///
    /// In place, with four bytes per item aside: a sort would take half
    /// the list again.
    fn new(mut items: Vec<(u32, T)>, processes: usize) -> Self {
        let starts = group_starts(items.iter().map(|(process, _)| *process), processes);
        // Each item's place: after those of the processes before its own
        // and those of its own that came before it.
        let mut next = starts.clone();
        let mut places: Vec<u32> = items
            .iter()
            .map(|(process, _)| {
                let place = next[*process as usize];
                next[*process as usize] += 1;
                place
            })
            .collect();
        drop(next);
        for i in 0..items.len() {
            // Swaps the item here to its place until the one that belongs
            // here arrives.
            while places[i] as usize != i {
                let place = places[i] as usize;
                items.swap(i, place);
                places.swap(i, place);
            }
        }
        drop(places);
        // Collected in place: the list is not copied.
        let items = items.into_iter().map(|(_, item)| item).collect();
        Grouped { items, starts }
    }

    fn of(&self, process: usize) -> &[T] {
        &self.items[self.starts[process] as usize..self.starts[process + 1] as usize]
    }
}

/// Where the items of each group start, and where the last group ends,
/// when items in the groups `keys` says are put together, group by group:
/// the first half of a counting sort.
fn group_starts(keys: impl Iterator<Item = u32>, groups: usize) -> Vec<u32> {
    let mut starts = vec![0; groups + 1];
    for key in keys {
        starts[key as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    starts
}

/// A recording with more processes, execs or descriptors than the table
/// counts (2^32 of each).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("more than 2^32 processes, execs or descriptors")]
pub struct TooLarge;

/// `n` as the table stores counts and indices.
fn small(n: usize) -> Result<u32, TooLarge> {
    u32::try_from(n).map_err(|_| TooLarge)
}

/// Every process of a recording, in the order they were created.
#[derive(Debug, Clone)]
pub struct Processes {
    rows: Vec<Row>,
    execs: Grouped<ExecRow>,
    children: Grouped<u32>,
    session_changes: Grouped<SessionChange>,
    /// By process index, each process once.
    lingering: Vec<(u32, Lingering)>,
    /// In recording order: the records of one snapshot are adjacent.
    snapshots: Vec<(u32, Snapshot)>,
    text: Text,
    fds: Vec<Fd>,
    /// End of the recording, for processes that never exited.
    end: u64,
}

/// A table that grows as a recording is made, for what a recorder says
/// while it runs (the hang explanation at a snapshot).
#[derive(Debug, Default)]
pub struct Growing(Builder);

impl Growing {
    /// Adds the next record; a table too large to grow stays as it was.
    pub fn add(&mut self, record: &Record) {
        let _ = self.0.add(record);
    }

    /// The table as it stands.
    pub fn table(&self) -> Processes {
        self.0.clone().finish(None)
    }
}

/// Builds the table from the events, given in causal order.
#[derive(Debug, Default, Clone)]
pub(crate) struct Builder {
    rows: Vec<Row>,
    execs: Vec<(u32, ExecRow)>,
    session_changes: Vec<(u32, SessionChange)>,
    lingering: Vec<(u32, Lingering)>,
    snapshots: Vec<(u32, Snapshot)>,
    text: Text,
    fds: Vec<Fd>,
    /// The newest process known under each pid.
    by_pid: HashMap<Pid, u32>,
    last_timestamp: Option<u64>,
}

impl Builder {
    /// Adds the next event; returns the index of the process it belongs
    /// to (`None` for header and trailer).
    pub(crate) fn add(&mut self, event: &Record) -> Result<Option<usize>, TooLarge> {
        let Some(index) = self.index_for(event)? else {
            return Ok(None);
        };
        self.last_timestamp = self.last_timestamp.max(event.timestamp());
        let row = &mut self.rows[index as usize];
        Row::put(&mut row.set, Row::PGID, &mut row.pgid, group_of(event));
        Row::put(&mut row.set, Row::SID, &mut row.sid, session_of(event));
        match event {
            Record::Fork(fork) => {
                Row::put(&mut row.set, Row::FORK, &mut row.fork, Some(fork.timestamp))
            }
            Record::Exec(exec) => self.add_exec(index, exec)?,
            Record::Exit(exit) => row.set_exit(exit),
            Record::Lingering(lingering) => self.lingering.push((index, lingering.clone())),
            Record::Snapshot(snapshot) => self.snapshots.push((index, snapshot.clone())),
            Record::SetSid(e) => self
                .session_changes
                .push((index, SessionChange::SetSid(e.clone()))),
            Record::SetPgid(e) => self
                .session_changes
                .push((index, SessionChange::SetPgid(e.clone()))),
            Record::Header(_) | Record::Trailer(_) => {}
        }
        Ok(Some(index as usize))
    }

    fn add_exec(&mut self, process: u32, exec: &Exec) -> Result<(), TooLarge> {
        let strings = self.text.run();
        self.text.push(&exec.filename);
        for arg in &exec.argv {
            self.text.push(arg);
        }
        // Usually the command line is argv joined: kept once, as argv.
        let has_cmdline = exec.cmdline != shell_join(&exec.argv);
        if has_cmdline {
            self.text.push(&exec.cmdline);
        }
        for (name, value) in &exec.env {
            self.text.push(name);
            self.text.push(value);
        }
        let fds = small(self.fds.len())?;
        self.fds.extend_from_slice(&exec.fds);
        small(self.fds.len())?;
        let mut set = 0;
        let mut sid = 0;
        Row::put(&mut set, ExecRow::SID, &mut sid, exec.sid);
        if exec.argv_truncated {
            set |= ExecRow::ARGV_TRUNCATED;
        }
        if has_cmdline {
            set |= ExecRow::CMDLINE;
        }
        let row = ExecRow {
            timestamp: exec.timestamp,
            strings,
            argc: small(exec.argv.len())?,
            fds,
            fd_count: small(exec.fds.len())?,
            pgid: exec.pgid,
            sid,
            set,
            env_count: u16::try_from(exec.env.len()).map_err(|_| TooLarge)?,
        };
        small(self.execs.len() + 1)?;
        self.execs.push((process, row));
        Ok(())
    }

    /// The process an event belongs to, created on its first event. After
    /// an exit the pid is free again, so a later event is a new process.
    fn index_for(&mut self, event: &Record) -> Result<Option<u32>, TooLarge> {
        let Some(pid) = event.pid() else {
            return Ok(None);
        };
        if let Some(&index) = self.by_pid.get(&pid) {
            if self.rows[index as usize].exit().is_none() {
                return Ok(Some(index));
            }
        }
        let parent_pid = match event {
            Record::Fork(f) => Some(f.parent_pid),
            Record::Exec(e) => Some(e.ppid),
            Record::Exit(e) => Some(e.ppid),
            _ => None,
        };
        let index = small(self.rows.len())?;
        let mut row = Row {
            pid,
            start: event.timestamp().unwrap_or(0),
            ..Row::default()
        };
        let parent = parent_pid.and_then(|p| self.by_pid.get(&p).copied());
        Row::put(
            &mut row.set,
            Row::PARENT_PID,
            &mut row.parent_pid,
            parent_pid,
        );
        Row::put(&mut row.set, Row::PARENT, &mut row.parent, parent);
        self.rows.push(row);
        self.by_pid.insert(pid, index);
        Ok(Some(index))
    }

    /// The table; `end` is the end of the recording if the trailer says.
    pub(crate) fn finish(self, end: Option<u64>) -> Processes {
        let count = self.rows.len();
        drop(self.by_pid);
        // One after the other: each takes memory aside while it groups.
        let execs = Grouped::new(self.execs, count);
        let children = (0..)
            .zip(&self.rows)
            .filter_map(|(child, row)| row.parent().map(|parent| (parent as u32, child)))
            .collect();
        let children = Grouped::new(children, count);
        let mut lingering = self.lingering;
        // The last report about a process is what it was found doing.
        lingering.reverse();
        lingering.sort_by_key(|(index, _)| *index);
        lingering.dedup_by_key(|(index, _)| *index);
        Processes {
            execs,
            children,
            session_changes: Grouped::new(self.session_changes, count),
            lingering,
            snapshots: self.snapshots,
            text: self.text,
            fds: self.fds,
            end: end.max(self.last_timestamp).unwrap_or(0),
            rows: self.rows,
        }
    }
}

/// The process group an event shows its process in, if it shows one.
fn group_of(event: &Record) -> Option<Pid> {
    match event {
        Record::Fork(f) => Some(f.child_pgid.unwrap_or(f.parent_pgid)),
        Record::Exec(e) => Some(e.pgid),
        Record::Exit(e) => Some(e.pgid),
        Record::SetPgid(e) => Some(e.pgid),
        _ => None,
    }
}

/// The session an event shows its process in, if it shows one.
fn session_of(event: &Record) -> Option<Pid> {
    match event {
        Record::Fork(f) => f.child_sid,
        Record::Exec(e) => e.sid,
        Record::Exit(e) => e.sid,
        Record::SetSid(e) => Some(e.sid),
        _ => None,
    }
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
            lingering: self
                .lingering
                .binary_search_by_key(&index, |(i, _)| *i as usize)
                .ok()
                .map(|at| &self.lingering[at].1),
            session_changes: self.session_changes.of(index),
            children: Children(self.children.of(index)),
            row,
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
    /// `<fork>` and the inherited command if it never exec'd.
    pub fn describe(&self, index: usize) -> String {
        let process = self.get(index);
        // One exec is its own first and last: one command line to make.
        let last = (process.execs.len() > 1).then(|| process.last_command());
        match (process.first_command(), last.flatten()) {
            (Some(first), Some(last)) if first != last => format!("{first} → {last}"),
            (Some(first), _) => first.into_owned(),
            (None, _) => match self.command_at(index, process.start()) {
                Some(inherited) => format!("<fork> {inherited}"),
                None => "<fork>".to_string(),
            },
        }
    }

    /// [`command_at`](Self::command_at) for display: `<fork>` marks a
    /// process that had not exec'd yet and ran its parent's program.
    pub fn describe_at(&self, index: usize, at: u64) -> String {
        let command = self.command_at(index, at).unwrap_or_default();
        let process = self.get(index);
        if process.execs.iter().any(|e| e.timestamp <= at) {
            command.into_owned()
        } else {
            format!("<fork> {command}").trim_end().to_string()
        }
    }

    /// What the process at `index` was running at time `at`: its exec
    /// current then or, before it exec'd, what it inherited from its parent.
    pub fn command_at(&self, index: usize, at: u64) -> Option<Cow<'_, str>> {
        let process = self.get(index);
        match process.execs.iter().rev().find(|e| e.timestamp <= at) {
            Some(exec) => Some(command_line(&exec)),
            None => process
                .parent
                .and_then(|parent| self.command_at(parent, process.start())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Fork;

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
        })
    }

    #[test]
    fn execs_keep_their_text_whatever_its_length() {
        let long = "x".repeat(20_000);
        let mut builder = Builder::default();
        let fork = Record::Fork(Fork {
            seq: 0,
            timestamp: 5,
            parent_pid: 1,
            child_pid: 2,
            parent_pgid: 1,
            child_pgid: None,
            child_sid: None,
            child_ppid: None,
        });
        for event in [
            exec(1, 1, &["sh", "-c", &long], None),
            fork,
            exec(2, 6, &["env", "a b"], Some("recorded otherwise")),
            exec(2, 7, &["true"], None),
        ] {
            builder.add(&event).unwrap();
        }
        let table = builder.finish(Some(10));
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
        let table = builder.finish(Some(3));
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
