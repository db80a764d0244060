//! Two recordings of the same command, compared: which processes ran in
//! one run only, which ended differently, which grew slower, which
//! lingered or hung in one run only, and the tests they belong to.
//!
//! Pids differ between runs, so processes are aligned by what ran: the
//! chain of command lines from the root down to the process. Processes
//! with the same chain pair up in the order they started: the third
//! `sleep 1` under `sh test.sh` in one run is the third in the other.
//! What is left pairs up the same way by the chain of command groups
//! ([`Processes::command_group`]), where what differs from run to run
//! (numbers, file names) is folded, each within its test.
//!
//! When both runs were recorded with `record --cpu-profile`, the diff also
//! says which functions' shares of the CPU samples moved ([`CpuShift`]);
//! with `record --probe`, which probes were hit more or less often, in
//! all and per test ([`HitShift`]); with `record --off-cpu`, which tests
//! took longer and in which of their waits ([`WaitShift`]).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::Serialize;

mod cpu;
mod hits;
mod waits;

pub use cpu::{CpuShift, Moved};
pub use hits::{HitChange, HitShift};
pub use waits::{Part, SlowerTest, WaitShift};

use super::testname::test_of;
use crate::analysis::{left_behind, outlived};
use crate::event::Pid;
use crate::processes::{Outcome, Processes};
use crate::recording::Recording;
use crate::text::seconds;
use crate::text::shell_join;

/// When a process counts as slower: every threshold given must hold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Slower {
    /// `2x`: at least this many times as long.
    Times(f64),
    /// `+500ms`: at least this much longer.
    Longer {
        /// Nanoseconds.
        ns: u64,
    },
}

impl Slower {
    /// The thresholds used when none is given: twice as long, and at
    /// least 100 ms longer, so that a 1 ms step taking 3 ms is not news.
    pub const DEFAULT: [Slower; 2] = [Slower::Times(2.0), Slower::Longer { ns: 100_000_000 }];

    fn holds(self, before: u64, after: u64) -> bool {
        match self {
            Slower::Times(times) => after as f64 >= before as f64 * times,
            Slower::Longer { ns } => after >= before.saturating_add(ns),
        }
    }
}

/// Why a `--slower` threshold could not be read.
#[derive(Debug, thiserror::Error)]
#[error(
    "{0:?} is not a threshold: give a factor above 1 like 2x or 1.5x, or a positive time \
     like +500ms or +2s"
)]
pub struct BadThreshold(String);

impl FromStr for Slower {
    type Err = BadThreshold;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadThreshold(text.to_owned());
        if let Some(times) = text.strip_suffix('x') {
            let times: f64 = times.parse().map_err(|_| bad())?;
            // At most 1x would call a process that got faster slower.
            return (times.is_finite() && times > 1.0)
                .then_some(Slower::Times(times))
                .ok_or_else(bad);
        }
        let added = text.strip_prefix('+').ok_or_else(bad)?;
        let added = humantime::parse_duration(added).map_err(|_| bad())?;
        let ns = u64::try_from(added.as_nanos()).map_err(|_| bad())?;
        (ns > 0).then_some(Slower::Longer { ns }).ok_or_else(bad)
    }
}

impl fmt::Display for Slower {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Slower::Times(times) => write!(f, "{times}x"),
            Slower::Longer { ns } => write!(f, "+{}", seconds(ns)),
        }
    }
}

/// What differs between run A and run B.
#[derive(Debug, Serialize)]
pub struct Diff {
    /// Run A as a whole.
    pub a: Run,
    /// Run B as a whole.
    pub b: Run,
    /// What made a process slower.
    pub slower_when: Vec<Slower>,
    /// Processes in both runs that ended differently.
    pub status_changed: Vec<Pair>,
    /// Processes in A with no counterpart in B: the topmost of each
    /// missing subtree, with how many descendants went with it.
    pub only_in_a: Vec<Lone>,
    /// Processes in B with no counterpart in A, likewise.
    pub only_in_b: Vec<Lone>,
    /// Processes in both runs that took longer in B beyond the thresholds.
    pub slower: Vec<Pair>,
    /// Processes that lingered or were still running at the end in A,
    /// and not in B.
    pub hung_only_in_a: Vec<Lone>,
    /// The same the other way round.
    pub hung_only_in_b: Vec<Lone>,
    /// The functions whose share of the CPU samples moved, when both runs
    /// have a CPU profile. Sampling is never exact, so shares always move
    /// a little: they are no difference for [`Diff::differs`].
    pub cpu: Option<CpuShift>,
    /// The probes' hits compared, when both runs were recorded with
    /// probes. A count that changed is no difference for
    /// [`Diff::differs`] either: how often a function runs is the
    /// program's business.
    pub hits: Option<HitShift>,
    /// The tests that took longer in B and what of them grew most, when
    /// both runs were recorded with `record --off-cpu`. A test slower
    /// beyond the thresholds is a difference, as a process is.
    pub waits: Option<WaitShift>,
}

