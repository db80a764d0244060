//! The recording thread: owns the BPF program, starts the command, drains
//! the kernel's buffers and hands what they hold on, one loop routing it:
//!
//! - [`route`]: every record decoded; lifecycle events into one causal
//!   order ([`reorder`]), samples and hits to the collector;
//! - [`buffer`]: the kernel's buffers, waited on with the requests;
//! - [`snapshots`]: snapshots of the live tree and their `--on-hang` runs;
//! - [`linger`]: processes that outlive their parent or the root;
//! - [`losses`]: what the kernel dropped, said as it happens;
//! - [`signals`]: what the recording sends the tree;
//! - [`reap`]: the root's status and the orphans.

mod buffer;
mod clock;
mod linger;
mod losses;
#[cfg(test)]
mod offcpu_tests;
mod reap;
mod reorder;
mod route;
mod signals;
mod snapshots;
#[cfg(test)]
mod tests;

use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use libbpf_rs::MapHandle;

use super::collect::{Collector, PythonMaps, Setup};
use super::control::{Control, Started};
use super::error::RecordError;
use super::hooks::{Hooks, OnHangCommand};
use super::launch::Prepared;
use super::lineage::Lineage;
use super::load::{self, KernelConfig, Probe};
use super::notice::Notice;
use super::policy::LingerPolicy;
use super::probes::{attempt_probes, latency_pairs};
use super::watch::{mapped_now, MmapWatch};
use crate::event::{Pid, Record, Trailer};
use crate::stacks::cache::NameCache;
use buffer::{Buffer, Readers, Waiter};
use clock::Clock;
use linger::Lingering;
use losses::Losses;
use route::Router;
use snapshots::{Snapshots, Tree};

/// How long an event is held back so that events of other CPUs with
/// earlier timestamps can still overtake it. Records are written within
/// microseconds of their timestamp (tracepoint programs run with preemption
/// off); this leaves room for a descheduled vCPU.
const REORDER_WINDOW_NS: u64 = 100_000_000;
/// How long to wait for the kernel between two looks at the tree.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// After a stop request, how long the tree's exits (from the same Ctrl-C)
/// may still be recorded.
const STOP_GRACE_NS: u64 = 300_000_000;

/// Where a recording sends what it finds.
pub struct Outputs {
    pub events: Sender<Record>,
    pub notices: Sender<Notice>,
    pub ready: Sender<Result<Started, RecordError>>,
}

/// Runs one recording on the calling thread; reports the start, or why it
/// could not start, on `ready`, then sends events and notices.
pub fn run(
    config: KernelConfig,
    target: Prepared,
    policy: LingerPolicy,
    control: Arc<Control>,
    outputs: Outputs,
) -> Result<Trailer, RecordError> {
    let mut storage = MaybeUninit::uninit();
    let prepared = load::load(&config, &mut storage).and_then(|probe| {
        let clock = Clock::start();
        let hooks = on_hang(&policy, clock)?;
        let router = Router::new(
            clock.start_ns(),
            config.env_names.clone(),
            collector(&config, &probe, clock, &outputs.events, &target)?,
            outputs.events.clone(),
            outputs.notices.clone(),
        );
        Ok((probe, clock, hooks, router))
    });
    let (probe, clock, hooks, router) = match prepared {
        Ok(prepared) => prepared,
        Err(err) => {
            let _ = outputs.ready.send(Err(err));
            return Ok(Trailer::default());
        }
    };
    let mut drain = Drain {
        clock,
        probe: &probe,
        perf_pages: config.perf_pages,
        policy,
        control,
        notices: outputs.notices,
        router,
        probing: !config.probes.is_empty() || config.test_marks.is_some(),
        sampling: config.python_frames(),
        unwinds: probe.cpu_profile.is_some()
            || probe.off_cpu.is_some()
            || (!config.probes.is_empty() && config.probe_stacks),
    };
    let totals = drain.run(&target, Snapshots::new(hooks), &outputs.ready)?;
    Ok(drain.finish_collector(totals))
}

