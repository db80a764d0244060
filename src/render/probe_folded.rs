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
use crate::stacks::folded;

/// Writes one line per distinct stack, in the order of their text.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let probes = recording.header.as_ref().map_or(&[][..], |h| &h.probes[..]);
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    let labels: Vec<String> = probes.iter().map(|p| p.label()).collect();
    for hit in hit_stacks(probes, &recording.profile, &recording.processes) {
        let probe = &labels[hit.probe.unwrap_or_default() as usize];
        let test = hit.test.as_deref();
        let stack = folded::stack(test, &hit.program, &hit.frames, Some(probe));
        folded::add(&mut lines, stack, hit.count);
    }
    for (stack, count) in lines {
        writeln!(out, "{stack} {count}")?;
    }
    Ok(())
}