/// One run as a whole.
#[derive(Debug, Serialize)]
pub struct Run {
    /// The recorded command, as a shell line.
    pub command: Option<String>,
    /// How the root ended.
    pub status: Option<String>,
    /// Nanoseconds from the first process's start to the end.
    pub wall_ns: u64,
    /// Processes recorded.
    pub processes: usize,
    /// Events the kernel could not deliver; `None` without a trailer.
    pub lost: Option<u64>,
    /// The recording is cut short ([`Recording::is_cut`]): what came after
    /// the cut is missing, and its processes cut off before an exit are
    /// compared by no status or time.
    pub cut: bool,
    /// CPU samples taken (`record --cpu-profile`); `None` for a run
    /// recorded without a CPU profile.
    pub cpu_samples: Option<u64>,
    /// Its waits were followed (`record --off-cpu`).
    pub off_cpu: bool,
}

/// A process of one run.
#[derive(Debug, Serialize)]
pub struct Side {
    /// Its pid in that run.
    pub pid: Pid,
    /// What it ran, in full.
    pub command: String,
    /// How it ended.
    pub status: String,
    /// Nanoseconds from its start to its end (or to the end of the run).
    pub duration_ns: u64,
    /// The test it belongs to, named as its runner prints it.
    pub test: Option<String>,
}

/// A process found in both runs.
#[derive(Debug, Serialize)]
pub struct Pair {
    /// What aligned them: the command groups from the root down to it.
    pub path: Vec<String>,
    /// It in run A.
    pub a: Side,
    /// It in run B.
    pub b: Side,
}

/// A process of one run only (or that hung in one run only).
#[derive(Debug, Serialize)]
pub struct Lone {
    /// The command groups from the root down to it.
    pub path: Vec<String>,
    /// The process.
    pub process: Side,
    /// Its descendants that are in this run only too.
    pub descendants: usize,
    /// What the first five of them ran, in the order they started,
    /// with `(outlived its parent)` where one did.
    pub named: Vec<String>,
    /// It outlived its parent in this run.
    pub outlived: bool,
}

/// Descendants of a process of one run only that the text names.
const NAMED: usize = 5;

impl Diff {
    /// Compares two recordings read keeping their processes.
    pub fn compare(a: &Recording, b: &Recording, slower_when: &[Slower]) -> Diff {
        let (a_processes, b_processes) = (&a.processes, &b.processes);
        let line = |p: &Processes, i| p.describe(i);
        // Within a test: a `sleep N` of one test is not another test's.
        let group = |p: &Processes, i| {
            let test = test_of(p, i).unwrap_or_default();
            format!("{}\0{test}", p.command_group(i))
        };
        let exact = pair_up(&chains(a_processes, line), &chains(b_processes, line), None);
        let (a_to_b, b_to_a) = pair_up(
            &chains(a_processes, group),
            &chains(b_processes, group),
            Some(exact),
        );
        let one = One::new(a_processes);
        let other = One::new(b_processes);
        let mut diff = Diff {
            a: run(a),
            b: run(b),
            slower_when: slower_when.to_vec(),
            status_changed: Vec::new(),
            only_in_a: one.lone(&a_to_b),
            only_in_b: other.lone(&b_to_a),
            slower: Vec::new(),
            hung_only_in_a: one.hung_only(&a_to_b, &other),
            hung_only_in_b: other.hung_only(&b_to_a, &one),
            cpu: (profiled(a) && profiled(b)).then(|| CpuShift::compare(&a.profile, &b.profile)),
            hits: (probed(a) && probed(b)).then(|| HitShift::compare(a, b)),
            waits: (a.off_cpu() && b.off_cpu()).then(|| WaitShift::compare(a, b, slower_when)),
        };
        for (ia, ib) in a_to_b.iter().enumerate() {
            let Some(ib) = *ib else { continue };
            let (pa, pb) = (a_processes.get(ia), b_processes.get(ib));
            let (oa, ob) = (pa.outcome(), pb.outcome());
            let ended = oa.ended() && ob.ended();
            let pair = || Pair {
                path: one.path(ia),
                a: one.side(ia),
                b: other.side(ib),
            };
            if ended && oa != ob {
                diff.status_changed.push(pair());
            }
            let (da, db) = (
                pa.duration(a_processes.end()),
                pb.duration(b_processes.end()),
            );
            if ended && slower_when.iter().all(|s| s.holds(da, db)) {
                diff.slower.push(pair());
            }
        }
        diff
    }

