//! The probes' hits (`record --probe`), summed up: per probe, its hits
//! per test, per command and per process, its most frequent tuples of
//! kept values, and each kept number's histogram by power of two, per
//! test too; and the stacks at the hits, each with its process, test and
//! program, which `probe-folded` collapses.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::cpu::{process_between, program_of, CountedStack};
use super::testname::LineTests;
use crate::event::{
    power_bucket, ArgValue, Pid, ProbeHistogram, ProbeHits, ProbeLatency, ProbePoint,
};
use crate::processes::Processes;
use crate::stacks::Profile;

/// One probe's hits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeUse {
    /// The probe as attached.
    pub probe: ProbePoint,
    /// Hits in all; 0 when no process of the tree hit it.
    pub hits: u64,
    /// Per test, most hits first; empty when no runner named tests.
    pub by_test: Vec<(String, u64)>,
    /// Per program, most hits first.
    pub by_command: Vec<(String, u64)>,
    /// Per process (pid and program), most hits first.
    pub by_process: Vec<(Pid, String, u64)>,
    /// The USDT argument tuples, most frequent first, over all processes;
    /// `None` stands for the tuples the recorder did not keep apart.
    pub args: Vec<(Option<Vec<ArgValue>>, u64)>,
    /// The same per test, most frequent first: how often each test hit
    /// the probe with each tuple (CPython's calls of each function in
    /// each test); empty when no runner named tests.
    pub args_by_test: Vec<(TestArgs, u64)>,
    /// How long the calls took, where a uretprobe of the same function
    /// was attached too.
    pub latency: Option<Latency>,
    /// Each kept number's histogram, in the order kept.
    pub histograms: Vec<ValueHistogram>,
}

/// How a probe's hits spread one kept number over powers of two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValueHistogram {
    /// The value as the spec kept it (`arg0`, `(int32)retval`; a USDT
    /// probe's `argN`).
    pub value: String,
    /// Hits per bucket ([`power_bucket`](crate::event::power_bucket)),
    /// lowest first, the empty buckets between the first and the last
    /// included.
    pub buckets: Vec<(i64, u64)>,
    /// The buckets each test hit, the test with most hits first; empty
    /// when no runner named tests.
    pub by_test: Vec<(String, Vec<(i64, u64)>)>,
}

/// A test and an argument tuple it hit a probe with (`None`: the tuples
/// not kept apart).
pub type TestArgs = (String, Option<Vec<ArgValue>>);

/// The calls of a function, uprobe to uretprobe, over every process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Latency {
    /// The uretprobe's id.
    pub ret: u32,
    /// Calls that returned.
    pub calls: u64,
    /// Shortest and longest, in nanoseconds.
    pub min: u64,
    /// See `min`.
    pub max: u64,
    /// The median, 90th and 99th percentiles: the lower bound of the
    /// histogram bucket each falls in (within 12.5% of it), never below
    /// `min` nor above `max`.
    pub p50: u64,
    /// See `p50`.
    pub p90: u64,
    /// See `p50`.
    pub p99: u64,
    /// Calls per power of two of nanoseconds: `(from, count)`, shortest
    /// first, from the shortest call's power to the longest's, the empty
    /// ones between included, as a histogram is read (at most 65 rows).
    pub histogram: Vec<(u64, u64)>,
}

