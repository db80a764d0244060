//! Which tests took longer in B, and in what, when both runs were
//! recorded with `record --off-cpu`: `test_x: +1.2s, of which +1.1s
//! socket`.
//!
//! A test's wall time is its CPU and its waits by reason, adding up
//! ([`wall`]), so the part that grew most is where it got slower: the
//! CPU, or one reason of waiting. Tests pair up by their names; a test
//! of one run only has nothing to compare.

use std::collections::HashMap;

use serde::Serialize;

use super::Slower;
use crate::analysis::{wall, WallSplit};
use crate::event::WaitReason;
use crate::recording::Recording;

/// The tests that took longer in B, by what grew.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WaitShift {
    /// The tests of both runs whose wall time grew beyond the thresholds,
    /// the most first.
    pub slower: Vec<SlowerTest>,
    /// The tests of both runs, compared.
    pub compared: usize,
}

/// One test that took longer in B.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlowerTest {
    /// The test, named as its runner prints it.
    pub test: String,
    /// Its wall time in A (nanoseconds): CPU plus waits.
    pub a_wall_ns: u64,
    /// Its wall time in B.
    pub b_wall_ns: u64,
    /// The part of it that grew most.
    pub part: Part,
    /// By how much, in nanoseconds.
    pub grew_ns: u64,
    /// For a wait, the function it waited in most in B, as the `wall`
    /// view names it.
    pub function: Option<String>,
    /// For a wait, who woke it most in B.
    pub waker: Option<String>,
}

/// A part of a test's wall time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// On a CPU.
    Cpu,
    /// Waiting, for this reason.
    Wait(WaitReason),
}

impl Part {
    /// `CPU`, or the reason's name: `socket`.
    pub fn name(self) -> &'static str {
        match self {
            Part::Cpu => "CPU",
            Part::Wait(reason) => reason.name(),
        }
    }
}

impl WaitShift {
    /// Compares the tests' wall times of two runs, a test slower when
    /// every threshold holds of its wall times.
    pub fn compare(a: &Recording, b: &Recording, slower_when: &[Slower]) -> WaitShift {
        let before = wall(&a.profile, &a.processes).by_test;
        let before: HashMap<&str, &WallSplit> =
            before.iter().map(|t| (t.name.as_str(), t)).collect();
        let mut shift = WaitShift::default();
        for after in wall(&b.profile, &b.processes).by_test {
            let Some(before) = before.get(after.name.as_str()) else {
                continue;
            };
            shift.compared += 1;
            let (from, to) = (before.wall_ns, after.wall_ns);
            if to > from && slower_when.iter().all(|s| s.holds(from, to)) {
                shift.slower.push(grown(before, after));
            }
        }
        shift.slower.sort_by(|x, y| {
            let grew = |t: &SlowerTest| t.b_wall_ns - t.a_wall_ns;
            (grew(y), &x.test).cmp(&(grew(x), &y.test))
        });
        shift
    }
}

/// What of a test grew most from `before` to `after`: the CPU first, then
/// the reasons in their order, where two grew alike.
fn grown(before: &WallSplit, after: WallSplit) -> SlowerTest {
    let waited = |split: &WallSplit, reason| {
        let share = split.waits.iter().find(|w| w.reason == reason);
        i128::from(share.map_or(0, |w| w.ns))
    };
    let cpu = (
        Part::Cpu,
        i128::from(after.cpu_ns) - i128::from(before.cpu_ns),
    );
    let waits = WaitReason::ALL
        .into_iter()
        .map(|r| (Part::Wait(r), waited(&after, r) - waited(before, r)));
    let (part, grew) = waits.fold(cpu, |most, part| if part.1 > most.1 { part } else { most });
    let share = after
        .waits
        .into_iter()
        .find(|w| Part::Wait(w.reason) == part);
    SlowerTest {
        test: after.name,
        a_wall_ns: before.wall_ns,
        b_wall_ns: after.wall_ns,
        part,
        grew_ns: u64::try_from(grew.max(0)).unwrap_or(u64::MAX),
        function: share.as_ref().and_then(|s| s.function.clone()),
        waker: share.and_then(|s| s.waker),
    }
}
