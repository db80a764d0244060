//! `cpu-folded`: the CPU profile as collapsed stacks for inferno,
//! FlameGraph and speedscope: one `TEST;PROGRAM;frame;…;leaf COUNT` line
//! per stack, the root first; the test's name only where the process
//! belongs to a test. Alike stacks of alike processes are one line.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::Options;
use crate::analysis::sampled_stacks;
use crate::recording::Recording;
use crate::stacks::folded;

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
        let test = sampled.test.as_deref();
        let stack = folded::stack(test, &sampled.program, &sampled.frames, None);
        folded::add(&mut lines, stack, sampled.count);
    }
    lines
}
