//! The recording thread: owns the BPF program, starts the command, drains
//! the kernel's buffer, restores one causal order and hands events on.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use libbpf_rs::{PerfBuffer, PerfBufferBuilder, RingBuffer, RingBufferBuilder};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::eventfd::EventFd;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid as NixPid;

use super::collect::Collector;
use super::control::{Control, Started};
use super::error::RecordError;
use super::hang::Taken;
use super::hooks::{Hooks, OnHangCommand, Reaped};
use super::launch::Prepared;
use super::lineage::Lineage;
use super::load::{self, KernelConfig, Probe};
use super::notice::Notice;
use super::policy::LingerPolicy;
use super::probes::{attempt_probes, latency_pairs};
use super::watch::{mapped_now, MmapWatch};
use super::wire::{decode, decode_from_hits, decode_sample, FromHits};
use crate::event::{BufferKind, Pid, Record, SnapshotCause, Trailer};
use crate::inspect;

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
/// Between SIGTERM and SIGKILL for a lingering process.
const KILL_GRACE_NS: u64 = 2_000_000_000;

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
    let probe = match load::load(&config, &mut storage) {
        Ok(probe) => probe,
        Err(err) => {
            let _ = outputs.ready.send(Err(err));
            return Ok(Trailer::default());
        }
    };
    let start_ns = monotonic_ns();
    let hooks = match policy.on_hang.clone() {
        Some(command) => {
            let command = OnHangCommand {
                command,
                timeout: policy.on_hang_timeout,
            };
            let clock = move || monotonic_ns().saturating_sub(start_ns);
            match Hooks::start(command, clock) {
                Ok(hooks) => Some(hooks),
                Err(err) => {
                    let error = RecordError::system("starting the --on-hang thread")(err);
                    let _ = outputs.ready.send(Err(error));
                    return Ok(Trailer::default());
                }
            }
        }
        None => None,
    };
    let stacks = probe.cpu_profile.is_some() || !config.probes.is_empty();
    let collector = match stacks {
        true => match Collector::start(
            start_ns,
            latency_pairs(&points(&config)),
            attempt_probes(&config.probes),
        ) {
            Ok(collector) => Some(collector),
            Err(err) => {
                let error = RecordError::system("starting the profile's thread")(err);
                let _ = outputs.ready.send(Err(error));
                return Ok(Trailer::default());
            }
        },
        false => None,
    };
    let mut drain = Drain {
        start_ns,
        hooks,
        probe: &probe,
        perf_pages: config.perf_pages,
        policy,
        control,
        outputs,
        reorder: RefCell::default(),
        env_names: config.env_names.clone(),
        collector,
        probing: !config.probes.is_empty() || config.test_marks.is_some(),
        unwinds: probe.cpu_profile.is_some() || (!config.probes.is_empty() && config.probe_stacks),
    };
    let totals = drain.run(&target)?;
    Ok(drain.finish_profile(totals))
}

fn points(config: &KernelConfig) -> Vec<crate::event::ProbePoint> {
    config.probes.iter().map(|p| p.point.clone()).collect()
}

struct Drain<'a, 'obj> {
    /// When the recording started, on the monotonic clock.
    start_ns: u64,
    hooks: Option<Hooks>,
    probe: &'a Probe<'obj>,
    perf_pages: usize,
    policy: LingerPolicy,
    control: Arc<Control>,
    outputs: Outputs,
    reorder: RefCell<Reorder>,
    env_names: Vec<String>,
    /// The thread that unwinds and counts stacks, with `--cpu-profile`
    /// or `--probe`.
    collector: Option<Collector>,
    /// Whether probes or test marks were attached: their ring is read.
    probing: bool,
    /// Whether stacks are unwound: the mappings are then followed.
    unwinds: bool,
}

