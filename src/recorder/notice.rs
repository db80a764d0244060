//! What a recording has to say while it runs, beyond its events.

use std::sync::Arc;

use super::hang::Taken;
use crate::event::Pid;

/// A lingering process, for people: its command and the chain of commands
/// that started it, from the root down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lingerer {
    /// The process.
    pub pid: Pid,
    /// What it runs.
    pub command: String,
    /// The commands of its ancestors, the root first, its parent last.
    pub ancestry: Vec<(Pid, String)>,
}

/// What a recording has to say while it runs, beyond its events.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// The root exited while these processes of its tree still run.
    RootExited(Vec<Lingerer>),
    /// A process has lingered for the `--linger` time.
    Lingering(Lingerer),
    /// A snapshot of the live tree was taken, whole: its records also
    /// follow among the events, once the events before it are out.
    Snapshot(Arc<Taken>),
    /// `--timeout` expired: the tree is being ended, first with this
    /// signal (`--timeout-signal`).
    TimedOut {
        /// The signal sent first.
        signal: i32,
    },
    /// The kernel has dropped events since the last count: these are the
    /// totals so far (checked about once a second).
    Lost {
        /// Events dropped with the buffer full.
        buffer_full: u64,
        /// Processes not followed with the tracking map full.
        tracking_full: u64,
    },
    /// A lingering process was sent a signal (`--kill-lingering`).
    Killed {
        /// The process.
        pid: Pid,
        /// The signal sent.
        signal: i32,
    },
}
