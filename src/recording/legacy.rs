//! Recordings of the original bpftrace-based proctrace, mapped into the
//! event model so that nothing downstream knows about them: `ExecArgs` and
//! `ExecFilename` lines fold into the `Exec` they follow.

use serde::Deserialize;

use crate::event::{Exec, Pid};
use crate::text::shell_join;

/// Lines only the original bpftrace-based proctrace wrote.
#[derive(Deserialize)]
pub(super) enum Legacy {
    /// An exec whose `cmdline` is a list of words.
    Exec(LegacyExec),
    ExecArgs(LegacyArgs),
    ExecFilename(LegacyFilename),
    ExecFull(LegacyExecFull),
    BadExec(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
pub(super) struct LegacyExec {
    #[serde(default)]
    seq: u64,
    timestamp: u64,
    pid: Pid,
    ppid: Pid,
    pgid: Pid,
    cmdline: Option<LegacyCommand>,
}

#[derive(Deserialize)]
pub(super) struct LegacyExecFull {
    #[serde(default)]
    seq: u64,
    timestamp: u64,
    pid: Pid,
    ppid: Pid,
    pgid: Pid,
    filename: String,
    args: LegacyCommand,
}

#[derive(Deserialize)]
pub(super) struct LegacyArgs {
    timestamp: u64,
    pid: Pid,
    args: LegacyCommand,
}

#[derive(Deserialize)]
pub(super) struct LegacyFilename {
    timestamp: u64,
    pid: Pid,
    filename: String,
}

/// The original printed arguments either joined (from bpftrace) or as a
/// list (from /proc). A joined line is kept as the display line only:
/// splitting it at spaces would invent an argv.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum LegacyCommand {
    Joined(String),
    Words(Vec<String>),
}

impl LegacyCommand {
    fn cmdline(&self) -> String {
        match self {
            LegacyCommand::Joined(line) => line.clone(),
            LegacyCommand::Words(words) => shell_join(words),
        }
    }

    fn apply(self, exec: &mut Exec) {
        exec.cmdline = self.cmdline();
        if let LegacyCommand::Words(words) = self {
            exec.argv = words;
        }
    }
}

fn legacy_exec(seq: u64, timestamp: u64, pid: Pid, ppid: Pid, pgid: Pid) -> Exec {
    Exec {
        seq,
        timestamp,
        pid,
        ppid,
        pgid,
        sid: None,
        filename: String::new(),
        filename_raw: None,
        argv: Vec::new(),
        argv_raw: Default::default(),
        cmdline: String::new(),
        argv_truncated: false,
        fds: Vec::new(),
        fds_truncated: false,
        env: Default::default(),
        used_before: None,
    }
}

impl LegacyExec {
    fn into_exec(self) -> Exec {
        let mut exec = legacy_exec(self.seq, self.timestamp, self.pid, self.ppid, self.pgid);
        if let Some(command) = self.cmdline {
            command.apply(&mut exec);
        }
        exec
    }
}

impl LegacyExecFull {
    fn into_exec(self) -> Exec {
        let mut exec = legacy_exec(self.seq, self.timestamp, self.pid, self.ppid, self.pgid);
        exec.filename = self.filename;
        self.args.apply(&mut exec);
        exec
    }
}

impl Legacy {
    /// Applies this line to the exec waiting for its detail lines in
    /// `pending`; returns the previous one when this line starts a new exec.
    /// A detail line that follows no matching exec has nothing to complete
    /// and is dropped, and a failed exec attempt is no event in this model.
    pub(super) fn fold_into(self, pending: &mut Option<Exec>) -> Option<Exec> {
        match self {
            Legacy::Exec(old) => pending.replace(old.into_exec()),
            Legacy::ExecFull(full) => pending.replace(full.into_exec()),
            Legacy::ExecArgs(args) => {
                if let Some(exec) = waiting(pending, args.pid, args.timestamp) {
                    if args.args.cmdline().len() > exec.cmdline.len() {
                        args.args.apply(exec);
                    }
                }
                None
            }
            Legacy::ExecFilename(file) => {
                if let Some(exec) = waiting(pending, file.pid, file.timestamp) {
                    exec.filename = file.filename;
                }
                None
            }
            Legacy::BadExec(_) => None,
        }
    }
}

/// The exec in `pending` if it is the one of `pid` at `timestamp`.
fn waiting(pending: &mut Option<Exec>, pid: Pid, timestamp: u64) -> Option<&mut Exec> {
    pending
        .as_mut()
        .filter(|exec| exec.pid == pid && exec.timestamp == timestamp)
}
