//! `proctrace view`: a finished recording in the full-screen view, at any
//! moment of the run (it opens at the end).

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use ratatui::crossterm::event::{self, Event};

use super::files::{open_seekable_input, print_warnings};
use super::tui::{Action, Screen, View};
use proctrace::processes::Processes;
use proctrace::recording::{Keep, Recording};

/// Arguments of `proctrace view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    /// The recording to open.
    #[arg(value_name = "FILE")]
    pub input: PathBuf,
}

/// Runs `proctrace view`.
pub fn run(args: ViewArgs) -> anyhow::Result<i32> {
    if !std::io::stdout().is_terminal() {
        bail!("view needs a terminal (for a file, use `proctrace render`)");
    }
    let mut reader = open_seekable_input(Some(&args.input))?;
    let recording = Recording::read(&mut reader, Keep::Processes);
    print_warnings(&reader);
    let recording = recording?;
    let processes = &recording.processes;
    let first = processes.all().map(|p| p.start()).min().unwrap_or(0);
    let end = processes.end();
    let mut now = end;
    let mut view = View::new(format!("proctrace view {}", args.input.display()), false);
    let mut screen = Screen::open().context("opening the terminal")?;
    loop {
        screen.draw(|frame| view.draw(frame, processes, now, &|_| None))?;
        let Event::Key(key) = event::read()? else {
            continue;
        };
        match view.key(key) {
            Action::Quit | Action::Interrupt => return Ok(0),
            Action::Seek(thousandths) => {
                let step = end.saturating_sub(first) as i128 * i128::from(thousandths) / 1000;
                now = (i128::from(now) + step).clamp(i128::from(first), i128::from(end)) as u64;
            }
            Action::Hang => view.note(hang_at(processes, now)),
            Action::None => {}
        }
    }
}

/// The chain of the last snapshot taken by `now`.
fn hang_at(processes: &Processes, now: u64) -> Vec<String> {
    let snapshots = processes.snapshots();
    let Some(last) = snapshots
        .iter()
        .rev()
        .find(|snapshot| snapshot[0].1.timestamp <= now)
    else {
        return vec!["no snapshot of the live tree was taken by this moment".to_owned()];
    };
    let nodes: Vec<_> = last.iter().map(|&(index, s)| (Some(index), s)).collect();
    proctrace::render::explain_hang(processes, &nodes)
}
