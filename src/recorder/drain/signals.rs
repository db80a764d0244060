//! Signals the recording sends to the tree: a lingering process ended,
//! the tree ended after `--timeout` or on proctrace's own signal, and the
//! SIGKILL that follows a grace period.

use crossbeam_channel::Sender;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid as NixPid;

use crate::event::Pid;
use crate::recorder::notice::Notice;

/// Between SIGTERM (or `--timeout-signal`) and SIGKILL.
pub(super) const KILL_GRACE_NS: u64 = 2_000_000_000;

/// Sends `signal` to `pid` and says so.
pub(super) fn signal(pid: Pid, signal: Signal, notices: &Sender<Notice>) {
    if kill(NixPid::from_raw(pid), signal).is_ok() {
        let _ = notices.send(Notice::Killed {
            pid,
            signal: signal as i32,
        });
    }
}

/// Sends `signal` to every process of `tree`.
pub(super) fn signal_tree(tree: &[Pid], signal: Signal) {
    for &pid in tree {
        let _ = kill(NixPid::from_raw(pid), signal);
    }
}

/// Processes sent a first signal, and when each is due its SIGKILL.
#[derive(Default)]
pub(super) struct Ending {
    due: Vec<(Pid, u64)>,
}

impl Ending {
    /// `pid` was sent its first signal at `elapsed`.
    pub(super) fn started(&mut self, pid: Pid, elapsed: u64) {
        self.due.push((pid, elapsed + KILL_GRACE_NS));
    }

    /// Kills those of `running` whose grace is over by `elapsed`, and
    /// forgets those no longer running.
    pub(super) fn kill_due(&mut self, running: &[Pid], elapsed: u64, notices: &Sender<Notice>) {
        self.due.retain(|&(pid, due)| {
            if !running.contains(&pid) {
                return false;
            }
            if elapsed < due {
                return true;
            }
            signal(pid, Signal::SIGKILL, notices);
            false
        });
    }
}
