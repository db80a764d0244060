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
use crate::stacks::folded::frame;

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

/// The collapsed stacks and their nanoseconds, in the order of their text.
fn lines(recording: &Recording) -> BTreeMap<String, u64> {
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for waited in waited_stacks(&recording.profile, &recording.processes) {
        let mut parts = Vec::with_capacity(waited.frames.len() + 3);
        if let Some(test) = &waited.test {
            parts.push(frame(test));
        }
        parts.push(frame(&waited.program));
        parts.extend(waited.frames.iter().map(|f| frame(f)));
        parts.push(format!("[{}]", waited.reason.name()));
        // Saturating: a hostile recording's times may add up past u64.
        let ns = lines.entry(parts.join(";")).or_default();
        *ns = ns.saturating_add(waited.ns);
    }
    lines
}
