//! Tests inside one process: pytest runs a whole suite in one
//! interpreter, so its probe hits and CPU samples are split by the test
//! it says runs (`PYTEST_CURRENT_TEST`, set through libc's setenv),
//! checked against what the interpreter itself counts in each test; and
//! so are the samples of a pytest-xdist run's workers.

use std::collections::BTreeMap;
use std::fs;

use crate::probes::{have_python_probes, profile_of};
use proctrace::event::ArgValue;

use crate::common::*;

/// Counts each test's calls of this directory's functions with CPython's
/// own profiler hook, by the test pytest says runs, and writes them to
/// $CALLS at the end: the oracle. (The hook also makes CPython 3.11 fire
/// `function__entry` at every call.)
const CONFTEST: &str = r#"
import json, os, sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
calls = Counter()

def profile(frame, event, arg):
    code = frame.f_code
    if event == "call" and os.path.dirname(code.co_filename) == HERE:
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        calls[test + " " + code.co_name] += 1

sys.setprofile(profile)

def pytest_sessionfinish(session):
    sys.setprofile(None)
    with open(os.environ["CALLS"], "w") as out:
        json.dump(calls, out)
"#;

/// Tests that call known functions a known number of times, libc's
/// getppid in-process (and, in test_child, from a child process), and
/// two that spend their CPU in different libraries.
const TESTS: &str = r#"
import os, subprocess, sys, zlib, hashlib
import pytest

def square(n):
    return n * n

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def test_a():
    list(map(square, range(3)))
    fib(5)
    for _ in range(4):
        os.getppid()

def test_b():
    sorted(range(6), key=square)
    fib(7)
    for _ in range(9):
        os.getppid()

@pytest.mark.parametrize("n", [1, 2])
def test_c(n):
    list(map(square, range(10 * n)))

def test_child():
    code = "import os\nfor _ in range(5): os.getppid()"
    subprocess.run([sys.executable, "-c", code], check=True)

def test_zlib():
    data = os.urandom(1 << 16)
    for _ in range(150):
        zlib.compress(data, 9)

def test_sha():
    data = os.urandom(1 << 20)
    for _ in range(150):
        hashlib.sha256(data).digest()
"#;

