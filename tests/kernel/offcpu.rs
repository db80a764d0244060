//! Issue #47, where the wall time went off the CPU (`record --off-cpu`):
//! real programs whose waits are known in advance (tests/workloads/
//! waits.c: a sleep in a known function, a parent waiting for a child
//! that computes, a pipe written after a delay, a mutex another thread
//! holds, an fsync, more computing threads than CPUs), each attributed to its reason, function and waker, its length
//! within 10% of what the program itself measured around the call, and
//! the waiting thread's CPU and waits adding up to within 5% of its
//! process's lifetime (fork to exit, as the kernel timed them). No
//! assertion is on the machine's time: only on ratios of two measures of
//! the same stretch.

use std::collections::BTreeMap;

use crate::common::*;
use proctrace::event::{OffCpu, OnCpu, Pid, Record, WaitReason, Waker};

/// Each wait's length: long against the machine's scheduling noise (a
/// few ms when both cores are busy), short for the suite.
const MS: &str = "400";

/// What waits.c printed of its wait: (its own measure in ms, the tid
/// that waited).
struct Said {
    ms: f64,
    tid: Pid,
}

/// Records `waits KIND MS` under `sh`, which makes it a child with a fork
/// and an exit of its own, with what it printed of its `NAME MS TID`.
fn recorded(kind: &str) -> (Run, Said) {
    let (run, report) = recorded_with(&[kind]);
    let line = report
        .lines()
        .find(|l| l.starts_with(kind))
        .expect("its report");
    let fields: Vec<&str> = line.split(' ').collect();
    let said = Said {
        ms: fields[1].parse().unwrap(),
        tid: fields[2].parse().unwrap(),
    };
    (run, said)
}

/// Records `waits ARGS… MS` under `sh`, with the report it printed.
fn recorded_with(args: &[&str]) -> (Run, String) {
    let waits = workload("waits");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let script = format!(
        "\"$0\" {} {MS} > '{}'; exit 0",
        args.join(" "),
        report.display()
    );
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--off-cpu"]);
    let run = record_in(
        dir,
        &opts,
        &["/bin/sh", "-c", &script, waits.to_str().unwrap()],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let text = std::fs::read_to_string(run.dir.path().join("report")).unwrap();
    (run, text)
}

fn off_cpu(run: &Run) -> Vec<&OffCpu> {
    let lines = run.profile_lines().iter();
    lines
        .filter_map(|r| match r {
            Record::OffCpu(w) => Some(w),
            _ => None,
        })
        .collect()
}

fn on_cpu(run: &Run) -> Vec<&OnCpu> {
    let lines = run.profile_lines().iter();
    lines
        .filter_map(|r| match r {
            Record::OnCpu(w) => Some(w),
            _ => None,
        })
        .collect()
}

/// The function names of stack `id`, the outermost first.
fn functions(run: &Run, id: u32) -> Vec<String> {
    let mut frames = BTreeMap::new();
    let mut stack = None;
    for line in run.profile_lines() {
        match line {
            Record::Frame(f) => {
                frames.insert(f.id, f.function.clone().unwrap_or_default());
            }
            Record::Stack(s) if s.id == id => stack = Some(s.frames.clone()),
            _ => {}
        }
    }
    let stack = stack.unwrap_or_else(|| panic!("no stack {id}"));
    stack.iter().map(|f| frames[f].clone()).collect()
}

/// The longest wait of `tid` for `reason`, the one the program made,
/// checked against what the program measured: within 10%, in `function`,
/// with a stack. (A loaded machine adds short ones of the same reason: a
/// mutex handed over contends again for a millisecond.)
fn the_wait<'r>(run: &'r Run, said: &Said, reason: WaitReason, function: &str) -> &'r OffCpu {
    let lines = off_cpu(run);
    let long = lines
        .iter()
        .filter(|w| w.tid == said.tid && w.reason == reason && w.stack.is_some());
    let wait = *long
        .max_by_key(|w| w.max_ns)
        .unwrap_or_else(|| panic!("no long {reason:?} wait: {lines:#?}"));
    assert_eq!(wait.count, 1, "{wait:?}");
    let ms = wait.total_ns as f64 / 1e6;
    assert!(
        (ms - said.ms).abs() <= said.ms * 0.10,
        "{reason:?}: recorded {ms:.1} ms, the program measured {:.1} ms",
        said.ms
    );
    let names = functions(run, wait.stack.unwrap());
    assert!(
        names.iter().any(|f| f == function),
        "not in {function}: {names:?}"
    );
    wait
}

