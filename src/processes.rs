//! The process table: what each process of a recording did, derived once
//! from the events and shared by every renderer that thinks in processes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use nix::sys::signal::Signal;

use crate::event::{shell_join, Exec, Exit, Fork, Pid, Record};
use crate::recording::Recording;

/// One process: everything between its fork and its exit.
#[derive(Debug, Clone)]
pub struct Process<'a> {
    /// Its pid (unique in the table only together with the time: pids are reused).
    pub pid: Pid,
    /// The pid of its parent, as far as the events tell.
    pub parent_pid: Option<Pid>,
    /// Index of the parent in the table, if the parent was recorded.
    pub parent: Option<usize>,
    /// The fork that created it; the root and processes whose fork was
    /// lost have none.
    pub fork: Option<&'a Fork>,
    /// Its successful execs, in order.
    pub execs: Vec<&'a Exec>,
    /// Its exit; `None` while it was still running at the end.
    pub exit: Option<&'a Exit>,
    /// All its events (its fork included), in order.
    pub events: Vec<&'a Record>,
    /// Indices of the processes it forked, in order.
    pub children: Vec<usize>,
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
    fn new(pid: Pid, parent_pid: Option<Pid>, parent: Option<usize>) -> Self {
        Process {
            pid,
            parent_pid,
            parent,
            fork: None,
            execs: Vec::new(),
            exit: None,
            events: Vec::new(),
            children: Vec::new(),
        }
    }

    /// When it started: its fork, or its first event when the fork is missing.
    pub fn start(&self) -> u64 {
        self.events.first().and_then(|e| e.timestamp()).unwrap_or(0)
    }

    /// When it ended: its exit, or `recording_end` if it was still running.
    pub fn end(&self, recording_end: u64) -> u64 {
        self.exit.map_or(recording_end, |e| e.timestamp)
    }

    /// How long it ran (until `recording_end` if it never exited).
    pub fn duration(&self, recording_end: u64) -> u64 {
        self.end(recording_end).saturating_sub(self.start())
    }

    /// How it ended.
    pub fn outcome(&self) -> Outcome {
        match self.exit {
            None => Outcome::Running,
            Some(Exit {
                signal: Some(signal),
                core_dumped,
                ..
            }) => Outcome::Killed {
                signal: *signal,
                core_dumped: *core_dumped,
            },
            Some(Exit {
                exit_code: Some(code),
                ..
            }) => Outcome::Exited(*code),
            Some(_) => Outcome::Ended,
        }
    }

    /// The command of its first exec: what it was started to run.
    pub fn first_command(&self) -> Option<Cow<'a, str>> {
        self.execs.first().copied().map(command_line)
    }

    /// The command of its last exec: what it ended up running.
    pub fn last_command(&self) -> Option<Cow<'a, str>> {
        self.execs.last().copied().map(command_line)
    }

    /// Each exec with the time it ran until: the next exec, the exit, or
    /// `recording_end`.
    pub fn exec_spans(&self, recording_end: u64) -> impl Iterator<Item = (&'a Exec, u64)> + '_ {
        let ends = self.execs.iter().skip(1).map(|e| e.timestamp);
        let last = std::iter::once(self.end(recording_end));
        self.execs.iter().copied().zip(ends.chain(last))
    }
}

/// The display line of an exec: its command line, else its argv, else
/// the file it executed.
pub fn command_line(exec: &Exec) -> Cow<'_, str> {
    if !exec.cmdline.is_empty() {
        Cow::Borrowed(&exec.cmdline)
    } else if !exec.argv.is_empty() {
        Cow::Owned(shell_join(&exec.argv))
    } else {
        Cow::Borrowed(&exec.filename)
    }
}

/// Every process of a recording, in the order they were created.
#[derive(Debug, Clone)]
pub struct Processes<'a> {
    list: Vec<Process<'a>>,
    /// The newest process known under each pid.
    by_pid: HashMap<Pid, usize>,
    /// End of the recording, for processes that never exited.
    end: u64,
}

impl<'a> Processes<'a> {
    /// Derives the table from a recording's events.
    pub fn new(recording: &'a Recording) -> Self {
        let mut table = Processes {
            list: Vec::new(),
            by_pid: HashMap::new(),
            end: recording.end_timestamp(),
        };
        for event in &recording.events {
            table.add(event);
        }
        table
    }

    fn add(&mut self, event: &'a Record) {
        let Some(index) = self.index_for(event) else {
            return;
        };
        let process = &mut self.list[index];
        process.events.push(event);
        match event {
            Record::Fork(fork) => process.fork = Some(fork),
            Record::Exec(exec) => process.execs.push(exec),
            Record::Exit(exit) => process.exit = Some(exit),
            _ => {}
        }
    }

    /// The process an event belongs to, created on its first event. After
    /// an exit the pid is free again, so a later event is a new process.
    fn index_for(&mut self, event: &Record) -> Option<usize> {
        let pid = event.pid()?;
        if let Some(&index) = self.by_pid.get(&pid) {
            if self.list[index].exit.is_none() {
                return Some(index);
            }
        }
        let parent_pid = match event {
            Record::Fork(f) => Some(f.parent_pid),
            Record::Exec(e) => Some(e.ppid),
            Record::Exit(e) => Some(e.ppid),
            _ => None,
        };
        let parent = parent_pid.and_then(|p| self.by_pid.get(&p).copied());
        let index = self.list.len();
        self.list.push(Process::new(pid, parent_pid, parent));
        if let Some(parent) = parent {
            self.list[parent].children.push(index);
        }
        self.by_pid.insert(pid, index);
        Some(index)
    }

    /// All processes, in the order they were created.
    pub fn all(&self) -> &[Process<'a>] {
        &self.list
    }

    /// The process at `index`.
    pub fn get(&self, index: usize) -> &Process<'a> {
        &self.list[index]
    }

    /// Indices of the processes whose parent was not recorded: the root,
    /// and orphans of lost events.
    pub fn roots(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.list.len()).filter(|&i| self.list[i].parent.is_none())
    }

    /// Nanoseconds from the start to the end of the recording.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// A one-line description of the process at `index`: what it was
    /// started to run and, if it exec'd again, what it ended up running;
    /// `<fork>` and the inherited command if it never exec'd.
    pub fn describe(&self, index: usize) -> String {
        let process = &self.list[index];
        match (process.first_command(), process.last_command()) {
            (Some(first), Some(last)) if first != last => format!("{first} → {last}"),
            (Some(first), _) => first.into_owned(),
            (None, _) => match self.command_at(index, process.start()) {
                Some(inherited) => format!("<fork> {inherited}"),
                None => "<fork>".to_string(),
            },
        }
    }

    /// What the process at `index` was running at time `at`: its exec
    /// current then or, before it exec'd, what it inherited from its parent.
    pub fn command_at(&self, index: usize, at: u64) -> Option<Cow<'a, str>> {
        let process = &self.list[index];
        match process.execs.iter().rev().find(|e| e.timestamp <= at) {
            Some(&exec) => Some(command_line(exec)),
            None => process
                .parent
                .and_then(|parent| self.command_at(parent, process.start())),
        }
    }
}
