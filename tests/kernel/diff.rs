//! `proctrace diff` on real recordings of one flaky script: two good runs
//! do not differ; a run where one step fails and one process leaks differs
//! by exactly that, named with its test; a step that grew slower is found
//! beyond the thresholds and not below them.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::common::*;

/// A suite of steps, each marked as a pytest test would be. With `$FLAKY`
/// naming a file that exists, the check fails and a process is left behind;
/// `$DELAY` is how long the slow step sleeps.
const SCRIPT: &str = r#"
PYTEST_CURRENT_TEST='t/test_suite.py::test_setup (call)' /bin/echo setting up
PYTEST_CURRENT_TEST='t/test_suite.py::test_check (call)' sh -c 'test ! -e "$FLAKY"'
if [ -e "$FLAKY" ]; then
    PYTEST_CURRENT_TEST='t/test_suite.py::test_check (call)' sleep 30 &
fi
PYTEST_CURRENT_TEST='t/test_suite.py::test_slow (call)' sleep "$DELAY"
exit 0
"#;

/// Records the script into `dir/name.ndjson`, lingering processes killed.
fn record_suite(dir: &Path, name: &str, flaky: bool, delay: &str) -> std::path::PathBuf {
    let mut opts = Opts::new(Mode::Ring);
    let flag = dir.join(if flaky { "flag" } else { "absent" });
    std::fs::write(dir.join("flag"), "").unwrap();
    opts.env = vec![
        ("FLAKY".into(), flag.display().to_string()),
        ("DELAY".into(), delay.into()),
    ];
    opts.args = strings(&["--linger", "500ms", "--kill-lingering"]);
    let run = record_with(&opts, &["sh", "-c", SCRIPT]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let path = dir.join(format!("{name}.ndjson"));
    std::fs::copy(run.dir.path().join("rec.ndjson"), &path).unwrap();
    path
}

fn diff(args: &[&str], a: &Path, b: &Path) -> (Output, Value) {
    let mut all = vec!["diff", "--json"];
    all.extend(args);
    all.extend([a.to_str().unwrap(), b.to_str().unwrap()]);
    let output = proctrace(&all);
    let json = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "diff --json: {e}: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output, json)
}

fn entries<'a>(json: &'a Value, list: &str) -> &'a [Value] {
    json[list].as_array().map_or(&[], Vec::as_slice)
}

/// The lists of a diff and how many entries each has.
fn counts(json: &Value) -> Vec<(&'static str, usize)> {
    [
        "status_changed",
        "only_in_a",
        "only_in_b",
        "slower",
        "hung_only_in_a",
        "hung_only_in_b",
    ]
    .map(|list| (list, entries(json, list).len()))
    .to_vec()
}

#[test]
fn a_failed_step_and_a_leak_are_the_only_differences() {
    let dir = tempfile::tempdir().unwrap();
    let good = record_suite(dir.path(), "good", false, "0.05");
    let again = record_suite(dir.path(), "again", false, "0.05");
    let flaky = record_suite(dir.path(), "flaky", true, "0.05");

    let (output, json) = diff(&[], &good, &again);
    assert_eq!(output.status.code(), Some(0), "{json:#}");
    assert!(counts(&json).iter().all(|&(_, n)| n == 0), "{json:#}");

    let (output, json) = diff(&[], &good, &flaky);
    assert_eq!(output.status.code(), Some(1), "{json:#}");
    let expected = [
        ("status_changed", 1),
        ("only_in_a", 0),
        ("only_in_b", 1),
        ("slower", 0),
        ("hung_only_in_a", 0),
        // The leak is only in B: listed there, once, as outlived.
        ("hung_only_in_b", 0),
    ];
    assert_eq!(counts(&json), expected, "{json:#}");
    let failed = &json["status_changed"][0];
    assert_eq!(failed["a"]["status"], "exit 0");
    assert_eq!(failed["b"]["status"], "exit 1");
    assert_eq!(failed["b"]["command"], r#"sh -c 'test ! -e "$FLAKY"'"#);
    assert_eq!(failed["b"]["test"], "t/test_suite.py::test_check");
    let leak = &json["only_in_b"][0];
    assert_eq!(leak["process"]["command"], "sleep 30");
    assert_eq!(leak["process"]["test"], "t/test_suite.py::test_check");
    assert_eq!(leak["path"][1], "sleep N", "aligned under the script");
    assert_eq!(leak["outlived"], true);

    let text = proctrace(&["diff", good.to_str().unwrap(), flaky.to_str().unwrap()]);
    assert_eq!(text.status.code(), Some(1));
    let text = String::from_utf8(text.stdout).unwrap();
    for shown in [
        "Ended differently (1):",
        "exit 0 → exit 1",
        "[test: t/test_suite.py::test_check]",
        "Only in B (1):\n  sleep 30: killed by SIGTERM",
        "outlived its parent  [test: t/test_suite.py::test_check]",
    ] {
        assert!(text.contains(shown), "{shown:?} not in:\n{text}");
    }
}

/// Two runs of one command whose arguments hold what changes from run to
/// run (a pid in brackets, a port, a temporary name) are matched as a
/// person would match them: nothing differs.
#[test]
fn runs_differing_in_pids_ports_and_temporary_names_do_not_differ() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"exec env true "[$$]" "localhost:$$" "$(mktemp -u tmpXXXXXXXX)""#;
    let [a, b] = ["a", "b"].map(|name| {
        let run = record(Mode::Ring, &["sh", "-c", script]);
        assert_eq!(run.code(), 0, "{}", run.stderr);
        let path = dir.path().join(format!("{name}.ndjson"));
        std::fs::copy(run.dir.path().join("rec.ndjson"), &path).unwrap();
        path
    });
    // Matching is the point, not time: a loaded machine may slow one run.
    let (output, json) = diff(&["--slower", "+1h"], &a, &b);
    assert_eq!(output.status.code(), Some(0), "{json:#}");
    assert!(counts(&json).iter().all(|(_, n)| *n == 0), "{json:#}");
    assert_eq!(json["a"]["processes"], 2, "{json:#}");
}

