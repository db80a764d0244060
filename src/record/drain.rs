//! The recording thread: owns the BPF program, starts the command, drains
//! the kernel's buffer, restores one causal order and hands events on.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use libbpf_rs::{PerfBuffer, PerfBufferBuilder, RingBuffer, RingBufferBuilder};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid as NixPid;

use super::decode::decode;
use super::kernel::{self, KernelConfig, Probe};
use super::{Control, Prepared, RecordError, Started, Totals};
use crate::event::{BufferKind, Pid, Record};

/// How long an event is held back so that events of other CPUs with
/// earlier timestamps can still overtake it. Records are written within
/// microseconds of their timestamp (tracepoint programs run with preemption
/// off); this leaves room for a descheduled vCPU.
const REORDER_WINDOW_NS: u64 = 100_000_000;
/// How long to wait for the kernel between two looks at the tree.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// How often to ask the kernel whether the tree is gone. Each look scans
/// the tracking map's buckets from the first (65,536 by default), which
/// costs more than the events of a wake-up: look at most this often.
const GONE_CHECK_NS: u64 = 10_000_000;
/// After a stop request, how long the tree's exits (from the same Ctrl-C)
/// may still be recorded.
const STOP_GRACE_NS: u64 = 300_000_000;

/// Runs one recording on the calling thread; reports the start, or why it
/// could not start, on `ready`, then sends events on `events`.
pub fn run(
    config: KernelConfig,
    target: Prepared,
    control: Arc<Control>,
    ready: Sender<Result<Started, RecordError>>,
    events: Sender<Record>,
) -> Result<Totals, RecordError> {
    let mut storage = MaybeUninit::uninit();
    let probe = match kernel::load(&config, &mut storage) {
        Ok(probe) => probe,
        Err(err) => {
            let _ = ready.send(Err(err));
            return Ok(Totals::default());
        }
    };
    let drain = Drain {
        probe: &probe,
        perf_pages: config.perf_pages,
        control,
        events,
        reorder: RefCell::default(),
    };
    drain.run(&target, &ready)
}

struct Drain<'a, 'obj> {
    probe: &'a Probe<'obj>,
    perf_pages: usize,
    control: Arc<Control>,
    events: Sender<Record>,
    reorder: RefCell<Reorder>,
}

enum Buffer<'cb> {
    Ring(RingBuffer<'cb>),
    Perf(PerfBuffer<'cb>),
}

impl Buffer<'_> {
    /// Waits for and consumes records. A signal (Ctrl-C, handled on another
    /// thread) may interrupt the wait; that is a wake-up, not a failure.
    fn poll(&self, timeout: Duration) -> libbpf_rs::Result<()> {
        let polled = match self {
            Buffer::Ring(ring) => ring.poll(timeout),
            Buffer::Perf(perf) => perf.poll(timeout),
        };
        match polled {
            Err(err) if err.kind() == libbpf_rs::ErrorKind::Interrupted => Ok(()),
            other => other,
        }
    }

    fn consume(&self) -> libbpf_rs::Result<()> {
        match self {
            Buffer::Ring(ring) => ring.consume(),
            Buffer::Perf(perf) => perf.consume(),
        }
    }
}

