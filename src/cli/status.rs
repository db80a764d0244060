//! The status line of `proctrace record`: elapsed time, processes alive
//! and seen, events, events lost, and the longest-running live process,
//! redrawn in place four times a second on the terminal's last row.
//!
//! The command shares the terminal, so the line keeps out of its way the
//! way apt's progress bar does: the rows above the last become the
//! scrolling region (DECSTBM), where the command's output scrolls, and the
//! line is drawn on the last row with the cursor saved and restored around
//! it. The command's output is never broken mid-line, and its cursor stays
//! where it was. On the way out the region is reset and the row cleared.
//!
//! Only when stderr is a terminal, and not with `--quiet`, `NO_COLOR`,
//! `TERM=dumb` or on a terminal of fewer than 5 rows.

use std::collections::HashMap;
use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use proctrace::event::{Pid, Record};
use proctrace::text::glance;

/// How often the line is redrawn.
pub const REDRAW: Duration = Duration::from_millis(250);

/// A process of the tree that is still alive.
struct Live {
    start_ns: u64,
    command: String,
}

/// What the line shows, kept up to date from every event.
pub struct Status {
    wanted: bool,
    terminal: Option<Terminal>,
    started: Instant,
    events: u64,
    seen: u64,
    alive: HashMap<Pid, Live>,
    lost: u64,
    /// The last event's time: what "how long alive" is measured against.
    now_ns: u64,
}

impl Status {
    /// A status line for a recording of `root` running `command`, kept
    /// up to date but not shown yet; shown (see [`show`](Self::show))
    /// only if `wanted`.
    pub fn new(wanted: bool, root: Pid, command: String) -> Self {
        let alive = HashMap::from([(
            root,
            Live {
                start_ns: 0,
                command,
            },
        )]);
        Status {
            wanted,
            terminal: None,
            started: Instant::now(),
            events: 0,
            seen: 1,
            alive,
            lost: 0,
            now_ns: 0,
        }
    }

    /// Starts drawing the line, if it was wanted and stderr is a terminal
    /// that can hold it.
    pub fn show(&mut self) {
        if self.wanted && self.terminal.is_none() {
            self.terminal = Terminal::open();
        }
    }

    /// Whether the line is drawn.
    pub fn shown(&self) -> bool {
        self.terminal.is_some()
    }

    /// Takes an event of the tree into account.
    pub fn add(&mut self, record: &Record) {
        self.events += 1;
        match record {
            Record::Fork(fork) => {
                self.seen += 1;
                let command = self
                    .alive
                    .get(&fork.parent_pid)
                    .map(|p| p.command.clone())
                    .unwrap_or_default();
                let live = Live {
                    start_ns: fork.timestamp,
                    command,
                };
                self.alive.insert(fork.child_pid, live);
            }
            Record::Exec(exec) => {
                if let Some(live) = self.alive.get_mut(&exec.pid) {
                    live.command.clone_from(&exec.cmdline);
                }
            }
            Record::Exit(exit) => {
                self.alive.remove(&exit.pid);
            }
            _ => {}
        }
        if let Some(timestamp) = record.timestamp() {
            self.now_ns = self.now_ns.max(timestamp);
        }
    }

    /// Counts what the kernel has dropped so far.
    pub fn lost(&mut self, lost: u64) {
        self.lost = lost;
    }

    /// Redraws the line.
    pub fn draw(&mut self) {
        let line = self.line();
        if let Some(terminal) = &mut self.terminal {
            terminal.draw(&line);
        }
    }

    /// The processes of the tree not known to have exited, with their
    /// command lines.
    pub fn alive(&self) -> impl Iterator<Item = (Pid, &str)> {
        self.alive
            .iter()
            .map(|(pid, live)| (*pid, live.command.as_str()))
    }

    /// Takes the line away and gives the terminal back as it was.
    pub fn close(&mut self) {
        if let Some(terminal) = self.terminal.take() {
            terminal.close();
        }
    }

    fn line(&self) -> String {
        let elapsed = self.started.elapsed();
        // The clock of events only moves with events: the wall clock says
        // how long a quiet process has been alive.
        let now_ns = self.now_ns.max(elapsed.as_nanos() as u64);
        let longest = self
            .alive
            .iter()
            .min_by_key(|(pid, live)| (live.start_ns, **pid))
            .map(|(pid, live)| {
                let age = Duration::from_nanos(now_ns.saturating_sub(live.start_ns));
                format!(
                    " · longest: {pid} {} ({})",
                    proctrace::text::visible(&live.command),
                    glance(age.as_nanos() as u64)
                )
            })
            .unwrap_or_default();
        format!(
            "proctrace {} · {} alive / {} seen · {} events · {} lost{longest}",
            glance(elapsed.as_nanos() as u64),
            self.alive.len(),
            self.seen,
            self.events,
            self.lost
        )
    }
}

impl Drop for Status {
    fn drop(&mut self) {
        self.close();
    }
}

/// The terminal on stderr, its last row kept for the line.
struct Terminal {
    rows: u16,
    columns: u16,
}

impl Terminal {
    fn open() -> Option<Terminal> {
        let stderr = io::stderr();
        let plain = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
            || std::env::var_os("TERM").is_none_or(|t| t == "dumb");
        if plain || !stderr.is_terminal() {
            return None;
        }
        let (columns, rows) = size()?;
        let mut terminal = Terminal { rows, columns };
        terminal.reserve();
        Some(terminal)
    }

    /// Makes the rows above the last the scrolling region. The newline
    /// first moves the text up a row if the cursor sat on the last one.
    fn reserve(&mut self) {
        let rows = self.rows;
        self.write(&format!("\n\x1b7\x1b[1;{}r\x1b8\x1b[1A", rows - 1));
    }

    fn draw(&mut self, line: &str) {
        if let Some((columns, rows)) = size().filter(|&s| s != (self.columns, self.rows)) {
            self.release();
            (self.columns, self.rows) = (columns, rows);
            self.reserve();
        }
        let line: String = line.chars().take(usize::from(self.columns)).collect();
        self.write(&format!(
            "\x1b7\x1b[{};1H\x1b[2K\x1b[7m{line}\x1b[0m\x1b8",
            self.rows
        ));
    }

    /// Resets the scrolling region (which homes the cursor: hence the
    /// save and restore) and clears the last row.
    fn release(&mut self) {
        self.write(&format!(
            "\x1b7\x1b[r\x1b8\x1b7\x1b[{};1H\x1b[2K\x1b8",
            self.rows
        ));
    }

    fn close(mut self) {
        self.release();
    }

    /// One write for one change: the command's output cannot land inside it.
    fn write(&mut self, bytes: &str) {
        let mut stderr = io::stderr().lock();
        let _ = stderr.write_all(bytes.as_bytes());
        let _ = stderr.flush();
    }
}

/// The terminal's columns and rows, if it has at least five rows.
fn size() -> Option<(u16, u16)> {
    let (width, height) = terminal_size::terminal_size_of(io::stderr())?;
    (height.0 >= 5).then_some((width.0, height.0))
}