enum Buffer<'cb> {
    Ring(RingBuffer<'cb>),
    Perf(PerfBuffer<'cb>),
}

impl Buffer<'_> {
    /// Waits for and consumes records. A signal (Ctrl-C, handled on another
    /// thread) may interrupt the wait; that is a wake-up, not a failure.
    fn poll(&self, timeout: Duration) -> Result<(), RecordError> {
        let polled = match self {
            Buffer::Ring(ring) => ring.poll(timeout),
            Buffer::Perf(perf) => perf.poll(timeout),
        };
        match polled {
            Err(err) if err.kind() == libbpf_rs::ErrorKind::Interrupted => Ok(()),
            other => other.map_err(RecordError::bpf("reading the kernel buffer")),
        }
    }

    fn consume(&self) -> Result<(), RecordError> {
        match self {
            Buffer::Ring(ring) => ring.consume(),
            Buffer::Perf(perf) => perf.consume(),
        }
        .map_err(RecordError::bpf("reading the kernel buffer"))
    }

    fn epoll_fd(&self) -> i32 {
        match self {
            Buffer::Ring(ring) => ring.epoll_fd(),
            Buffer::Perf(perf) => perf.epoll_fd(),
        }
    }
}

/// The kernel's buffer and the consumer's requests, waited on together:
/// a snapshot asked for by a signal starts at once, not a poll later.
struct Waiter<'a> {
    /// libbpf's own epoll set, inside this one, and the wake-up.
    both: Option<(Epoll, &'a EventFd)>,
}

impl<'a> Waiter<'a> {
    fn new(buffer: &Buffer<'_>, wake: Option<&'a EventFd>) -> Waiter<'a> {
        let both = wake.and_then(|wake| {
            let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).ok()?;
            // SAFETY: the buffer's epoll fd lives as long as the buffer,
            // which outlives this wait set; adding it only reads it.
            let kernel = unsafe { BorrowedFd::borrow_raw(buffer.epoll_fd()) };
            epoll
                .add(kernel, EpollEvent::new(EpollFlags::EPOLLIN, 0))
                .ok()?;
            epoll
                .add(wake, EpollEvent::new(EpollFlags::EPOLLIN, 1))
                .ok()?;
            Some((epoll, wake))
        });
        Waiter { both }
    }

    /// Waits up to `timeout` for records or a request; the records are
    /// read by the consume that follows.
    fn wait(&self, buffer: &Buffer<'_>, timeout: Duration) -> Result<(), RecordError> {
        let Some((epoll, wake)) = &self.both else {
            return buffer.poll(timeout);
        };
        let mut events = [EpollEvent::empty(); 2];
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        match epoll.wait(&mut events, ms) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(err) => return Err(RecordError::system("waiting for the kernel buffer")(err)),
        }
        let _ = wake.read();
        Ok(())
    }
}

/// The state of a running recording, step to step.
struct Progress {
    root: Pid,
    start_ns: u64,
    totals: Trailer,
    lineage: Lineage,
    /// Lingering processes sent SIGTERM, and when SIGKILL is due.
    terminating: Vec<(Pid, u64)>,
    stop_since: Option<u64>,
    lingered_out_since: Option<u64>,
    /// When the last event of the tree happened (nanoseconds since start).
    last_event: u64,
    /// A `--hang-after` snapshot was taken since the last event.
    quiet_reported: bool,
    /// After `--timeout`: when the tree gets SIGKILL.
    timeout_kill_due: Option<u64>,
    /// Snapshots whose `--on-hang` runs have not all ended.
    hooks_running: usize,
    /// A snapshot was taken in this step.
    snapshot_taken: bool,
    /// What follows a snapshot once its `--on-hang` runs have ended.
    after_hooks: Option<Ending>,
    /// The kernel's loss counters as last told, and when they were read.
    losses: ((u64, u64), u64),
}