    /// Whether anything differs beyond the thresholds.
    pub fn differs(&self) -> bool {
        !(self.status_changed.is_empty()
            && self.only_in_a.is_empty()
            && self.only_in_b.is_empty()
            && self.slower.is_empty()
            && self.hung_only_in_a.is_empty()
            && self.hung_only_in_b.is_empty()
            && self.waits.as_ref().is_none_or(|w| w.slower.is_empty()))
    }
}

/// The chain of each process, by index: a hash of its parent's chain and
/// its own name by `name`. Hashes, not the names themselves: two runs of
/// a million events hold their process tables and no more.
fn chains(processes: &Processes, name: fn(&Processes, usize) -> String) -> Vec<u64> {
    const NO_PARENT: u64 = 0;
    let mut keys = vec![NO_PARENT; processes.len()];
    for (index, _) in processes.depth_first() {
        let parent = processes.get(index).parent.map_or(NO_PARENT, |p| keys[p]);
        // SipHash with fixed keys: the same in both runs.
        let mut hasher = std::hash::DefaultHasher::new();
        (parent, name(processes, index)).hash(&mut hasher);
        keys[index] = hasher.finish();
    }
    keys
}

/// Each side's counterpart on the other, by index.
type Pairing = (Vec<Option<usize>>, Vec<Option<usize>>);

/// Pairs the processes of two runs with the same chain, in the order they
/// started, among those `paired` left without a counterpart: both sides
/// sorted by chain, then merged.
fn pair_up(a_keys: &[u64], b_keys: &[u64], paired: Option<Pairing>) -> Pairing {
    let (mut a_to_b, mut b_to_a) =
        paired.unwrap_or_else(|| (vec![None; a_keys.len()], vec![None; b_keys.len()]));
    let waiting = |keys: &[u64], counterpart: &[Option<usize>]| {
        let mut list: Vec<(u64, usize)> = (0..keys.len())
            .filter(|&i| counterpart[i].is_none())
            .map(|i| (keys[i], i))
            .collect();
        list.sort_unstable();
        list
    };
    let (a, b) = (waiting(a_keys, &a_to_b), waiting(b_keys, &b_to_a));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => {
                let ((_, ia), (_, ib)) = (a[i], b[j]);
                a_to_b[ia] = Some(ib);
                b_to_a[ib] = Some(ia);
                (i, j) = (i + 1, j + 1);
            }
        }
    }
    (a_to_b, b_to_a)
}

/// One run's processes.
struct One<'a> {
    processes: &'a Processes,
    /// By process: whether it was left behind ([`left_behind`]).
    left: Vec<bool>,
}

impl<'a> One<'a> {
    fn new(processes: &'a Processes) -> Self {
        let mut left = vec![false; processes.len()];
        for index in left_behind(processes, &outlived(processes)) {
            left[index] = true;
        }
        One { processes, left }
    }
}

