//! `flamegraph`: the collapsed stacks of [`folded`](super::folded) drawn
//! as an SVG by inferno, upside down (an icicle): the root on top, each
//! process below its parent, as wide as it and its descendants weigh.

use std::io::{self, Write};

use inferno::flamegraph::{self, Direction};

use super::{folded, Options, Weight};
use crate::recording::Recording;
use crate::text::shell_join;
use crate::text::shorten_command;

/// Longest command line the title shows.
const TITLE_WIDTH: usize = 100;

/// Writes the SVG. inferno sorts and merges the stacks itself, so they are
/// all held, one line per process.
pub fn render(recording: &Recording, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    let mut lines = Vec::new();
    folded::each_stack(processes, options.weight, |stack, weight| {
        lines.push(format!("{stack} {weight}"));
        Ok(())
    })?;
    let mut settings = flamegraph::Options::default();
    settings.direction = Direction::Inverted;
    settings.deterministic = true;
    settings.hash = true;
    settings.count_name = match options.weight {
        Weight::Cpu => "µs of CPU",
        Weight::Wall => "µs of wall time",
    }
    .to_owned();
    settings.name_type = "Process:".to_owned();
    settings.title = title(recording);
    flamegraph::from_lines(&mut settings, lines.iter().map(String::as_str), out)
}

/// `proctrace: make -j4`, the command as a shell would read it.
pub(super) fn title(recording: &Recording) -> String {
    let command = recording
        .header
        .as_ref()
        .map(|header| shell_join(&header.command));
    match command {
        Some(command) => format!(
            "proctrace: {}",
            shorten_command(&command, Some(TITLE_WIDTH))
        ),
        None => "proctrace".to_owned(),
    }
}