/// How the tree is ended after a snapshot.
#[derive(Clone, Copy)]
enum Ending {
    /// `--timeout` expired.
    Timeout,
    /// proctrace got this signal: pass it on to the root, then stop.
    Interrupt(i32),
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
    fn run(&self, target: &Prepared) -> Result<Trailer, RecordError> {
        let malformed = RefCell::new(0u64);
        let start_ns = self.start_ns;
        let on_record = |data: &[u8]| match decode(data, start_ns, &self.env_names) {
            Ok(record) => self.reorder.borrow_mut().push(record),
            Err(_) => *malformed.borrow_mut() += 1,
        };
        let on_sample = |data: &[u8]| match (decode_sample(data, start_ns), &self.collector) {
            (Ok(sample), Some(collector)) => collector.sample(sample),
            _ => *malformed.borrow_mut() += 1,
        };
        let unread_hits = Cell::new(0u64);
        let on_hit = |data: &[u8]| match (decode_from_hits(data, start_ns), &self.collector) {
            (Ok(FromHits::Hit(hit)), Some(collector)) => collector.hit(hit),
            (Ok(FromHits::Mark(mark)), Some(collector)) => collector.mark(mark),
            _ => unread_hits.set(unread_hits.get() + 1),
        };
        // Perf events are installed in the map when the buffer opens: open
        // it before the command starts, or its first exec has nowhere to go.
        let started = self
            .open_buffer(on_record, on_sample, on_hit)
            .and_then(|buffer| {
                let tracked = self.probe.tracked_map()?;
                if self.policy.subreaper {
                    become_subreaper()?;
                }
                let seed = |pid| {
                    self.probe.track(pid)?;
                    self.watch_mappings(pid)
                };
                let untrack = |pid| self.probe.untrack(pid);
                Ok((buffer, tracked, target.start(seed, untrack)?))
            });
        let (buffer, tracked, root) = match started {
            Ok(ok) => ok,
            Err(err) => {
                let _ = self.outputs.ready.send(Err(err));
                return Ok(Trailer::default());
            }
        };
        let started = Started {
            tracked,
            root_pid: root,
            buffer: self.probe.buffer,
            syscall_hook: self.probe.syscall_hook,
            warnings: self.probe.warnings.clone(),
            cpu_profile: self.probe.cpu_profile,
        };
        let _ = self.outputs.ready.send(Ok(started));
        let waiter = Waiter::new(&buffer, self.control.wake.as_ref());
        let mut progress = Progress {
            root,
            start_ns,
            totals: Trailer::default(),
            lineage: Lineage::new(root),
            terminating: Vec::new(),
            stop_since: None,
            lingered_out_since: None,
            last_event: 0,
            quiet_reported: false,
            timeout_kill_due: None,
            hooks_running: 0,
            snapshot_taken: false,
            after_hooks: None,
            losses: ((0, 0), 0),
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
            self.reap(root, root_exited, &mut totals);
        }
        (totals.lost_buffer_full, totals.lost_tracking_full) = self.probe.losses();
        totals.unwatched_32bit_execs = self.probe.unwatched_32bit_execs();
        totals.malformed = *malformed.borrow();
        totals.lost_probe_hits = unread_hits.get();
        totals.lost = totals.lost_buffer_full + totals.lost_tracking_full + totals.malformed;
        totals.end_timestamp = monotonic_ns().saturating_sub(start_ns);
        Ok(totals)
    }

    /// Reads what the kernel has buffered and releases what is older than
    /// the reorder window; false when nobody receives it.
    fn catch_up(&self, buffer: &Buffer<'_>, progress: &mut Progress) -> Result<bool, RecordError> {
        // Timed before the read: what happened a window before it is in.
        let elapsed = monotonic_ns().saturating_sub(progress.start_ns);
        // The kernel wakes this thread only when it must (see emit() in the
        // BPF program); what came in quietly is read now.
        buffer.consume()?;
        Ok(self.release(Some(elapsed.saturating_sub(REORDER_WINDOW_NS)), progress))
    }