impl One<'_> {
    fn side(&self, index: usize) -> Side {
        let process = self.processes.get(index);
        Side {
            pid: process.pid,
            command: self.processes.describe(index),
            status: process.outcome().to_string(),
            duration_ns: process.duration(self.processes.end()),
            test: test_of(self.processes, index),
        }
    }

    /// The command groups from the root down to `index`.
    fn path(&self, index: usize) -> Vec<String> {
        let mut path = self.processes.ancestors(index);
        path.push(index);
        path.into_iter()
            .map(|i| self.processes.command_group(i))
            .collect()
    }

    fn lone_entry(&self, index: usize, descendants: &[usize]) -> Lone {
        let named = descendants
            .iter()
            .take(NAMED)
            .map(|&d| {
                let mark = if self.left[d] {
                    " (outlived its parent)"
                } else {
                    ""
                };
                format!("{}{mark}", self.processes.describe(d))
            })
            .collect();
        Lone {
            path: self.path(index),
            process: self.side(index),
            descendants: descendants.len(),
            named,
            outlived: self.left[index],
        }
    }

    /// The processes without a counterpart whose parent has one (or that
    /// have no parent), each with its unpaired descendants.
    fn lone(&self, counterpart: &[Option<usize>]) -> Vec<Lone> {
        let unpaired = |index: usize| counterpart[index].is_none();
        let mut descendants: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut tops = Vec::new();
        for index in (0..self.processes.len()).filter(|&i| unpaired(i)) {
            let mut top = index;
            while let Some(parent) = self.processes.get(top).parent.filter(|&p| unpaired(p)) {
                top = parent;
            }
            if top == index {
                tops.push(index);
            } else {
                descendants.entry(top).or_default().push(index);
            }
        }
        tops.into_iter()
            .map(|index| self.lone_entry(index, descendants.get(&index).map_or(&[], Vec::as_slice)))
            .collect()
    }

    /// The processes of both runs that were left behind or still running
    /// here only: those of this run only are under "Only in" already.
    fn hung_only(&self, counterpart: &[Option<usize>], other: &One) -> Vec<Lone> {
        (0..self.processes.len())
            .filter(|&index| self.hung(index))
            .filter(|&index| counterpart[index].is_some_and(|c| !other.hung(c)))
            .map(|index| self.lone_entry(index, &[]))
            .collect()
    }

    /// Whether a process outlived its parent (or `record --linger` found
    /// it lingering) or was still running when the recording ended.
    fn hung(&self, index: usize) -> bool {
        self.left[index] || self.processes.get(index).outcome() == Outcome::Running
    }
}

fn run(recording: &Recording) -> Run {
    let processes = &recording.processes;
    let header = recording.header.as_ref();
    let root = header.and_then(|h| processes.all().find(|p| p.pid == h.root_pid));
    Run {
        command: header.map(|h| shell_join(&h.command)),
        status: root.map(|p| p.outcome().to_string()),
        wall_ns: processes.wall_time(),
        processes: processes.len(),
        lost: recording.trailer.as_ref().map(|t| t.lost),
        cut: recording.is_cut(),
        cpu_samples: profiled(recording).then(|| recording.profile.total()),
        off_cpu: recording.off_cpu(),
    }
}

/// Whether the run was recorded with `record --probe`.
fn probed(recording: &Recording) -> bool {
    recording
        .header
        .as_ref()
        .is_some_and(|h| !h.probes.is_empty())
}

/// Whether the run was recorded with `record --cpu-profile`.
fn profiled(recording: &Recording) -> bool {
    recording
        .header
        .as_ref()
        .is_some_and(|h| h.cpu_profile.is_some())
}

#[cfg(test)]
mod tests {
    use super::{pair_up, Slower};

    #[test]
    fn thresholds_read_as_factors_or_added_times() {
        assert_eq!("2x".parse::<Slower>().unwrap(), Slower::Times(2.0));
        assert_eq!("1.5x".parse::<Slower>().unwrap(), Slower::Times(1.5));
        assert_eq!(
            "+500ms".parse::<Slower>().unwrap(),
            Slower::Longer { ns: 500_000_000 }
        );
        for bad in [
            "2", "x", "0x", "-1x", "0.5x", "1x", "infx", "500ms", "+", "+soon", "+0s",
        ] {
            assert!(bad.parse::<Slower>().is_err(), "{bad}");
        }
        assert!(Slower::Times(2.0).holds(100, 200) && !Slower::Times(2.0).holds(100, 199));
        assert!(Slower::Longer { ns: 5 }.holds(10, 15) && !Slower::Longer { ns: 5 }.holds(10, 14));
    }

    #[test]
    fn the_same_chain_pairs_in_order_and_earlier_pairs_stand() {
        // A: x x y, B: y x; an earlier pass paired A's y already.
        let earlier = (vec![None, None, Some(0)], vec![Some(2), None]);
        let (a_to_b, b_to_a) = pair_up(&[1, 1, 2], &[2, 1], Some(earlier));
        assert_eq!(a_to_b, [Some(1), None, Some(0)]);
        assert_eq!(b_to_a, [Some(2), Some(0)]);
    }
}
