//! The full-screen view of a process tree at one moment: `record --live`
//! shows the moment that is now, `view FILE` any moment of a recording.
//!
//! Live processes in tree order with their age, state, CPU and command;
//! finished ones folded away (`f` shows them), failed ones kept and
//! marked; sorting by age or CPU; `/` to search; `h` for the hang chain.
//! The view draws from a process table and a time, and knows nothing of
//! where they come from: the caller runs the loop.

use std::io::{self, Stdout};

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::crossterm::ExecutableCommand;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Row, Table, TableState};
use ratatui::{Frame, Terminal};

use proctrace::processes::{Process, Processes};
use proctrace::text::glance;
use proctrace::text::{shorten_command, visible};

/// What a key asks of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing beyond redrawing.
    None,
    /// Leave the view.
    Quit,
    /// Show the hang chain: of a snapshot taken now (live), or of the
    /// last one taken by this moment (replay).
    Hang,
    /// Interrupt the recording, as Ctrl-C on a terminal would.
    Interrupt,
    /// Move the time by this many thousandths of the run (replay only).
    Seek(i32),
}

/// How the rows are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sort {
    Tree,
    Age,
    Cpu,
}

/// What one row shows.
struct Shown {
    index: usize,
    depth: usize,
    age_ns: u64,
    cpu_ns: Option<u64>,
    state: String,
    ended: bool,
    failed: bool,
}

/// The view's state between frames.
pub struct View {
    title: String,
    live: bool,
    show_finished: bool,
    sort: Sort,
    query: String,
    typing: bool,
    table: TableState,
    /// Lines about a snapshot, shown under the table until Esc.
    notes: Vec<String>,
}

impl View {
    /// A view titled `title`; `live` says the moment shown is now.
    pub fn new(title: String, live: bool) -> View {
        View {
            title,
            live,
            show_finished: false,
            sort: Sort::Tree,
            query: String::new(),
            typing: false,
            table: TableState::default().with_selected(0),
            notes: Vec::new(),
        }
    }

    /// Shows `lines` (a snapshot's chain) under the table.
    pub fn note(&mut self, lines: Vec<String>) {
        self.notes = lines;
    }

