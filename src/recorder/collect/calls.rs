//! Calls timed from a uprobe's hit to its uretprobe's on the same thread:
//! each process's latency histogram of each function probed both ways.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::event::{latency_bucket, Pid, ProbeLatency};
use crate::recorder::wire::Hit;

/// Calls timed from a uprobe's hit to its uretprobe's on the same thread.
pub(super) struct Calls {
    /// Each uretprobe's uprobe.
    entry_of: HashMap<u32, u32>,
    /// The uprobes that have a uretprobe.
    timed: HashSet<u32>,
    /// The entries not yet returned from, by thread and uprobe, the
    /// innermost last (recursion nests).
    open: HashMap<(Pid, u32), Vec<u64>>,
    /// The calls that returned, per process and uprobe.
    took: HashMap<(Pid, u32), Took>,
}

/// Calls that cannot return before their callers do: a thread deeper than
/// this in one function forgets its outermost entries.
const MAX_OPEN_CALLS: usize = 4096;

/// One process's returned calls of one function: its uretprobe, and the
/// times as [`ProbeLatency`] has them, the buckets by lower bound.
struct Took {
    ret: u32,
    count: u64,
    min: u64,
    max: u64,
    buckets: BTreeMap<u64, u64>,
}

impl Calls {
    pub(super) fn new(pairs: Vec<(u32, u32)>) -> Calls {
        Calls {
            timed: pairs.iter().map(|&(entry, _)| entry).collect(),
            entry_of: pairs.into_iter().map(|(entry, ret)| (ret, entry)).collect(),
            open: HashMap::new(),
            took: HashMap::new(),
        }
    }

    /// Follows one hit, in time order.
    pub(super) fn hit(&mut self, hit: &Hit) {
        let (pid, tid, at) = (hit.sample.pid, hit.sample.tid, hit.sample.timestamp);
        if self.timed.contains(&hit.probe) {
            let open = self.open.entry((tid, hit.probe)).or_default();
            if open.len() == MAX_OPEN_CALLS {
                open.remove(0);
            }
            open.push(at);
        }
        let Some(&entry) = self.entry_of.get(&hit.probe) else {
            return;
        };
        // A return whose entry was before the recording is not timed.
        let Some(since) = self.open.get_mut(&(tid, entry)).and_then(Vec::pop) else {
            return;
        };
        let ns = at.saturating_sub(since);
        let took = self.took.entry((pid, entry)).or_insert(Took {
            ret: hit.probe,
            count: 0,
            min: ns,
            max: ns,
            buckets: BTreeMap::new(),
        });
        took.count += 1;
        took.min = took.min.min(ns);
        took.max = took.max.max(ns);
        *took.buckets.entry(latency_bucket(ns)).or_default() += 1;
    }

    pub(super) fn into_records(self) -> Vec<ProbeLatency> {
        let mut records: Vec<ProbeLatency> = self
            .took
            .into_iter()
            .map(|((pid, probe), took)| ProbeLatency {
                pid,
                probe,
                ret: took.ret,
                count: took.count,
                min: took.min,
                max: took.max,
                buckets: took
                    .buckets
                    .into_iter()
                    .map(|(lower, n)| [lower, n])
                    .collect(),
            })
            .collect();
        records.sort_by_key(|r| (r.pid, r.probe));
        records
    }
}
