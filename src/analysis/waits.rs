//! Where the wall time went off the CPU (`record --off-cpu`): the stacks
//! the tree's threads waited in, with their reasons, for the flame graphs
//! of waiting; and each test's and each slow program's time split into
//! CPU and waits by reason, with the function it waited in and who woke
//! it, the parts adding up to the whole; and the same of each process,
//! for the critical path.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::cpu::program_of;
use super::testname::LineTests;
use super::wakers::{chain, ChainLink, LongWaits};
use crate::event::{OffCpu, Pid, WaitReason, Waker};
use crate::processes::Processes;
use crate::stacks::Profile;

/// The time one process waited in one stack for one reason, with what
/// the flame graphs fold it under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitedStack {
    /// Its test, as for [`CountedStack::test`](super::CountedStack::test).
    pub test: Option<String>,
    /// What it ran.
    pub program: String,
    /// The functions, the outermost caller first, the kernel's last; none
    /// for the waits shorter than the threshold (kept without stacks) and
    /// the time runnable.
    pub frames: Vec<String>,
    /// What it waited on.
    pub reason: WaitReason,
    /// Nanoseconds waited.
    pub ns: u64,
}

/// The process a line of `pid` is of: the last of that pid (the lines
/// carry no time; a pid reused within one recording is rare).
fn process_of(processes: &Processes, pid: Pid) -> Option<usize> {
    processes.find(pid, u64::MAX)
}

/// Every line of waits of the recording, in its order; alike stacks are
/// not merged, each view merges them by what it shows.
pub fn waited_stacks(profile: &Profile, processes: &Processes) -> Vec<WaitedStack> {
    let mut tests = LineTests::new(processes);
    profile
        .off_cpu
        .iter()
        .map(|line| {
            let process = process_of(processes, line.pid);
            let frames = line.stack.map(|s| profile.stack(s)).unwrap_or_default();
            WaitedStack {
                test: tests.of(line.test.as_deref(), process),
                program: program_of(processes, process, line.pid),
                frames: frames.iter().map(|f| f.label()).collect(),
                reason: line.reason,
                ns: line.total_ns,
            }
        })
        .collect()
}

/// The time one thread of the tree ran under one test, without its
/// stacks: the CPU of a wall-clock flame graph where the recording has
/// no CPU profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RanStretch {
    /// Its test, as for [`WaitedStack::test`].
    pub test: Option<String>,
    /// What it ran.
    pub program: String,
    /// Nanoseconds on a CPU.
    pub ns: u64,
}

/// Every line of time on a CPU of the recording, in its order.
pub fn ran_stretches(profile: &Profile, processes: &Processes) -> Vec<RanStretch> {
    let mut tests = LineTests::new(processes);
    profile
        .on_cpu
        .iter()
        .map(|line| {
            let process = process_of(processes, line.pid);
            RanStretch {
                test: tests.of(line.test.as_deref(), process),
                program: program_of(processes, process, line.pid),
                ns: line.ns,
            }
        })
        .collect()
}

/// One reason's share of a [`WallSplit`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitShare {
    /// What it waited on.
    pub reason: WaitReason,
    /// Nanoseconds.
    pub ns: u64,
    /// Waits.
    pub count: u64,
    /// The function of its own code it waited in most (the innermost
    /// frame outside the kernel and the C and threads libraries), where a
    /// long wait's stack says.
    pub function: Option<String>,
    /// Who woke it most, named: `sh 1234`, `java 12 thread 15`, `postgres 99 (outside the
    /// tree)`, `an interrupt`.
    pub waker: Option<String>,
    /// Where that waker is of the tree, what it waited on meanwhile, and
    /// so on: empty where it was running.
    pub chain: Vec<ChainLink>,
}

/// A test's, or a program's, time: its CPU and its waits, which add up
/// to its wall time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WallSplit {
    /// The test, or the program.
    pub name: String,
    /// Processes folded into the line (the program's runs; for a test,
    /// the one its time is the main thread of).
    pub processes: usize,
    /// CPU plus waits: the main threads' lifetimes.
    pub wall_ns: u64,
    /// Nanoseconds on a CPU.
    pub cpu_ns: u64,
    /// The waits, the longest first.
    pub waits: Vec<WaitShare>,
    /// Threads other than the main ones (their time is not in
    /// `wall_ns`: they ran alongside).
    pub other_threads: usize,
    /// Their CPU time.
    pub other_threads_cpu_ns: u64,
}

/// The wall time of the tests and the slowest programs, split.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Wall {
    /// Per test, the slowest first; empty when no runner named tests.
    pub by_test: Vec<WallSplit>,
    /// Per program (its runs folded), the slowest first.
    pub by_program: Vec<WallSplit>,
}

/// What one thread's lines add up to.
#[derive(Default)]
struct Parts<'p> {
    cpu_ns: u64,
    waits: Vec<&'p OffCpu>,
}