/// The waiting thread's process: its CPU and waits (its main thread's)
/// add up to within 5% of its lifetime, fork to exit.
fn adds_up(run: &Run, pid: Pid) {
    let fork = run
        .forks()
        .into_iter()
        .find(|f| f.child_pid == pid)
        .expect("its fork");
    let lifetime = run.exit(pid).timestamp - fork.timestamp;
    let cpu: u64 = on_cpu(run)
        .iter()
        .filter(|r| r.tid == pid)
        .map(|r| r.ns)
        .sum();
    let waited: u64 = off_cpu(run)
        .iter()
        .filter(|w| w.tid == pid)
        .map(|w| w.total_ns)
        .sum();
    let parts = cpu + waited;
    let off = parts.abs_diff(lifetime) as f64 / lifetime as f64;
    assert!(
        off <= 0.05,
        "CPU {cpu} + waits {waited} = {parts} ns against a lifetime of {lifetime} ns"
    );
}

#[test]
fn offcpu_sleep_is_in_its_function_woken_by_the_timer() {
    require_root();
    let (run, said) = recorded("sleep");
    let wait = the_wait(&run, &said, WaitReason::Sleep, "nap_here");
    assert_eq!(wait.call.as_deref(), Some("clock_nanosleep"));
    assert_eq!(wait.waker, Some(Waker::Interrupt));
    adds_up(&run, said.tid);
    let folded = run.dir.path().join("offcpu.folded");
    render(&run.dir.path().join("rec.ndjson"), "offcpu-folded", &folded);
    let text = std::fs::read_to_string(&folded).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains(";nap_here;"))
        .expect(&text);
    let (stack, us) = line.rsplit_once(' ').unwrap();
    assert!(
        stack.starts_with("waits;") && stack.ends_with(";[sleep]"),
        "{line}"
    );
    assert_eq!(us.parse::<u64>().unwrap(), wait.total_ns / 1000, "{line}");
}

#[test]
fn offcpu_parent_waits_for_the_child_that_computes() {
    require_root();
    let (run, said) = recorded("child");
    let wait = the_wait(&run, &said, WaitReason::Child, "wait_child");
    let child = run.children(said.tid);
    assert_eq!(child.len(), 1, "{}", run.text);
    let Some(Waker::Tree { pid, .. }) = wait.waker else {
        panic!("not woken by the tree: {wait:?}")
    };
    assert_eq!(pid, child[0]);
    // The child computed for MS of its CPU time, which its switches saw.
    let ran: u64 = on_cpu(&run)
        .iter()
        .filter(|r| r.pid == pid)
        .map(|r| r.ns)
        .sum();
    let ms: f64 = MS.parse().unwrap();
    let ran_ms = ran as f64 / 1e6;
    assert!(
        (ran_ms - ms).abs() <= ms * 0.10,
        "the child ran {ran_ms:.1} ms"
    );
    adds_up(&run, said.tid);
    adds_up(&run, pid);
}

