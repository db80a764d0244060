//! Probes on the tree (`record --probe`): uprobes, uretprobes and USDT
//! probes counted per process, with the stacks at the hits and the USDT
//! arguments, checked against programs whose answers are known; hits of
//! processes outside the tree never leave the kernel.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use proctrace::event::{ArgValue, ProbeKind};
use proctrace::stacks::Profile;

use crate::common::*;
use crate::cpu_profile::refused;

/// Rounds of tests/workloads/probed.c: that many mallocs from allocate().
const ROUNDS: i64 = 1000;

/// A loop outside the tree running the same program, all along: none of
/// its hits may leave the kernel.
struct Outsider(std::process::Child);

impl Outsider {
    fn start(program: &str) -> Outsider {
        let script = format!("while :; do {program} 50; done");
        Outsider(
            Command::new("sh")
                .args(["-c", &script])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The recording's probe lines, read back as a library user would.
pub(crate) fn profile_of(run: &Run) -> Profile {
    let mut profile = Profile::default();
    for record in run.profile_lines() {
        assert!(profile.take(record.clone()).is_none(), "{record:?}");
    }
    profile
}

/// Hits of probe `id` whose stack passes through `function`, and all.
fn hits_through(profile: &Profile, id: u32, function: &str) -> (u64, u64) {
    let hits = profile.probe_hits.iter().filter(|h| h.probe == id);
    hits.fold((0, 0), |(through, all), h| {
        let frames = h.stack.map(|s| profile.stack(s)).unwrap_or_default();
        let passes = frames
            .iter()
            .any(|f| f.function.as_deref() == Some(function));
        (through + if passes { h.count } else { 0 }, all + h.count)
    })
}

#[test]
fn malloc_hits_through_a_known_function_are_counted_exactly() {
    let probed = workload("probed");
    let program = probed.to_str().unwrap();
    let outsider = Outsider::start(program);
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&[
        "--probe",
        "uprobe:libc:malloc",
        "--probe",
        "uretprobe:libc:malloc",
        "--probe",
        &format!("usdt:{program}:proctrace_test:round"),
        "--probe",
        &format!("usdt:{program}:proctrace_test:done"),
        "--probe",
        &format!("usdt:{program}:proctrace_test:named"),
    ]);
    let run = record_with(&opts, &[program, &ROUNDS.to_string()]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let probes = &run.header().probes;
    let kinds: Vec<ProbeKind> = probes.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [
            ProbeKind::Uprobe,
            ProbeKind::Uretprobe,
            ProbeKind::Usdt,
            ProbeKind::Usdt,
            ProbeKind::Usdt
        ]
    );
    assert!(probes[0].file.contains("libc.so"), "{probes:?}");
    let profile = profile_of(&run);
    let outside = outsider.0.id() as i32;
    assert!(
        profile.probe_hits.iter().all(|h| h.pid == run.root()),
        "a hit of a process other than the root (the outsider is {outside})"
    );
    for (id, what) in [(0, "malloc"), (1, "malloc's return")] {
        let (through, _) = hits_through(&profile, id, "allocate");
        assert_eq!(through, ROUNDS as u64, "{what} through allocate");
        let (from_main, _) = hits_through(&profile, id, "main");
        assert_eq!(from_main, ROUNDS as u64, "{what}: the stacks reach main");
    }
    // The USDT arguments: (i, ROUNDS) once each, then (sum, -7) once.
    let args_of = |id: u32| -> BTreeMap<Vec<ArgValue>, u64> {
        profile
            .probe_args
            .iter()
            .filter(|a| a.probe == id)
            .map(|a| (a.args.clone(), a.count))
            .collect()
    };
    let numbers = |values: &[i64]| values.iter().map(|&n| ArgValue::Number(n)).collect();
    let expected: BTreeMap<Vec<ArgValue>, u64> =
        (0..ROUNDS).map(|i| (numbers(&[i, ROUNDS]), 1)).collect();
    assert_eq!(args_of(2), expected);
    let sum = ROUNDS * (ROUNDS - 1) / 2;
    assert_eq!(args_of(3), BTreeMap::from([(numbers(&[sum, -7]), 1)]));
    // A pointer argument is read as the string it points to.
    assert_eq!(
        args_of(4),
        BTreeMap::from([(
            vec![ArgValue::Text("allocate".into()), ArgValue::Number(ROUNDS)],
            1
        )])
    );
    assert_eq!(
        hits_through(&profile, 2, "allocate"),
        (ROUNDS as u64, ROUNDS as u64)
    );
    assert_eq!(run.trailer().lost_probe_hits, 0);
}

#[test]
fn hits_are_counted_without_stacks_too() {
    let probed = workload("probed");
    let program = probed.to_str().unwrap();
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&[
        "--no-probe-stacks",
        "--probe",
        &format!("usdt:{program}:proctrace_test:r*"),
        "--probe",
        &format!("uprobe:{program}:alloc*"),
    ]);
    let run = record_with(&opts, &[program, "300"]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let names: Vec<&str> = run
        .header()
        .probes
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["proctrace_test:round", "allocate"]);
    let profile = profile_of(&run);
    let count = |id| -> u64 {
        let hits = profile.probe_hits.iter().filter(|h| h.probe == id);
        hits.map(|h| {
            assert_eq!(h.stack, None, "{h:?}");
            h.count
        })
        .sum()
    };
    assert_eq!((count(0), count(1)), (300, 1));
}

#[test]
fn bad_probes_are_one_clear_line() {
    let probed = workload("probed");
    let program = probed.to_str().unwrap();
    let usdt_missing = format!("usdt:{program}:proctrace_test:nope");
    for (spec, says) in [
        ("uprobe:/no/such/file:main", "no file \"/no/such/file\""),
        ("uprobe:libno-such-lib:f", "no file \"libno-such-lib\""),
        (
            "uprobe:libc:no_such_function_at_all",
            "has no function \"no_such_function_at_all\"",
        ),
        (
            usdt_missing.as_str(),
            "has no USDT probe \"proctrace_test:nope\"",
        ),
        ("kprobes:libc:malloc", "unknown probe type \"kprobes\""),
        ("uprobe:libc", "expected FILE:FUNCTION"),
        ("uprobe:libc:*", "past the 256 probes"),
        ("uprobe:/bin/true:no_such_function", "has no function"),
        ("uprobe:/etc/passwd:main", "not an ELF program or library"),
    ] {
        let (code, stderr) = refused(&["--probe", spec]);
        assert_ne!(code, Some(0), "{spec}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{spec}: one line:\n{stderr}");
        assert!(stderr.contains(says), "{spec}: {stderr}");
        assert!(
            stderr.contains(&format!("{spec:?}")),
            "{spec}: names it: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (code, stderr) = refused(&["--perf-buffer", "--probe", "uprobe:libc:malloc"]);
    assert_ne!(code, Some(0), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("needs the ring buffer"), "{stderr}");
}

#[test]
fn the_views_count_per_probe_and_say_which_were_never_hit() {
    let probed = workload("probed");
    let program = probed.to_str().unwrap();
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&[
        "--probe",
        &format!("uprobe:{program}:allocate"),
        "--probe",
        &format!("usdt:{program}:proctrace_test:round"),
        "--probe",
        "uprobe:libc:getpid",
    ]);
    let run = record_with(&opts, &[program, "40"]);
    let path = run.dir.path().join("rec.ndjson");
    let text = crate::hang::render_as(&path, "probes");
    assert!(
        text.starts_with("Probes: 3 attached, 41 hits of 1 process, 0 lost\n"),
        "{text}"
    );
    assert!(text.contains("\nuprobe:probed:allocate: 1 hit\n"), "{text}");
    assert!(
        text.contains("\nusdt:probed:proctrace_test:round: 40 hits\n"),
        "{text}"
    );
    assert!(text.contains("  arguments (10 of 40):\n"), "{text}");
    assert!(text.contains("    … 30 more with 30 hits\n"), "{text}");
    assert!(
        text.ends_with("\n\nNo process of the tree hit uprobe:libc.so.6:getpid\n"),
        "{text}"
    );
    let folded = crate::hang::render_as(&path, "probe-folded");
    // Root first, the probe last, one line per stack: main;allocate then
    // the probe (what glibc runs before main varies by version).
    let lines: Vec<(&str, &str)> = folded
        .lines()
        .map(|line| line.rsplit_once(' ').expect("STACK COUNT"))
        .collect();
    assert_eq!(lines.len(), 2, "{folded}");
    for ((stack, count), (probe, hits)) in lines.iter().zip([
        ("uprobe:probed:allocate", "1"),
        ("usdt:probed:proctrace_test:round", "40"),
    ]) {
        assert!(stack.starts_with("probed;"), "{folded}");
        assert!(
            stack.ends_with(&format!(";main;allocate;{probe}")),
            "{folded}"
        );
        assert_eq!(*count, hits, "{folded}");
    }
}

#[test]
fn a_uprobe_and_its_uretprobe_time_each_call() {
    let probed = workload("probed");
    let program = probed.to_str().unwrap();
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&[
        "--probe",
        &format!("uprobe:{program}:nap"),
        "--probe",
        &format!("uretprobe:{program}:nap"),
    ]);
    let run = record_with(&opts, &[program, "0", "5"]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let profile = profile_of(&run);
    let [latency] = &profile.probe_latency[..] else {
        panic!("one line of calls: {:?}", profile.probe_latency);
    };
    assert_eq!((latency.probe, latency.ret, latency.count), (0, 1, 5));
    // nanosleep sleeps at least what it is asked for.
    assert!(latency.min >= 20_000_000, "{latency:?}");
    let text = crate::hang::render_as(&run.dir.path().join("rec.ndjson"), "probes");
    assert!(
        text.contains("  latency to uretprobe:probed:nap: 5 calls, min "),
        "{text}"
    );
}

/// Counts the calls of each function with CPython's own profiler hook,
/// and prints them: the oracle for `python:function__entry`. (With a
/// profiler set, CPython enters every call through the path that fires
/// the probe; without one, 3.11 and later fire it only for calls from C.)
const PYTHON_CALLS: &str = r#"
import sys
from collections import Counter

def square(n):
    return n * n

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

calls = Counter()

def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_filename == __file__:
        calls[frame.f_code.co_name] += 1

sys.setprofile(profile)
list(map(square, range(7)))
sorted(range(5), key=square)
fib(9)
sys.setprofile(None)
for name, count in sorted(calls.items()):
    print(name, count)
"#;

/// Whether Debian's python3, with its USDT probes, is here (or, under
/// CI, fails the test).
pub(crate) fn have_python_probes() -> bool {
    let python = std::path::Path::new("/usr/bin/python3");
    let has_probes = proctrace::recorder::probes::usdt::probes(python)
        .is_ok_and(|p| p.iter().any(|p| p.name == "function__entry"));
    prerequisite(has_probes, "Debian's python3, built with USDT probes")
}

#[test]
fn python_function_entries_match_the_interpreters_own_count() {
    let python = std::path::Path::new("/usr/bin/python3");
    if !have_python_probes() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("calls.py");
    std::fs::write(&script, PYTHON_CALLS).unwrap();
    let oracle = Command::new(python).arg(&script).output().unwrap();
    let oracle: BTreeMap<String, u64> = String::from_utf8(oracle.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let (name, count) = line.split_once(' ').unwrap();
            (name.to_owned(), count.parse().unwrap())
        })
        .collect();
    assert_eq!(oracle.get("fib"), Some(&109), "{oracle:?}");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--probe", "usdt:/usr/bin/python3:python:function__entry"]);
    let run = record_with(&opts, &[python.to_str().unwrap(), script.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    // The probe's arguments: the file, the function, the line.
    let file = ArgValue::Text(script.to_str().unwrap().to_owned());
    let mut counted: BTreeMap<String, u64> = BTreeMap::new();
    for args in &profile_of(&run).probe_args {
        if let [path, ArgValue::Text(function), _] = &args.args[..] {
            if *path == file {
                *counted.entry(function.clone()).or_default() += args.count;
            }
        }
    }
    // What the hook cannot see: the module itself, run before it is set,
    // and the hook, which the interpreter calls from C at every event.
    counted.retain(|name, _| oracle.contains_key(name));
    assert_eq!(counted, oracle);
}

/// `proctrace probes TARGET PATTERN`: its status, stdout and stderr.
fn list(target: &str, pattern: &str) -> (Option<i32>, String, String) {
    let out = Command::new(proctrace_bin())
        .args(["probes", target, pattern])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (out.status.code(), text(out.stdout), text(out.stderr))
}

#[test]
fn probes_lists_a_binarys_usdt_probes_and_a_live_processs() {
    let probed = workload("probed");
    let program = probed.to_str().unwrap();
    let names = |stdout: &str| -> Vec<String> {
        stdout
            .lines()
            .map(|line| line.split_whitespace().next().unwrap().to_owned())
            .collect()
    };
    let expected: Vec<String> = ["round", "done", "named"]
        .iter()
        .map(|name| format!("usdt:{program}:proctrace_test:{name}"))
        .collect();
    let (code, stdout, stderr) = list(program, "proctrace_test:*");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(names(&stdout), expected, "{stdout}");
    // A live process: every file it maps, its program's probes among them.
    // It naps a minute, killed once listed: listing each file's functions
    // takes seconds of a loaded machine.
    let mut napping = Command::new(program).args(["0", "3000"]).spawn().unwrap();
    let pid = napping.id().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let listed = loop {
        let (code, stdout, _) = list(&pid, "proctrace_test:*");
        if code == Some(0) || std::time::Instant::now() > deadline {
            break stdout;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let _ = napping.kill();
    let _ = napping.wait();
    assert_eq!(names(&listed), expected, "{listed}");
    for (target, says) in [
        ("/etc/passwd", "not an ELF program or library"),
        ("no-such-program-here", "no such process, and no such file"),
    ] {
        let (code, stdout, stderr) = list(target, "*");
        assert_eq!((code, stdout.as_str()), (Some(2), ""), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

#[test]
fn the_html_report_lists_each_probes_hits() {
    if !crate::common::browser::have_chromium() {
        return;
    }
    let probed = workload("probed");
    let program = probed.to_str().unwrap();
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&[
        "--probe",
        &format!("usdt:{program}:proctrace_test:round"),
        "--probe",
        "uprobe:libc:getpid",
    ]);
    let run = record_with(&opts, &[program, "1500"]);
    let page = run.dir.path().join("report.html");
    render(&run.dir.path().join("rec.ndjson"), "html", &page);
    let dom = crate::html::load(&page, "").dom;
    for fact in [
        "<dt>Probe usdt:probed:proctrace_test:round</dt><dd><button",
        ">1,500 hits by 1 process</button></dd>",
        "<dt>Probe uprobe:libc.so.6:getpid</dt><dd>no process of the tree hit it</dd>",
    ] {
        assert!(dom.contains(fact), "{fact} not in the page");
    }
    assert!(
        !dom.contains(">CPU profile</dt>"),
        "no CPU profile was taken"
    );
    // The stacks at the hits, a flame graph of the probe's own: the
    // probe, the program, down through main to the function that hit it.
    let status = crate::html::load(&page, "#cpu=usdt:probed:proctrace_test:round");
    assert_eq!(status.attributes["page"], "cpu");
    let labels: Vec<&str> = status.attributes["flame-run"].split('|').collect();
    assert_eq!(
        labels[..2],
        ["usdt:probed:proctrace_test:round", "probed"],
        "{labels:?}"
    );
    for function in ["main", "allocate"] {
        let drawn = labels.iter().any(|l| l.starts_with(function));
        assert!(drawn, "{function} not drawn: {labels:?}");
    }
    assert!(
        status.dom.contains(">Probes</button>"),
        "the tab names what it shows"
    );
}

#[test]
fn hits_are_split_by_the_test_each_process_ran() {
    let probed = workload("probed");
    let program = probed.to_str().unwrap();
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--probe", &format!("usdt:{program}:proctrace_test:round")]);
    let script = format!(
        "PYTEST_CURRENT_TEST='t.py::test_a (call)' {program} 3; \
         PYTEST_CURRENT_TEST='t.py::test_b (call)' {program} 5"
    );
    let run = record_with(&opts, &["sh", "-c", &script]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let path = run.dir.path().join("rec.ndjson");
    let text = crate::hang::render_as(&path, "probes");
    assert!(
        text.contains(
            "  by test (2 of 2):\n             5  t.py::test_b\n             3  t.py::test_a\n"
        ),
        "{text}"
    );
    let folded = crate::hang::render_as(&path, "probe-folded");
    let tests: Vec<(&str, &str)> = folded
        .lines()
        .map(|line| {
            let (stack, count) = line.rsplit_once(' ').unwrap();
            (stack.split(';').next().unwrap(), count)
        })
        .collect();
    assert_eq!(
        tests,
        [("t.py::test_a", "3"), ("t.py::test_b", "5")],
        "{folded}"
    );
}
