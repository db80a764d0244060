//! `cpu-flamegraph`: the CPU profile's collapsed stacks, the lines of
//! [`cpu_folded`](super::cpu_folded), drawn as an SVG by inferno.
//!
//! The root is at the bottom, each function above its caller, as flame
//! graphs of code are drawn (flamegraph.pl, perf, inferno-flamegraph from
//! `cpu-folded`): the picture people who profile know, and the same one
//! whichever tool drew it. The process `flamegraph` hangs upside down
//! because it is a tree of processes, read from the root down like `tree`.
//! The flame graphs of waiting ([`wait_flamegraph`](super::wait_flamegraph))
//! are drawn by the same hand.

use std::collections::BTreeMap;
use std::io::{self, Write};

use inferno::flamegraph::{self, Direction};

use super::cpu::headline;
use super::flamegraph::title;
use super::{cpu_folded, Missing, Options};
use crate::recording::Recording;

/// Writes the SVG.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let headline = headline(recording).ok_or(Missing::CpuProfile)?;
    draw(
        recording,
        &cpu_folded::lines(recording),
        "samples",
        headline,
        out,
    )
}

/// Draws collapsed stacks and their counts in `unit`, the root at the
/// bottom: every flame graph of code stacks is drawn alike.
pub(super) fn draw(
    recording: &Recording,
    lines: &BTreeMap<String, u64>,
    unit: &str,
    subtitle: String,
    out: &mut dyn Write,
) -> io::Result<()> {
    let lines: Vec<String> = lines
        .iter()
        .map(|(stack, count)| format!("{stack} {count}"))
        .collect();
    let mut settings = flamegraph::Options::default();
    settings.direction = Direction::Straight;
    settings.deterministic = true;
    settings.hash = true;
    settings.count_name = unit.to_owned();
    settings.name_type = "Function:".to_owned();
    settings.title = title(recording);
    settings.subtitle = Some(subtitle);
    flamegraph::from_lines(&mut settings, lines.iter().map(String::as_str), out)
}
