//! Issue #5, "why does my test suite hang?", end to end: real bats suites
//! recorded with `record --linger 2s --kill-lingering` on the real kernel.
//!
//! One test of the leaking suite starts `sleep 1000 &`, which inherits bats'
//! fd 3; bats waits for fd 3 to close, so without proctrace the suite would
//! hang. proctrace must find that one sleep, end it so the suite finishes,
//! and `render -d leaks` must blame that test and no other, not even the
//! one that starts a background job of its own and waits for it.
//!
//! Needs root and Debian's bats (`crate::common::prerequisite`).

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{
    have_tool, kill_if, parse_lines, proctrace_bin, read, recorder_bin, wait_within,
};
use proctrace::analysis::{held, Others};
use proctrace::event::{FdKind, Pid, Record};

/// Only there so that a hang fails the test instead of blocking the suite;
/// the leaking suite takes a few seconds. Never a timing assertion.
const HANG_GUARD: Duration = Duration::from_secs(120);

const LEAKING_SUITE: &str = r#"
@test "first is fine" { true; }
@test "leaks a sleeper" { sleep 1000 & }
@test "waits for its job" { sleep 0.2 & wait $!; }
@test "last is fine" { run echo hi; [ "$output" = hi ]; }
"#;

const CLEAN_SUITE: &str = r#"
@test "first is fine" { true; }
@test "waits for its job" { sleep 0.2 & wait $!; }
"#;

/// The tests of [`LEAKING_SUITE`] that do not leak, as bats prints them.
const INNOCENT: [&str; 3] = ["first is fine", "waits for its job", "last is fine"];

/// A recorded bats run: what bats printed, the records, `render -d leaks`.
struct Suite {
    tap: String,
    records: Vec<Record>,
    leaks: String,
}

/// Writes `suite` to a .bats file and records `bats --tap` on it.
fn record_suite(dir: &Path, suite: &str) -> Suite {
    let bats_file = dir.join("suite.bats");
    fs::write(&bats_file, suite).unwrap();
    let out = dir.join("suite.ndjson");
    let tap = dir.join("tap.txt");
    let mut child = Command::new(recorder_bin())
        .args(["record", "--linger", "2s", "--kill-lingering", "-o"])
        .arg(&out)
        .args(["--", "bats", "--tap"])
        .arg(&bats_file)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&tap).unwrap())
        .stderr(fs::File::create(dir.join("stderr.txt")).unwrap())
        .spawn()
        .unwrap();
    let status = wait_within(&mut child, "proctrace record -- bats", HANG_GUARD);
    let stderr = fs::read_to_string(dir.join("stderr.txt")).unwrap();
    let records = parse_lines(&fs::read_to_string(&out).unwrap());
    // Whatever else fails, no sleep of ours may outlive the test.
    for pid in lingering_pids(&records) {
        kill_if(pid, &["sleep"]);
    }
    assert!(status.success(), "{status:?}\n{stderr}");
    let leaks = Command::new(proctrace_bin())
        .args(["render", "-d", "leaks", "-i"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(leaks.status.success());
    Suite {
        tap: fs::read_to_string(&tap).unwrap(),
        records,
        leaks: String::from_utf8(leaks.stdout).unwrap(),
    }
}

fn lingering_pids(records: &[Record]) -> Vec<Pid> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Lingering(l) => Some(l.pid),
            _ => None,
        })
        .collect()
}

#[test]
fn the_test_that_leaks_a_sleeper_is_blamed_and_no_other() {
    if !have_tool("bats") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = record_suite(dir.path(), LEAKING_SUITE);
    assert_eq!(
        suite.tap,
        "1..4\nok 1 first is fine\nok 2 leaks a sleeper\nok 3 waits for its job\nok 4 last is fine\n"
    );

    let lingering = lingering_pids(&suite.records);
    assert_eq!(lingering.len(), 1, "{}", suite.leaks);
    let sleeper = lingering[0];
    let argv: Vec<&Vec<String>> = suite
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Exec(e) if e.pid == sleeper => Some(&e.argv),
            _ => None,
        })
        .collect();
    assert_eq!(argv, [&vec!["sleep".to_string(), "1000".to_string()]]);
    let signal = suite.records.iter().find_map(|r| match r {
        Record::Exit(e) if e.pid == sleeper => Some(e.signal),
        _ => None,
    });
    assert!(
        matches!(signal, Some(Some(15 | 9))),
        "the sleep was not killed: {signal:?}"
    );
    let Some(Record::Trailer(trailer)) = suite.records.last() else {
        panic!("no trailer")
    };
    assert_eq!(trailer.lingering, 1);

    let leaks = &suite.leaks;
    assert!(
        leaks.starts_with("1 process outlived the process that started it\n\n"),
        "{leaks}"
    );
    assert!(
        leaks.contains(&format!("\n{sleeper} sleep 1000\n")),
        "{leaks}"
    );
    assert!(
        leaks.contains("\n  test:          leaks a sleeper\n"),
        "{leaks}"
    );
    assert!(leaks.contains("\n  holds fd 3 → pipe:["), "{leaks}");
    // The snapshot --linger takes names bats' reader subshell, which never
    // exec'd, as the holder of the other end of fd 3.
    let fd3 = leaks.split("\n  holds fd 3 → pipe:[").nth(1).unwrap();
    let next = fd3.lines().nth(1).unwrap();
    assert!(
        next.starts_with("    also fd 0 of ") && next.contains(" <fork> bats (started by "),
        "{leaks}"
    );
    assert!(!leaks.contains("may hold the other end"), "{leaks}");
    assert_reader_holds_fd3(&dir.path().join("suite.ndjson"), sleeper);
    assert!(
        leaks.contains("\n  ended:         killed by SIG"),
        "{leaks}"
    );
    for innocent in INNOCENT {
        assert!(!leaks.contains(innocent), "{innocent} blamed:\n{leaks}");
    }
}