    /// One look at the kernel and the tree; `Some` once the recording ends.
    fn step(
        &self,
        buffer: &Buffer<'_>,
        waiter: &Waiter<'_>,
        target: &Prepared,
        progress: &mut Progress,
    ) -> Result<Option<End>, RecordError> {
        let now = monotonic_ns();
        let elapsed = now.saturating_sub(progress.start_ns);
        waiter.wait(buffer, POLL_INTERVAL)?;
        if !self.catch_up(buffer, progress)? {
            return Ok(Some(End::Abandoned));
        }
        if self.control.abort.load(Ordering::Relaxed) {
            return Ok(Some(End::Aborted));
        }
        if target.is_child() {
            self.reap(progress.root, false, &mut progress.totals);
        }
        self.watch_lingering(elapsed, progress);
        self.watch_hang(elapsed, progress);
        // A snapshot of thousands of processes outlasts the reorder window:
        // the events before it go out now, not a poll later, and with them
        // the snapshot, whose answer the session gives once they are written.
        if std::mem::take(&mut progress.snapshot_taken) && !self.catch_up(buffer, progress)? {
            return Ok(Some(End::Abandoned));
        }
        self.collect_hooks(progress);
        self.watch_losses(elapsed, progress);
        if self.control.stop.load(Ordering::Relaxed) {
            progress.stop_since.get_or_insert(now);
        }
        // Without --linger nothing is reported lingering, and the counters
        // alone say when the tree is gone.
        if self.policy.linger.is_some()
            && !self.policy.kill
            && progress.lineage.only_lingerers_left()
        {
            progress.lingered_out_since.get_or_insert(now);
        }
        let waited = |since: Option<u64>, grace: u64| since.is_some_and(|t| now - t > grace);
        // Runs of --on-hang are bounded by their own timeout: their records
        // are waited for.
        if progress.hooks_running > 0 {
            return Ok(None);
        }
        // The last exit is counted after its event is in the buffer, so once
        // the tree is gone one more read of the buffer has everything.
        Ok(
            if self.probe.tree_is_gone() || waited(progress.lingered_out_since, REORDER_WINDOW_NS) {
                Some(End::Settled)
            } else if waited(progress.stop_since, STOP_GRACE_NS) {
                Some(End::Stopped)
            } else {
                None
            },
        )
    }

    /// Reports processes that have lingered for the `--linger` time, and
    /// with `--kill-lingering` ends them: SIGTERM, then SIGKILL.
    fn watch_lingering(&self, elapsed: u64, progress: &mut Progress) {
        let Some(linger) = self.policy.linger else {
            return;
        };
        let mut found = Vec::new();
        for lingering in progress
            .lineage
            .newly_lingering(elapsed, linger.as_nanos() as u64)
        {
            let pid = lingering.pid;
            progress.totals.lingering += 1;
            let _ = self
                .outputs
                .notices
                .send(Notice::Lingering(progress.lineage.describe(pid)));
            self.reorder.borrow_mut().push(Record::Lingering(lingering));
            found.push(pid);
        }
        if !found.is_empty() {
            // Before any lingerer is ended: its end closes what it held, and
            // whoever waited on that moves on and may be gone from the picture.
            self.snapshot(SnapshotCause::Linger, progress);
        }
        if self.policy.kill {
            for pid in found {
                self.signal(pid, Signal::SIGTERM);
                progress.terminating.push((pid, elapsed + KILL_GRACE_NS));
            }
        }
        let still_running = progress.lineage.lingerers();
        progress.terminating.retain(|&(pid, due)| {
            if !still_running.contains(&pid) {
                return false;
            }
            if elapsed < due {
                return true;
            }
            self.signal(pid, Signal::SIGKILL);
            false
        });
    }

    /// Tells as they happen, about once a second, that the kernel dropped
    /// events: the end of the recording is too late for a run that hangs.
    fn watch_losses(&self, elapsed: u64, progress: &mut Progress) {
        const EVERY_NS: u64 = 1_000_000_000;
        let (told, read_at) = progress.losses;
        if elapsed.saturating_sub(read_at) < EVERY_NS {
            return;
        }
        let losses = self.probe.losses();
        progress.losses = (losses, elapsed);
        if losses != told {
            let (buffer_full, tracking_full) = losses;
            let _ = self.outputs.notices.send(Notice::Lost {
                buffer_full,
                tracking_full,
            });
        }
    }

