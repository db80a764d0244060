//! What a recording does about the tree as it runs: lingering processes,
//! timeouts, hangs and their `--on-hang` runs.

use std::path::PathBuf;
use std::time::Duration;

/// How long an `--on-hang` run may take, unless the recorder is told
/// otherwise (`Recorder::on_hang_timeout`).
pub const DEFAULT_ON_HANG_TIMEOUT: Duration = Duration::from_secs(10);

/// What to do about processes that outlive their parent or the root.
#[derive(Debug, Clone)]
pub(crate) struct LingerPolicy {
    pub linger: Option<Duration>,
    pub kill: bool,
    pub subreaper: bool,
    /// `--timeout`: snapshot, then end the tree.
    pub timeout: Option<Duration>,
    /// What `timeout` ends the tree with, before SIGKILL.
    pub timeout_signal: nix::sys::signal::Signal,
    /// `--hang-after`: snapshot once the tree has been quiet this long.
    pub hang_after: Option<Duration>,
    /// `--on-hang`: run for each culprit after a snapshot.
    pub on_hang: Option<String>,
    pub on_hang_timeout: Duration,
    /// `--command-output`: its last line goes into each snapshot.
    pub command_output: Option<PathBuf>,
}

impl Default for LingerPolicy {
    fn default() -> Self {
        LingerPolicy {
            linger: None,
            kill: false,
            subreaper: false,
            timeout: None,
            timeout_signal: nix::sys::signal::Signal::SIGTERM,
            hang_after: None,
            on_hang: None,
            on_hang_timeout: DEFAULT_ON_HANG_TIMEOUT,
            command_output: None,
        }
    }
}
