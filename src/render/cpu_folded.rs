//! `cpu-folded`: the CPU profile as collapsed stacks for inferno,
//! FlameGraph and speedscope: one `TEST;PROGRAM;frame;…;leaf COUNT` line
//! per stack, the root first; the test's name only where the process
//! belongs to a test. Alike stacks of alike processes are one line.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::Options;
use crate::analysis::testname::test_of;
use crate::analysis::{sampled_process, sampled_program};
use crate::recording::Recording;
use crate::stacks::folded::frame;

/// Writes one line per distinct stack, in the order of their text.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    let profile = &recording.profile;
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for samples in &profile.samples {
        let index = sampled_process(processes, samples);
        let mut parts = Vec::new();
        if let Some(test) = index.and_then(|i| test_of(processes, i)) {
            parts.push(frame(&test));
        }
        parts.push(frame(&sampled_program(processes, samples)));
        parts.extend(
            profile
                .stack(samples.stack)
                .iter()
                .map(|f| frame(&f.label())),
        );
        *lines.entry(parts.join(";")).or_default() += samples.count;
    }
    for (stack, count) in lines {
        writeln!(out, "{stack} {count}")?;
    }
    Ok(())
}