#[test]
fn a_slower_step_is_found_beyond_the_thresholds_only() {
    let dir = tempfile::tempdir().unwrap();
    let fast = record_suite(dir.path(), "fast", false, "0.05");
    let slow = record_suite(dir.path(), "slow", false, "0.5");

    let (output, json) = diff(&[], &fast, &slow);
    assert_eq!(output.status.code(), Some(1), "{json:#}");
    // The slow step, and the script that waited for it.
    let slower: Vec<&Value> = entries(&json, "slower")
        .iter()
        .map(|pair| &pair["b"]["command"])
        .collect();
    assert!(slower.contains(&&Value::from("sleep 0.5")), "{json:#}");
    let step = entries(&json, "slower")
        .iter()
        .find(|pair| pair["b"]["command"] == "sleep 0.5")
        .unwrap();
    assert_eq!(step["a"]["command"], "sleep 0.05");
    assert_eq!(step["b"]["test"], "t/test_suite.py::test_slow");
    assert_eq!(
        counts(&json)[..3],
        [("status_changed", 0), ("only_in_a", 0), ("only_in_b", 0)]
    );

    // 10x longer is beyond neither 20x nor +1s.
    for threshold in ["20x", "+1s"] {
        let (output, json) = diff(&["--slower", threshold], &fast, &slow);
        assert_eq!(output.status.code(), Some(0), "{threshold}: {json:#}");
    }
}

#[test]
fn bad_input_is_exit_status_2_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = repo().join("tests/data/demo.ndjson");
    let bad = dir.path().join("bad.ndjson");
    let mut text = std::fs::read_to_string(&good).unwrap();
    text.insert_str(text.find('\n').unwrap() + 1, "{not json\n");
    std::fs::write(&bad, text).unwrap();
    let output = proctrace(&["diff", good.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("{}:2", bad.display())), "{stderr}");
    let output = proctrace(&[
        "diff",
        "--slower",
        "2",
        good.to_str().unwrap(),
        good.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
}

/// Records `hot` with a CPU profile, spin_a and spin_b sharing each round
/// as `ratio` says (tests/workloads/hot.c), into `dir/name.ndjson`.
fn record_hot(dir: &Path, name: &str, ratio: &str) -> std::path::PathBuf {
    let hot = workload("hot");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    opts.env = vec![("HOT_RATIO".into(), ratio.into())];
    // 1.2 s of CPU, ~1,200 samples: with 400 ms, one recording under a
    // loaded suite gave spin_b 37% where it does 25% of the work.
    let run = record_with(&opts, &[hot.to_str().unwrap(), "1200", "2", "40"]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let path = dir.join(format!("{name}.ndjson"));
    std::fs::copy(run.dir.path().join("rec.ndjson"), &path).unwrap();
    path
}

/// The function of a diff's `cpu` entry, GCC's `.constprop.0` left out.
fn function(moved: &Value) -> &str {
    let name = moved["function"].as_str().unwrap();
    name.split('.').next().unwrap()
}

#[test]
fn the_functions_whose_cpu_share_moved_most_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let before = record_hot(dir.path(), "before", "3:1");
    let after = record_hot(dir.path(), "after", "1:3");

    // A wall time an hour longer is slower: on a busy machine, one run
    // may well take twice as long as the other, which is not the point.
    let (output, json) = diff(&["--slower", "+1h"], &before, &after);
    // The same command, the same processes: shares moving is no
    // difference for the exit status.
    assert_eq!(output.status.code(), Some(0), "{json:#}");
    assert!(counts(&json).iter().all(|&(_, n)| n == 0), "{json:#}");
    let cpu = &json["cpu"];
    assert!(cpu["a_samples"].as_u64().unwrap() > 0, "{cpu:#}");
    // 75% to 25% and back: half the samples change hands.
    let (grew, shrank) = (&cpu["grew"][0], &cpu["shrank"][0]);
    assert_eq!(function(grew), "spin_b", "{cpu:#}");
    assert_eq!(function(shrank), "spin_a", "{cpu:#}");
    for (moved, sign) in [(grew, 1.0), (shrank, -1.0)] {
        let points = moved["points"].as_f64().unwrap() * sign;
        assert!((35.0..65.0).contains(&points), "{moved:#}");
    }

    let text = proctrace(&["diff", before.to_str().unwrap(), after.to_str().unwrap()]);
    let text = String::from_utf8(text.stdout).unwrap();
    let section = text
        .split_once("\nCPU share by function, % of each run's self samples (A: ")
        .unwrap_or_else(|| panic!("no CPU section:\n{text}"))
        .1;
    let lines: Vec<&str> = section.lines().collect();
    assert!(lines[1].starts_with("  grew most ("), "{text}");
    assert!(lines[2].contains(" points  spin_b"), "{text}");
    let shrank = lines
        .iter()
        .position(|l| l.starts_with("  shrank most ("))
        .unwrap();
    assert!(lines[shrank + 1].contains(" points  spin_a"), "{text}");

    // A run recorded without a profile: said, not compared.
    let plain = record_suite(dir.path(), "plain", false, "0.05");
    let (_, json) = diff(&[], &before, &plain);
    assert!(json["cpu"].is_null(), "{json:#}");
    assert!(json["a"]["cpu_samples"].as_u64().unwrap() > 0);
    assert!(json["b"]["cpu_samples"].is_null());
}
