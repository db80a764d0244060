//! `cpu-folded`: the CPU profile as collapsed stacks for inferno,
//! FlameGraph and speedscope: one `TEST;PROGRAM;frame;…;leaf COUNT` line
//! per stack, the root first; the test's name only where the process
//! belongs to a test. Alike stacks of alike processes are one line.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::Options;
use crate::analysis::sampled_stacks;
use crate::recording::Recording;
use crate::stacks::folded::frame;

/// Writes one line per distinct stack, in the order of their text.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    for (stack, count) in lines(recording) {
        writeln!(out, "{stack} {count}")?;
    }
    Ok(())
}

/// The collapsed stacks and their sample counts, in the order of their
/// text: what `cpu-folded` writes and `cpu-flamegraph` draws.
pub(super) fn lines(recording: &Recording) -> BTreeMap<String, u64> {
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for sampled in sampled_stacks(&recording.profile, &recording.processes) {
        let mut parts = Vec::with_capacity(sampled.frames.len() + 2);
        if let Some(test) = &sampled.test {
            parts.push(frame(test));
        }
        parts.push(frame(&sampled.program));
        parts.extend(sampled.frames.iter().map(|f| frame(f)));
        // Saturating: a hostile recording's counts may add up past u64.
        let count = lines.entry(parts.join(";")).or_default();
        *count = count.saturating_add(sampled.count);
    }
    lines
}