#[test]
fn offcpu_pipe_reader_is_woken_by_the_writer() {
    require_root();
    let (run, said) = recorded("pipe");
    let wait = the_wait(&run, &said, WaitReason::Pipe, "read_pipe");
    assert_eq!(wait.call.as_deref(), Some("read"));
    let writer = run.children(said.tid);
    assert_eq!(writer.len(), 1, "{}", run.text);
    let Some(Waker::Tree { pid, stack, .. }) = wait.waker else {
        panic!("{wait:?}: not woken by a process of the tree");
    };
    assert_eq!(pid, writer[0], "{wait:?}: not woken by the writer");
    // The writer's stack as it woke the reader: its write, and none of
    // the frames of the program that took it.
    let waking = functions(&run, stack.expect("the waker's stack"));
    assert!(
        waking.iter().any(|f| f.contains("pipe_write")),
        "{waking:?}"
    );
    assert!(
        !waking.iter().any(|f| f.starts_with("bpf_prog_")),
        "{waking:?}"
    );
    adds_up(&run, said.tid);
    // The writer slept all along: the chain of wakers says so.
    let line = wall_line(&run);
    let chain = format!(
        "pipe in read_pipe woken by <fork> waits {}, which waited ",
        writer[0]
    );
    let (_, after) = line.split_once(&chain).unwrap_or_else(|| panic!("{line}"));
    assert!(
        after.split(" (").next().unwrap().ends_with(" on sleep"),
        "{line}"
    );
    // On the critical path, the reader says it waited on the pipe most.
    let profile = run.dir.path().join("profile.txt");
    render(&run.dir.path().join("rec.ndjson"), "profile", &profile);
    let text = std::fs::read_to_string(&profile).unwrap();
    let mut lines = text.lines();
    lines
        .find(|l| l.contains(&format!(" own  {} ", said.tid)))
        .unwrap_or_else(|| panic!("{} not on the critical path: {text}", said.tid));
    let piped: u64 = off_cpu(&run)
        .iter()
        .filter(|w| w.tid == said.tid && w.reason == WaitReason::Pipe)
        .map(|w| w.total_ns)
        .sum();
    let waited = lines.next().unwrap().split_once("; waited ").unwrap().1;
    let pipe = format!("{} pipe", proctrace::text::glance(piped));
    assert!(waited.starts_with(&pipe), "{waited} is not {pipe}…");
}

#[test]
fn offcpu_mutex_waiter_is_woken_by_the_holder() {
    require_root();
    let (run, said) = recorded("mutex");
    let wait = the_wait(&run, &said, WaitReason::Lock, "take_lock");
    assert_eq!(wait.call.as_deref(), Some("futex"));
    let holders: Vec<Pid> = on_cpu(&run)
        .iter()
        .filter(|r| r.pid == said.tid && r.tid != said.tid)
        .map(|r| r.tid)
        .collect();
    assert_eq!(holders.len(), 1, "{holders:?}");
    assert!(
        matches!(wait.waker, Some(Waker::Tree { pid, tid, .. }) if pid == said.tid && tid == holders[0]),
        "{wait:?}: not woken by the holder {}",
        holders[0]
    );
    adds_up(&run, said.tid);
    let line = wall_line(&run);
    assert!(
        line.contains(&format!(
            "lock in take_lock woken by waits {} thread {}",
            said.tid, holders[0]
        )),
        "{line}"
    );
}

/// The `waits` program's line of `render -d wall`.
fn wall_line(run: &Run) -> String {
    let wall = run.dir.path().join("wall.txt");
    render(&run.dir.path().join("rec.ndjson"), "wall", &wall);
    let text = std::fs::read_to_string(&wall).unwrap();
    let line = text.lines().find(|l| l.trim_start().starts_with("waits:"));
    line.unwrap_or_else(|| panic!("{text}")).to_owned()
}

/// The numbers of the report's lines that start with `kind`.
fn reported(report: &str, kind: &str) -> Vec<Vec<f64>> {
    let lines = report.lines().filter_map(|l| l.strip_prefix(kind));
    let numbers = |l: &str| l.split_whitespace().map(|n| n.parse().unwrap()).collect();
    lines.map(numbers).collect()
}

/// The time of `tid`'s waits that `keep` keeps, in ms.
fn waited_ms(run: &Run, tid: Pid, keep: impl Fn(&OffCpu) -> bool) -> f64 {
    let lines = off_cpu(run).into_iter().filter(|w| w.tid == tid && keep(w));
    lines.map(|w| w.total_ns).sum::<u64>() as f64 / 1e6
}

