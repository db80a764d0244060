//! The probes' lines (`record --probe`): what was probed, and how often
//! each process hit each probe in each stack and with each USDT argument
//! tuple. The stacks and frames are the CPU profile's, shared.

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
    /// maps).
    pub file: String,
    /// The function as people write it (a Rust or C++ symbol demangled,
    /// with its `+OFFSET`), or the USDT's `PROVIDER:NAME`.
    pub name: String,
    /// The function's symbol as linked, where it is not `name` (a
    /// mangled Rust or C++ name; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
}

impl ProbePoint {
    /// The probe as people read it: `uprobe:libc.so.6:malloc`.
    pub fn label(&self) -> String {
        let kind = match self.kind {
            ProbeKind::Uprobe => "uprobe",
            ProbeKind::Uretprobe => "uretprobe",
            ProbeKind::Usdt => "usdt",
        };
        let file = self.file.rsplit('/').next().unwrap_or(&self.file);
        format!("{kind}:{file}:{}", self.name)
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

/// How often one process hit one USDT probe with one tuple of arguments.
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