    /// Handles a key.
    pub fn key(&mut self, key: KeyEvent) -> Action {
        if key.kind != KeyEventKind::Press {
            return Action::None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Action::Interrupt;
        }
        if self.typing {
            match key.code {
                KeyCode::Enter => self.typing = false,
                KeyCode::Esc => {
                    self.typing = false;
                    self.query.clear();
                }
                KeyCode::Backspace => {
                    self.query.pop();
                }
                KeyCode::Char(c) => self.query.push(c),
                _ => {}
            }
            self.table.select(Some(0));
            return Action::None;
        }
        let step = |view: &mut View, by: i32| {
            let at = view.table.selected().unwrap_or(0) as i64 + i64::from(by);
            view.table.select(Some(at.max(0) as usize));
        };
        match key.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Char('h') => return Action::Hang,
            KeyCode::Char('/') => {
                self.typing = true;
                self.query.clear();
            }
            KeyCode::Char('f') => self.show_finished = !self.show_finished,
            KeyCode::Char('s') => {
                self.sort = match self.sort {
                    Sort::Tree => Sort::Age,
                    Sort::Age => Sort::Cpu,
                    Sort::Cpu => Sort::Tree,
                }
            }
            KeyCode::Esc => {
                self.notes.clear();
                self.query.clear();
            }
            KeyCode::Down | KeyCode::Char('j') => step(self, 1),
            KeyCode::Up | KeyCode::Char('k') => step(self, -1),
            KeyCode::PageDown => step(self, 20),
            KeyCode::PageUp => step(self, -20),
            KeyCode::Left if !self.live => return Action::Seek(-20),
            KeyCode::Right if !self.live => return Action::Seek(20),
            KeyCode::Char('[') if !self.live => return Action::Seek(-1),
            KeyCode::Char(']') if !self.live => return Action::Seek(1),
            KeyCode::Home if !self.live => return Action::Seek(-1000),
            KeyCode::End if !self.live => return Action::Seek(1000),
            _ => {}
        }
        Action::None
    }

    /// Draws the tree as it was at `now_ns`; `state` gives a live
    /// process's state letter and CPU time, where the caller can read them.
    pub fn draw(
        &mut self,
        frame: &mut Frame<'_>,
        processes: &Processes,
        now_ns: u64,
        state: &dyn Fn(Process<'_>) -> Option<(char, u64)>,
    ) {
        let rows = self.rows(processes, now_ns, state);
        let started = processes.all().filter(|p| p.start() <= now_ns);
        let (mut seen, mut alive, mut failed) = (0, 0, 0);
        for process in started {
            seen += 1;
            match process.exit.filter(|e| e.timestamp <= now_ns) {
                None => alive += 1,
                Some(_) => failed += usize::from(process.outcome().failed()),
            }
        }
        let notes = self.notes.len().min(10) as u16;
        let [head, body, foot, help] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(if notes > 0 { notes + 2 } else { 0 }),
            Constraint::Length(1),
        ])
        .areas(frame.area());
        let when = if self.live { "now" } else { "at" };
        let header = format!(
            "{}  {when} +{}  {alive} alive · {failed} failed · {seen} seen",
            self.title,
            glance(now_ns),
        );
        frame.render_widget(
            Paragraph::new(header).style(Style::new().add_modifier(Modifier::REVERSED)),
            head,
        );
        let selected = self
            .table
            .selected()
            .unwrap_or(0)
            .min(rows.len().saturating_sub(1));
        self.table.select(Some(selected));
        let fixed = [8, 8, 12, 8];
        // What the fixed columns and the blank after each leave.
        let width = usize::from(body.width).saturating_sub(fixed.iter().map(|w| w + 1).sum());
        let table = Table::new(
            rows.iter().map(|r| self.row(processes, r, width)),
            fixed
                .map(|w| Constraint::Length(w as u16))
                .into_iter()
                .chain([Constraint::Fill(1)]),
        )
        .header(
            Row::new(["PID", "AGE", "STATE", "CPU", "COMMAND"])
                .style(Style::new().add_modifier(Modifier::BOLD)),
        )
        .row_highlight_style(Style::new().bg(Color::DarkGray));
        frame.render_stateful_widget(table, body, &mut self.table);
        if notes > 0 {
            let lines: Vec<Line> = self.notes.iter().map(|l| Line::from(l.as_str())).collect();
            frame.render_widget(
                Paragraph::new(lines).block(Block::bordered().title(" hang (Esc closes) ")),
                foot,
            );
        }
        frame.render_widget(Paragraph::new(self.help()), help);
    }

    fn help(&self) -> Line<'static> {
        if self.typing {
            return Line::from(format!("/{}▏ (Enter to keep, Esc to clear)", self.query));
        }
        let sort = match self.sort {
            Sort::Tree => "tree",
            Sort::Age => "age",
            Sort::Cpu => "cpu",
        };
        let finished = if self.show_finished { "hide" } else { "show" };
        let time = if self.live {
            "h hang snapshot"
        } else {
            "←→ [] Home End time · h hang"
        };
        let search = if self.query.is_empty() {
            String::new()
        } else {
            format!(" · search: {}", self.query)
        };
        Line::from(vec![
            Span::styled("q", Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!(
                " quit · ↑↓ move · {time} · f {finished} finished · s sort ({sort}) · / search{search}"
            )),
        ])
    }

    /// A process's line, its command cut to `width` columns.
    fn row<'a>(&self, processes: &'a Processes, shown: &Shown, width: usize) -> Row<'a> {
        let process = processes.get(shown.index);
        let indent = if self.sort == Sort::Tree {
            "  ".repeat(shown.depth.min(20))
        } else {
            String::new()
        };
        let mark = if shown.failed { "✗ " } else { "" };
        let command = format!(
            "{indent}{mark}{}",
            visible(&processes.describe(shown.index))
        );
        let command = shorten_command(&command, Some(width));
        let style = if shown.failed {
            Style::new().fg(Color::Red)
        } else if shown.ended {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new()
        };
        Row::new([
            process.pid.to_string(),
            glance(shown.age_ns),
            shown.state.clone(),
            shown.cpu_ns.map(glance).unwrap_or_default(),
            command,
        ])
        .style(style)
    }

    /// The processes to show at `now_ns`, in the order chosen.
    fn rows(
        &self,
        processes: &Processes,
        now_ns: u64,
        state: &dyn Fn(Process<'_>) -> Option<(char, u64)>,
    ) -> Vec<Shown> {
        let query = self.query.to_lowercase();
        let mut rows: Vec<Shown> = processes
            .depth_first()
            .into_iter()
            .filter_map(|(index, depth)| {
                let process = processes.get(index);
                let start = process.start();
                if start > now_ns {
                    return None;
                }
                let ended_at = process.exit.map(|e| e.timestamp).filter(|&t| t <= now_ns);
                let failed = ended_at.is_some() && process.outcome().failed();
                if ended_at.is_some() && !failed && !self.show_finished {
                    return None;
                }
                if !query.is_empty() && !processes.describe(index).to_lowercase().contains(&query) {
                    return None;
                }
                let (state, cpu_ns) = match ended_at {
                    Some(_) => (
                        process.outcome().short(),
                        process.resources.map(|r| r.cpu_ns),
                    ),
                    None => match state(process) {
                        Some((letter, cpu)) => (letter.to_string(), Some(cpu)),
                        None => ("running".to_owned(), None),
                    },
                };
                Some(Shown {
                    index,
                    depth,
                    age_ns: ended_at.unwrap_or(now_ns).saturating_sub(start),
                    cpu_ns,
                    state,
                    ended: ended_at.is_some(),
                    failed,
                })
            })
            .collect();
        match self.sort {
            Sort::Tree => {}
            Sort::Age => rows.sort_by_key(|r| std::cmp::Reverse(r.age_ns)),
            Sort::Cpu => rows.sort_by_key(|r| std::cmp::Reverse(r.cpu_ns)),
        }
        rows
    }
}

/// The terminal in full-screen mode; given back as it was when dropped,
/// a panic included.
pub struct Screen(Terminal<CrosstermBackend<Stdout>>);

impl Screen {
    /// Takes the terminal over (raw mode, the alternate screen).
    pub fn open() -> io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let mut stdout = io::stdout();
        if let Err(err) = stdout.execute(EnterAlternateScreen) {
            let _ = terminal::disable_raw_mode();
            return Err(err);
        }
        Ok(Screen(Terminal::new(CrosstermBackend::new(stdout))?))
    }

    /// Draws one frame.
    pub fn draw(&mut self, render: impl FnOnce(&mut Frame<'_>)) -> io::Result<()> {
        self.0.draw(render).map(drop)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.0.backend_mut().execute(LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
        let _ = self.0.show_cursor();
    }
}

/// Reads keys on a thread of its own, for a caller that waits on channels.
pub fn keys() -> crossbeam_channel::Receiver<KeyEvent> {
    let (send, receive) = crossbeam_channel::bounded(64);
    std::thread::spawn(move || loop {
        match event::read() {
            Ok(Event::Key(key)) => {
                if send.send(key).is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(_) => return,
        }
    });
    receive
}
