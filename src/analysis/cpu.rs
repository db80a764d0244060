//! Where the CPU went inside the processes (`record --cpu-profile`): the
//! hottest functions by the samples taken in them (self) and under them
//! (total), for the whole run, per command and per test; and the sampled
//! stacks themselves, each with its process, test and program, which the
//! flame graphs fold.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::testname::LineTests;
use crate::event::{CpuSamples, Pid};
use crate::processes::Processes;
use crate::stacks::Profile;

/// One function's share of the samples.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hot {
    /// The function as people read it (its file and offset where no symbol
    /// names it; `_[k]` marks the kernel's).
    pub function: String,
    /// The file its code is in.
    pub module: String,
    /// Samples taken in it.
    pub self_samples: u64,
    /// Samples taken in it or in what it called.
    pub total_samples: u64,
}

/// The samples of one group (a command, a test), and its hottest functions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HotGroup {
    /// The command's program, or the test's name.
    pub name: String,
    /// Samples of the group.
    pub samples: u64,
    /// Processes of the group that were sampled.
    pub processes: usize,
    /// Its functions, most self samples first.
    pub functions: Vec<Hot>,
}

/// The CPU profile, summed up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Hotspots {
    /// Samples in all.
    pub samples: u64,
    /// Processes sampled.
    pub processes: usize,
    /// Every function, most self samples first.
    pub functions: Vec<Hot>,
    /// Per program, most samples first.
    pub by_command: Vec<HotGroup>,
    /// Per test, most samples first; empty when no runner named tests.
    pub by_test: Vec<HotGroup>,
}

/// Adds up the profile of a recording; `processes` names each sampled
/// process's program and test.
pub fn hotspots(profile: &Profile, processes: &Processes) -> Hotspots {
    let mut all = Tally::default();
    let mut by_command: HashMap<String, Tally> = HashMap::new();
    let mut by_test: HashMap<String, Tally> = HashMap::new();
    let mut tests = LineTests::new(processes);
    for samples in &profile.samples {
        let frames = profile.stack(samples.stack);
        let index = sampled_process(processes, samples);
        let program = sampled_program(processes, samples);
        let stack: Vec<(String, &str)> = frames
            .iter()
            .map(|f| (f.label(), f.module.as_str()))
            .collect();
        all.add(samples.pid, &stack, samples.count);
        by_command
            .entry(program)
            .or_default()
            .add(samples.pid, &stack, samples.count);
        if let Some(test) = tests.of(samples.test.as_deref(), index) {
            by_test
                .entry(test)
                .or_default()
                .add(samples.pid, &stack, samples.count);
        }
    }
    Hotspots {
        samples: all.samples,
        processes: all.pids.len(),
        functions: all.functions(),
        by_command: groups(by_command),
        by_test: groups(by_test),
    }
}

/// One process's CPU samples, or its hits of one probe, in one stack,
/// with what the flame graphs fold them under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CountedStack {
    /// The probe hit there ([`ProbePoint::id`](crate::event::ProbePoint::id));
    /// `None` for CPU samples.
    pub probe: Option<u32>,
    /// The process, by its index in [`Processes`]; `None` where the
    /// recording has no process of its pid (see [`sampled_process`]).
    pub process: Option<usize>,
    /// Its test, where a runner names one: the one the process said ran
    /// in it then, else its own ([`test_of`](super::testname::test_of)).
    pub test: Option<String>,
    /// What it ran ([`sampled_program`]).
    pub program: String,
    /// The functions ([`Frame::label`](crate::event::Frame::label)), the
    /// outermost caller first (none for hits counted without stacks).
    pub frames: Vec<String>,
    /// Samples or hits there.
    pub count: u64,
}

/// Every line of samples of the profile, in the order the recording has
/// them; alike stacks are not merged, so that each view merges them by
/// what it shows (the text of a collapsed stack, a process, a test).
pub fn sampled_stacks(profile: &Profile, processes: &Processes) -> Vec<CountedStack> {
    let mut tests = LineTests::new(processes);
    profile
        .samples
        .iter()
        .map(|samples| {
            let process = sampled_process(processes, samples);
            let test = tests.of(samples.test.as_deref(), process);
            CountedStack {
                probe: None,
                process,
                test,
                program: program_of(processes, process, samples.pid),
                frames: profile
                    .stack(samples.stack)
                    .iter()
                    .map(|f| f.label())
                    .collect(),
                count: samples.count,
            }
        })
        .collect()
}

