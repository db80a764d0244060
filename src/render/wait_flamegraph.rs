//! `offcpu-flamegraph` and `wall-flamegraph` (`record --off-cpu`): where
//! the tree waited, and where its wall time went, as SVG flame graphs
//! drawn like `cpu-flamegraph`, in microseconds.
//!
//! The waits are the lines of [`offcpu_folded`](super::offcpu_folded),
//! each ending in its reason (`[pipe]`). The wall-clock graph sets the
//! time on a CPU beside them: the CPU profile's stacks, each sample
//! weighing its period, where the recording has one; else each thread's
//! time on a CPU from its context switches, as `[cpu]` under its program.
//! Both cover every thread of the tree, not only the main ones `wall`
//! splits.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::cpu_flamegraph::draw;
use super::{cpu_folded, off_cpu_settings, offcpu_folded, Options};
use crate::analysis::ran_stretches;
use crate::recording::Recording;
use crate::stacks::folded;
use crate::text::glance;

/// Writes the SVG of the waits.
pub fn render_offcpu(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let settings = off_cpu_settings(recording)?;
    let waits = offcpu_folded::lines(recording);
    let subtitle = format!(
        "{} waited, waits of {} or more with their stacks",
        glance(sum(&waits)),
        glance(settings.threshold_ns)
    );
    draw(recording, &micros(waits), "µs", subtitle, out)
}

/// Writes the SVG of the waits and the time on a CPU together.
pub fn render_wall(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    off_cpu_settings(recording)?;
    let waits = offcpu_folded::lines(recording);
    let (ran, from) = ran(recording);
    let subtitle = format!(
        "{} = {} on a CPU ({from}) + {} waited, all threads",
        glance(sum(&waits).saturating_add(sum(&ran))),
        glance(sum(&ran)),
        glance(sum(&waits)),
    );
    let mut lines = waits;
    for (stack, ns) in ran {
        folded::add(&mut lines, stack, ns);
    }
    draw(recording, &micros(lines), "µs", subtitle, out)
}

/// The time on a CPU as collapsed stacks in nanoseconds, and what it was
/// measured from.
fn ran(recording: &Recording) -> (BTreeMap<String, u64>, String) {
    let profile = recording.header.as_ref().and_then(|h| h.cpu_profile);
    if let Some(profile) = profile.filter(|_| recording.profile.total() > 0) {
        let period = 1_000_000_000 / u64::from(profile.hz.max(1));
        let mut lines = cpu_folded::lines(recording);
        lines
            .values_mut()
            .for_each(|n| *n = n.saturating_mul(period));
        return (lines, format!("sampled at {} Hz", profile.hz));
    }
    let mut lines = BTreeMap::new();
    for ran in ran_stretches(&recording.profile, &recording.processes) {
        let stack = folded::stack(ran.test.as_deref(), &ran.program, &[], Some("[cpu]"));
        folded::add(&mut lines, stack, ran.ns);
    }
    (lines, "from the context switches".to_owned())
}

fn sum(lines: &BTreeMap<String, u64>) -> u64 {
    lines.values().fold(0, |a, b| a.saturating_add(*b))
}

/// Whole microseconds: a flame graph counts whole units, so the lines
/// under one are left out (their time is in the subtitle's totals).
fn micros(lines: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    lines
        .into_iter()
        .map(|(stack, ns)| (stack, ns / 1_000))
        .filter(|(_, us)| *us > 0)
        .collect()
}