    /// Snapshots asked for by a signal, `--timeout` and `--hang-after`,
    /// and what follows them: the signal passed on, the tree ended.
    fn watch_hang(&self, elapsed: u64, progress: &mut Progress) {
        let asked = self.control.snapshot.swap(0, Ordering::Relaxed);
        if asked != 0 {
            self.snapshot(SnapshotCause::Signal(asked), progress);
        }
        let interrupt = self.control.interrupt.swap(0, Ordering::Relaxed);
        if interrupt != 0 {
            self.snapshot(SnapshotCause::Signal(interrupt), progress);
            progress.after_hooks = Some(Ending::Interrupt(interrupt));
        }
        let timed_out = self
            .policy
            .timeout
            .is_some_and(|t| elapsed >= t.as_nanos() as u64);
        if timed_out && !progress.totals.timed_out {
            progress.totals.timed_out = true;
            self.snapshot(SnapshotCause::Timeout, progress);
            progress.after_hooks = Some(Ending::Timeout);
        }
        if progress.hooks_running == 0 {
            if let Some(ending) = progress.after_hooks.take() {
                self.end_tree(ending, elapsed, progress);
            }
        }
        if progress.timeout_kill_due.is_some_and(|due| elapsed >= due) {
            self.signal_tree(Signal::SIGKILL, progress);
            progress.timeout_kill_due = None;
        }
        let quiet = self.policy.hang_after.is_some_and(|quiet| {
            elapsed.saturating_sub(progress.last_event) >= quiet.as_nanos() as u64
        });
        if quiet && !progress.quiet_reported && self.reorder.borrow().is_empty() {
            progress.quiet_reported = true;
            self.snapshot(SnapshotCause::Quiet, progress);
        }
    }

    /// Ends the tree once a snapshot's `--on-hang` runs are over: passes
    /// on the signal proctrace got and stops, or after `--timeout` sends
    /// `--timeout-signal`, SIGKILL later.
    fn end_tree(&self, ending: Ending, elapsed: u64, progress: &mut Progress) {
        match ending {
            Ending::Interrupt(signal) => {
                if signal != libc::SIGINT {
                    let _ = kill(
                        NixPid::from_raw(progress.root),
                        Signal::try_from(signal).ok(),
                    );
                }
                self.control.stop.store(true, Ordering::Relaxed);
            }
            Ending::Timeout => {
                let signal = self.policy.timeout_signal;
                let _ = self.outputs.notices.send(Notice::TimedOut {
                    signal: signal as i32,
                });
                self.signal_tree(signal, progress);
                progress.timeout_kill_due = Some(elapsed + KILL_GRACE_NS);
            }
        }
    }

    /// Puts the records of `--on-hang` runs that have ended among the
    /// events, as of now.
    fn collect_hooks(&self, progress: &mut Progress) {
        let Some(hooks) = &self.hooks else { return };
        let (done, gone) = hooks.done();
        for runs in done {
            progress.hooks_running -= 1;
            let mut reorder = self.reorder.borrow_mut();
            runs.into_iter()
                .for_each(|run| reorder.push(Record::OnHang(run)));
        }
        if gone {
            progress.hooks_running = 0;
        }
    }