/// The `--on-hang` runs' thread, when asked for.
fn on_hang(policy: &LingerPolicy, clock: Clock) -> Result<Option<Hooks>, RecordError> {
    let Some(command) = policy.on_hang.clone() else {
        return Ok(None);
    };
    let command = OnHangCommand {
        command,
        timeout: policy.on_hang_timeout,
    };
    Hooks::start(command, move || clock.elapsed())
        .map(Some)
        .map_err(RecordError::system("starting the --on-hang thread"))
}

/// The collector, with a CPU profile, probes or the waits; its records
/// go to `events` after the last event.
fn collector(
    config: &KernelConfig,
    probe: &Probe<'_>,
    clock: Clock,
    events: &Sender<Record>,
    target: &Prepared,
) -> Result<Option<Collector>, RecordError> {
    if probe.cpu_profile.is_none() && config.probes.is_empty() && probe.off_cpu.is_none() {
        return Ok(None);
    }
    let points: Vec<_> = config.probes.iter().map(|p| p.point.clone()).collect();
    let setup = Setup {
        start: clock.start_ns(),
        pairs: latency_pairs(&points),
        attempts: attempt_probes(&config.probes),
        own_code: probe.own_code(),
        names: match config.name_cache {
            true => NameCache::open(),
            false => NameCache::off(),
        },
        python: config
            .python_frames()
            .then(|| {
                Some(PythonMaps {
                    processes: MapHandle::try_from(&probe.skel.maps.python_processes).ok()?,
                    binaries: MapHandle::try_from(&probe.skel.maps.python_binaries).ok()?,
                })
            })
            .flatten(),
        first_programs: target.first_programs(),
        node_perf_maps_ours: target.node_perf_maps_ours(),
        exits_after: config.exits_after,
    };
    Collector::start(setup, events.clone())
        .map(Some)
        .map_err(RecordError::system("starting the profile's thread"))
}

struct Drain<'a, 'obj> {
    clock: Clock,
    probe: &'a Probe<'obj>,
    perf_pages: usize,
    policy: LingerPolicy,
    control: Arc<Control>,
    notices: Sender<Notice>,
    router: Router,
    /// Whether probes or test marks were attached: their ring is read.
    probing: bool,
    /// Whether the samples ring is read: a CPU profile's samples, or the
    /// code objects of probe hits' Python frames.
    sampling: bool,
    /// Whether stacks are unwound: the mappings are then followed.
    unwinds: bool,
}

/// The state of a running recording, step to step.
struct Progress {
    root: Pid,
    totals: Trailer,
    lineage: Lineage,
    lingering: Lingering,
    losses: Losses,
    snapshots: Snapshots,
    stop_since: Option<u64>,
}

/// Why a recording ended.
enum End {
    /// Every process of the tree is gone, or only lingerers are left.
    Settled,
    /// A stop was requested and its grace period is over.
    Stopped,
    /// An abort was requested: what has arrived is given out at once.
    Aborted,
    /// The consumer went away: nothing more is given out.
    Abandoned,
}

impl Drain<'_, '_> {
    fn run(
        &self,
        target: &Prepared,
        snapshots: Snapshots,
        ready: &Sender<Result<Started, RecordError>>,
    ) -> Result<Trailer, RecordError> {
        let (buffer, started) = match self.start(target) {
            Ok(started) => started,
            Err(err) => {
                let _ = ready.send(Err(err));
                return Ok(Trailer::default());
            }
        };
        let root = started.root_pid;
        let _ = ready.send(Ok(started));
        let waiter = Waiter::new(&buffer, self.control.wake.as_ref());
        let mut progress = Progress {
            root,
            totals: Trailer::default(),
            lineage: Lineage::new(root),
            lingering: Lingering::new(self.policy.linger, self.policy.kill),
            losses: Losses::default(),
            snapshots,
            stop_since: None,
        };
        let end = loop {
            if let Some(end) = self.step(&buffer, &waiter, target, &mut progress)? {
                break end;
            }
        };
        if !matches!(end, End::Abandoned) {
            buffer.consume()?;
            self.release(None, &mut progress);
        }
        let mut totals = progress.totals;
        totals.interrupted = !matches!(end, End::Settled);
        if target.is_child() {
            // A settled tree's root has exited in the kernel, and becomes a
            // zombie a moment later: wait for that moment.
            let root_exited = matches!(end, End::Settled);
            let mut hooks = progress.snapshots.reaped();
            let subreaper = self.policy.subreaper;
            reap::reap(
                root,
                root_exited,
                subreaper,
                &mut totals,
                hooks.as_deref_mut(),
            );
        }
        self.count_losses(&mut totals);
        Ok(totals)
    }