/// The time of the main thread of each process, by test, and each
/// process's other threads' CPU.
struct Threads<'p> {
    /// (process, test) → the main thread's parts.
    main: HashMap<(usize, Option<String>), Parts<'p>>,
    /// process → (threads, CPU ns) of its other threads.
    others: HashMap<usize, (HashSet<Pid>, u64)>,
}

fn threads<'p>(profile: &'p Profile, processes: &Processes) -> Threads<'p> {
    let mut tests = LineTests::new(processes);
    let mut main: HashMap<(usize, Option<String>), Parts<'p>> = HashMap::new();
    let mut others: HashMap<usize, (HashSet<Pid>, u64)> = HashMap::new();
    for ran in &profile.on_cpu {
        let Some(process) = process_of(processes, ran.pid) else {
            continue;
        };
        if ran.tid != ran.pid {
            let other = others.entry(process).or_default();
            other.0.insert(ran.tid);
            other.1 = other.1.saturating_add(ran.ns);
            continue;
        }
        let test = tests.of(ran.test.as_deref(), Some(process));
        let parts = main.entry((process, test)).or_default();
        parts.cpu_ns = parts.cpu_ns.saturating_add(ran.ns);
    }
    for line in profile.off_cpu.iter().filter(|l| l.tid == l.pid) {
        let Some(process) = process_of(processes, line.pid) else {
            continue;
        };
        let test = tests.of(line.test.as_deref(), Some(process));
        main.entry((process, test)).or_default().waits.push(line);
    }
    Threads { main, others }
}

/// Splits the wall time of each test (the main thread of its process
/// that spent the most under it: the runner's) and of each program.
pub fn wall(profile: &Profile, processes: &Processes) -> Wall {
    let threads = threads(profile, processes);
    let mut by_test: HashMap<String, (usize, Vec<&Parts>)> = HashMap::new();
    let mut by_program: HashMap<String, (Vec<usize>, Vec<&Parts>)> = HashMap::new();
    for ((process, test), parts) in &threads.main {
        if let Some(test) = test {
            let best = by_test
                .entry(test.clone())
                .or_insert((*process, Vec::new()));
            if best.1.first().is_none_or(|b| total(b) < total(parts)) {
                *best = (*process, vec![parts]);
            }
        }
        let program = by_program.entry(processes.name(*process)).or_default();
        if !program.0.contains(process) {
            program.0.push(*process);
        }
        program.1.push(parts);
    }
    let long_waits = LongWaits::new(&profile.long_waits);
    let from = From {
        profile,
        processes,
        long_waits: &long_waits,
    };
    let mut tests: Vec<WallSplit> = by_test
        .into_iter()
        .map(|(test, (process, parts))| split(test, &[process], &parts, &threads, from))
        .collect();
    let mut programs: Vec<WallSplit> = by_program
        .into_iter()
        .map(|(program, (list, parts))| split(program, &list, &parts, &threads, from))
        .collect();
    for list in [&mut tests, &mut programs] {
        list.sort_by(|a, b| (b.wall_ns, &a.name).cmp(&(a.wall_ns, &b.name)));
    }
    Wall {
        by_test: tests,
        by_program: programs,
    }
}

/// Splits the wall time of each process with off-CPU lines, all its
/// tests together, by its index in the table: named by its program, its
/// one process the only one folded in.
pub fn wall_by_process(profile: &Profile, processes: &Processes) -> HashMap<usize, WallSplit> {
    let threads = threads(profile, processes);
    let mut by_process: HashMap<usize, Vec<&Parts>> = HashMap::new();
    for ((process, _), parts) in &threads.main {
        by_process.entry(*process).or_default().push(parts);
    }
    let long_waits = LongWaits::new(&profile.long_waits);
    let from = From {
        profile,
        processes,
        long_waits: &long_waits,
    };
    by_process
        .into_iter()
        .map(|(process, parts)| {
            let name = processes.name(process);
            (process, split(name, &[process], &parts, &threads, from))
        })
        .collect()
}

/// What the lines are named from, and their chains of wakers followed
/// through.
#[derive(Clone, Copy)]
struct From<'r> {
    profile: &'r Profile,
    processes: &'r Processes,
    long_waits: &'r LongWaits<'r>,
}

fn total(parts: &Parts) -> u64 {
    let waited = parts.waits.iter().map(|w| w.total_ns);
    waited.fold(parts.cpu_ns, u64::saturating_add)
}

/// One line of the split: `parts` added up by reason, with the other
/// threads of `processes`.
fn split(
    name: String,
    processes: &[usize],
    parts: &[&Parts],
    threads: &Threads,
    from: From,
) -> WallSplit {
    let (other_threads, other_threads_cpu_ns) = processes
        .iter()
        .filter_map(|p| threads.others.get(p))
        .fold((0, 0), |(n, ns), (tids, cpu)| (n + tids.len(), ns + cpu));
    let cpu_ns = parts.iter().map(|p| p.cpu_ns).fold(0, u64::saturating_add);
    let mut by_reason: HashMap<WaitReason, Vec<&OffCpu>> = HashMap::new();
    for line in parts.iter().flat_map(|p| &p.waits) {
        by_reason.entry(line.reason).or_default().push(line);
    }
    let mut waits: Vec<WaitShare> = by_reason
        .into_iter()
        .map(|(reason, lines)| share(reason, &lines, from))
        .collect();
    waits.sort_by(|a, b| (b.ns, a.reason).cmp(&(a.ns, b.reason)));
    let waited = waits.iter().map(|w| w.ns).fold(0, u64::saturating_add);
    WallSplit {
        name,
        processes: processes.len(),
        wall_ns: cpu_ns.saturating_add(waited),
        cpu_ns,
        waits,
        other_threads,
        other_threads_cpu_ns,
    }
}