    /// Every process of the tree known to run: those the released events
    /// say run, and the children of forks not yet released.
    fn live_tree(&self, progress: &Progress) -> Vec<Pid> {
        let mut pids = progress.lineage.alive();
        pids.extend(self.reorder.borrow().forked());
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Records a snapshot of the live tree, says so, and hands it to the
    /// `--on-hang` runs.
    fn snapshot(&self, cause: SnapshotCause, progress: &mut Progress) {
        // Taken now, not at the step's start: every process read alive
        // has its Fork before this time and its Exit after it.
        let now = monotonic_ns().saturating_sub(progress.start_ns);
        let pids = self.live_tree(progress);
        let last_event = |pid| {
            let held = self.reorder.borrow().last_event(pid);
            held.or_else(|| progress.lineage.last_event(pid))
        };
        let started = std::time::Instant::now();
        let root_fds = progress.lineage.root_fds();
        let mut records = inspect::snapshot(&pids, now, cause, root_fds, last_event);
        if let Some(first) = records.first_mut() {
            let output = self.policy.command_output.as_deref();
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
            let reorder = self.reorder.borrow();
            let held = reorder.held();
            let known = records.iter().map(|s| {
                let (parent, command) = held.get(&s.pid).copied().unwrap_or_default();
                progress.lineage.known(s.pid, parent, command)
            });
            known.collect::<Vec<_>>()
        };
        let mut reorder = self.reorder.borrow_mut();
        records
            .iter()
            .for_each(|s| reorder.push(Record::Snapshot(s.clone())));
        progress.snapshot_taken = true;
        let taken = Arc::new(Taken::new(now, cause, records, known));
        if let Some(hooks) = &self.hooks {
            hooks.run(Arc::clone(&taken));
            progress.hooks_running += 1;
        }
        let _ = self.outputs.notices.send(Notice::Snapshot(taken));
    }

    fn signal_tree(&self, signal: Signal, progress: &Progress) {
        for pid in self.live_tree(progress) {
            let _ = kill(NixPid::from_raw(pid), signal);
        }
    }

    fn signal(&self, pid: Pid, signal: Signal) {
        if kill(NixPid::from_raw(pid), signal).is_ok() {
            let _ = self.outputs.notices.send(Notice::Killed {
                pid,
                signal: signal as i32,
            });
        }
    }

    /// With stacks to unwind (a CPU profile, probes with stacks), has the
    /// kernel announce every executable mapping of `pid` and of the
    /// processes it starts from now on; a process attached to has its
    /// mappings already, read from /proc.
    fn watch_mappings(&self, pid: Pid) -> Result<(), RecordError> {
        let Some(collector) = self.collector.as_ref().filter(|_| self.unwinds) else {
            return Ok(());
        };
        let watch = MmapWatch::open(pid)?;
        // In force from the start: the samples of an attached process may
        // be taken before they are read. A command held before its exec
        // has proctrace's own, which its exec ends.
        collector.watch(watch, mapped_now(pid, 0));
        Ok(())
    }

    /// Ends the profile's thread and sends its records, after every event
    /// and before the trailer; counts its samples in `totals`.
    fn finish_profile(&mut self, mut totals: Trailer) -> Trailer {
        let Some(collector) = self.collector.take() else {
            return totals;
        };
        let collected = collector.finish();
        totals.samples = collected.samples;
        totals.lost_samples = self.probe.lost_samples();
        totals.probe_hits = collected.hits;
        totals.stackless_probe_hits = collected.stackless_hits;
        totals.lost_probe_hits += self.probe.lost_hits();
        if collected.lost_mappings > 0 {
            log::warn!(
                "{} executable mappings were not announced (their ring was full): frames in them are [unknown]",
                collected.lost_mappings
            );
        }
        for record in collected.records {
            if self.outputs.events.send(record).is_err() {
                break;
            }
        }
        totals
    }

    /// Opens the events buffer, and with a CPU profile the samples ring,
    /// with probes the hits ring, read in the same wait. The samples and
    /// hits need the ring buffer (5.8+).
    fn open_buffer<'cb>(
        &self,
        mut on_record: impl FnMut(&[u8]) + 'cb,
        mut on_sample: impl FnMut(&[u8]) + 'cb,
        mut on_hit: impl FnMut(&[u8]) + 'cb,
    ) -> Result<Buffer<'cb>, RecordError>
    where
        Self: 'cb,
    {
        let map = &self.probe.skel.maps.events;
        let error = RecordError::bpf("opening the kernel buffer");
        if self.collector.is_some() && self.probe.buffer != BufferKind::Ring {
            return Err(RecordError::ProfileNeedsRing);
        }
        match self.probe.buffer {
            BufferKind::Ring => {
                let mut builder = RingBufferBuilder::new();
                builder
                    .add(map, move |data: &[u8]| {
                        on_record(data);
                        0
                    })
                    .map_err(RecordError::bpf("opening the kernel buffer"))?;
                if self.collector.is_some() {
                    builder
                        .add(&self.probe.skel.maps.samples, move |data: &[u8]| {
                            on_sample(data);
                            0
                        })
                        .map_err(RecordError::bpf("opening the samples ring"))?;
                }
                if self.probing {
                    builder
                        .add(&self.probe.skel.maps.hits, move |data: &[u8]| {
                            on_hit(data);
                            0
                        })
                        .map_err(RecordError::bpf("opening the probe hits ring"))?;
                }
                builder.build().map(Buffer::Ring).map_err(error)
            }
            BufferKind::Perf => PerfBufferBuilder::new(map)
                .pages(self.perf_pages)
                .sample_cb(move |_cpu, data: &[u8]| on_record(data))
                .build()
                .map(Buffer::Perf)
                .map_err(error),
        }
    }

