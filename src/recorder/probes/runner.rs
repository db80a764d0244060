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

use super::attempt::NEXTEST;
use super::point::{Place, Resolved, MAX_PROBES};
use super::usdt::probes;
use super::{files, resolve, symbols};

/// The specs of nextest's test probes, for a command that runs nextest
/// (an argument names it: `cargo nextest run`, `cargo-nextest`, `sh -c
/// 'cargo nextest run'`): on `cargo-nextest` where cargo finds it
/// (`$CARGO_HOME/bin`, then PATH), if that ships them.
fn nextest_specs(command: &[String]) -> Vec<String> {
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

/// nextest's test probes, resolved and numbered after the `given` ones,
/// where `command` runs nextest, none of `given` is one of them already
/// and this kernel can attach them (`supported`): attached unasked, so
/// never an error, and optional.
pub(crate) fn nextest_points(
    command: &[String],
    given: &[Resolved],
    supported: impl FnOnce() -> bool,
) -> Vec<Resolved> {
    let asked = given.iter().any(|p| {
        matches!(
            p.place,
            Place::Usdt {
                attempt: Some(_),
                ..
            }
        )
    });
    let specs = match asked {
        true => return Vec::new(),
        false => nextest_specs(command),
    };
    if specs.is_empty() || !supported() {
        return Vec::new();
    }
    match resolve(&specs) {
        Ok(runner) if given.len() + runner.len() <= MAX_PROBES => runner
            .into_iter()
            .map(|mut point| {
                point.point.id += given.len() as u32;
                point.optional = true;
                point
            })
            .collect(),
        Ok(_) => {
            log::debug!("nextest's probes: past the {MAX_PROBES} probes");
            Vec::new()
        }
        Err(err) => {
            log::debug!("nextest's probes: {err}");
            Vec::new()
        }
    }
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
        let found =
            symbols::functions_where(&file, |n| names.contains(&n.forms[0].as_str())).ok()?;
        let offset = |name: &str| found.iter().find(|f| f.symbol == name).map(|f| f.offset);
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
