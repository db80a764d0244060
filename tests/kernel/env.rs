//! Environment variables at exec: read in the kernel, only the allowlisted
//! ones recorded (the test runners', and `record --env NAME`), never another.

use std::collections::BTreeMap;
use std::fs;

use crate::common::{have_tool, pytest, record_with, strings, Mode, Opts};

const SECRET: &str = "proctrace-test-secret-5e1f";

/// The test runners' variables, as this test sets them for the command
/// (so that a runner of these tests cannot change what is expected).
fn runner_env() -> Vec<(String, String)> {
    [
        ("PYTEST_CURRENT_TEST", "t/test_a.py::test_b (call)"),
        ("BATS_TEST_FILENAME", "/t/a.bats"),
        ("BATS_TEST_NAME", "test_a"),
        ("NEXTEST_BINARY_ID", "proctrace::kernel"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .to_vec()
}

fn map(pairs: &[(String, String)]) -> BTreeMap<String, String> {
    pairs.iter().cloned().collect()
}

/// The environment is over the 16 KiB copied (a long variable sorts first,
/// as the command gets it, and is cut), argv is over its cap too, and a
/// secret sits among the variables: each exec keeps exactly the runners'
/// variables, and the secret is nowhere in the recording or on stderr.
fn only_the_allowlist(mode: Mode) {
    let mut opts = Opts::new(mode);
    opts.env = runner_env();
    opts.env.push(("SECRET".into(), SECRET.into()));
    opts.env.push(("AAA_LONG".into(), SECRET.repeat(1000)));
    let mut cmd = strings(&["/usr/bin/env", "/bin/true"]);
    cmd.extend((0..5000).map(|i| format!("argument-{i}")));
    let run = record_with(&opts, &cmd);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let execs = run.all_execs();
    assert_eq!(execs.len(), 2, "env, then true");
    for exec in execs {
        assert!(exec.argv_truncated);
        assert_eq!(exec.env, map(&runner_env()), "{}", exec.filename);
    }
    let bytes = fs::read(run.dir.path().join("rec.ndjson")).unwrap();
    let found = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    assert!(!found(SECRET.as_bytes()) && !found(b"SECRET") && !found(b"AAA_LONG"));
    assert!(!run.stderr.contains("secret"), "{}", run.stderr);
}

per_mode!(only_the_allowlist:
    only_the_allowlist_ring => Ring,
    only_the_allowlist_perf => Perf,
);

/// `--env NAME` keeps one more variable, as each program got it at its
/// exec: a shell changing it passes the new value on.
#[test]
fn env_option_adds_a_variable() {
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--env", "MY_VAR"]);
    opts.env = runner_env();
    opts.env.push(("MY_VAR".into(), "first".into()));
    opts.env.push(("OTHER_VAR".into(), "not kept".into()));
    let run = record_with(&opts, &["sh", "-c", "MY_VAR=second exec true"]);
    let root = run.root();
    let values: Vec<Option<&str>> = run
        .execs(root)
        .iter()
        .map(|e| e.env.get("MY_VAR").map(String::as_str))
        .collect();
    assert_eq!(values, [Some("first"), Some("second")]);
    let mut expected = map(&runner_env());
    expected.insert("MY_VAR".into(), "second".into());
    assert_eq!(run.execs(root)[1].env, expected);
    assert!(!run.text.contains("OTHER_VAR"), "{}", run.text);
}

/// A pytest test leaks a daemon; `--linger 1s --kill-lingering` ends the
/// run. The leaks and hang views name the daemon's test by its node id.
#[test]
fn a_leaking_pytest_test_is_named_by_its_node_id() {
    if !have_tool("pytest-3") {
        return;
    }
    let suite = tempfile::tempdir().unwrap();
    let file = suite.path().join("test_leak.py");
    fs::write(
        &file,
        "import subprocess\n\n\
         def test_fine():\n    pass\n\n\
         def test_leaks_a_daemon():\n    subprocess.Popen([\"sleep\", \"1000\"])\n\n\
         def test_last():\n    pass\n",
    )
    .unwrap();
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--linger", "1s", "--kill-lingering"]);
    let run = record_with(&opts, &pytest(suite.path(), &file));
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let sleep = run.child_with_argv(run.root(), &["sleep", "1000"]);
    let node_id = "test_leak.py::test_leaks_a_daemon";
    let current = &run.execs(sleep)[0].env["PYTEST_CURRENT_TEST"];
    assert_eq!(current, &format!("{node_id} (call)"));

    let input = run.dir.path().join("rec.ndjson");
    let out = run.dir.path().join("view");
    crate::common::render(&input, "leaks", &out);
    let leaks = fs::read_to_string(&out).unwrap();
    let header = format!("{sleep} sleep 1000\n  test:          {node_id}\n");
    assert!(leaks.contains(&header), "{leaks}");
    crate::common::render(&input, "hang", &out);
    let hang = fs::read_to_string(&out).unwrap();
    let line = format!("  {sleep} sleep 1000 [test \"{node_id}\"] (alive ");
    assert!(hang.contains(&line), "{hang}");
    // Only the daemon belongs to a test; pytest itself to none.
    assert_eq!(leaks.matches("  test: ").count(), 1, "{leaks}");
}