    /// Sends the held events up to `cutoff` (all with `None`) in order,
    /// following the tree as they go; false when nobody receives them.
    fn release(&self, cutoff: Option<u64>, progress: &mut Progress) -> bool {
        let ready = self.reorder.borrow_mut().take_until(cutoff);
        for record in ready {
            if !matches!(
                record,
                Record::Snapshot(_) | Record::Lingering(_) | Record::OnHang(_)
            ) {
                progress.last_event = record.timestamp().unwrap_or(0);
                progress.quiet_reported = false;
            }
            if let Some(notice) = progress.lineage.observe(&record) {
                let _ = self.outputs.notices.send(notice);
            }
            if let Some(collector) = &self.collector {
                collector.event(&record);
            }
            if self.outputs.events.send(record).is_err() {
                return false;
            }
            progress.totals.events += 1;
        }
        // The profile unwinds no sample before the forks up to it are in.
        if let (Some(collector), Some(cutoff)) = (&self.collector, cutoff) {
            collector.upto(cutoff);
        }
        true
    }

    /// Collects exited children: the root's status, and as the subreaper
    /// the orphans of the tree, which would otherwise stay zombies. With
    /// `root_exited`, waits for the root's status first.
    fn reap(&self, root: Pid, root_exited: bool, totals: &mut Trailer) {
        let mut hooks = self.hooks.as_ref().map(Hooks::reaped);
        let mut collect = |waited| collect(waited, root, totals, hooks.as_deref_mut());
        if root_exited {
            collect(waitpid(NixPid::from_raw(root), None));
        }
        let any = if self.policy.subreaper { -1 } else { root };
        while collect(waitpid(NixPid::from_raw(any), Some(WaitPidFlag::WNOHANG))) {}
    }
}

/// The pids whose Exit has been given out, until a Fork reuses them.
///
/// The kernel can report an event of a process after its exit: a parent's
/// `setpgid(child, ...)` succeeds on a child that is already a zombie (bash
/// does this for every job), and its hook runs after the child's exit hook.
/// Such an event says nothing about a process that is gone, and would bring
/// it back to life for every reader: it is dropped here, at the source.
#[derive(Default)]
struct Departed(HashSet<Pid>);

impl Departed {
    /// Follows one event in release order; true when it comes after its
    /// process's Exit and must not be given out.
    fn is_late(&mut self, record: &Record) -> bool {
        match record {
            Record::Fork(fork) => {
                self.0.remove(&fork.child_pid);
                false
            }
            Record::Exit(exit) => !self.0.insert(exit.pid),
            // About a process as its snapshot saw it, since maybe gone.
            Record::OnHang(_) => false,
            other => other.pid().is_some_and(|pid| self.0.contains(&pid)),
        }
    }
}

/// Takes in one wait result, handing an `--on-hang` shell's over; false
/// when there is nothing more to wait for.
fn collect(
    waited: nix::Result<WaitStatus>,
    root: Pid,
    totals: &mut Trailer,
    hooks: Option<&mut Reaped>,
) -> bool {
    if let (Ok(status), Some(hooks)) = (waited, hooks) {
        if let Some(slot) = status.pid().and_then(|pid| hooks.get_mut(&pid.as_raw())) {
            *slot = Some(status);
            return true;
        }
    }
    match waited {
        Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == root => {
            totals.root_exit_code = Some(code)
        }
        Ok(WaitStatus::Signaled(pid, signal, _)) if pid.as_raw() == root => {
            totals.root_signal = Some(signal as i32)
        }
        Ok(WaitStatus::StillAlive) | Err(_) => return false,
        Ok(_) => {}
    }
    true
}

/// Orphans of the tree become proctrace's children instead of init's, so
/// they can be waited for and killed cleanly.
fn become_subreaper() -> Result<(), RecordError> {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes a plain integer argument.
    let result = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if result == 0 {
        Ok(())
    } else {
        Err(RecordError::System {
            context: "becoming the subreaper of the tree".into(),
            source: std::io::Error::last_os_error(),
        })
    }
}

