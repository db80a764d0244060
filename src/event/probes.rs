//! The probes' lines (`record --probe`): what was probed, and how often
//! each process hit each probe in each stack, with each tuple of the
//! values it keeps, and in each power of two of each number kept. The stacks and frames are the CPU profile's, shared.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Pid;

/// How a probe is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ProbeKind {
    /// The entry of a function (or an offset into it).
    Uprobe,
    /// The return of a function.
    Uretprobe,
    /// A static probe a program ships (`<sys/sdt.h>`'s USDT).
    Usdt,
    /// A static probe of the kernel (`syscalls:sys_enter_openat`).
    Tracepoint,
    /// The entry of a kernel function, through a kprobe.
    Kprobe,
    /// The return of a kernel function, through a kretprobe.
    Kretprobe,
    /// The entry of a kernel function, through its BPF trampoline.
    Fentry,
    /// The return of a kernel function, through its BPF trampoline.
    Fexit,
}

/// One attached probe, in the header: a spec with a wildcard is one per
/// match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbePoint {
    /// Its number, which [`ProbeHits`] and [`ProbeArgs`] refer to.
    pub id: u32,
    /// The `--probe` it came from, as given.
    pub spec: String,
    /// How it is attached.
    pub kind: ProbeKind,
    /// The file attached to, resolved (`libc` becomes the path the tree
    /// maps); empty for a probe of the kernel.
    pub file: String,
    /// The function as people write it (a Rust or C++ symbol demangled,
    /// with its `+OFFSET`), or the USDT's `PROVIDER:NAME`.
    pub name: String,
    /// The function's symbol as linked, where it is not `name` (a
    /// mangled Rust or C++ name; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// The values each hit kept, as the spec's `keep` named them
    /// (`arg0`, `str(arg0)`, `(int32)retval`): what [`ProbeArgs::args`]
    /// and [`ProbeHistogram::value`] follow. Empty for a USDT probe, whose
    /// hits keep all its arguments, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The filter the kernel kept only the hits that passed (the spec's
    /// `if`), as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

impl ProbePoint {
    /// The probe as people read it: `uprobe:libc.so.6:malloc`,
    /// `tracepoint:syscalls:sys_enter_openat`.
    pub fn label(&self) -> String {
        let kind = match self.kind {
            ProbeKind::Uprobe => "uprobe",
            ProbeKind::Uretprobe => "uretprobe",
            ProbeKind::Usdt => "usdt",
            ProbeKind::Tracepoint => "tracepoint",
            ProbeKind::Kprobe => "kprobe",
            ProbeKind::Kretprobe => "kretprobe",
            ProbeKind::Fentry => "fentry",
            ProbeKind::Fexit => "fexit",
        };
        match self.file.rsplit('/').next() {
            Some(file) if !file.is_empty() => format!("{kind}:{file}:{}", self.name),
            _ => format!("{kind}:{}", self.name),
        }
    }
}

/// How often one process hit one probe in one stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeHits {
    /// The process (any of its threads).
    pub pid: Pid,
    /// The test the process said ran in it at the time, where it runs
    /// many (pytest's `PYTEST_CURRENT_TEST`, its node id); absent
    /// otherwise, when the process's own test stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// The [`ProbePoint`] id.
    pub probe: u32,
    /// The [`Stack`](super::Stack) id at the hits; absent when recorded
    /// without stacks, or where none could be unwound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<u32>,
    /// Hits there.
    pub count: u64,
    /// The first and last of them (nanoseconds since the start).
    pub first: u64,
    /// See `first`.
    pub last: u64,
}

/// How often one process hit one probe with one tuple of the values it
/// keeps: a USDT probe's arguments, or what its spec's `keep` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeArgs {
    /// The process (any of its threads).
    pub pid: Pid,
    /// The test the process said ran in it at the time, where it runs
    /// many (pytest's `PYTEST_CURRENT_TEST`, its node id); absent
    /// otherwise, when the process's own test stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// The [`ProbePoint`] id.
    pub probe: u32,
    /// The arguments: numbers, or the C strings that pointers pointed
    /// to; empty for the hits past the recorder's bound of distinct
    /// tuples (`other`).
    pub args: Vec<ArgValue>,
    /// The hits whose tuple was not kept apart: the recorder keeps at
    /// most [`ARG_TUPLES_KEPT`] per probe and process.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub other: bool,
    /// Hits with these arguments.
    pub count: u64,
}