/// One reason's lines added up, named by the largest stack and waker.
fn share(reason: WaitReason, lines: &[&OffCpu], from: From) -> WaitShare {
    let ns = lines
        .iter()
        .map(|l| l.total_ns)
        .fold(0, u64::saturating_add);
    let count = lines.iter().map(|l| l.count).fold(0, u64::saturating_add);
    let mut by_function: HashMap<String, u64> = HashMap::new();
    let mut by_waker: HashMap<&Waker, u64> = HashMap::new();
    for line in lines {
        let frames = line
            .stack
            .map(|s| from.profile.stack(s))
            .unwrap_or_default();
        // Innermost first: the frames of the program's own code, past the
        // runtime it waits through where any are.
        let mut own = frames
            .iter()
            .rev()
            .filter(|f| !f.kernel && !system_library(&f.module))
            .peekable();
        let innermost = own.peek().copied();
        if let Some(frame) = own.find(|f| !python_runtime(&f.module)).or(innermost) {
            *by_function.entry(frame.label()).or_default() += line.total_ns;
        }
        if let Some(waker) = &line.waker {
            *by_waker.entry(waker).or_default() += line.total_ns;
        }
    }
    let waker = largest(by_waker);
    let chain = match waker {
        Some(Waker::Tree { pid, .. }) => {
            let threads: HashSet<Pid> = lines.iter().map(|l| l.tid).collect();
            let name = |pid, tid| tree_name(from.processes, pid, tid);
            chain(from.long_waits, &threads, *pid, &name)
        }
        _ => Vec::new(),
    };
    WaitShare {
        reason,
        ns,
        count,
        function: largest(by_function),
        waker: waker.map(|w| waker_name(from.processes, w)),
        chain,
    }
}

fn largest<K: Ord>(counts: HashMap<K, u64>) -> Option<K> {
    let best = counts
        .into_iter()
        .max_by(|a, b| (a.1, &b.0).cmp(&(b.1, &a.0)));
    best.map(|(name, _)| name)
}

/// The C library, the threads library and the loader: where every wait
/// of a native program ends, which says nothing of whose it is.
fn system_library(module: &str) -> bool {
    let file = module.rsplit('/').next().unwrap_or(module);
    [
        "libc.so",
        "libc-",
        "libpthread",
        "ld-linux",
        "ld-musl",
        "libc.musl",
    ]
    .iter()
    .any(|prefix| file.starts_with(prefix))
}

/// A CPython interpreter and its standard library, which a Python
/// program's waits go through as a native program's go through the C
/// library: `Condition.wait (threading.py:320)` under the caller's
/// `wait_for_it (app.py:13)`. A Python frame's module is its source file.
fn python_runtime(module: &str) -> bool {
    let file = module.rsplit('/').next().unwrap_or(module);
    let standard = module.contains("/lib/python3.") && !module.contains("-packages/");
    file.starts_with("python3.") && !file.ends_with(".py")
        || file.starts_with("libpython3.")
        || module.starts_with("<frozen ")
        || standard
}

/// Who woke a wait, as the views say it.
fn waker_name(processes: &Processes, waker: &Waker) -> String {
    match waker {
        Waker::Tree { pid, tid, .. } => tree_name(processes, *pid, *tid),
        Waker::Outside { pid, name } => format!("{name} {pid} (outside the tree)"),
        Waker::Interrupt => "an interrupt".to_owned(),
    }
}

/// A thread of the tree, named: `sh 1234`, `java 12 thread 15`.
fn tree_name(processes: &Processes, pid: Pid, tid: Pid) -> String {
    let process = process_of(processes, pid);
    let thread = if tid != pid {
        format!(" thread {tid}")
    } else {
        String::new()
    };
    format!("{} {pid}{thread}", program_of(processes, process, pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_python_runtime_is_the_interpreter_and_its_standard_library() {
        for module in [
            "/usr/bin/python3.11",
            "/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0",
            "/usr/lib/python3.11/threading.py",
            "<frozen importlib._bootstrap>",
        ] {
            assert!(python_runtime(module), "{module}");
        }
        for module in [
            "/src/app/tests/test_sync.py",
            "/usr/lib/python3/dist-packages/requests/api.py",
            "/venv/lib/python3.11/site-packages/psycopg/connection.py",
            "/usr/lib/x86_64-linux-gnu/libssl.so.3",
        ] {
            assert!(!python_runtime(module), "{module}");
        }
    }
}