impl Drain<'_, '_> {
    fn run(
        &self,
        target: &Prepared,
        ready: &Sender<Result<Started, RecordError>>,
    ) -> Result<Totals, RecordError> {
        let malformed = RefCell::new(0u64);
        let start_ns = monotonic_ns();
        let on_record = |data: &[u8]| match decode(data, start_ns) {
            Ok(record) => self.reorder.borrow_mut().push(record),
            Err(_) => *malformed.borrow_mut() += 1,
        };
        // Perf events are installed in the map when the buffer opens: open
        // it before the command starts, or its first exec has nowhere to go.
        let buffer = self.open_buffer(on_record).and_then(|buffer| {
            let root = target.start(self.probe)?;
            Ok((buffer, root))
        });
        let (buffer, root) = match buffer {
            Ok(ok) => ok,
            Err(err) => {
                let _ = ready.send(Err(err));
                return Ok(Totals::default());
            }
        };
        let _ = ready.send(Ok(Started {
            root_pid: root,
            buffer: self.probe.buffer,
            warnings: self.probe.warnings.clone(),
        }));
        let mut totals = Totals::default();
        let mut gone_since = None;
        let mut gone_checked = 0;
        let mut stop_since = None;
        loop {
            let now = monotonic_ns();
            buffer
                .poll(POLL_INTERVAL)
                .map_err(RecordError::bpf("reading the kernel buffer"))?;
            let cutoff = now.saturating_sub(start_ns + REORDER_WINDOW_NS);
            if !self.release(Some(cutoff), &mut totals)
                || self.control.abort.load(Ordering::Relaxed)
            {
                totals.interrupted = true;
                break;
            }
            if target.is_child() {
                self.reap_root(root, &mut totals);
            }
            if self.control.stop.load(Ordering::Relaxed) {
                stop_since.get_or_insert(now);
            }
            // Timed after the poll: a poll that waited for nothing always
            // looks, so the end is noticed as soon as before.
            let polled = monotonic_ns();
            if gone_since.is_none() && polled.saturating_sub(gone_checked) >= GONE_CHECK_NS {
                gone_checked = polled;
                if self.probe.tree_is_gone() {
                    gone_since = Some(now);
                }
            }
            let settled = gone_since.is_some_and(|t| now - t > REORDER_WINDOW_NS);
            let stopped = stop_since.is_some_and(|t| now - t > STOP_GRACE_NS);
            if settled || stopped {
                buffer
                    .consume()
                    .map_err(RecordError::bpf("reading the kernel buffer"))?;
                self.release(None, &mut totals);
                totals.interrupted = !settled;
                break;
            }
        }
        if target.is_child() {
            self.reap_root(root, &mut totals);
        }
        (totals.lost_buffer_full, totals.lost_tracking_full) = self.probe.losses();
        totals.malformed = *malformed.borrow();
        totals.end_timestamp = monotonic_ns().saturating_sub(start_ns);
        Ok(totals)
    }

    fn open_buffer<'cb>(
        &self,
        mut on_record: impl FnMut(&[u8]) + 'cb,
    ) -> Result<Buffer<'cb>, RecordError>
    where
        Self: 'cb,
    {
        let map = &self.probe.skel.maps.events;
        let error = RecordError::bpf("opening the kernel buffer");
        match self.probe.buffer {
            BufferKind::Ring => {
                let mut builder = RingBufferBuilder::new();
                builder
                    .add(map, move |data: &[u8]| {
                        on_record(data);
                        0
                    })
                    .map_err(RecordError::bpf("opening the kernel buffer"))?;
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

    /// Sends the held events up to `cutoff` (all with `None`) in order;
    /// false when nobody receives them any more.
    fn release(&self, cutoff: Option<u64>, totals: &mut Totals) -> bool {
        let ready = self.reorder.borrow_mut().take_until(cutoff);
        for record in ready {
            if self.events.send(record).is_err() {
                return false;
            }
            totals.events += 1;
        }
        true
    }

    fn reap_root(&self, root: Pid, totals: &mut Totals) {
        if totals.root_exit_code.is_some() || totals.root_signal.is_some() {
            return;
        }
        match waitpid(NixPid::from_raw(root), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => totals.root_exit_code = Some(code),
            Ok(WaitStatus::Signaled(_, signal, _)) => totals.root_signal = Some(signal as i32),
            _ => {}
        }
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
}

impl Reorder {
    fn push(&mut self, record: Record) {
        let timestamp = record.timestamp().unwrap_or(0);
        self.pending.insert((timestamp, self.arrivals), record);
        self.arrivals += 1;
    }

    fn take_until(&mut self, cutoff: Option<u64>) -> Vec<Record> {
        let later = match cutoff {
            Some(cutoff) => self.pending.split_off(&(cutoff, u64::MAX)),
            None => BTreeMap::new(),
        };
        let ready = std::mem::replace(&mut self.pending, later);
        ready
            .into_values()
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
}