#[test]
fn a_pytest_suites_hits_and_samples_are_split_by_test() {
    if !have_python_probes() || !have_tool("pytest-3") {
        return;
    }
    let suite = tempfile::tempdir().unwrap();
    fs::write(suite.path().join("conftest.py"), CONFTEST).unwrap();
    let file = suite.path().join("test_calls.py");
    fs::write(&file, TESTS).unwrap();
    let calls = suite.path().join("calls.json");
    std::env::set_var("CALLS", &calls);
    let mut opts = Opts::new(Mode::Ring);
    // The hits are counted here, not their stacks: CPython's calls with
    // an 8 KiB stack copy each can outrun the drain on a loaded machine,
    // and the hits it could not read are counted as lost, not split.
    opts.args = strings(&[
        "--cpu-profile=499",
        "--no-probe-stacks",
        "--probe",
        "uprobe:libc:getppid",
        "--probe",
        "usdt:/usr/bin/python3:python:function__entry",
    ]);
    let run = record_with(&opts, &pytest(suite.path(), &file));
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let profile = profile_of(&run);
    let test = |name: &str| Some(format!("test_calls.py::{name}"));

    // libc's getppid per test: in pytest's own process, and in the child
    // test_child started, named by the variable it inherited.
    let mut getppid: BTreeMap<Option<String>, u64> = BTreeMap::new();
    for hits in profile.probe_hits.iter().filter(|h| h.probe == 0) {
        let said = hits.test.clone();
        let key = said.or_else(|| run_test_of(&run, hits.pid));
        *getppid.entry(key).or_default() += hits.count;
    }
    let expected = BTreeMap::from([
        (test("test_a"), 4),
        (test("test_b"), 9),
        (test("test_child"), 5),
    ]);
    assert_eq!(getppid, expected);

    // Each test's calls of each function, as the interpreter counted them.
    let oracle: BTreeMap<String, u64> =
        serde_json::from_str(&fs::read_to_string(&calls).unwrap()).unwrap();
    assert_eq!(
        oracle.get("test_calls.py::test_a fib"),
        Some(&15),
        "{oracle:?}"
    );
    assert_eq!(
        oracle.get("test_calls.py::test_c[2] square"),
        Some(&20),
        "{oracle:?}"
    );
    let mut counted: BTreeMap<String, u64> = BTreeMap::new();
    let path = ArgValue::Text(file.to_str().unwrap().to_owned());
    for args in profile.probe_args.iter().filter(|a| a.probe == 1) {
        if let ([file, ArgValue::Text(function), _], Some(test)) = (&args.args[..], &args.test) {
            if *file == path {
                *counted.entry(format!("{test} {function}")).or_default() += args.count;
            }
        }
    }
    // The module's own code and the tests themselves run from pytest's
    // collection and calls as the hook sees them: compare the helpers.
    counted.retain(|key, _| key.ends_with(" square") || key.ends_with(" fib"));
    let oracle: BTreeMap<String, u64> = oracle
        .into_iter()
        .filter(|(key, _)| key.ends_with(" square") || key.ends_with(" fib"))
        .collect();
    assert_eq!(counted, oracle);

    // The CPU: zlib's code runs in test_zlib, OpenSSL's in test_sha.
    let in_test = |library: &str| -> BTreeMap<Option<String>, u64> {
        let mut by_test = BTreeMap::new();
        for samples in &profile.samples {
            let frames = profile.stack(samples.stack);
            if frames.iter().any(|f| f.module.contains(library)) {
                *by_test.entry(samples.test.clone()).or_default() += samples.count;
            }
        }
        by_test
    };
    // (Importing them runs some of it outside any test.)
    for (library, name) in [("libz.so", "test_zlib"), ("libcrypto.so", "test_sha")] {
        let mut by_test = in_test(library);
        by_test.remove(&None);
        let all: u64 = by_test.values().sum();
        let own = by_test.get(&test(name)).copied().unwrap_or(0);
        // A sample is told apart from a test's start by the time the
        // kernel stamped on both: only a drain stalled for longer than
        // its reorder window (100 ms) could misplace one.
        assert!(own > 10 && own * 50 >= all * 49, "{library}: {by_test:?}");
    }

    // The views: per test, in-process.
    let input = run.dir.path().join("rec.ndjson");
    let probes = crate::hang::render_as(&input, "probes");
    assert!(
        probes.contains("             9  test_calls.py::test_b\n"),
        "{probes}"
    );
    let cpu = crate::hang::render_as(&input, "cpu");
    assert!(cpu.contains("test_calls.py::test_zlib"), "{cpu}");
}

/// The uprobes on setenv are armed before the command starts: a runner
/// that names its first test at once has it named, even while another
/// process registers uprobes on libc, which holds up theirs (250 to
/// 300 ms here, when pytest had run two tests before they armed).
/// Both ways of arming them, each while the object loads: one
/// uprobe.multi link (6.6+), and two perf-event uprobes held by a child,
/// as before 6.6.
#[test]
fn a_test_named_at_a_commands_first_instruction_is_split_out() {
    for arming in [&[][..], &["--no-uprobe-multi"]] {
        first_test_is_split_out(arming);
    }
}

fn first_test_is_split_out(arming: &[&str]) {
    let libc = proctrace::recorder::probes::runner::TestMarks::find().expect("this machine's libc");
    let churn = uprobe_churn(&libc.file, libc.setenv);
    let mut opts = Opts::new(Mode::Ring);
    let probe = ["--no-probe-stacks", "--probe", "uprobe:libc:getppid"];
    opts.args = strings(&[&probe[..], arming].concat());
    opts.env.push(("PROCTRACE_DEBUG".into(), "1".into()));
    let marks = workload("marks");
    let run = record_with(&opts, &strings(&[marks.to_str().unwrap(), "3", "5"]));
    drop(churn);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    // They are registered while the object loads, not after.
    let early = match arming.is_empty() && kernel_at_least((6, 6)) {
        true => "armed through the link made while the object loaded",
        false => "armed through the child forked while the object loaded",
    };
    assert!(run.stderr.contains(early), "{arming:?}\n{}", run.stderr);
    let mut getppid: BTreeMap<Option<String>, u64> = BTreeMap::new();
    for hits in &profile_of(&run).probe_hits {
        *getppid.entry(hits.test.clone()).or_default() += hits.count;
    }
    let expected = BTreeMap::from([
        (None, 1),
        (Some("t.py::test_first".to_owned()), 3),
        (Some("t.py::test_second".to_owned()), 5),
    ]);
    assert_eq!(getppid, expected, "{arming:?}\n{}", run.stderr);
}

