//! Where the time went, by group: commands grouped by what they ran (the
//! program and its arguments with file names, numbers and repeats folded:
//! `gcc -c *.c`) and processes grouped by test, each with its total wall
//! time, CPU, count and peak RSS; and the processes that ran longest.

use std::collections::HashMap;

use serde::Serialize;

use super::testname::test_of;
use super::{programs, Peak};
use crate::processes::{command_group_of, Processes};

/// What the programs (or processes) of one group used together.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// How many programs (or processes) the group has.
    pub count: u64,
    /// Their wall time, added up.
    pub wall_ns: u64,
    /// Their CPU time (user and system), added up.
    pub cpu_ns: u64,
    /// The largest peak RSS, and whether it is only an upper bound.
    pub max_rss: Option<Peak>,
    /// How many of them failed.
    pub failed: u64,
}

impl Usage {
    fn add(&mut self, wall_ns: u64, cpu_ns: Option<u64>, peak: Option<Peak>, failed: bool) {
        self.count += 1;
        // Saturating: a damaged recording may hold any figure.
        self.wall_ns = self.wall_ns.saturating_add(wall_ns);
        self.cpu_ns = self.cpu_ns.saturating_add(cpu_ns.unwrap_or(0));
        if peak.map(Peak::bytes) > self.max_rss.map(Peak::bytes) {
            self.max_rss = peak;
        }
        self.failed += u64::from(failed);
    }
}

/// The groups of a run, each list by total CPU, most first (by wall time
/// where CPU ties, as where none was recorded; then by name).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct GroupUsage {
    /// Each program under its command group: a shell that ends as `sleep`
    /// counts once as the shell and once as `sleep`, each with its own
    /// share. A process that never exec'd is `<fork>` and the group it
    /// inherited ([`Processes::command_group`]).
    pub by_command: Vec<(String, Usage)>,
    /// Each process under its test, whole; empty when no test runner ran.
    pub by_test: Vec<(String, Usage)>,
}

/// What each command group and each test used.
pub fn group_usage(processes: &Processes) -> GroupUsage {
    let mut by_command: HashMap<String, Usage> = HashMap::new();
    let mut by_test: HashMap<String, Usage> = HashMap::new();
    let end = processes.end();
    for (index, process) in processes.all().enumerate() {
        let failed = process.outcome().failed();
        let ran = programs(&process, end);
        for program in &ran {
            let exec = process.execs.iter().nth(program.exec);
            let group =
                exec.map_or_else(|| processes.command_group(index), |e| command_group_of(&e));
            let last = program.exec + 1 == ran.len();
            by_command.entry(group).or_default().add(
                program.end - program.start,
                program.cpu_ns,
                program.peak_rss,
                failed && last,
            );
        }
        let resources = process.resources;
        let whole = |usage: &mut Usage| {
            let peak = resources.map(|r| match ran.last().and_then(|p| p.peak_rss) {
                Some(Peak::AtMost(_)) => Peak::AtMost(r.max_rss_bytes),
                _ => Peak::Exact(r.max_rss_bytes),
            });
            usage.add(
                process.duration(end),
                resources.map(|r| r.cpu_ns),
                peak,
                failed,
            )
        };
        if ran.is_empty() {
            whole(
                by_command
                    .entry(processes.command_group(index))
                    .or_default(),
            );
        }
        if let Some(test) = test_of(processes, index) {
            whole(by_test.entry(test).or_default());
        }
    }
    GroupUsage {
        by_command: by_cpu(by_command),
        by_test: by_cpu(by_test),
    }
}

fn by_cpu(groups: HashMap<String, Usage>) -> Vec<(String, Usage)> {
    let mut groups: Vec<(String, Usage)> = groups.into_iter().collect();
    groups.sort_by(|(a, x), (b, y)| (y.cpu_ns, y.wall_ns, a).cmp(&(x.cpu_ns, x.wall_ns, b)));
    groups
}

/// The indices of the `count` processes that ran longest, longest first
/// (the earlier started first among equals).
pub fn slowest(processes: &Processes, count: usize) -> Vec<usize> {
    let end = processes.end();
    let mut slowest: Vec<usize> = (0..processes.len()).collect();
    slowest.sort_by_key(|&i| std::cmp::Reverse(processes.get(i).duration(end)));
    slowest.truncate(count);
    slowest
}
