//! The kernel's buffers as the drain reads them: the events buffer (ring
//! or perf), with the samples and hits rings beside it, waited on together
//! with the consumer's requests.

use std::os::fd::BorrowedFd;
use std::time::Duration;

use libbpf_rs::{PerfBuffer, PerfBufferBuilder, RingBuffer, RingBufferBuilder};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::eventfd::EventFd;

use crate::event::BufferKind;
use crate::recorder::error::RecordError;
use crate::recorder::load::Probe;

/// What each buffer's records go to.
pub(super) struct Readers<R, S, H, W> {
    /// The events buffer's.
    pub record: R,
    /// The samples ring's, when samples are taken.
    pub sample: Option<S>,
    /// The hits ring's, when probes or test marks are attached.
    pub hit: Option<H>,
    /// The waits ring's, with `--off-cpu`.
    pub wait: Option<W>,
}

pub(super) enum Buffer<'cb> {
    Ring(RingBuffer<'cb>),
    Perf(PerfBuffer<'cb>),
}

impl<'cb> Buffer<'cb> {
    /// Opens the events buffer, and the samples and hits rings that have a
    /// reader (they need the ring buffer, 5.8+), read in the same wait.
    pub(super) fn open<R, S, H, W>(
        probe: &'cb Probe<'_>,
        perf_pages: usize,
        readers: Readers<R, S, H, W>,
    ) -> Result<Buffer<'cb>, RecordError>
    where
        R: FnMut(&[u8]) + 'cb,
        S: FnMut(&[u8]) + 'cb,
        H: FnMut(&[u8]) + 'cb,
        W: FnMut(&[u8]) + 'cb,
    {
        let map = &probe.skel.maps.events;
        let error = RecordError::bpf("opening the kernel buffer");
        let Readers {
            mut record,
            sample,
            hit,
            wait,
        } = readers;
        if probe.buffer != BufferKind::Ring {
            if sample.is_some() || hit.is_some() || wait.is_some() {
                return Err(RecordError::ProfileNeedsRing);
            }
            return PerfBufferBuilder::new(map)
                .pages(perf_pages)
                .sample_cb(move |_cpu, data: &[u8]| record(data))
                .build()
                .map(Buffer::Perf)
                .map_err(error);
        }
        let mut builder = RingBufferBuilder::new();
        builder
            .add(map, read(record))
            .map_err(RecordError::bpf("opening the kernel buffer"))?;
        if let Some(sample) = sample {
            builder
                .add(&probe.skel.maps.samples, read(sample))
                .map_err(RecordError::bpf("opening the samples ring"))?;
        }
        if let Some(hit) = hit {
            builder
                .add(&probe.skel.maps.hits, read(hit))
                .map_err(RecordError::bpf("opening the probe hits ring"))?;
        }
        if let Some(wait) = wait {
            builder
                .add(&probe.skel.maps.waits, read(wait))
                .map_err(RecordError::bpf("opening the waits ring"))?;
        }
        builder.build().map(Buffer::Ring).map_err(error)
    }

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

    pub(super) fn consume(&self) -> Result<(), RecordError> {
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

/// A ring buffer's callback: every record read, and go on.
fn read<'cb>(mut each: impl FnMut(&[u8]) + 'cb) -> impl FnMut(&[u8]) -> i32 + 'cb {
    move |data: &[u8]| {
        each(data);
        0
    }
}

/// The kernel's buffer and the consumer's requests, waited on together:
/// a snapshot asked for by a signal starts at once, not a poll later.
pub(super) struct Waiter<'a> {
    /// libbpf's own epoll set, inside this one, and the wake-up.
    both: Option<(Epoll, &'a EventFd)>,
}

impl<'a> Waiter<'a> {
    pub(super) fn new(buffer: &Buffer<'_>, wake: Option<&'a EventFd>) -> Waiter<'a> {
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
    pub(super) fn wait(&self, buffer: &Buffer<'_>, timeout: Duration) -> Result<(), RecordError> {
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
