//! Test runners' own probes, which name the tests: nextest fires
//! `nextest:test-attempt-start` as it starts a test's process and
//! `nextest:test-attempt-done` when it has judged it. Each passes a JSON
//! document first, then the test in plain arguments: the binary id, the
//! name, and the pid (start) or the result and duration (done). nextest
//! 0.9.113 added an attempt id (and the pid) after the document; the
//! argument count tells the two layouts apart. The probes "are not part of
//! nextest's stability guarantees": a layout not known here is counted as
//! any probe, and names no test.
//!
//! A runner that runs every test in its own process (pytest) says which
//! one runs now in a variable it sets before each; [`TestMarks`] are
//! where libc sets and unsets it.

use std::path::{Path, PathBuf};

use super::usdt::probes;
use super::{files, symbols};

/// The provider of nextest's probes.
pub const NEXTEST: &str = "nextest";

/// Which arguments of a runner's probe say what of a test attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptProbe {
    /// The start of an attempt (else its end).
    pub start: bool,
    /// The suite's: nextest's binary id.
    pub suite: usize,
    /// The test's name.
    pub name: usize,
    /// The test process's pid (at the start).
    pub pid: Option<usize>,
    /// The result (`pass`, `fail`; at the end).
    pub result: Option<usize>,
    /// The duration in nanoseconds (at the end).
    pub duration: Option<usize>,
}

impl AttemptProbe {
    /// The layout of nextest's probe `name` with `args` arguments, if
    /// known.
    pub fn nextest(name: &str, args: usize) -> Option<AttemptProbe> {
        let start = |suite, pid| AttemptProbe {
            start: true,
            suite,
            name: suite + 1,
            pid,
            result: None,
            duration: None,
        };
        let done = |suite| AttemptProbe {
            start: false,
            suite,
            name: suite + 1,
            pid: None,
            result: Some(suite + 2),
            duration: Some(suite + 3),
        };
        match (name, args) {
            ("test-attempt-start", 5) => Some(start(2, Some(4))),
            ("test-attempt-start", 3) => Some(start(1, None)),
            ("test-attempt-done", 6) => Some(done(2)),
            ("test-attempt-done", 5) => Some(done(1)),
            _ => None,
        }
    }

    /// Bit i set where argument i is text: the suite, name and result.
    pub fn strings(&self) -> u32 {
        [Some(self.suite), Some(self.name), self.result]
            .into_iter()
            .flatten()
            .fold(0, |mask, i| mask | 1 << i)
    }
}

/// The specs of nextest's test probes, for a command that runs nextest
/// (an argument names it: `cargo nextest run`, `cargo-nextest`, `sh -c
/// 'cargo nextest run'`): on `cargo-nextest` where cargo finds it
/// (`$CARGO_HOME/bin`, then PATH), if that ships them.
pub fn nextest_specs(command: &[String]) -> Vec<String> {
    if !command.iter().any(|arg| arg.contains(NEXTEST)) {
        return Vec::new();
    }
    let Some(file) = cargo_nextest() else {
        return Vec::new();
    };
    let known = probes(&file).unwrap_or_default();
    let wanted = ["test-attempt-start", "test-attempt-done"];
    wanted
        .iter()
        .filter(|name| {
            known
                .iter()
                .any(|p| p.provider == NEXTEST && p.name == **name)
        })
        .map(|name| format!("usdt:{}:{NEXTEST}:{name}", file.display()))
        .collect()
}

/// `cargo-nextest` as `cargo nextest` runs it.
fn cargo_nextest() -> Option<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")));
    let in_home = cargo_home.map(|home| home.join("bin/cargo-nextest"));
    in_home
        .and_then(|path| files::find(&path.to_string_lossy()))
        .or_else(|| files::find("cargo-nextest"))
}

/// The variables by which a runner names the test running in its own
/// process now: pytest sets `PYTEST_CURRENT_TEST` to the test's node id
/// and phase before each phase (`tests/t.py::test_a (call)`), and unsets
/// it after the test.
pub const TEST_VARIABLES: &[&str] = &["PYTEST_CURRENT_TEST"];

/// Where the tree's processes set and unset variables: the file offsets
/// of `setenv` and `unsetenv` in the libc they map. An interpreter sets
/// its environment through them (CPython's `os.environ` since 3.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestMarks {
    /// The C library.
    pub file: PathBuf,
    /// `setenv(name, value, overwrite)`.
    pub setenv: u64,
    /// `unsetenv(name)`.
    pub unsetenv: u64,
}

impl TestMarks {
    /// The C library's, found as `--probe uprobe:libc:setenv` finds it.
    pub fn find() -> Option<TestMarks> {
        let file = files::find("libc")?;
        let names = ["setenv", "unsetenv"];
        let found = symbols::functions_where(&file, |name| names.contains(&name)).ok()?;
        let offset = |name: &str| found.iter().find(|(n, _)| n == name).map(|(_, at)| *at);
        Some(TestMarks {
            setenv: offset("setenv")?,
            unsetenv: offset("unsetenv")?,
            file,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts_of_nextest_are_known() {
        let start = AttemptProbe::nextest("test-attempt-start", 5).unwrap();
        assert_eq!((start.suite, start.name, start.pid), (2, 3, Some(4)));
        assert_eq!(start.strings(), 0b1100);
        let done = AttemptProbe::nextest("test-attempt-done", 6).unwrap();
        assert_eq!((done.result, done.duration), (Some(4), Some(5)));
        assert_eq!(done.strings(), 0b11100);
        let old = AttemptProbe::nextest("test-attempt-start", 3).unwrap();
        assert_eq!((old.suite, old.name, old.pid), (1, 2, None));
        assert_eq!(AttemptProbe::nextest("test-attempt-slow", 5), None);
        assert_eq!(AttemptProbe::nextest("test-attempt-done", 9), None);
    }

    #[test]
    fn libc_sets_variables_where_its_symbols_say() {
        let marks = TestMarks::find().expect("this machine's libc");
        assert_ne!(marks.setenv, marks.unsetenv);
        assert!(marks.file.to_string_lossy().contains("libc"), "{marks:?}");
    }

    #[test]
    fn only_a_command_that_names_nextest_gets_its_probes() {
        assert!(nextest_specs(&["make".into(), "test".into()]).is_empty());
    }
}
