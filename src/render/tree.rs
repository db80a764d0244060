//! `tree`: the process tree, pstree-style, one line per process with its
//! start offset, duration and how it ended.

use std::io::{self, Write};

use anstyle::{AnsiColor, Style};
use unicode_width::UnicodeWidthStr;

use super::{paint, Options};
use crate::processes::{Outcome, Processes};
use crate::recording::Recording;
use crate::text::visible;
use crate::text::{seconds, shorten_command};

/// Writes the tree, every top-level process with its descendants.
pub fn render(recording: &Recording, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    // Depth-first with an explicit stack: a long chain of forks must not
    // exhaust the call stack.
    let mut stack: Vec<(usize, String, Branch)> = processes
        .roots()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .map(|index| (index, String::new(), Branch::Root))
        .collect();
    while let Some((index, indent, branch)) = stack.pop() {
        write_line(
            processes,
            index,
            &format!("{indent}{}", branch.connector()),
            options,
            out,
        )?;
        let child_indent = format!("{indent}{}", branch.continuation());
        let children = processes.get(index).children;
        for (i, child) in children.iter().enumerate().rev() {
            let branch = if i + 1 == children.len() {
                Branch::Last
            } else {
                Branch::Middle
            };
            stack.push((child, child_indent.clone(), branch));
        }
    }
    let cut = "a process `cut off` may have run on, and those started after the cut are missing";
    match super::cut_note(recording, cut) {
        Some(note) => writeln!(out, "({note})"),
        None => Ok(()),
    }
}

/// Where a process sits among its siblings.
#[derive(Clone, Copy)]
enum Branch {
    Root,
    Middle,
    Last,
}

impl Branch {
    fn connector(self) -> &'static str {
        match self {
            Branch::Root => "",
            Branch::Middle => "├─ ",
            Branch::Last => "└─ ",
        }
    }

    /// What the lines of its descendants start with below it.
    fn continuation(self) -> &'static str {
        match self {
            Branch::Root => "",
            Branch::Middle => "│  ",
            Branch::Last => "   ",
        }
    }
}

fn write_line(
    processes: &Processes,
    index: usize,
    prefix: &str,
    options: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    let process = processes.get(index);
    let command = processes.describe(index);
    let forked = process.execs.is_empty();
    let outcome = process.outcome();
    let times = format!(
        "+{} {}",
        seconds(process.start()),
        super::wall(&process, processes.end())
    );
    let pid = process.pid.to_string();
    let fixed = prefix.width() + pid.len() + times.len() + outcome.to_string().len() + 4;
    let command = shorten_command(
        &visible(&command),
        options.width.map(|w| w.saturating_sub(fixed)),
    );

    let paint = |style: Style, text: &str| paint(options, style, text);
    let command_style = if forked {
        Style::new().dimmed()
    } else {
        Style::new()
    };
    writeln!(
        out,
        "{prefix}{} {}  {} {}",
        paint(Style::new().bold(), &pid),
        paint(command_style, &command),
        paint(Style::new().dimmed(), &times),
        paint(outcome_style(outcome), &outcome.to_string()),
    )
}

fn outcome_style(outcome: Outcome) -> Style {
    let color = match outcome {
        _ if outcome.failed() => AnsiColor::Red,
        Outcome::Exited(_) => AnsiColor::Green,
        Outcome::Running | Outcome::CutOff => AnsiColor::Yellow,
        Outcome::Killed { .. } | Outcome::Ended => return Style::new(),
    };
    Style::new().fg_color(Some(color.into()))
}
