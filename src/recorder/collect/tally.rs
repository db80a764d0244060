//! The counts the profile is made of: each process's samples by test and
//! stack, its hits of each probe by test and stack, by the values they
//! kept and by power of two of each number kept; and the test each
//! process says runs in it now.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::event::{power_bucket, ArgValue, Pid, ARG_TUPLES_KEPT};
use crate::recorder::frames::Place;
use crate::recorder::wire::{Hit, Mark};

/// The test a process said ran in it at a sample or hit, if any.
pub(super) type Test = Option<Arc<str>>;

/// How often something was counted, and when first and last.
#[derive(Debug, Clone, Copy)]
pub(super) struct Count {
    pub count: u64,
    pub first: u64,
    pub last: u64,
}

impl Count {
    fn merge(&mut self, other: &Count) {
        self.count += other.count;
        self.first = self.first.min(other.first);
        self.last = self.last.max(other.last);
    }
}

/// Counts one more at time `at` under `key`.
fn count_at<K: std::hash::Hash + Eq, S: std::hash::BuildHasher>(
    counts: &mut HashMap<K, Count, S>,
    key: K,
    at: u64,
) {
    let count = counts.entry(key).or_insert(Count {
        count: 0,
        first: at,
        last: at,
    });
    count.count += 1;
    count.last = at;
}

/// Adds `count` to what `counts` has under `key`.
pub(super) fn merge<K: std::hash::Hash + Eq>(
    counts: &mut HashMap<K, Count>,
    key: K,
    count: &Count,
) {
    counts
        .entry(key)
        .and_modify(|sum| sum.merge(count))
        .or_insert(*count);
}

/// One process's hits of one USDT probe by their arguments.
#[derive(Default)]
pub(super) struct ArgTuples {
    pub kept: HashMap<Vec<ArgValue>, u64>,
    pub other: u64,
}

/// Samples by process, test and stack (its [`PlaceStacks`] id).
pub(super) type SampleCounts = foldhash::HashMap<(Pid, Test, u32), Count>;
/// Hits by process, test, probe and stack (the empty one without stacks).
pub(super) type HitCounts = foldhash::HashMap<(Pid, Test, u32, u32), Count>;

/// Every stack of places counted (leaf first), each numbered once: a
/// stack seen before is found by its places, without copying them.
#[derive(Default)]
pub(super) struct PlaceStacks {
    ids: foldhash::HashMap<Box<[Place]>, u32>,
    /// The places of the stacks numbered since [`PlaceStacks::take_new`].
    new: Vec<Place>,
}

impl PlaceStacks {
    fn id(&mut self, places: &[Place]) -> u32 {
        if let Some(&id) = self.ids.get(places) {
            return id;
        }
        let id = self.ids.len() as u32;
        self.ids.insert(places.into(), id);
        self.new.extend_from_slice(places);
        id
    }

    /// The places of the stacks first seen since the last call.
    pub(super) fn take_new(&mut self) -> Vec<Place> {
        std::mem::take(&mut self.new)
    }

    /// The stacks by id.
    pub(super) fn by_id(&self) -> Vec<&[Place]> {
        let mut stacks = vec![&[][..]; self.ids.len()];
        for (places, &id) in &self.ids {
            stacks[id as usize] = places;
        }
        stacks
    }
}

/// Hits by process, test and probe, by the values they kept.
pub(super) type ArgCounts = HashMap<(Pid, Test, u32), ArgTuples>;
/// Hits by process, test, probe and kept number, by its power of two.
pub(super) type HistogramCounts = HashMap<(Pid, Test, u32, u32), BTreeMap<i64, u64>>;

#[derive(Default)]
pub(super) struct Tally {
    /// The test each process says runs in it now (see [`Mark`]); a fork
    /// starts in its parent's.
    tests: HashMap<Pid, Arc<str>>,
    pub stacks: PlaceStacks,
    pub samples: SampleCounts,
    pub hits: HitCounts,
    /// Past the bound of tuples kept, by process, test and probe only.
    pub args: ArgCounts,
    pub histograms: HistogramCounts,
    /// Samples counted.
    pub sample_total: u64,
    /// Hits counted.
    pub hit_total: u64,
}

impl Tally {
    /// A fork starts in its parent's test.
    pub(super) fn fork(&mut self, parent: Pid, child: Pid) {
        if let Some(test) = self.tests.get(&parent).cloned() {
            self.tests.insert(child, test);
        }
    }

    /// A new program, or a process gone: no test marked any more.
    pub(super) fn forget(&mut self, pid: Pid) {
        self.tests.remove(&pid);
    }

    /// Follows a process's word on its current test.
    pub(super) fn mark(&mut self, mark: Mark) {
        match mark.test {
            // A test's next phase keeps the name every key shares.
            Some(test) if self.tests.get(&mark.pid).is_some_and(|t| **t == test) => {}
            Some(test) => {
                self.tests.insert(mark.pid, Arc::from(test));
            }
            None => {
                self.tests.remove(&mark.pid);
            }
        }
    }

    fn test_of(&self, pid: Pid) -> Test {
        self.tests.get(&pid).cloned()
    }

    /// Counts a sample of `pid` at `at` in the stack of `places`.
    pub(super) fn sample(&mut self, pid: Pid, at: u64, places: &[Place]) {
        self.sample_total += 1;
        let test = self.test_of(pid);
        let stack = self.stacks.id(places);
        count_at(&mut self.samples, (pid, test, stack), at);
    }

    /// Counts one hit of a probe, in its stack and by its arguments.
    pub(super) fn hit(&mut self, hit: Hit, places: &[Place]) {
        self.hit_total += 1;
        let (pid, at) = (hit.sample.pid, hit.sample.timestamp);
        let test = self.test_of(pid);
        let stack = self.stacks.id(places);
        count_at(&mut self.hits, (pid, test.clone(), hit.probe, stack), at);
        if hit.args.is_empty() {
            return;
        }
        for (value, arg) in hit.args.iter().enumerate() {
            if let ArgValue::Number(n) = arg {
                let key = (pid, test.clone(), hit.probe, value as u32);
                let histogram = self.histograms.entry(key).or_default();
                *histogram.entry(power_bucket(*n)).or_default() += 1;
            }
        }
        let tuples = self.args.entry((pid, test, hit.probe)).or_default();
        if let Some(count) = tuples.kept.get_mut(&hit.args) {
            *count += 1;
        } else if tuples.kept.len() < ARG_TUPLES_KEPT {
            tuples.kept.insert(hit.args, 1);
        } else {
            tuples.other += 1;
        }
    }
}