    /// Opens the buffers (before the command starts, or its first exec
    /// has nowhere to go) and starts following the target.
    fn start(&self, target: &Prepared) -> Result<(Buffer<'_>, Started), RecordError> {
        let router = &self.router;
        let readers = Readers {
            record: |data: &[u8]| router.record(data),
            sample: self.sampling.then_some(|data: &[u8]| router.sample(data)),
            hit: self.probing.then_some(|data: &[u8]| router.hit(data)),
            wait: self.probe.off_cpu.map(|_| |data: &[u8]| router.wait(data)),
        };
        let buffer = Buffer::open(self.probe, self.perf_pages, readers)?;
        let tracked = self.probe.tracked_map()?;
        if self.policy.subreaper {
            reap::become_subreaper()?;
        }
        let seed = |pid| {
            let seeded = self.probe.track(pid)?;
            if self.probe.off_cpu.is_some() {
                self.probe.follow_threads(pid)?;
            }
            self.watch_mappings(pid)?;
            Ok(seeded)
        };
        let untrack = |pid| self.probe.untrack(pid);
        let mut warnings = self.probe.warnings.clone();
        warnings.extend(self.probe.wait_for_marks());
        let (root_pid, attached) = target.start(self.clock.elapsed(), seed, untrack)?;
        // Ahead of any event of theirs: the kernel follows them only
        // after they were read.
        for running in attached {
            self.router.push(Record::Attached(running));
        }
        let started = Started {
            tracked,
            root_pid,
            buffer: self.probe.buffer,
            syscall_hook: self.probe.syscall_hook,
            warnings,
            cpu_profile: self.probe.cpu_profile,
            off_cpu: self.probe.off_cpu,
        };
        Ok((buffer, started))
    }

    /// What was lost and could not be read, in the trailer.
    fn count_losses(&self, totals: &mut Trailer) {
        (totals.lost_buffer_full, totals.lost_tracking_full) = self.probe.losses();
        totals.unwatched_32bit_execs = self.probe.unwatched_32bit_execs();
        (totals.malformed, totals.lost_probe_hits) = self.router.unread();
        totals.lost = totals.lost_buffer_full + totals.lost_tracking_full + totals.malformed;
        totals.end_timestamp = self.clock.elapsed();
    }

    /// Reads what the kernel has buffered and releases what is older than
    /// the reorder window; false when nobody receives it.
    fn catch_up(&self, buffer: &Buffer<'_>, progress: &mut Progress) -> Result<bool, RecordError> {
        // Timed before the read: what happened a window before it is in.
        let elapsed = self.clock.elapsed();
        // The kernel wakes this thread only when it must (see emit() in the
        // BPF program); what came in quietly is read now.
        buffer.consume()?;
        Ok(self.release(Some(elapsed.saturating_sub(REORDER_WINDOW_NS)), progress))
    }

    /// Gives out the held events up to `cutoff`; false when nobody
    /// receives them.
    fn release(&self, cutoff: Option<u64>, progress: &mut Progress) -> bool {
        let Some(released) = self.router.release(cutoff, &mut progress.lineage) else {
            return false;
        };
        progress.totals.events += released.events;
        if let Some(at) = released.last_event {
            progress.snapshots.event_at(at);
        }
        true
    }

