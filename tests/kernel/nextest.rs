//! Tests named by their runner's own probes: a crate whose tests' names,
//! outcomes and children are known, run under the real cargo-nextest,
//! which fires `nextest:test-attempt-start` and `-done` for each attempt.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use proctrace::analysis::testname::{runner_check, test_of};
use proctrace::event::{Record, TestAttempt};

use crate::common::*;

/// A test name longer than the 63 bytes a probe's text keeps.
const LONG: &str = "tests::a_name_longer_than_the_sixty_three_bytes_a_probe_argument_keeps";

const LIB: &str = r#"
#[cfg(test)]
mod tests {
    #[test]
    fn passes() {}

    #[test]
    fn fails() {
        panic!("as planned");
    }

    #[test]
    fn a_name_longer_than_the_sixty_three_bytes_a_probe_argument_keeps() {}

    #[test]
    fn starts_a_child() {
        let status = std::process::Command::new("sleep").arg("0.05").status();
        assert!(status.unwrap().success());
    }
}
"#;

/// cargo-nextest, on the PATH or where install-deps put it.
fn nextest_dir() -> Option<PathBuf> {
    let installed = repo().join("tests/.cargo/bin/cargo-nextest");
    let found = tool_path("cargo-nextest").or(installed.is_file().then_some(installed));
    prerequisite(found.is_some(), "cargo-nextest (with its USDT probes)").then_some(())?;
    found.and_then(|path| path.parent().map(Path::to_path_buf))
}

/// A crate of four tests, built: nextest only runs them.
fn fixture(dir: &Path) {
    fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = "[package]\nname = \"planned\"\nversion = \"0.1.0\"\nedition = \"2021\"\n";
    fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    fs::write(dir.join("src/lib.rs"), LIB).unwrap();
    let built = Command::new("cargo")
        .args(["build", "--tests", "--offline", "--quiet"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(built.success());
}

fn attempts(run: &Run) -> Vec<TestAttempt> {
    let attempts = run.records.iter().cloned().filter_map(|r| match r {
        Record::TestAttempt(attempt) => Some(attempt),
        _ => None,
    });
    attempts.collect()
}

fn record_nextest(dir: tempfile::TempDir, nextest: &Path, more: &[&str]) -> Run {
    let krate = dir.path().join("planned");
    fixture(&krate);
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(more);
    let path = std::env::join_paths(std::iter::once(nextest.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    opts.env = vec![("PATH".into(), path.to_string_lossy().into_owned())];
    let manifest = krate.join("Cargo.toml");
    let manifest = manifest.to_str().unwrap();
    let command = [
        "cargo",
        "nextest",
        "run",
        "--offline",
        "--manifest-path",
        manifest,
        "--retries",
        "1",
        "--no-fail-fast",
    ];
    record_in(dir, &opts, &command)
}

#[test]
fn nextest_names_its_tests_through_its_probes() {
    let Some(nextest) = nextest_dir() else {
        return;
    };
    let run = record_nextest(tempfile::tempdir().unwrap(), &nextest, &[]);
    assert_eq!(
        run.code(),
        100,
        "nextest's status for a failed test: {}",
        run.stderr
    );
    let told = attempts(&run);
    let mut results: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for attempt in &told {
        assert_eq!(attempt.suite, "planned", "{attempt:?}");
        assert!(attempt.test_pid.is_some(), "{attempt:?}");
        assert!(attempt.start < attempt.end, "{attempt:?}");
        assert!(attempt.duration_ns.is_some_and(|d| d > 0), "{attempt:?}");
        let result = attempt.result.clone().unwrap_or_default();
        results
            .entry(attempt.name.clone())
            .or_default()
            .push(result);
    }
    let expected = BTreeMap::from([
        (LONG[..63].to_string(), vec!["pass".to_string()]),
        ("tests::fails".into(), vec!["fail".into(), "fail".into()]),
        ("tests::passes".into(), vec!["pass".into()]),
        ("tests::starts_a_child".into(), vec!["pass".into()]),
    ]);
    assert_eq!(results, expected, "{told:?}");

    // Each attempt is on the process that ran it, the long name whole;
    // what a test starts belongs to it.
    let processes = read(&run.dir.path().join("rec.ndjson"));
    let named: Vec<(String, String)> = processes
        .all()
        .enumerate()
        .filter_map(|(i, p)| {
            let test = test_of(&processes, i)?;
            Some((
                p.execs.last()?.argv.get(0)?.rsplit('/').next()?.to_string(),
                test,
            ))
        })
        .collect();
    let tests_of = |program: &str| -> Vec<&str> {
        let mut tests: Vec<&str> = named
            .iter()
            .filter(|(p, _)| p.starts_with(program))
            .map(|(_, t)| t.as_str())
            .collect();
        tests.sort();
        tests
    };
    assert_eq!(
        tests_of("planned-"),
        [
            format!("planned {LONG}"),
            "planned tests::fails".into(),
            "planned tests::fails".into(),
            "planned tests::passes".into(),
            "planned tests::starts_a_child".into(),
        ]
    );
    assert_eq!(tests_of("sleep"), ["planned tests::starts_a_child"]);
    let check = runner_check(&processes);
    assert_eq!((check.attempts, check.agree, check.unplaced), (5, 5, 0));
    assert!(check.judged_otherwise.is_empty(), "{check:?}");
    let recording = run.dir.path().join("rec.ndjson");
    let summary = proctrace_ok(&["render", "-i", recording.to_str().unwrap(), "-d", "summary"]);
    let summary = String::from_utf8_lossy(&summary.stdout);
    assert!(
        summary.contains("Tests:      5 attempts told by the runner's probes; 5 agree"),
        "{summary}"
    );
    let markdown = proctrace_ok(&[
        "render",
        "-i",
        recording.to_str().unwrap(),
        "-d",
        "markdown",
    ]);
    let markdown = String::from_utf8_lossy(&markdown.stdout);
    assert!(
        markdown.contains("**Tests** 5 attempts told by the runner's probes; 5 agree"),
        "{markdown}"
    );
}

#[test]
fn no_runner_probes_leaves_the_names_to_the_command_lines() {
    let Some(nextest) = nextest_dir() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = record_nextest(dir, &nextest, &["--no-runner-probes"]);
    assert_eq!(run.code(), 100, "{}", run.stderr);
    assert!(attempts(&run).is_empty());
    assert!(run.header().probes.is_empty());
    let processes = read(&run.dir.path().join("rec.ndjson"));
    let tests: std::collections::BTreeSet<String> = (0..processes.len())
        .filter_map(|i| test_of(&processes, i))
        .collect();
    assert!(tests.contains("planned tests::passes"), "{tests:?}");
}