/// Three processes that register and unregister a uprobe on `file` in a
/// loop, killed when dropped: each registration waits for the others'
/// turns (160 to 260 ms here, against 6 to 13 ms alone).
fn uprobe_churn(file: &std::path::Path, offset: u64) -> Vec<Background> {
    let churn = || {
        let mut command = std::process::Command::new(workload("uprobe_churn"));
        command.arg(file).arg(offset.to_string());
        Background::spawn(&mut command)
    };
    (0..3).map(|_| churn()).collect()
}

/// The test a process's environment names at its exec.
fn run_test_of(run: &Run, pid: proctrace::event::Pid) -> Option<String> {
    let current = run
        .execs(pid)
        .first()?
        .env
        .get("PYTEST_CURRENT_TEST")?
        .clone();
    Some(proctrace::event::pytest_node_id(&current).to_owned())
}

/// Tests whose CPU is known: `heavy_work` spins three times what
/// `light_work` does, each called from two tests.
const COSTS: &str = r#"
def spin(n):
    total = 0
    for i in range(n):
        total += i % 7
    return total

def heavy_work():
    return spin(3_000_000)

def light_work():
    return spin(1_000_000)

def test_heavy():
    assert heavy_work() > 0

def test_light():
    assert light_work() > 0

def test_heavy_again():
    assert heavy_work() > 0

def test_light_again():
    assert light_work() > 0
"#;

/// pytest-xdist runs the tests in worker processes it starts, several
/// to a worker: each sample of a test's Python function counts under
/// that test, whichever worker ran it.
#[test]
fn a_pytest_xdist_runs_python_functions_are_under_their_tests() {
    require_root();
    if !have_tool("pytest-3") || !prerequisite(xdist_installed(), "python3-pytest-xdist") {
        return;
    }
    let suite = tempfile::tempdir().unwrap();
    let file = suite.path().join("test_costs.py");
    fs::write(&file, COSTS).unwrap();
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    let command = [pytest(suite.path(), &file), strings(&["-n", "2"])].concat();
    let run = record_with(&opts, &command);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let workers: Vec<_> = run
        .all_execs()
        .into_iter()
        .filter(|e| {
            e.argv
                .iter()
                .any(|a| a.contains("execnet") || a.contains("exec("))
        })
        .collect();
    assert!(workers.len() >= 2, "no worker processes: {}", run.text);
    let profile = profile_of(&run);
    let mut by_test: BTreeMap<(Option<String>, &str), u64> = BTreeMap::new();
    for samples in &profile.samples {
        let frames = profile.stack(samples.stack);
        let names = frames.iter().filter_map(|f| f.function.as_deref());
        let Some(work) = names
            .filter_map(|f| f.split(" (").next())
            .find(|f| *f == "heavy_work" || *f == "light_work")
        else {
            continue;
        };
        let work = if work == "heavy_work" {
            "heavy"
        } else {
            "light"
        };
        *by_test.entry((samples.test.clone(), work)).or_default() += samples.count;
    }
    let test = |name: &str| Some(format!("test_costs.py::{name}"));
    for name in [
        "test_heavy",
        "test_heavy_again",
        "test_light",
        "test_light_again",
    ] {
        let (own, other) = match name.contains("heavy") {
            true => ("heavy", "light"),
            false => ("light", "heavy"),
        };
        let mine = by_test.get(&(test(name), own)).copied().unwrap_or(0);
        let misplaced = by_test.get(&(test(name), other)).copied().unwrap_or(0);
        assert!(mine > 10 && misplaced * 50 <= mine, "{name}: {by_test:?}");
    }
    let outside: u64 = by_test
        .iter()
        .filter(|((test, _), _)| test.is_none())
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        outside, 0,
        "samples of the tests' functions outside any test: {by_test:?}"
    );
}

/// Whether Debian's python3 has pytest-xdist.
fn xdist_installed() -> bool {
    std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import xdist"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