    /// One look at the kernel and the tree; `Some` once the recording ends.
    fn step(
        &self,
        buffer: &Buffer<'_>,
        waiter: &Waiter<'_>,
        target: &Prepared,
        progress: &mut Progress,
    ) -> Result<Option<End>, RecordError> {
        let now = clock::monotonic_ns();
        let elapsed = now.saturating_sub(self.clock.start_ns());
        waiter.wait(buffer, POLL_INTERVAL)?;
        if !self.catch_up(buffer, progress)? {
            return Ok(Some(End::Abandoned));
        }
        if self.control.abort.load(Ordering::Relaxed) {
            return Ok(Some(End::Aborted));
        }
        if target.is_child() {
            let mut hooks = progress.snapshots.reaped();
            let totals = &mut progress.totals;
            let subreaper = self.policy.subreaper;
            reap::reap(
                progress.root,
                false,
                subreaper,
                totals,
                hooks.as_deref_mut(),
            );
        }
        self.watch_tree(elapsed, progress);
        // A snapshot of thousands of processes outlasts the reorder window:
        // the events before it go out now, not a poll later, and with them
        // the snapshot, whose answer the session gives once they are written.
        if progress.snapshots.taken_now() && !self.catch_up(buffer, progress)? {
            return Ok(Some(End::Abandoned));
        }
        progress.snapshots.collect_hooks(&self.router);
        progress.losses.watch(elapsed, self.probe, &self.notices);
        if self.control.stop.load(Ordering::Relaxed) {
            progress.stop_since.get_or_insert(now);
        }
        progress.lingering.note_left(now, &progress.lineage);
        if progress.snapshots.busy() {
            return Ok(None);
        }
        // The last exit is counted after its event is in the buffer, so once
        // the tree is gone one more read of the buffer has everything.
        let stopped = progress.stop_since.is_some_and(|t| now - t > STOP_GRACE_NS);
        Ok(
            if self.probe.tree_is_gone() || progress.lingering.settled(now, REORDER_WINDOW_NS) {
                Some(End::Settled)
            } else if stopped {
                Some(End::Stopped)
            } else {
                None
            },
        )
    }

    /// Lingering processes, then the snapshots asked for and what follows
    /// them.
    fn watch_tree(&self, elapsed: u64, progress: &mut Progress) {
        let Progress {
            root,
            totals,
            lineage,
            lingering,
            snapshots,
            ..
        } = progress;
        let found = lingering.found(elapsed, lineage, &self.router, &self.notices, totals);
        let tree = Tree {
            root: *root,
            clock: self.clock,
            lineage,
            router: &self.router,
            notices: &self.notices,
        };
        if !found.is_empty() {
            // Before any lingerer is ended: its end closes what it held, and
            // whoever waited on that moves on and may be gone from the picture.
            snapshots.take(crate::event::SnapshotCause::Linger, &tree, &self.policy);
        }
        lingering.end(found, elapsed, lineage, &self.notices);
        snapshots.watch(elapsed, &tree, &self.policy, &self.control, totals);
    }

    /// With stacks to unwind (a CPU profile, probes with stacks), has the
    /// kernel announce every executable mapping of `pid` and of the
    /// processes it starts from now on; a process attached to has its
    /// mappings already, read from /proc.
    fn watch_mappings(&self, pid: Pid) -> Result<(), RecordError> {
        let Some(collector) = self.router.collector().filter(|_| self.unwinds) else {
            return Ok(());
        };
        let watch = MmapWatch::open(pid)?;
        // In force from the start: the samples of an attached process may
        // be taken before they are read. A command held before its exec
        // has proctrace's own, which its exec ends.
        collector.watch(Box::new(watch), mapped_now(pid, 0));
        Ok(())
    }

    /// Ends the collector, whose records go out after every event and
    /// before the trailer; counts its samples in `totals`.
    fn finish_collector(&mut self, mut totals: Trailer) -> Trailer {
        if let (Some(collector), Some(_)) = (self.router.collector(), self.probe.off_cpu) {
            collector.wait_totals(self.probe.wait_totals());
            (totals.lost_wait_stacks, totals.lost_waits) = self.probe.wait_losses();
        }
        let Some(counted) = self.router.finish() else {
            return totals;
        };
        totals.samples = counted.samples;
        totals.lost_samples = self.probe.lost_samples();
        totals.probe_hits = counted.hits;
        totals.stackless_probe_hits = counted.stackless_hits;
        totals.waits = counted.waits;
        totals.long_waits = counted.long_waits;
        totals.long_waits_left_out = counted.long_waits_left_out;
        totals.lost_probe_hits += self.probe.lost_hits();
        if counted.unnamed_python > 0 {
            log::warn!(
                "{} Python frames are unnamed ([python]): their code objects could not be read while their process lived",
                counted.unnamed_python
            );
        }
        if counted.lost_mappings > 0 {
            log::warn!(
                "{} executable mappings were not announced (their ring was full): frames in them are [unknown]",
                counted.lost_mappings
            );
        }
        totals
    }
}
