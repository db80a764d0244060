//! The loop of `proctrace record` once the command runs: events to the
//! output, what the recording finds (lingering processes, snapshots of the
//! live tree, losses) to people, the status line or the live view redrawn.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::Result;
use crossbeam_channel::{never, tick, unbounded, Receiver, Sender};
use ratatui::crossterm::event::KeyEvent;
use signal_hook::consts::SIGUSR1;

use super::files::open_seekable_input;
use super::live::Live;
use super::status::{Status, REDRAW};
use super::tui::Action;
use std::sync::Arc;

use proctrace::event::{Record, Trailer};
use proctrace::processes::{Growing, Processes};
use proctrace::recorder::{Lingerer, LiveRecording, Notice, Stopper, Taken};
use proctrace::recording::{Keep, Output};

/// The tree as recorded so far, which explaining a snapshot needs.
pub enum Tree {
    /// Kept in memory as it grows: for the live view, which draws it four
    /// times a second, and for a recording on stdout, which cannot be
    /// read back.
    Kept(Box<Growing>),
    /// Read back from the recording's file when a snapshot is taken, so
    /// that a long run costs no memory for it.
    OnDisk(PathBuf),
}

impl Tree {
    fn add(&mut self, record: &Record) {
        if let Tree::Kept(growing) = self {
            growing.add(record);
        }
    }
}

/// The tree read back from the recording's file, up to what has been
/// written. It has no trailer yet, so no warning about that.
fn read_back(path: &Path) -> Option<Processes> {
    let mut reader = open_seekable_input(Some(path)).ok()?;
    let recording = proctrace::recording::Recording::read(&mut reader, Keep::Processes);
    recording.ok().map(|r| r.processes)
}

/// A snapshot explained against the tree recorded up to it, or if that
/// cannot be read back, against what the recorder knew.
fn explain(table: Option<Processes>, taken: &Taken) -> Vec<String> {
    let started = std::time::Instant::now();
    let hang = match table {
        Some(table) => taken.hang_in(&table),
        None => taken.hang(),
    };
    let lines = hang.map_or_else(Vec::new, |hang| {
        proctrace::render::explain_hang_short(&hang, SCREEN_LINES)
    });
    log::debug!(
        "snapshot: analysed in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    lines
}

/// Lines of a snapshot's explanation on stderr: a screenful.
const SCREEN_LINES: usize = 40;

/// A snapshot's explanation and the number of its place among what is said.
type Explanation = (u64, Vec<String>);

/// The state of the loop.
pub struct Session<'a> {
    output: Output,
    name: String,
    processes: u64,
    tree: Tree,
    /// Snapshots whose earlier events have not all been written yet, each
    /// with the number of its place in `told`.
    pending: Vec<(u64, Arc<Taken>)>,
    /// The timestamp of the last event written.
    written_until: u64,
    status: &'a mut Status,
    live: Option<Live>,
    keys: Receiver<KeyEvent>,
    lost_told: bool,
    /// Explanations of snapshots worked out on threads of their own, so
    /// that reading a long recording back never holds up its events; each
    /// with the number of its place in `told`.
    explained: (Sender<Explanation>, Receiver<Explanation>),
    in_flight: usize,
    /// What is to be said, in the order it happened: lines said while a
    /// snapshot waits for its explanation wait behind it.
    told: Told,
}

impl<'a> Session<'a> {
    /// A session writing to `output`, showing `status`, or `live` while
    /// the view is up.
    pub fn new(output: Output, tree: Tree, status: &'a mut Status, live: Option<Live>) -> Self {
        Session {
            name: output.name().to_owned(),
            output,
            processes: 1,
            tree,
            pending: Vec::new(),
            written_until: 0,
            status,
            keys: live.as_ref().map_or_else(never, Live::keys),
            live,
            lost_told: false,
            explained: unbounded(),
            in_flight: 0,
            told: Told::default(),
        }
    }

    /// Writes header, events and trailer; returns how many processes were
    /// recorded. A failing output does not end the recording: the tree runs
    /// on, watched and reaped as before, and its events are counted as lost.
    pub fn run(mut self, recording: LiveRecording) -> Result<(u64, Trailer, Output)> {
        tell_failure(&self.name, self.output.header(recording.header()));
        let (events, notices) = (recording.events(), recording.notices());
        let redraw = if self.status.shown() || self.live.is_some() {
            tick(REDRAW)
        } else {
            never()
        };
        let stopper = recording.stopper();
        loop {
            // Whatever has been drained reaches the output before proctrace
            // waits: a kill -9 then loses at most what the kernel still holds.
            if events.is_empty() {
                tell_failure(&self.name, self.output.flush());
            }
            let keys = self.keys.clone();
            let explained = self.explained.1.clone();
            crossbeam_channel::select! {
                recv(events) -> record => match record {
                    Ok(record) => self.record(&record),
                    Err(_) => break,
                },
                recv(notices) -> notice => {
                    if let Ok(notice) = notice {
                        self.notice(notice);
                    }
                }
                recv(redraw) -> _ => self.redraw(),
                recv(keys) -> key => self.key(key.ok(), &stopper),
                recv(explained) -> explanation => {
                    self.in_flight -= 1;
                    if let Ok((place, lines)) = explanation {
                        self.explained(place, lines);
                    }
                }
            }
        }
        self.live = None;
        notices.try_iter().for_each(|notice| self.notice(notice));
        for (place, taken) in std::mem::take(&mut self.pending) {
            self.explain(place, taken);
        }
        for _ in 0..std::mem::take(&mut self.in_flight) {
            if let Ok((place, lines)) = self.explained.1.recv() {
                self.explained(place, lines);
            }
        }
        for lines in self.told.rest() {
            self.tell(lines);
        }
        let totals = recording.finish()?;
        tell_failure(&self.name, self.output.trailer(&totals));
        if totals.timed_out {
            say!("proctrace: timed out; the tree was ended");
        }
        Ok((self.processes, totals, self.output))
    }

