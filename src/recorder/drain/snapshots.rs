//! Snapshots of the live tree (asked for by a signal, after `--timeout`,
//! when the tree is quiet for `--hang-after`, when processes linger), the
//! `--on-hang` runs each hands its culprits to, and what follows them: the
//! signal passed on, or the tree ended.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use crossbeam_channel::Sender;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid as NixPid;

use super::clock::Clock;
use super::route::Router;
use super::signals::{signal_tree, KILL_GRACE_NS};
use crate::event::{Pid, Record, SnapshotCause, Trailer};
use crate::inspect;
use crate::recorder::control::Control;
use crate::recorder::hang::Taken;
use crate::recorder::hooks::{Hooks, Reaped};
use crate::recorder::lineage::Lineage;
use crate::recorder::notice::Notice;
use crate::recorder::policy::LingerPolicy;

/// How the tree is ended after a snapshot.
#[derive(Clone, Copy)]
enum Ending {
    /// `--timeout` expired.
    Timeout,
    /// proctrace got this signal: pass it on to the root if asked, then
    /// stop.
    Interrupt { signal: i32, pass_on: bool },
}

/// What a step's snapshots read: the tree as the events say, and where
/// the records and notices go.
pub(super) struct Tree<'a> {
    pub root: Pid,
    pub clock: Clock,
    pub lineage: &'a Lineage,
    pub router: &'a Router,
    pub notices: &'a Sender<Notice>,
}

impl Tree<'_> {
    /// Every process of the tree known to run: those the released events
    /// say run, and the children of forks not yet released; the root
    /// first, where it runs (the views' answers and the command's output
    /// go on a snapshot's first record), then by pid, which wraps.
    fn live(&self) -> Vec<Pid> {
        let mut pids = self.lineage.alive();
        pids.extend(self.router.forked());
        pids.sort_unstable();
        pids.dedup();
        if let Some(root) = pids.iter().position(|&pid| pid == self.root) {
            pids[..=root].rotate_right(1);
        }
        pids
    }
}

/// The snapshots taken and what follows them.
pub(super) struct Snapshots {
    hooks: Option<Hooks>,
    /// When the last event of the tree happened (nanoseconds since start).
    last_event: u64,
    /// A `--hang-after` snapshot was taken since the last event.
    quiet_reported: bool,
    /// After `--timeout`: when the tree gets SIGKILL.
    timeout_kill_due: Option<u64>,
    /// Snapshots whose `--on-hang` runs have not all ended.
    hooks_running: usize,
    /// A snapshot was taken in this step.
    taken_now: bool,
    /// What follows a snapshot once its `--on-hang` runs have ended.
    after_hooks: Option<Ending>,
}

impl Snapshots {
    /// With the `--on-hang` runs' thread, if there is one.
    pub(super) fn new(hooks: Option<Hooks>) -> Snapshots {
        Snapshots {
            hooks,
            last_event: 0,
            quiet_reported: false,
            timeout_kill_due: None,
            hooks_running: 0,
            taken_now: false,
            after_hooks: None,
        }
    }

    /// An event of the tree happened at `at`: it is not quiet.
    pub(super) fn event_at(&mut self, at: u64) {
        self.last_event = at;
        self.quiet_reported = false;
    }

    /// Whether a snapshot was taken since the last ask.
    pub(super) fn taken_now(&mut self) -> bool {
        std::mem::take(&mut self.taken_now)
    }

    /// Whether `--on-hang` runs are under way: their records are waited
    /// for, bounded by their own timeout.
    pub(super) fn busy(&self) -> bool {
        self.hooks_running > 0
    }

