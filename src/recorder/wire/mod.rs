//! The ground floor of the recorder: what the kernel hands over, decoded,
//! and the pure parsers of it. Nothing here loads, polls or starts a
//! thread, so every part of the recorder can stand on it and unit tests
//! can feed it bytes without a kernel.
//!
//! - [`events`]: the lifecycle records of the events buffer, into the
//!   event model;
//! - [`samples`]: the samples and hits rings' records (CPU samples, probe
//!   hits, test marks);
//! - [`waits`]: the waits ring's records (long waits and their wakers)
//!   and the kernel's totals of every wait (`--off-cpu`);
//! - [`mappings`]: the executable mappings perf announces, and
//!   /proc/PID/maps lines;
//! - [`btf`]: the kernel's BTF cut down to what the program relocates
//!   against;
//! - [`cpus`]: the kernel's lists of CPUs.
//!
//! The record layouts are `src/bpf/proctrace.h`'s, through the skeleton's
//! `bpf::types`: one definition shared by C and Rust.

pub(crate) mod btf;
pub(crate) mod cpus;
pub(crate) mod events;
pub(crate) mod mappings;
pub(crate) mod samples;
pub(crate) mod waits;

use plain::Plain;

use crate::bpf::types::{
    event_header, exec_event, exit_event, fork_event, hit_event, id_event, mark_event,
    offcpu_thread, probe_setting, py_code_event, py_frame, py_layout, resources, sample_event,
    wait_event, wait_key, wait_total, waker_event,
};

pub(crate) use events::decode;
pub(crate) use mappings::{Mapping, Seen};
pub(crate) use samples::{
    decode_from_hits, decode_from_samples, FromHits, FromSamples, Hit, Mark, PyCode, PyFrame,
    Sample,
};
pub(crate) use waits::{decode_from_waits, fd_call_bits, FromWaits, Wait, WaitKey, Wakeup};

// SAFETY: plain C structs of integers, valid for any bit pattern.
unsafe impl Plain for event_header {}
unsafe impl Plain for fork_event {}
unsafe impl Plain for exec_event {}
unsafe impl Plain for exit_event {}
unsafe impl Plain for resources {}
unsafe impl Plain for id_event {}
unsafe impl Plain for sample_event {}
unsafe impl Plain for hit_event {}
unsafe impl Plain for mark_event {}
unsafe impl Plain for probe_setting {}
unsafe impl Plain for wait_event {}
unsafe impl Plain for waker_event {}
unsafe impl Plain for wait_key {}
unsafe impl Plain for wait_total {}
unsafe impl Plain for offcpu_thread {}
unsafe impl Plain for py_code_event {}
unsafe impl Plain for py_layout {}
unsafe impl Plain for py_frame {}

/// A kernel record that does not match the shared layout; only a build of
/// mismatched C and Rust halves could produce one.
#[derive(Debug, thiserror::Error)]
#[error("malformed kernel record ({len} bytes, kind {kind})")]
pub struct Malformed {
    len: usize,
    kind: u32,
}

impl Malformed {
    fn new(len: usize, kind: u32) -> Malformed {
        Malformed { len, kind }
    }
}

/// Copies a record out of the buffer: perf samples are only 4-byte aligned,
/// so the bytes cannot be borrowed as the struct in place.
pub(crate) fn copy<T: Plain + Default>(data: &[u8]) -> Option<T> {
    let mut value = T::default();
    plain::copy_from_bytes(&mut value, data).ok()?;
    Some(value)
}

/// The bytes of a struct as the kernel lays it out: a setting written to
/// a map, or a record as the kernel writes it, for tests that feed the
/// recorder without one.
pub(crate) fn bytes_of<T: Plain>(value: &T) -> Vec<u8> {
    // SAFETY: Plain types have no padding invariants to uphold when read.
    unsafe { plain::as_bytes(value) }.to_vec()
}
