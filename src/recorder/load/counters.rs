//! The counters the kernel side keeps, and the tracked map, while the recording runs.

use std::sync::atomic::{AtomicU64, Ordering};

use libbpf_rs::{MapCore, MapFlags};

use super::Probe;
use crate::bpf::types::loss_kind;
use crate::bpf::ProctraceSkel;
use crate::event::Pid;
use crate::event::SyscallHook;
use crate::recorder::error::RecordError;

/// The `.bss` counters, in the mapping the kernel updates too: taken out
/// of the skeleton so that every access to them is atomic.
pub(super) struct Counters<'obj> {
    forked: &'obj AtomicU64,
    exited: &'obj AtomicU64,
    seeded: &'obj AtomicU64,
    compat_execs: &'obj AtomicU64,
}

impl<'obj> Counters<'obj> {
    pub(super) fn take(skel: &mut ProctraceSkel<'obj>) -> Self {
        let bss = skel
            .maps
            .bss_data
            .take()
            .expect(".bss is memory-mapped by libbpf");
        // SAFETY: aligned u64s that nothing else in this process refers to
        // any more; the BPF side uses atomic adds and plain loads on them.
        let atomic = |field: &'obj mut u64| unsafe { AtomicU64::from_ptr(field) };
        Counters {
            forked: atomic(&mut bss.forked),
            exited: atomic(&mut bss.exited),
            seeded: atomic(&mut bss.seeded),
            compat_execs: atomic(&mut bss.compat_execs),
        }
    }
}

impl Probe<'_> {
    /// Starts following `pid` and everything it creates from now on;
    /// `false` where the kernel follows it already, having seen its fork
    /// (see `on_fork`): then it was counted there, and its Fork tells it.
    pub fn track(&self, pid: Pid) -> Result<bool, RecordError> {
        let tracked = &self.skel.maps.tracked;
        match tracked.update(&pid.to_ne_bytes(), &[1], MapFlags::NO_EXIST) {
            Ok(()) => {
                self.counters.seeded.fetch_add(1, Ordering::SeqCst);
                Ok(true)
            }
            Err(err) if err.kind() == libbpf_rs::ErrorKind::AlreadyExists => Ok(false),
            Err(err) => Err(RecordError::bpf(format!("tracking pid {pid}"))(err)),
        }
    }

    /// Stops following `pid` (a seed that turned out to be gone already).
    pub fn untrack(&self, pid: Pid) {
        if self.skel.maps.tracked.delete(&pid.to_ne_bytes()).is_ok() {
            self.counters.seeded.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether every tracked process is gone. A child is counted before
    /// its parent can exit, so reading the exits before the forks can
    /// only overcount the living, never see none too early.
    pub fn tree_is_gone(&self) -> bool {
        let exited = self.counters.exited.load(Ordering::SeqCst);
        let forked = self.counters.forked.load(Ordering::SeqCst);
        let seeded = self.counters.seeded.load(Ordering::SeqCst);
        seeded + forked <= exited
    }

    /// Execs of 32-bit programs so far, where the syscall hook cannot see
    /// their setsid and setpgid; 0 where it can.
    pub fn unwatched_32bit_execs(&self) -> u64 {
        match self.syscall_hook {
            Some(SyscallHook::Tracepoint) => self.counters.compat_execs.load(Ordering::SeqCst),
            _ => 0,
        }
    }

    /// Events lost in the kernel so far: (buffer full, tracking map full).
    pub fn losses(&self) -> (u64, u64) {
        (
            self.lost(loss_kind::LOSS_OUTPUT),
            self.lost(loss_kind::LOSS_TRACKING_FULL),
        )
    }

    /// CPU samples the kernel took but could not hand over so far.
    pub fn lost_samples(&self) -> u64 {
        self.lost(loss_kind::LOSS_SAMPLE)
    }

    /// Probe hits the kernel saw but could not hand over so far.
    pub fn lost_hits(&self) -> u64 {
        self.lost(loss_kind::LOSS_HIT)
    }

    /// Losses of `kind` so far, on every CPU.
    fn lost(&self, kind: loss_kind) -> u64 {
        let per_cpu = self
            .skel
            .maps
            .losses
            .lookup_percpu(&kind.0.to_ne_bytes(), MapFlags::ANY);
        per_cpu
            .ok()
            .flatten()
            .into_iter()
            .flatten()
            .filter_map(|bytes| {
                bytes
                    .get(..8)
                    .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
            })
            .sum()
    }
}
