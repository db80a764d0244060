//! How often the tree hit each probe in A and in B, in all and per test,
//! when both runs were recorded with the same `record --probe`: which
//! test calls `malloc` or opens files more often now.
//!
//! Counts, not shares: a probe counts calls exactly, and a test that
//! makes twice the calls is the news whatever the run's length. Probes
//! are matched by what they name (`uprobe:libc.so.6:malloc`), tests by
//! their names; a probe of one run only is said, not compared.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::probe_uses;
use crate::recording::Recording;

/// The probes' hits compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HitShift {
    /// Every probe, or probe in one test, whose hits differ, the largest
    /// change first.
    pub changed: Vec<HitChange>,
    /// Those whose hits are the same in both runs.
    pub same: usize,
    /// Probes of A only, and of B only, as they read.
    pub only_in_a: Vec<String>,
    /// See `only_in_a`.
    pub only_in_b: Vec<String>,
}

/// One probe's hits in both runs, in all or in one test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HitChange {
    /// The probe as it reads (`uprobe:libc.so.6:malloc`).
    pub probe: String,
    /// The test; `None` for the probe's hits in all.
    pub test: Option<String>,
    /// Hits in A.
    pub a: u64,
    /// Hits in B.
    pub b: u64,
}

/// Hits by (probe, test), `None` for all.
type Counts = BTreeMap<(String, Option<String>), u64>;

impl HitShift {
    /// Compares the probes' hits of two runs.
    pub fn compare(a: &Recording, b: &Recording) -> HitShift {
        let (a, b) = (counts(a), counts(b));
        let probes = |c: &Counts| -> Vec<String> {
            let mut p: Vec<String> = c.keys().map(|(probe, _)| probe.clone()).collect();
            p.dedup();
            p
        };
        let (in_a, in_b) = (probes(&a), probes(&b));
        let mut shift = HitShift {
            only_in_a: in_a.iter().filter(|p| !in_b.contains(p)).cloned().collect(),
            only_in_b: in_b.iter().filter(|p| !in_a.contains(p)).cloned().collect(),
            ..HitShift::default()
        };
        let both = |key: &(String, Option<String>)| in_a.contains(&key.0) && in_b.contains(&key.0);
        let mut keys: Vec<&(String, Option<String>)> = a.keys().chain(b.keys()).collect();
        keys.sort();
        keys.dedup();
        for key in keys.into_iter().filter(|k| both(k)) {
            let (ha, hb) = (a.get(key).copied(), b.get(key).copied());
            match ha.unwrap_or(0) == hb.unwrap_or(0) {
                true => shift.same += 1,
                false => shift.changed.push(HitChange {
                    probe: key.0.clone(),
                    test: key.1.clone(),
                    a: ha.unwrap_or(0),
                    b: hb.unwrap_or(0),
                }),
            }
        }
        shift
            .changed
            .sort_by_key(|c| std::cmp::Reverse(c.a.abs_diff(c.b)));
        shift
    }
}

/// A run's hits by probe (its label) and test, and in all.
fn counts(recording: &Recording) -> Counts {
    let probes = recording
        .header
        .as_ref()
        .map_or(&[][..], |h| h.probes.as_slice());
    let uses = probe_uses(probes, &recording.profile, &recording.processes);
    let mut counts = Counts::new();
    for used in uses {
        let label = used.probe.label();
        *counts.entry((label.clone(), None)).or_default() += used.hits;
        for (test, hits) in used.by_test {
            *counts.entry((label.clone(), Some(test))).or_default() += hits;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::recording::{Keep, Reader};

    fn read(text: &str) -> Recording {
        let mut reader = Reader::new(Cursor::new(text.as_bytes().to_vec()), "test");
        Recording::read(&mut reader, Keep::Processes).unwrap()
    }

    /// The fuzz corpus's recording with probes, and the same with one
    /// test's hits of one probe doubled.
    #[test]
    fn a_test_that_hits_a_probe_more_often_is_named_with_both_counts() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fuzz-corpus/probes.ndjson"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let a = read(&text);
        assert_eq!(HitShift::compare(&a, &a).changed, []);
        let hits = text
            .lines()
            .find(|l| l.starts_with("{\"ProbeHits\"") && l.contains("\"count\":"))
            .expect("a ProbeHits line");
        let count: u64 = hits
            .split("\"count\":")
            .nth(1)
            .unwrap()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let doubled = hits.replace(
            &format!("\"count\":{count}"),
            &format!("\"count\":{}", count * 2),
        );
        let b = read(&text.replace(hits, &doubled));
        let shift = HitShift::compare(&a, &b);
        assert!(!shift.changed.is_empty(), "{shift:?}");
        let all = shift
            .changed
            .iter()
            .find(|c| c.test.is_none())
            .expect("the probe in all");
        assert_eq!(all.b - all.a, count, "{shift:?}");
        assert!(shift.only_in_a.is_empty() && shift.only_in_b.is_empty());
    }
}