    fn record(&mut self, record: &Record) {
        self.processes += u64::from(matches!(record, Record::Fork(_)));
        self.tree.add(record);
        self.status.add(record);
        // Written first: a tree read back for the snapshot has it.
        tell_failure(&self.name, self.output.event(record));
        self.written_until = record.timestamp().unwrap_or(self.written_until);
        if let Record::OnHang(run) = record {
            self.say(vec![proctrace::render::on_hang_line(run)]);
        }
        if self.pending.is_empty() {
            return;
        }
        let (ready, pending): (Vec<_>, _) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(_, taken)| taken.timestamp <= self.written_until);
        self.pending = pending;
        ready
            .into_iter()
            .for_each(|(place, taken)| self.explain(place, taken));
    }

    fn notice(&mut self, notice: Notice) {
        match notice {
            // Explained once the events before it are written: the tree
            // it is explained against then has every process it names.
            // What is said meanwhile waits for it.
            Notice::Snapshot(taken) => {
                let place = self.told.hold();
                if taken.timestamp <= self.written_until {
                    self.explain(place, taken);
                } else {
                    self.pending.push((place, taken));
                }
            }
            Notice::Lost {
                buffer_full,
                tracking_full,
            } => {
                let lost = buffer_full + tracking_full;
                if !std::mem::replace(&mut self.lost_told, true) {
                    self.say(vec![format!(
                        "WARNING: the kernel is dropping events ({lost} so far); \
                         raise --buffer-mib or --max-processes"
                    )]);
                }
                self.status.lost(lost);
            }
            notice => self.say(tell(&notice)),
        }
    }

    fn redraw(&mut self) {
        match (&mut self.live, &self.tree) {
            (Some(view), Tree::Kept(growing)) => view.draw(growing),
            _ => self.status.draw(),
        }
    }

    fn key(&mut self, key: Option<KeyEvent>, stopper: &Stopper) {
        let action = match (&mut self.live, key) {
            (Some(view), Some(key)) => view.key(key),
            _ => Action::Quit,
        };
        match action {
            Action::Hang => stopper.snapshot(SIGUSR1),
            Action::Quit | Action::Interrupt => {
                // The terminal is given back; the status line takes over.
                self.live = None;
                self.keys = never();
                self.status.show();
                if action == Action::Interrupt {
                    // Raw mode kept Ctrl-C from the tree: send it where the
                    // terminal would, to the foreground process group.
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::getpgrp(),
                        nix::sys::signal::Signal::SIGINT,
                    );
                }
            }
            Action::Seek(_) | Action::None => {}
        }
    }

    /// Explains a snapshot, said at `place`: at once from the tree in
    /// memory, or on a thread that reads the tree back from the file.
    fn explain(&mut self, place: u64, taken: Arc<Taken>) {
        match &self.tree {
            Tree::Kept(growing) => {
                let lines = explain(Some(growing.table()), &taken);
                self.explained(place, lines);
            }
            Tree::OnDisk(path) => {
                let table = self.output.flush().ok().map(|()| path.clone());
                let send = self.explained.0.clone();
                self.in_flight += 1;
                std::thread::spawn(move || {
                    let started = std::time::Instant::now();
                    let table = table.and_then(|p| read_back(&p));
                    log::debug!(
                        "snapshot: the tree read back in {:.1} ms",
                        started.elapsed().as_secs_f64() * 1e3
                    );
                    let _ = send.send((place, explain(table, &taken)));
                });
            }
        }
    }

    /// Says a snapshot's explanation at its place, and what waited for it.
    fn explained(&mut self, place: u64, lines: Vec<String>) {
        for lines in self.told.fill(place, lines) {
            self.tell(lines);
        }
    }

    /// Says `lines` once what came before them is said.
    fn say(&mut self, lines: Vec<String>) {
        if let Some(lines) = self.told.after_the_rest(lines) {
            self.tell(lines);
        }
    }

    /// Says `lines` in the live view when it is up, else on stderr.
    fn tell(&mut self, lines: Vec<String>) {
        match &mut self.live {
            Some(view) if !lines.is_empty() => view.note(lines),
            Some(_) => {}
            None => lines.iter().for_each(|line| say!("proctrace: {line}")),
        }
    }
}