    /// The statuses of the `--on-hang` shells, for the reaper.
    pub(super) fn reaped(&self) -> Option<MutexGuard<'_, Reaped>> {
        self.hooks.as_ref().map(Hooks::reaped)
    }

    /// Snapshots asked for by a signal, `--timeout` and `--hang-after`,
    /// and what follows them: the signal passed on, the tree ended.
    pub(super) fn watch(
        &mut self,
        elapsed: u64,
        tree: &Tree<'_>,
        policy: &LingerPolicy,
        control: &Control,
        totals: &mut Trailer,
    ) {
        let asked = control.snapshot.swap(0, Ordering::Relaxed);
        if asked != 0 {
            self.take(SnapshotCause::Signal(asked), tree, policy);
        }
        let signal = control.interrupt.swap(0, Ordering::Acquire);
        if signal != 0 {
            let pass_on = control.pass_on.load(Ordering::Relaxed);
            self.take(SnapshotCause::Signal(signal), tree, policy);
            self.after_hooks = Some(Ending::Interrupt { signal, pass_on });
        }
        let timed_out = policy
            .timeout
            .is_some_and(|t| elapsed >= t.as_nanos() as u64);
        if timed_out && !totals.timed_out {
            totals.timed_out = true;
            self.take(SnapshotCause::Timeout, tree, policy);
            self.after_hooks = Some(Ending::Timeout);
        }
        if self.hooks_running == 0 {
            if let Some(ending) = self.after_hooks.take() {
                self.end_tree(ending, elapsed, tree, policy, control);
            }
        }
        if self.timeout_kill_due.is_some_and(|due| elapsed >= due) {
            signal_tree(&tree.live(), Signal::SIGKILL);
            self.timeout_kill_due = None;
        }
        let quiet = policy.hang_after.is_some_and(|quiet| {
            elapsed.saturating_sub(self.last_event) >= quiet.as_nanos() as u64
        });
        if quiet && !self.quiet_reported && tree.router.held().is_empty() {
            self.quiet_reported = true;
            self.take(SnapshotCause::Quiet, tree, policy);
        }
    }

    /// Ends the tree once a snapshot's `--on-hang` runs are over: passes
    /// on the signal proctrace got and stops, or after `--timeout` sends
    /// `--timeout-signal`, SIGKILL later.
    fn end_tree(
        &mut self,
        ending: Ending,
        elapsed: u64,
        tree: &Tree<'_>,
        policy: &LingerPolicy,
        control: &Control,
    ) {
        match ending {
            Ending::Interrupt { signal, pass_on } => {
                if pass_on {
                    let _ = kill(NixPid::from_raw(tree.root), Signal::try_from(signal).ok());
                }
                control.stop.store(true, Ordering::Relaxed);
            }
            Ending::Timeout => {
                let signal = policy.timeout_signal;
                let _ = tree.notices.send(Notice::TimedOut {
                    signal: signal as i32,
                });
                signal_tree(&tree.live(), signal);
                self.timeout_kill_due = Some(elapsed + KILL_GRACE_NS);
            }
        }
    }

    /// Puts the records of `--on-hang` runs that have ended among the
    /// events, as of now.
    pub(super) fn collect_hooks(&mut self, router: &Router) {
        let Some(hooks) = &self.hooks else { return };
        let (done, gone) = hooks.done();
        for runs in done {
            self.hooks_running -= 1;
            runs.into_iter()
                .for_each(|run| router.push(Record::OnHang(run)));
        }
        if gone {
            self.hooks_running = 0;
        }
    }

    /// Records a snapshot of the live tree, says so, and hands it to the
    /// `--on-hang` runs.
    pub(super) fn take(&mut self, cause: SnapshotCause, tree: &Tree<'_>, policy: &LingerPolicy) {
        // Taken now, not at the step's start: every process read alive
        // has its Fork before this time and its Exit after it.
        let now = tree.clock.elapsed();
        let pids = tree.live();
        let last_event = |pid| {
            let held = tree.router.held().last_event(pid);
            held.or_else(|| tree.lineage.last_event(pid))
        };
        let started = std::time::Instant::now();
        let root_fds = tree.lineage.root_fds();
        let mut records = inspect::snapshot(&pids, now, cause, root_fds, last_event);
        crate::recorder::frames::dump_python(&mut records);
        if let Some(first) = records.first_mut() {
            let output = policy.command_output.as_deref();
            first.output = output.and_then(inspect::last_line);
        }
        log::debug!(
            "snapshot: {} of {} processes read in {:.1} ms",
            records.len(),
            pids.len(),
            started.elapsed().as_secs_f64() * 1e3
        );
        if records.is_empty() {
            return;
        }
        let known = {
            let reorder = tree.router.held();
            let held = reorder.held();
            let known = records.iter().map(|s| {
                let (parent, command) = held.get(&s.pid).copied().unwrap_or_default();
                tree.lineage.known(s.pid, parent, command)
            });
            known.collect::<Vec<_>>()
        };
        records
            .iter()
            .for_each(|s| tree.router.push(Record::Snapshot(s.clone())));
        self.taken_now = true;
        let taken = Arc::new(Taken::new(now, cause, records, known));
        if let Some(hooks) = &self.hooks {
            hooks.run(Arc::clone(&taken));
            self.hooks_running += 1;
        }
        let _ = tree.notices.send(Notice::Snapshot(taken));
    }
}