#[test]
fn a_suite_without_leaks_has_no_lingering_processes() {
    if !have_tool("bats") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = record_suite(dir.path(), CLEAN_SUITE);
    assert_eq!(
        suite.tap,
        "1..2\nok 1 first is fine\nok 2 waits for its job\n"
    );
    assert_eq!(lingering_pids(&suite.records), Vec::<Pid>::new());
    assert_eq!(
        suite.leaks,
        "no process outlived the process that started it\n"
    );
}

/// A test that runs a suite of its own: each process is named by the
/// nearest test above it, as bats prints it, never by bats' encoded
/// function name, `source` or an empty name that the exported variables
/// of the other runs would give.
#[test]
fn nested_suites_name_each_process_by_its_nearest_test() {
    if !have_tool("bats") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("nested")).unwrap();
    fs::write(
        dir.path().join("nested/inner.bats"),
        "@test \"inner one, with a comma\" { /bin/sleep 0.1; }\n",
    )
    .unwrap();
    let outer = dir.path().join("outer.bats");
    fs::write(
        &outer,
        "@test \"runs a nested suite\" { bats --tap \"$BATS_TEST_DIRNAME/nested/inner.bats\"; }\n",
    )
    .unwrap();
    let opts = crate::common::Opts::new(crate::common::Mode::Ring);
    let run = crate::common::record_in(dir, &opts, &["bats", "--tap", outer.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let processes = crate::common::read(&run.dir.path().join("rec.ndjson"));
    let test = |argv: &[&str]| {
        let index = (0..processes.len())
            .find(|&i| {
                let exec = processes.get(i).execs.last();
                exec.is_some_and(|e| e.argv.iter().eq(argv.iter().copied()))
            })
            .unwrap_or_else(|| panic!("no {argv:?}"));
        proctrace::analysis::testname::test_of(&processes, index)
    };
    assert_eq!(
        test(&["/bin/sleep", "0.1"]).as_deref(),
        Some("inner one, with a comma")
    );
    let names: std::collections::BTreeSet<String> = (0..processes.len())
        .filter_map(|i| proctrace::analysis::testname::test_of(&processes, i))
        .collect();
    let expected = ["inner one, with a comma", "runs a nested suite"];
    assert_eq!(
        names,
        expected.iter().map(|s| s.to_string()).collect(),
        "{}",
        run.text
    );
}

/// The analysis under the leaks view: the one other holder of the
/// sleeper's fd 3 is bats' reader subshell, with the pipe as its stdin.
fn assert_reader_holds_fd3(recording: &Path, sleeper: Pid) {
    let processes = read(recording);
    let index = (0..processes.len())
        .find(|&i| processes.get(i).pid == sleeper)
        .unwrap();
    let record = processes.get(index).lingering.expect("found lingering");
    let found = held(&processes, index, record);
    let fd3 = found.files.iter().find(|f| f.fds.contains(&3)).unwrap();
    assert_eq!(fd3.file.kind, FdKind::Pipe, "{found:?}");
    let Others::Running(holders) = &fd3.others else {
        panic!("{found:?}")
    };
    let readers: Vec<_> = holders.iter().filter(|h| h.fds == [0]).collect();
    assert_eq!(readers.len(), 1, "{found:?}");
    assert!(
        processes.get(readers[0].index).execs.is_empty(),
        "{found:?}"
    );
    assert!(
        !fd3.unanswered() && found.unrecorded.is_empty(),
        "{found:?}"
    );
}