/// fsync of 64 MiB waits on the disk in sync_file: the time off the CPU
/// in the call (its wall time less its CPU time, as the program measured
/// them) is the disk's, but for the stretches it was runnable.
#[test]
fn offcpu_fsync_waits_on_the_disk() {
    require_root();
    // On the disk of the build, not a tmpfs, where fsync would not wait.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("synced");
    let (run, report) = recorded_with(&["fsync", file.to_str().unwrap()]);
    let [call] = &reported(&report, "fsync ")[..] else {
        panic!("{report}")
    };
    let (wall, cpu, tid) = (call[0], call[1], call[2] as Pid);
    let disk = waited_ms(&run, tid, |w| {
        w.reason == WaitReason::Disk && w.call.as_deref() == Some("fsync")
    });
    let runnable = waited_ms(&run, tid, |w| w.reason == WaitReason::Runnable);
    let off = wall - cpu;
    assert!(
        disk <= off * 1.05 && disk + runnable >= off * 0.90,
        "disk {disk:.1} ms, runnable {runnable:.1} ms, off the CPU in fsync {off:.1} ms"
    );
    let longest = off_cpu(&run)
        .into_iter()
        .filter(|w| w.tid == tid && w.reason == WaitReason::Disk && w.stack.is_some())
        .max_by_key(|w| w.max_ns)
        .unwrap_or_else(|| panic!("no long disk wait"));
    let names = functions(&run, longest.stack.unwrap());
    assert!(names.iter().any(|f| f == "sync_file"), "{names:?}");
    adds_up(&run, tid);
}

/// More threads computing than CPUs: each waits its turn, runnable, for
/// what its wall time exceeds its CPU time.
#[test]
fn offcpu_threads_beyond_the_cpus_are_runnable() {
    require_root();
    let cpus = std::thread::available_parallelism().unwrap().get();
    let threads = (2 * cpus).to_string();
    let (run, report) = recorded_with(&["runnable", &threads]);
    let spun = reported(&report, "runnable ");
    assert_eq!(spun.len(), 2 * cpus, "{report}");
    for thread in spun {
        let (wall, cpu, tid) = (thread[0], thread[1], thread[2] as Pid);
        let runnable = waited_ms(&run, tid, |w| w.reason == WaitReason::Runnable);
        let others = waited_ms(&run, tid, |w| w.reason != WaitReason::Runnable);
        let off = wall - cpu;
        assert!(
            (runnable - off).abs() <= off * 0.10 + others,
            "thread {tid}: runnable {runnable:.1} ms, other waits {others:.1} ms, \
             wall less CPU {off:.1} ms"
        );
    }
}

/// Each thread's time off the CPU, in ms, as `perf sched timehist`
/// printed it (its wait time and scheduling delay), by tid.
fn perf_waits(timehist: &str) -> BTreeMap<Pid, f64> {
    let mut waits = BTreeMap::new();
    for line in timehist.lines() {
        // `TIME [CPU] COMM[TID/PID] WAIT DELAY RUN`: the command may hold
        // spaces and brackets, the numbers after it do not.
        let fields: Vec<&str> = line.split_whitespace().rev().take(4).collect();
        let [_run, delay, wait, task] = fields[..] else {
            continue;
        };
        let (Ok(wait), Ok(delay)) = (wait.parse::<f64>(), delay.parse::<f64>()) else {
            continue;
        };
        let Some(ids) = task
            .rsplit_once('[')
            .and_then(|(_, ids)| ids.strip_suffix(']'))
        else {
            continue;
        };
        let Ok(tid) = ids.split('/').next().unwrap().parse::<Pid>() else {
            continue;
        };
        *waits.entry(tid).or_insert(0.0) += wait + delay;
    }
    waits
}

/// `perf sched timehist` as the oracle of each thread's time off the
/// CPU, on threads that sleep, wait on a pipe and wait their turn: perf
/// sees every switch of the machine, proctrace only the tree's, and the
/// two agree within 10% (+1 ms). perf runs inside the recording, and
/// mounts tracefs as the other tests' perf does. (In a mount namespace of
/// its own, which would take the mount with it, bookworm's perf 6.1
/// aborts in a chroot: "assertion failed at util/namespaces.c:301".)
#[test]
fn offcpu_wait_totals_agree_with_perf_sched() {
    require_root();
    if !have_tool("perf") {
        return;
    }
    // perf follows every switch of the machine and may lose some under
    // load: in a full run of the suite it put a thread that slept 400 ms
    // (proctrace: 400.1) at 206 ms. Its own figures are checked by
    // agreeing with ours in one of three runs.
    let mut missed = Vec::new();
    for _ in 0..3 {
        match perf_sched_disagrees() {
            None => return,
            Some(why) => missed.push(why),
        }
    }
    panic!("{}", missed.join("\n\n"));
}

