//! `offcpu-folded`: where the tree waited, as collapsed stacks for
//! inferno, FlameGraph and speedscope: one
//! `TEST;PROGRAM;frame;…;leaf;[REASON] MICROSECONDS` line per stack and
//! reason, the root first, the test's name only where the process belongs
//! to a test, as in `cpu-folded`. The waits shorter than the threshold
//! (kept without stacks) and the time runnable have no frames. Alike
//! stacks of alike processes are one line.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::Options;
use crate::analysis::waited_stacks;
use crate::recording::Recording;
use crate::stacks::folded;

/// Writes one line per distinct stack and reason, in the order of their
/// text; lines under a microsecond are left out, as flame graphs count
/// whole units.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    for (stack, ns) in lines(recording) {
        if ns >= 1_000 {
            writeln!(out, "{stack} {}", ns / 1_000)?;
        }
    }
    Ok(())
}

/// The collapsed stacks and their nanoseconds, in the order of their
/// text: what `offcpu-folded` writes and the flame graphs of waiting draw.
pub(super) fn lines(recording: &Recording) -> BTreeMap<String, u64> {
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for waited in waited_stacks(&recording.profile, &recording.processes) {
        let test = waited.test.as_deref();
        let leaf = format!("[{}]", waited.reason.name());
        let stack = folded::stack(test, &waited.program, &waited.frames, Some(&leaf));
        folded::add(&mut lines, stack, waited.ns);
    }
    lines
}
