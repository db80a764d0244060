//! The path of every record the kernel sends: decoded as it is read;
//! lifecycle events held until no earlier one can still arrive, then given
//! out in order, following the tree as they go; samples, hits and test
//! marks handed straight to the collector, which puts them in order
//! itself. What the drain makes (snapshots, lingerers, `--on-hang` runs)
//! joins the events here.

use std::cell::{Cell, Ref, RefCell};

use crossbeam_channel::Sender;

use super::reorder::Reorder;
use crate::event::{Pid, Record};
use crate::recorder::collect::{Collector, Counted};
use crate::recorder::lineage::Lineage;
use crate::recorder::notice::Notice;
use crate::recorder::wire::{
    decode, decode_from_hits, decode_from_samples, decode_from_waits, FromHits, FromSamples,
    FromWaits,
};

/// Where the records go, and what could not be read on the way.
pub(super) struct Router {
    /// When the recording started, on the monotonic clock: the records'
    /// times are made relative to it.
    start_ns: u64,
    /// The environment variables an exec's record keeps.
    env_names: Vec<String>,
    reorder: RefCell<Reorder>,
    /// With `--cpu-profile`, `--probe` or `--off-cpu`: what unwinds and
    /// counts stacks.
    collector: Option<Collector>,
    events: Sender<Record>,
    notices: Sender<Notice>,
    /// Records that did not decode.
    malformed: Cell<u64>,
    /// Hits read with nothing to count them, or that did not decode.
    unread_hits: Cell<u64>,
}

/// What one release gave out.
pub(super) struct Released {
    /// Events given out.
    pub events: u64,
    /// When the last event of the tree among them happened.
    pub last_event: Option<u64>,
}

impl Router {
    /// Records go to `events`, what the tree's events say to `notices`.
    pub(super) fn new(
        start_ns: u64,
        env_names: Vec<String>,
        collector: Option<Collector>,
        events: Sender<Record>,
        notices: Sender<Notice>,
    ) -> Router {
        Router {
            start_ns,
            env_names,
            reorder: RefCell::default(),
            collector,
            events,
            notices,
            malformed: Cell::new(0),
            unread_hits: Cell::new(0),
        }
    }

    /// A record of the events buffer.
    pub(super) fn record(&self, data: &[u8]) {
        match decode(data, self.start_ns, &self.env_names) {
            Ok(record) => self.push(record),
            Err(_) => self.malformed.set(self.malformed.get() + 1),
        }
    }

    /// A record of the samples ring: a CPU sample or a code object its
    /// Python frames ran.
    pub(super) fn sample(&self, data: &[u8]) {
        let Some(collector) = &self.collector else {
            return self.malformed.set(self.malformed.get() + 1);
        };
        match decode_from_samples(data, self.start_ns, collector.buffer()) {
            Ok(FromSamples::Sample(sample)) => collector.sample(sample),
            Ok(FromSamples::PyCode(code)) => collector.py_code(code),
            Err(_) => self.malformed.set(self.malformed.get() + 1),
        }
    }

    /// A record of the hits ring: a probe's hit or a test mark.
    pub(super) fn hit(&self, data: &[u8]) {
        let Some(collector) = &self.collector else {
            return self.unread_hits.set(self.unread_hits.get() + 1);
        };
        match decode_from_hits(data, self.start_ns, collector.buffer()) {
            Ok(FromHits::Hit(hit)) => collector.hit(hit),
            Ok(FromHits::Mark(mark)) => collector.mark(mark),
            Err(_) => self.unread_hits.set(self.unread_hits.get() + 1),
        }
    }

    /// A record of the waits ring: a long wait or its waker.
    pub(super) fn wait(&self, data: &[u8]) {
        match (decode_from_waits(data, self.start_ns), &self.collector) {
            (Ok(FromWaits::Wait(wait)), Some(collector)) => collector.wait(wait),
            (Ok(FromWaits::Wakeup(wakeup)), Some(collector)) => collector.wakeup(wakeup),
            _ => self.malformed.set(self.malformed.get() + 1),
        }
    }

    /// A record the drain made, among the events.
    pub(super) fn push(&self, record: Record) {
        self.reorder.borrow_mut().push(record);
    }

    /// The events held back.
    pub(super) fn held(&self) -> Ref<'_, Reorder> {
        self.reorder.borrow()
    }

    /// The collector, when stacks are counted.
    pub(super) fn collector(&self) -> Option<&Collector> {
        self.collector.as_ref()
    }

    /// Gives out the held events up to `cutoff` (all with `None`) in
    /// order, following the tree with `lineage` as they go; `None` when
    /// nobody receives them.
    pub(super) fn release(&self, cutoff: Option<u64>, lineage: &mut Lineage) -> Option<Released> {
        let ready = self.reorder.borrow_mut().take_until(cutoff);
        let mut released = Released {
            events: 0,
            last_event: None,
        };
        for record in ready {
            if !matches!(
                record,
                Record::Snapshot(_) | Record::Lingering(_) | Record::OnHang(_)
            ) {
                released.last_event = Some(record.timestamp().unwrap_or(0));
            }
            if let Some(notice) = lineage.observe(&record) {
                let _ = self.notices.send(notice);
            }
            if let Some(collector) = &self.collector {
                collector.event(&record);
            }
            self.events.send(record).ok()?;
            released.events += 1;
        }
        // The collector places no sample before the forks up to it are in.
        if let (Some(collector), Some(cutoff)) = (&self.collector, cutoff) {
            collector.upto(cutoff);
        }
        Some(released)
    }

    /// Ends the collector, whose records go out after every event (all
    /// released by now), and says what it counted.
    pub(super) fn finish(&mut self) -> Option<Counted> {
        self.collector.take().map(Collector::finish)
    }

    /// Records that did not decode, and hits that could not be counted.
    pub(super) fn unread(&self) -> (u64, u64) {
        (self.malformed.get(), self.unread_hits.get())
    }

    /// The children of forks held back, which run though no released
    /// event says so yet.
    pub(super) fn forked(&self) -> Vec<Pid> {
        self.reorder.borrow().forked().collect()
    }
}
