//! Tests as their runner's own probes tell them: nextest fires
//! `test-attempt-start` with the test's name and process, and
//! `test-attempt-done` with its result and duration.

use serde::{Deserialize, Serialize};

use super::Pid;

/// One attempt of one test, from its runner's probes: the runner's word
/// for which process ran which test, and how it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestAttempt {
    /// The runner's process, which fired the probes.
    pub pid: Pid,
    /// The test's own process, where the runner says it (nextest 0.9.113
    /// and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_pid: Option<Pid>,
    /// Its suite: nextest's binary id (`proctrace::kernel`).
    pub suite: String,
    /// The test's name as the probe passed it: its first
    /// [`PROBE_TEXT_MAX`] bytes.
    pub name: String,
    /// When it started and ended (nanoseconds since the start of the
    /// recording), where the probe was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    /// See `start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<u64>,
    /// The runner's verdict: nextest's `pass`, `fail`, `timeout`,
    /// `exec-fail`, `leak`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The test's duration as the runner measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
}

/// pytest's test in `PYTEST_CURRENT_TEST`, which is the test's node id
/// and its phase, `tests/test_a.py::test_b (call)`: the node id, how
/// pytest names it.
pub fn pytest_node_id(current: &str) -> &str {
    [" (setup)", " (call)", " (teardown)"]
        .iter()
        .find_map(|phase| current.strip_suffix(phase))
        .unwrap_or(current)
}

/// The longest text a probe's argument keeps (proctrace.h's
/// PROBE_STRING_CAP, less the NUL): a name this long may have been cut.
pub const PROBE_TEXT_MAX: usize = 63;

impl TestAttempt {
    /// Whether `full`, a test's whole name, is the one this attempt
    /// names, which may have been cut to [`PROBE_TEXT_MAX`] bytes (less
    /// a character cut in two).
    pub fn names(&self, full: &str) -> bool {
        if self.name.len() + 3 >= PROBE_TEXT_MAX {
            full.starts_with(&self.name)
        } else {
            full == self.name
        }
    }
}
