//! CPython's own test runner, `python3 -m test -jN`: each worker process
//! runs one test module, and it and what it starts are named by it.

use crate::common::*;
use proctrace::analysis::testname::test_of;

const ALPHA: &str = "import subprocess, sys, unittest
class T(unittest.TestCase):
    def test_child(self):
        subprocess.run([sys.executable, '-c', 'pass'], check=True)
";

const BETA: &str = "import unittest
class T(unittest.TestCase):
    def test_nothing(self):
        pass
";

/// Two test modules of a `--testdir` run by two workers: each worker is
/// its module, the child a test starts is that test's, and the runner's
/// own process is none.
#[test]
fn regrtest_workers_are_named_by_their_test_module() {
    let python = std::path::Path::new("/usr/bin/python3");
    if !prerequisite(
        python.exists() && have_regrtest(python),
        "/usr/bin/python3 with its `test` package",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tests = dir.path().join("tests");
    std::fs::create_dir(&tests).unwrap();
    std::fs::write(tests.join("test_alpha.py"), ALPHA).unwrap();
    std::fs::write(tests.join("test_beta.py"), BETA).unwrap();
    let testdir = tests.to_str().unwrap().to_owned();
    let command = [
        "/usr/bin/python3",
        "-m",
        "test",
        "-j2",
        "--testdir",
        &testdir,
    ];
    let run = record_in(
        dir,
        &Opts::new(Mode::Ring),
        &[&command[..], &["test_alpha", "test_beta"]].concat(),
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let processes = read(&run.dir.path().join("rec.ndjson"));
    let mut named: Vec<(String, Option<String>)> = (0..processes.len())
        .map(|i| {
            let exec = processes.get(i).execs.last().expect("every process execs");
            // -B is passed on to the workers where the environment asks
            // for no bytecode (PYTHONDONTWRITEBYTECODE): not the point.
            let argv = exec.argv.iter().filter(|a| *a != "-B");
            let argv: Vec<&str> = argv.take(5).collect();
            (argv.join(" "), test_of(&processes, i))
        })
        .collect();
    named.sort();
    let test = |name: &str| Some(name.to_owned());
    let worker = "/usr/bin/python3 -u -m test.regrtest --worker-args";
    let expected = [
        ("/usr/bin/python3 -c pass", test("test_alpha")),
        ("/usr/bin/python3 -m test -j2 --testdir", None),
        (worker, test("test_alpha")),
        (worker, test("test_beta")),
    ]
    .map(|(argv, test)| (argv.to_owned(), test));
    assert_eq!(named, expected);
}

/// Whether `python` has CPython's test runner (Debian ships it in
/// libpython3.X-stdlib; the tests themselves are another package).
fn have_regrtest(python: &std::path::Path) -> bool {
    std::process::Command::new(python)
        .args(["-c", "import test.libregrtest"])
        .status()
        .is_ok_and(|s| s.success())
}