/// Lines to say in the order their causes happened, some held until a
/// snapshot's explanation, worked out later, takes its place before them.
#[derive(Default)]
struct Told {
    /// Places in order: `None` while held.
    queue: VecDeque<(u64, Option<Vec<String>>)>,
    next: u64,
}

impl Told {
    /// Holds a place for lines to come; returns its number.
    fn hold(&mut self) -> u64 {
        self.next += 1;
        self.queue.push_back((self.next, None));
        self.next
    }

    /// `lines`, to say now if nothing is held before them.
    fn after_the_rest(&mut self, lines: Vec<String>) -> Option<Vec<String>> {
        if self.queue.is_empty() {
            return Some(lines);
        }
        self.next += 1;
        self.queue.push_back((self.next, Some(lines)));
        None
    }

    /// Puts `lines` in held place `place`; returns what can be said now.
    fn fill(&mut self, place: u64, lines: Vec<String>) -> Vec<Vec<String>> {
        if let Some((_, held)) = self.queue.iter_mut().find(|(p, _)| *p == place) {
            *held = Some(lines);
        }
        let mut ready = Vec::new();
        while let Some((_, Some(_))) = self.queue.front() {
            if let Some((_, Some(lines))) = self.queue.pop_front() {
                ready.push(lines);
            }
        }
        ready
    }

    /// Whatever is left to say, past any place never filled.
    fn rest(&mut self) -> Vec<Vec<String>> {
        self.queue
            .drain(..)
            .filter_map(|(_, lines)| lines)
            .collect()
    }
}

/// What the recording found about the tree, for people, as it happens.
fn tell(notice: &Notice) -> Vec<String> {
    match notice {
        Notice::TimedOut { signal } => {
            let name = nix::sys::signal::Signal::try_from(*signal).map_or("?", |s| s.as_str());
            vec![format!(
                "--timeout expired: ending the tree ({name}, then SIGKILL 2 s later)"
            )]
        }
        Notice::RootExited(alive) => {
            let mut lines = vec![format!(
                "the command exited; {} of its processes still run:",
                alive.len()
            )];
            let groups = alike(alive);
            let shown = groups.iter().take(SCREEN_LINES / 4);
            lines.extend(shown.map(|group| format!("  {}", lineage_of(group))));
            if groups.len() > SCREEN_LINES / 4 {
                let left: usize = groups[SCREEN_LINES / 4..].iter().map(Vec::len).sum();
                lines.push(format!("  … and {left} more"));
            }
            lines
        }
        Notice::Lingering(who) => vec![format!("lingering: {}", lineage(who))],
        Notice::Killed { pid, signal } => {
            let name = nix::sys::signal::Signal::try_from(*signal).map_or("?", |s| s.as_str());
            vec![format!("sent {name} to lingering process {pid}")]
        }
        // Snapshots and losses are told by their own lines; a newer kind
        // of notice has nothing to say here until this view learns it.
        _ => Vec::new(),
    }
}

/// Processes folded by command and ancestry, in order of the first of each.
fn alike(all: &[Lingerer]) -> Vec<Vec<&Lingerer>> {
    let mut groups: Vec<Vec<&Lingerer>> = Vec::new();
    let mut by_kind = std::collections::HashMap::new();
    for who in all {
        let ancestors: Vec<i32> = who.ancestry.iter().map(|(pid, _)| *pid).collect();
        let kind = (who.command.as_str(), ancestors);
        let at = *by_kind.entry(kind).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[at].push(who);
    }
    groups
}

/// [`lineage`] of a group: `N × command (pids a–b) ← parent ← ...`.
fn lineage_of(group: &[&Lingerer]) -> String {
    let who = group[0];
    if group.len() == 1 {
        return lineage(who);
    }
    let pids = group.iter().map(|who| who.pid).collect();
    let ranges = proctrace::text::pid_ranges(pids);
    let head = format!("{} × {} (pids {ranges})", group.len(), who.command);
    started_by(head, who)
}

/// `PID command ← parent ← ... ← root`: who started a process, back to the root.
fn lineage(who: &Lingerer) -> String {
    started_by(format!("{} {}", who.pid, who.command), who)
}

/// `head ← parent ← ... ← root`.
fn started_by(head: String, who: &Lingerer) -> String {
    let mut line = head;
    for (pid, command) in who.ancestry.iter().rev() {
        line.push_str(&format!("  ← {pid} {command}"));
    }
    line
}

/// Says at once that the output failed; the command is not told, and runs on.
fn tell_failure(name: &str, written: io::Result<()>) {
    match written {
        // The reader of `-o -` went away: its choice, not news to it.
        Err(err) if super::files::reader_left(&err) => {}
        Err(err) => say!(
            "proctrace: error: writing {name}: {err}; the command runs on, its events are no longer recorded"
        ),
        Ok(()) => {}
    }
}