/// One USDT argument of a hit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ArgValue {
    /// A number, signed.
    Number(i64),
    /// The C string a pointer argument pointed to (its first
    /// [`PROBE_TEXT_MAX`](super::PROBE_TEXT_MAX) bytes).
    Text(String),
}

impl fmt::Display for ArgValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgValue::Number(n) => write!(f, "{n}"),
            ArgValue::Text(text) => write!(f, "{text:?}"),
        }
    }
}

/// How one process's hits of one probe spread one kept number over powers
/// of two (bpftrace's `hist()`): its histogram, per test too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeHistogram {
    /// The process (any of its threads).
    pub pid: Pid,
    /// The test the process said ran in it at the time, as for
    /// [`ProbeHits::test`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// The [`ProbePoint`] id.
    pub probe: u32,
    /// Which value: its index among [`ProbePoint::values`] (a USDT
    /// probe's argument).
    pub value: u32,
    /// `[LOWER, COUNT]`: hits whose value was in LOWER's bucket
    /// ([`power_bucket`]), lowest first.
    pub buckets: Vec<(i64, u64)>,
}

/// The bucket of the power-of-two histogram `value` falls in, by its
/// bound nearest 0: 0 alone; from 1, 2, 4, … up to twice that; and
/// from -1, -2, -4, … down to twice that.
pub fn power_bucket(value: i64) -> i64 {
    let power = |magnitude: u64| 1u64 << (63 - magnitude.leading_zeros());
    match value {
        0 => 0,
        v if v > 0 => power(v as u64) as i64,
        // i64::MIN's bucket is itself: -(1 << 63) as two's complement.
        v => power(v.unsigned_abs()).wrapping_neg() as i64,
    }
}

/// Distinct argument tuples a recording keeps per probe and process.
pub const ARG_TUPLES_KEPT: usize = 1000;

/// The times one process spent in one function, from each hit of a
/// `uprobe` to the hit of its `uretprobe` on the same thread, where both
/// were attached to the function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeLatency {
    /// The process (any of its threads).
    pub pid: Pid,
    /// The uprobe's [`ProbePoint`] id.
    pub probe: u32,
    /// The uretprobe's.
    pub ret: u32,
    /// Calls that returned.
    pub count: u64,
    /// The shortest and longest, in nanoseconds.
    pub min: u64,
    /// See `min`.
    pub max: u64,
    /// `[LOWER, COUNT]`: calls that took from LOWER ns up to the next
    /// bucket's lower bound ([`latency_bucket`]), shortest first.
    pub buckets: Vec<[u64; 2]>,
}

/// The lower bound of the latency histogram's bucket `ns` falls in: the
/// value itself below 8 ns, then 8 buckets per power of two, so a
/// bucket's bounds are within 12.5% of each other.
pub fn latency_bucket(ns: u64) -> u64 {
    if ns < 8 {
        return ns;
    }
    let shift = 63 - ns.leading_zeros() - 3;
    (ns >> shift) << shift
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_buckets_are_bounded_by_powers_of_two() {
        let cases = [
            (0, 0),
            (1, 1),
            (3, 2),
            (65536, 65536),
            (131071, 65536),
            (-1, -1),
            (-5, -4),
            (i64::MAX, 1 << 62),
            (i64::MIN, i64::MIN),
        ];
        for (value, bucket) in cases {
            assert_eq!(power_bucket(value), bucket, "{value}");
        }
    }

    #[test]
    fn latency_buckets_are_within_an_eighth() {
        assert_eq!(latency_bucket(5), 5);
        assert_eq!(latency_bucket(8), 8);
        assert_eq!(latency_bucket(17), 16);
        assert_eq!(latency_bucket(19), 18);
        assert_eq!(latency_bucket(1_000_000), 983_040);
        for ns in [9u64, 100, 12_345, 1 << 40, u64::MAX] {
            let lower = latency_bucket(ns);
            assert!(lower <= ns && ns - lower <= lower / 8, "{ns}: {lower}");
        }
    }
}
