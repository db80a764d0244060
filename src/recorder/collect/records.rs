//! The profile's records, written once at the end: the frames named, the
//! stacks numbered by their frames, then the counts that refer to them.

use std::collections::HashMap;

use super::offcpu::Waits;
use super::stack_ids::StackIds;
use super::tally::{merge, ArgCounts, Count, HistogramCounts, Tally, Test};
use crate::event::{ArgValue, CpuSamples, Pid, ProbeArgs, ProbeHistogram, ProbeHits, Record};
use crate::recorder::frames::Names;

/// The Frame and Stack records, then CpuSamples, ProbeHits, ProbeArgs,
/// ProbeHistogram and the waits' lines: places that name the same
/// functions are one stack.
pub(super) fn records(tally: Tally, waits: Waits, names: Names) -> Vec<Record> {
    let places = tally.stacks.by_id();
    let mut stacks = StackIds::default();
    let mut merged: HashMap<(Pid, Test, u32), Count> = HashMap::new();
    for ((pid, test, id), count) in &tally.samples {
        let stack = stacks.of(&names, places[*id as usize]);
        merge(&mut merged, (*pid, test.clone(), stack), count);
    }
    let mut merged_hits: HashMap<(Pid, Test, u32, Option<u32>), Count> = HashMap::new();
    for ((pid, test, probe, id), count) in &tally.hits {
        let places = places[*id as usize];
        let stack = (!places.is_empty()).then(|| stacks.of(&names, places));
        merge(&mut merged_hits, (*pid, test.clone(), *probe, stack), count);
    }
    let waited = waits.into_records(&names, &mut stacks);
    let mut records: Vec<Record> = names.table.into_iter().map(Record::Frame).collect();
    records.extend(stacks.into_records());
    records.extend(sample_records(merged).map(Record::CpuSamples));
    records.extend(hit_records(merged_hits).map(Record::ProbeHits));
    records.extend(arg_records(tally.args).map(Record::ProbeArgs));
    records.extend(histogram_records(tally.histograms).map(Record::ProbeHistogram));
    records.extend(waited);
    records
}

/// By process and test, the most frequent stack first.
fn sample_records(merged: HashMap<(Pid, Test, u32), Count>) -> impl Iterator<Item = CpuSamples> {
    let mut samples: Vec<CpuSamples> = merged
        .into_iter()
        .map(|((pid, test, stack), count)| CpuSamples {
            pid,
            test: test.map(|t| t.to_string()),
            stack,
            count: count.count,
            first: count.first,
            last: count.last,
        })
        .collect();
    samples.sort_by(|a, b| {
        (a.pid, &a.test, b.count, a.stack).cmp(&(b.pid, &b.test, a.count, b.stack))
    });
    samples.into_iter()
}

/// By process, test and probe, the most frequent stack first.
fn hit_records(
    merged: HashMap<(Pid, Test, u32, Option<u32>), Count>,
) -> impl Iterator<Item = ProbeHits> {
    let mut hits: Vec<ProbeHits> = merged
        .into_iter()
        .map(|((pid, test, probe, stack), count)| ProbeHits {
            pid,
            test: test.map(|t| t.to_string()),
            probe,
            stack,
            count: count.count,
            first: count.first,
            last: count.last,
        })
        .collect();
    hits.sort_by(|a, b| {
        (a.pid, &a.test, a.probe, b.count, a.stack)
            .cmp(&(b.pid, &b.test, b.probe, a.count, b.stack))
    });
    hits.into_iter()
}

/// The kept numbers by power of two, by process, test, probe and value.
fn histogram_records(counts: HistogramCounts) -> impl Iterator<Item = ProbeHistogram> {
    let mut counts: Vec<_> = counts.into_iter().collect();
    counts.sort_by(|(a, _), (b, _)| a.cmp(b));
    counts
        .into_iter()
        .map(|((pid, test, probe, value), buckets)| ProbeHistogram {
            pid,
            test: test.map(|t| t.to_string()),
            probe,
            value,
            buckets: buckets.into_iter().collect(),
        })
}

/// The hits by the values kept, most frequent first per process and probe,
/// the tuples past the bound in one record of their own.
fn arg_records(counts: ArgCounts) -> impl Iterator<Item = ProbeArgs> {
    let mut counts: Vec<_> = counts.into_iter().collect();
    counts.sort_by(|(a, _), (b, _)| a.cmp(b));
    counts.into_iter().flat_map(|((pid, test, probe), tuples)| {
        let mut kept: Vec<(Vec<ArgValue>, u64)> = tuples.kept.into_iter().collect();
        kept.sort_by(|a, b| (b.1, &a.0).cmp(&(a.1, &b.0)));
        let line = move |args, other, count| ProbeArgs {
            pid,
            test: test.as_ref().map(|t| t.to_string()),
            probe,
            args,
            other,
            count,
        };
        let other = (tuples.other > 0).then(|| line(Vec::new(), true, tuples.other));
        kept.into_iter()
            .map(move |(args, count)| line(args, false, count))
            .chain(other)
    })
}
