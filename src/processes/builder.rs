//! Building the table from a recording's events as they stream by.

use std::collections::HashMap;

use super::storage::{small, ExecRow, Grouped, Row, Text};
use super::{Processes, SessionChange, TooLarge};
use crate::event::{
    profile_lines, Attached, Exec, Fd, Lingering, OnHang, Pid, Record, Resources, Snapshot,
    TestAttempt,
};
use crate::text::shell_join;

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
        self.0.clone().finish(None, false)
    }
}

/// Builds the table from the events, given in causal order.
#[derive(Debug, Default, Clone)]
pub(crate) struct Builder {
    pub(super) rows: Vec<Row>,
    pub(super) execs: Vec<(u32, ExecRow)>,
    pub(super) session_changes: Vec<(u32, SessionChange)>,
    pub(super) lingering: Vec<(u32, Lingering)>,
    pub(super) resources: Vec<(u32, Resources)>,
    pub(super) snapshots: Vec<(u32, Snapshot)>,
    pub(super) on_hang: Vec<OnHang>,
    pub(super) attempts: Vec<TestAttempt>,
    pub(super) text: Text,
    pub(super) fds: Vec<Fd>,
    /// The newest process known under each pid.
    pub(super) by_pid: HashMap<Pid, u32>,
    pub(super) last_timestamp: Option<u64>,
}

impl Builder {
    /// Adds the next event; returns the index of the process it belongs
    /// to (`None` for header and trailer).
    pub(crate) fn add(&mut self, event: &Record) -> Result<Option<usize>, TooLarge> {
        if let Record::OnHang(run) = event {
            // About the process as its snapshot saw it, maybe since exited:
            // never a new process.
            self.last_timestamp = self.last_timestamp.max(Some(run.timestamp));
            self.on_hang.push(run.clone());
            return Ok(self.by_pid.get(&run.pid).map(|&i| i as usize));
        }
        if let Record::TestAttempt(attempt) = event {
            // Told after every event: placed once all processes are known.
            self.attempts.push(attempt.clone());
            return Ok(None);
        }
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
            Record::Exec(exec) => self.add_exec(index, exec, false)?,
            Record::Attached(attached) => self.add_exec(index, &running(attached), true)?,
            Record::Exit(exit) => {
                row.set_exit(exit);
                if let Some(used) = exit.resources {
                    self.resources.push((index, used));
                }
            }
            Record::Lingering(lingering) => self.lingering.push((index, lingering.clone())),
            Record::Snapshot(snapshot) => self.snapshots.push((index, snapshot.clone())),
            Record::SetSid(e) => self
                .session_changes
                .push((index, SessionChange::SetSid(e.clone()))),
            Record::SetPgid(e) => self
                .session_changes
                .push((index, SessionChange::SetPgid(e.clone()))),
            Record::Header(_) | Record::Trailer(_) | Record::OnHang(_) | profile_lines!() => {}
        }
        Ok(Some(index as usize))
    }

    /// Adds an exec of `process`; `attached` for the program it was
    /// running when `record --pid` attached ([`ExecView::attached`]).
    pub(super) fn add_exec(
        &mut self,
        process: u32,
        exec: &Exec,
        attached: bool,
    ) -> Result<(), TooLarge> {
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
        if attached {
            set |= ExecRow::ATTACHED;
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
            used_before: exec.used_before,
        };
        small(self.execs.len() + 1)?;
        self.execs.push((process, row));
        Ok(())
    }

    /// The process an event belongs to, created on its first event. After
    /// an exit the pid is free again, so a later event is a new process.
    pub(super) fn index_for(&mut self, event: &Record) -> Result<Option<u32>, TooLarge> {
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
            Record::Attached(e) => Some(e.ppid),
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

    /// The table; `end` is the end of the recording if the trailer says,
    /// `cut` where the recording was cut short ([`Processes::is_cut`]).
    pub(crate) fn finish(self, end: Option<u64>, cut: bool) -> Processes {
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
        let mut resources = self.resources;
        resources.sort_unstable_by_key(|(index, _)| *index);
        let mut processes = Processes {
            execs,
            resources,
            children,
            session_changes: Grouped::new(self.session_changes, count),
            lingering,
            snapshots: self.snapshots,
            on_hang: self.on_hang,
            text: self.text,
            fds: self.fds,
            end: end.max(self.last_timestamp).unwrap_or(0),
            cut,
            rows: self.rows,
            attempts: Vec::new(),
        };
        processes.attempts = super::attempts::place(&processes, self.attempts);
        processes
    }
}

/// The process group an event shows its process in, if it shows one.
pub(super) fn group_of(event: &Record) -> Option<Pid> {
    match event {
        Record::Fork(f) => Some(f.child_pgid.unwrap_or(f.parent_pgid)),
        Record::Exec(e) => Some(e.pgid),
        Record::Attached(e) => Some(e.pgid),
        Record::Exit(e) => Some(e.pgid),
        Record::SetPgid(e) => Some(e.pgid),
        _ => None,
    }
}

/// The session an event shows its process in, if it shows one.
pub(super) fn session_of(event: &Record) -> Option<Pid> {
    match event {
        Record::Fork(f) => f.child_sid,
        Record::Exec(e) => e.sid,
        Record::Attached(e) => Some(e.sid),
        Record::Exit(e) => e.sid,
        Record::SetSid(e) => Some(e.sid),
        _ => None,
    }
}

/// The program a process was running when `record --pid` attached, as an
/// exec at the attach: what names the process in every view.
fn running(attached: &Attached) -> Exec {
    Exec {
        seq: attached.seq,
        timestamp: attached.timestamp,
        pid: attached.pid,
        ppid: attached.ppid,
        pgid: attached.pgid,
        sid: Some(attached.sid),
        filename: attached.filename.clone(),
        cmdline: shell_join(&attached.argv),
        argv: attached.argv.clone(),
        argv_truncated: false,
        argv_raw: Default::default(),
        filename_raw: None,
        fds: Vec::new(),
        fds_truncated: false,
        env: Default::default(),
        used_before: None,
    }
}