/// The process `samples` were taken of. The root is sampled from before
/// its first event, its exec (running proctrace's code until then): it
/// is the first process of that pid to start after them.
pub fn sampled_process(processes: &Processes, samples: &CpuSamples) -> Option<usize> {
    process_between(processes, samples.pid, samples.first, samples.last)
}

/// The process of `pid` that something seen from `first` to `last` (a
/// line of samples, of probe hits) was of; see [`sampled_process`].
pub(crate) fn process_between(
    processes: &Processes,
    pid: Pid,
    first: u64,
    last: u64,
) -> Option<usize> {
    processes
        .find(pid, first)
        .or_else(|| processes.find(pid, last))
        .or_else(|| {
            let later = processes
                .all()
                .enumerate()
                .filter(|(_, p)| p.pid == pid && p.start() >= last);
            later.min_by_key(|(_, p)| p.start()).map(|(i, _)| i)
        })
}

/// What the process `samples` were taken of ran: its
/// [`name`](Processes::name), or its pid where the recording has no
/// process of that pid.
pub fn sampled_program(processes: &Processes, samples: &CpuSamples) -> String {
    let index = sampled_process(processes, samples);
    program_of(processes, index, samples.pid)
}

pub(crate) fn program_of(processes: &Processes, index: Option<usize>, pid: Pid) -> String {
    match index {
        Some(index) => processes.name(index),
        None => format!("<pid {pid}>"),
    }
}

#[derive(Default)]
struct Tally {
    samples: u64,
    pids: HashSet<i32>,
    /// (function, module) -> (self, total).
    functions: HashMap<(String, String), (u64, u64)>,
}

impl Tally {
    /// Counts `count` samples of stack `stack` (root first).
    fn add(&mut self, pid: i32, stack: &[(String, &str)], count: u64) {
        // Saturating: a hostile recording's counts may add up past u64.
        self.samples = self.samples.saturating_add(count);
        self.pids.insert(pid);
        let mut seen = HashSet::new();
        for (function, module) in stack {
            // Recursion counts once towards the total.
            if seen.insert((function, module)) {
                let key = (function.clone(), (*module).to_owned());
                let total = &mut self.functions.entry(key).or_default().1;
                *total = total.saturating_add(count);
            }
        }
        if let Some((function, module)) = stack.last() {
            let key = (function.clone(), (*module).to_owned());
            let own = &mut self.functions.entry(key).or_default().0;
            *own = own.saturating_add(count);
        }
    }

    fn functions(&self) -> Vec<Hot> {
        let mut hot: Vec<Hot> = self
            .functions
            .iter()
            .map(|((function, module), &(self_samples, total_samples))| Hot {
                function: function.clone(),
                module: module.clone(),
                self_samples,
                total_samples,
            })
            .collect();
        hot.sort_by(|a, b| {
            (b.self_samples, b.total_samples, &a.function).cmp(&(
                a.self_samples,
                a.total_samples,
                &b.function,
            ))
        });
        hot
    }
}

fn groups(tallies: HashMap<String, Tally>) -> Vec<HotGroup> {
    let mut groups: Vec<HotGroup> = tallies
        .into_iter()
        .map(|(name, tally)| HotGroup {
            functions: tally.functions(),
            samples: tally.samples,
            processes: tally.pids.len(),
            name,
        })
        .collect();
    groups.sort_by(|a, b| (b.samples, &a.name).cmp(&(a.samples, &b.name)));
    groups
}

/// One stack a process ran in, and how many of its samples were there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HotStack {
    /// Its functions, the one running first, then its callers.
    pub frames: Vec<String>,
    /// Samples taken in it.
    pub samples: u64,
}

/// The stacks `pid` was sampled in during the `window` nanoseconds up to
/// `until` (a snapshot's time), most samples first: what a process that
/// runs rather than waits is busy with. The profile counts per stack over
/// the process's life, so a stack counts whole when it was seen in the
/// window at all.
pub fn hottest_stacks(profile: &Profile, pid: i32, until: u64, window: u64) -> Vec<HotStack> {
    let since = until.saturating_sub(window);
    let mut stacks: Vec<HotStack> = profile
        .of(pid)
        .filter(|s| s.last >= since && s.first <= until)
        .map(|s| HotStack {
            frames: profile
                .stack(s.stack)
                .iter()
                .rev()
                .map(|f| f.label())
                .collect(),
            samples: s.count,
        })
        .collect();
    stacks.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.frames.cmp(&b.frames))
    });
    stacks
}
