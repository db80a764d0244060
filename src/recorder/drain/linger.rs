//! `--linger` and `--kill-lingering`: the tree's processes that outlive
//! their parent or the root for the linger time are recorded and said,
//! and ended if asked; once only they are left, the recording ends.

use std::time::Duration;

use crossbeam_channel::Sender;
use nix::sys::signal::Signal;

use super::route::Router;
use super::signals::{self, Ending};
use crate::event::{Pid, Record, Trailer};
use crate::recorder::lineage::Lineage;
use crate::recorder::notice::Notice;

/// What the lingering processes have come to.
pub(super) struct Lingering {
    /// The `--linger` time; `None`: nothing is reported lingering.
    linger: Option<Duration>,
    /// `--kill-lingering`.
    kill: bool,
    /// Lingerers sent SIGTERM.
    ending: Ending,
    /// Since when only lingerers are left.
    only_they_since: Option<u64>,
}

impl Lingering {
    pub(super) fn new(linger: Option<Duration>, kill: bool) -> Lingering {
        Lingering {
            linger,
            kill,
            ending: Ending::default(),
            only_they_since: None,
        }
    }

    /// Records and says the processes that have lingered for the linger
    /// time by `elapsed`; their pids.
    pub(super) fn found(
        &self,
        elapsed: u64,
        lineage: &mut Lineage,
        router: &Router,
        notices: &Sender<Notice>,
        totals: &mut Trailer,
    ) -> Vec<Pid> {
        let Some(linger) = self.linger else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for lingering in lineage.newly_lingering(elapsed, linger.as_nanos() as u64) {
            let pid = lingering.pid;
            totals.lingering += 1;
            let _ = notices.send(Notice::Lingering(lineage.describe(pid)));
            router.push(Record::Lingering(lingering));
            found.push(pid);
        }
        found
    }

    /// With `--kill-lingering`, ends the lingerers `found` (SIGTERM) and
    /// those whose grace is over (SIGKILL).
    pub(super) fn end(
        &mut self,
        found: Vec<Pid>,
        elapsed: u64,
        lineage: &Lineage,
        notices: &Sender<Notice>,
    ) {
        if !self.kill {
            return;
        }
        for pid in found {
            signals::signal(pid, Signal::SIGTERM, notices);
            self.ending.started(pid, elapsed);
        }
        self.ending.kill_due(&lineage.lingerers(), elapsed, notices);
    }

    /// Notes from when only lingerers are left: without `--linger`
    /// nothing is reported lingering, and the kernel's counters alone say
    /// when the tree is gone.
    pub(super) fn note_left(&mut self, now: u64, lineage: &Lineage) {
        if self.linger.is_some() && !self.kill && lineage.only_lingerers_left() {
            self.only_they_since.get_or_insert(now);
        }
    }

    /// Whether only lingerers have been left for `grace` by `now`.
    pub(super) fn settled(&self, now: u64, grace: u64) -> bool {
        self.only_they_since.is_some_and(|t| now - t > grace)
    }
}
