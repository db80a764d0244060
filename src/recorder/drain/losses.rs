//! What the kernel dropped, told as it happens, about once a second: the
//! end of the recording is too late for a run that hangs.

use crossbeam_channel::Sender;

use crate::recorder::load::Probe;
use crate::recorder::notice::Notice;

/// Between two reads of the kernel's loss counters.
const EVERY_NS: u64 = 1_000_000_000;

/// The kernel's loss counters as last told, and when they were read.
#[derive(Default)]
pub(super) struct Losses {
    told: (u64, u64),
    read_at: u64,
}

impl Losses {
    /// Says the losses if they grew since the last time they were read,
    /// a second or more before `elapsed`.
    pub(super) fn watch(&mut self, elapsed: u64, probe: &Probe<'_>, notices: &Sender<Notice>) {
        if elapsed.saturating_sub(self.read_at) < EVERY_NS {
            return;
        }
        let losses = probe.losses();
        self.read_at = elapsed;
        if losses != std::mem::replace(&mut self.told, losses) {
            let (buffer_full, tracking_full) = losses;
            let _ = notices.send(Notice::Lost {
                buffer_full,
                tracking_full,
            });
        }
    }
}