/// Every probe of the recording with its hits, in the order attached.
pub fn probe_uses(
    probes: &[ProbePoint],
    profile: &Profile,
    processes: &Processes,
) -> Vec<ProbeUse> {
    let mut uses: Vec<Tally> = probes.iter().map(|_| Tally::default()).collect();
    let mut tests = LineTests::new(processes);
    // Argument lines carry no times to find their process by: their
    // hits' lines, counted alongside, do.
    let mut process_of_pid: HashMap<Pid, Option<usize>> = HashMap::new();
    for hits in &profile.probe_hits {
        let Some(tally) = uses.get_mut(hits.probe as usize) else {
            continue;
        };
        let (process, program) = process_of(processes, hits);
        process_of_pid.insert(hits.pid, process);
        tally.hits = tally.hits.saturating_add(hits.count);
        add(&mut tally.by_command, program.clone(), hits.count);
        add(&mut tally.by_process, (hits.pid, program), hits.count);
        if let Some(test) = tests.of(hits.test.as_deref(), process) {
            add(&mut tally.by_test, test, hits.count);
        }
    }
    let mut latencies: HashMap<u32, (u32, Vec<&ProbeLatency>)> = HashMap::new();
    for latency in &profile.probe_latency {
        let entry = latencies
            .entry(latency.probe)
            .or_insert((latency.ret, Vec::new()));
        entry.1.push(latency);
    }
    for args in &profile.probe_args {
        if let Some(tally) = uses.get_mut(args.probe as usize) {
            let tuple = (!args.other).then(|| args.args.clone());
            let process = process_of_pid.get(&args.pid).copied().flatten();
            if let Some(test) = tests.of(args.test.as_deref(), process) {
                add(&mut tally.args_by_test, (test, tuple.clone()), args.count);
            }
            add(&mut tally.args, tuple, args.count);
        }
    }
    let mut histograms = histograms(
        probes,
        &profile.probe_histograms,
        &mut tests,
        &process_of_pid,
    );
    probes
        .iter()
        .zip(uses)
        .map(|(probe, tally)| ProbeUse {
            probe: probe.clone(),
            hits: tally.hits,
            by_test: most_first(tally.by_test),
            by_command: most_first(tally.by_command),
            by_process: most_first(tally.by_process)
                .into_iter()
                .map(|((pid, program), n)| (pid, program, n))
                .collect(),
            args: most_first(tally.args),
            args_by_test: most_first(tally.args_by_test),
            latency: latencies
                .get(&probe.id)
                .and_then(|(ret, lines)| latency(*ret, lines)),
            histograms: histograms.remove(&probe.id).unwrap_or_default(),
        })
        .collect()
}

/// Buckets merged: a histogram's counts by bucket.
type Buckets = BTreeMap<i64, u64>;

/// Each probe's kept numbers' histograms, by probe id, over every process
/// and per test.
fn histograms(
    probes: &[ProbePoint],
    lines: &[ProbeHistogram],
    tests: &mut LineTests<'_>,
    process_of_pid: &HashMap<Pid, Option<usize>>,
) -> HashMap<u32, Vec<ValueHistogram>> {
    let mut merged: BTreeMap<(u32, u32), (Buckets, HashMap<String, Buckets>)> = BTreeMap::new();
    for line in lines.iter().filter(|l| (l.probe as usize) < probes.len()) {
        let (all, by_test) = merged.entry((line.probe, line.value)).or_default();
        add_buckets(all, &line.buckets);
        let process = process_of_pid.get(&line.pid).copied().flatten();
        if let Some(test) = tests.of(line.test.as_deref(), process) {
            add_buckets(by_test.entry(test).or_default(), &line.buckets);
        }
    }
    let mut by_probe: HashMap<u32, Vec<ValueHistogram>> = HashMap::new();
    for ((probe, value), (all, by_test)) in merged {
        let point = &probes[probe as usize];
        let name = point.values.get(value as usize).cloned();
        // A `str(…)` that did not read as text stays its number, an
        // address, whose power of two says nothing.
        if name.as_ref().is_some_and(|n| n.starts_with("str(")) {
            continue;
        }
        let hits = |buckets: &Buckets| buckets.values().fold(0u64, |s, n| s.saturating_add(*n));
        let mut by_test: Vec<(String, Buckets)> = by_test.into_iter().collect();
        by_test.sort_by(|a, b| hits(&b.1).cmp(&hits(&a.1)).then_with(|| a.0.cmp(&b.0)));
        by_probe.entry(probe).or_default().push(ValueHistogram {
            value: name.unwrap_or_else(|| format!("arg{value}")),
            buckets: with_empty_powers(&all),
            by_test: by_test
                .into_iter()
                .map(|(test, buckets)| (test, buckets.into_iter().collect()))
                .collect(),
        });
    }
    by_probe
}

fn add_buckets(into: &mut Buckets, buckets: &[(i64, u64)]) {
    for &(bucket, n) in buckets {
        let count = into.entry(bucket).or_default();
        *count = count.saturating_add(n);
    }
}

