//! `record --live`: the full-screen view of the tree as it runs, drawn
//! from the table the recording grows, with what /proc says of the live
//! processes (state letter, CPU so far).

use std::time::Instant;

use crossbeam_channel::Receiver;
use ratatui::crossterm::event::KeyEvent;

use super::tui::{self, Action, Screen, View};
use proctrace::processes::{Growing, Process};

/// The view while it is on screen.
pub struct Live {
    view: View,
    screen: Screen,
    keys: Receiver<KeyEvent>,
    started: Instant,
}

impl Live {
    /// Takes the terminal over.
    pub fn open(command: &str) -> std::io::Result<Live> {
        Ok(Live {
            view: View::new(format!("proctrace live: {command}"), true),
            screen: Screen::open()?,
            keys: tui::keys(),
            started: Instant::now(),
        })
    }

    /// The keys pressed in the view.
    pub fn keys(&self) -> Receiver<KeyEvent> {
        self.keys.clone()
    }

    /// Handles a key; says what the recording should do.
    pub fn key(&mut self, key: KeyEvent) -> Action {
        self.view.key(key)
    }

    /// Shows lines (a snapshot's chain, a notice) under the tree.
    pub fn note(&mut self, lines: Vec<String>) {
        self.view.note(lines);
    }

    /// Draws the tree as recorded so far.
    pub fn draw(&mut self, table: &Growing) {
        let processes = table.table();
        let now = (self.started.elapsed().as_nanos() as u64).max(processes.end());
        let view = &mut self.view;
        let _ = self
            .screen
            .draw(|frame| view.draw(frame, &processes, now, &proc_state));
    }
}

/// A live process's state letter and CPU time so far, from /proc.
fn proc_state(process: Process<'_>) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", process.pid)).ok()?;
    // The command sits in parentheses and may hold anything: the fields
    // start after the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
    Some((state, ticks * 1_000_000_000 / hz.max(1)))
}
