//! `probe-folded`: the stacks at the probes' hits as collapsed stacks for
//! inferno, FlameGraph and speedscope: one `TEST;PROGRAM;frame;…;PROBE
//! COUNT` line per stack, the root first and the probe last; the test's
//! name only where the process belongs to a test. Alike stacks of alike
//! processes are one line.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::Options;
use crate::analysis::hit_stacks;
use crate::recording::Recording;
use crate::stacks::folded::frame;

/// Writes one line per distinct stack, in the order of their text.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let probes = recording.header.as_ref().map_or(&[][..], |h| &h.probes[..]);
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    let labels: Vec<String> = probes.iter().map(|p| p.label()).collect();
    for hit in hit_stacks(probes, &recording.profile, &recording.processes) {
        let probe = &labels[hit.probe.unwrap_or_default() as usize];
        let parts: Vec<String> = hit
            .test
            .iter()
            .chain([&hit.program])
            .chain(&hit.frames)
            .chain([probe])
            .map(|part| frame(part))
            .collect();
        // Saturating: a hostile recording's counts may add up past u64.
        let count = lines.entry(parts.join(";")).or_default();
        *count = count.saturating_add(hit.count);
    }
    for (stack, count) in lines {
        writeln!(out, "{stack} {count}")?;
    }
    Ok(())
}