/// One recording of the workload under perf sched: what disagrees.
fn perf_sched_disagrees() -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let waits = workload("waits").to_str().unwrap().to_owned();
    let threads = 2 * std::thread::available_parallelism().unwrap().get();
    let (data, report, timehist) = (at("sched.data"), at("report"), at("timehist"));
    let script = format!(
        "perf sched record -q -o '{data}' -- sh -c \
         \"'{waits}' runnable {threads} {MS} && '{waits}' pipe {MS} && '{waits}' sleep {MS}\" \
         > '{report}' && perf sched timehist -i '{data}' > '{timehist}'"
    );
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--off-cpu"]);
    let run = record_in(dir, &opts, &["sh", "-c", &script]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let report = std::fs::read_to_string(run.dir.path().join("report")).unwrap();
    let timehist = std::fs::read_to_string(run.dir.path().join("timehist")).unwrap();
    let perf = perf_waits(&timehist);
    let tids: Vec<Pid> = report
        .lines()
        .map(|l| l.split_whitespace().last().unwrap().parse().unwrap())
        .collect();
    assert_eq!(tids.len(), threads + 2, "{report}");
    let disagree: Vec<String> = tids
        .into_iter()
        .filter_map(|tid| {
            let ours = waited_ms(&run, tid, |_| true);
            let Some(&theirs) = perf.get(&tid) else {
                return Some(format!("perf saw no switch of {tid}"));
            };
            let apart = (ours - theirs).abs() > theirs * 0.10 + 1.0;
            apart.then(|| {
                format!("thread {tid}: off the CPU {ours:.1} ms here, {theirs:.1} ms by perf")
            })
        })
        .collect();
    (!disagree.is_empty()).then(|| format!("{}\n{report}", disagree.join("\n")))
}

/// A Python program's waits have its Python frames, as its CPU samples
/// do (tests/workloads/pywaits.py): the main thread's lock wait is under
/// `main` and `wait_for_it`, its waker the helper thread in
/// `release_it`, and the wall view says it waited in `wait_for_it`, not
/// in the interpreter's lock.
#[test]
fn python_waits_have_their_python_frames() {
    require_root();
    let script = repo().join("tests/workloads/pywaits.py");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--off-cpu"]);
    let run = record_with(&opts, &["/usr/bin/python3", script.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let root = run.root();
    let lock = off_cpu(&run)
        .into_iter()
        .filter(|w| w.tid == root && w.reason == WaitReason::Lock && w.stack.is_some())
        .max_by_key(|w| w.max_ns)
        .unwrap_or_else(|| panic!("no long lock wait of the main thread:\n{}", run.text));
    let names = functions(&run, lock.stack.unwrap());
    let at = |f: &str| names.iter().position(|n| n.starts_with(f));
    let (main, waiting) = (at("main (pywaits.py:"), at("wait_for_it (pywaits.py:"));
    assert!(main.is_some() && main < waiting, "{names:?}");
    let Some(Waker::Tree {
        tid,
        stack: Some(waker),
        ..
    }) = &lock.waker
    else {
        panic!("not woken by a thread of the tree with its stack: {lock:?}");
    };
    assert_ne!(*tid, root);
    let waker = functions(&run, *waker);
    assert!(
        waker
            .iter()
            .any(|f| f.starts_with("release_it (pywaits.py:")),
        "{waker:?}"
    );
    let out = run.dir.path().join("wall.txt");
    render(&run.dir.path().join("rec.ndjson"), "wall", &out);
    let wall = std::fs::read_to_string(&out).unwrap();
    assert!(wall.contains(" lock in wait_for_it (pywaits.py:"), "{wall}");
}