/// The calls of `lines` (one per process) merged.
fn latency(ret: u32, lines: &[&ProbeLatency]) -> Option<Latency> {
    let mut buckets: BTreeMap<u64, u64> = BTreeMap::new();
    for line in lines {
        for &[lower, n] in &line.buckets {
            let count = buckets.entry(lower).or_default();
            *count = count.saturating_add(n);
        }
    }
    let calls = buckets.values().fold(0u64, |s, n| s.saturating_add(*n));
    if calls == 0 {
        return None;
    }
    let percentile = |q: u64| {
        let rank = (calls.saturating_mul(q)).div_ceil(100).max(1);
        let mut seen = 0u64;
        buckets
            .iter()
            .find(|(_, n)| {
                seen = seen.saturating_add(**n);
                seen >= rank
            })
            .map_or(0, |(lower, _)| *lower)
    };
    let mut histogram = Buckets::new();
    for (lower, n) in &buckets {
        // Nanoseconds fit an i64 for 292 years.
        let count = histogram.entry(power_bucket(*lower as i64)).or_default();
        *count = count.saturating_add(*n);
    }
    let min = lines.iter().map(|l| l.min).min().unwrap_or(0);
    let max = lines.iter().map(|l| l.max).max().unwrap_or(0).max(min);
    // A bucket's lower bound may be below the shortest call in it.
    let within = |ns: u64| ns.clamp(min, max);
    Some(Latency {
        ret,
        calls,
        min,
        max,
        p50: within(percentile(50)),
        p90: within(percentile(90)),
        p99: within(percentile(99)),
        histogram: with_empty_powers(&histogram)
            .into_iter()
            .map(|(power, n)| (power as u64, n))
            .collect(),
    })
}

/// `histogram`'s rows from its first bucket to its last, each power of
/// two between that no hit fell in with a count of 0 (…, -2, -1, 0, 1,
/// 2, …).
fn with_empty_powers(histogram: &Buckets) -> Vec<(i64, u64)> {
    let (Some(&first), Some(&last)) = (histogram.keys().next(), histogram.keys().last()) else {
        return Vec::new();
    };
    let next = |bucket: i64| match bucket {
        i64::MIN..=-2 => Some(bucket / 2),
        -1 => Some(0),
        0 => Some(1),
        _ => bucket.checked_mul(2),
    };
    std::iter::successors(Some(first), |&b| next(b).filter(|&b| b <= last))
        .map(|bucket| (bucket, histogram.get(&bucket).copied().unwrap_or(0)))
        .collect()
}

/// Every line of hits of one of `probes`, in the order the recording
/// has them.
pub fn hit_stacks(
    probes: &[ProbePoint],
    profile: &Profile,
    processes: &Processes,
) -> Vec<CountedStack> {
    let mut tests = LineTests::new(processes);
    profile
        .probe_hits
        .iter()
        .filter(|hits| (hits.probe as usize) < probes.len())
        .map(|hits| {
            let (process, program) = process_of(processes, hits);
            let test = tests.of(hits.test.as_deref(), process);
            let frames = hits.stack.map(|s| profile.stack(s)).unwrap_or_default();
            CountedStack {
                probe: Some(hits.probe),
                process,
                test,
                program,
                frames: frames.iter().map(|f| f.label()).collect(),
                count: hits.count,
            }
        })
        .collect()
}

fn process_of(processes: &Processes, hits: &ProbeHits) -> (Option<usize>, String) {
    let index = process_between(processes, hits.pid, hits.first, hits.last);
    (index, program_of(processes, index, hits.pid))
}

#[derive(Default)]
struct Tally {
    hits: u64,
    by_test: HashMap<String, u64>,
    by_command: HashMap<String, u64>,
    by_process: HashMap<(Pid, String), u64>,
    args: HashMap<Option<Vec<ArgValue>>, u64>,
    args_by_test: HashMap<TestArgs, u64>,
}

fn add<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, u64>, key: K, n: u64) {
    let count = counts.entry(key).or_default();
    // Saturating: a hostile recording's counts may add up past u64.
    *count = count.saturating_add(n);
}

/// Most first, ties in the keys' order.
fn most_first<K: Ord>(counts: HashMap<K, u64>) -> Vec<(K, u64)> {
    let mut list: Vec<(K, u64)> = counts.into_iter().collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    list
}

/// Processes with at least one hit of any probe.
pub fn probed_processes(profile: &Profile) -> usize {
    let pids: HashSet<Pid> = profile.probe_hits.iter().map(|h| h.pid).collect();
    pids.len()
}