/// Holds events until no earlier one can still arrive, then gives them out
/// in timestamp order, numbered. The ring buffer is already ordered; perf
/// buffers are per CPU, so their events interleave only here.
#[derive(Default)]
struct Reorder {
    pending: BTreeMap<(u64, u64), Record>,
    arrivals: u64,
    next_seq: u64,
    departed: Departed,
}

impl Reorder {
    fn push(&mut self, record: Record) {
        let timestamp = record.timestamp().unwrap_or(0);
        self.pending.insert((timestamp, self.arrivals), record);
        self.arrivals += 1;
    }

    fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// When the last Fork or Exec of `pid` held back happened.
    fn last_event(&self, pid: Pid) -> Option<u64> {
        let events = self
            .pending
            .values()
            .filter(|r| matches!(r, Record::Fork(_) | Record::Exec(_)));
        events
            .filter(|r| r.pid() == Some(pid))
            .filter_map(Record::timestamp)
            .max()
    }

    /// What the Forks and Execs held back say: each process's parent,
    /// and the command of its latest exec.
    fn held(&self) -> HashMap<Pid, (Option<Pid>, Option<&str>)> {
        let mut held: HashMap<Pid, (Option<Pid>, Option<&str>)> = HashMap::new();
        for record in self.pending.values() {
            match record {
                Record::Fork(fork) => {
                    held.entry(fork.child_pid).or_default().0 = Some(fork.parent_pid)
                }
                Record::Exec(exec) => held.entry(exec.pid).or_default().1 = Some(&exec.cmdline),
                _ => {}
            }
        }
        held
    }

    /// The children of the forks held back.
    fn forked(&self) -> impl Iterator<Item = Pid> + '_ {
        self.pending.values().filter_map(|record| match record {
            Record::Fork(fork) => Some(fork.child_pid),
            _ => None,
        })
    }

    fn take_until(&mut self, cutoff: Option<u64>) -> Vec<Record> {
        let later = match cutoff {
            Some(cutoff) => self.pending.split_off(&(cutoff, u64::MAX)),
            None => BTreeMap::new(),
        };
        let ready = std::mem::replace(&mut self.pending, later);
        ready
            .into_values()
            .filter(|record| !self.departed.is_late(record))
            .map(|mut record| {
                record.set_seq(self.next_seq);
                self.next_seq += 1;
                record
            })
            .collect()
    }
}

fn monotonic_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC always exists");
    now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SetSid;

    fn setsid(timestamp: u64, pid: Pid) -> Record {
        Record::SetSid(SetSid {
            seq: 0,
            timestamp,
            pid,
            sid: pid,
        })
    }

    #[test]
    fn reorder_releases_in_timestamp_order_up_to_the_cutoff() {
        let mut reorder = Reorder::default();
        for (ts, pid) in [(30, 3), (10, 1), (20, 2), (10, 4)] {
            reorder.push(setsid(ts, pid));
        }
        let first: Vec<_> = reorder
            .take_until(Some(20))
            .iter()
            .map(|r| (r.seq(), r.pid()))
            .collect();
        assert_eq!(
            first,
            [(Some(0), Some(1)), (Some(1), Some(4)), (Some(2), Some(2))]
        );
        let rest: Vec<_> = reorder
            .take_until(None)
            .iter()
            .map(|r| (r.seq(), r.pid()))
            .collect();
        assert_eq!(rest, [(Some(3), Some(3))]);
    }

    #[test]
    fn events_after_an_exit_are_dropped_until_the_pid_is_forked_again() {
        use crate::recorder::lineage::tests::{exit, fork};
        let mut fork = fork(1, 7);
        fork.set_timestamp(40);
        let mut reorder = Reorder::default();
        for record in [
            setsid(10, 7),
            exit(7, 20),
            setsid(30, 7),
            fork,
            setsid(50, 7),
        ] {
            reorder.push(record);
        }
        let released: Vec<_> = reorder
            .take_until(None)
            .iter()
            .map(|r| (r.seq(), r.kind(), r.timestamp()))
            .collect();
        assert_eq!(
            released,
            [
                (Some(0), "SetSID", Some(10)),
                (Some(1), "Exit", Some(20)),
                (Some(2), "Fork", Some(40)),
                (Some(3), "SetSID", Some(50)),
            ]
        );
    }
}
