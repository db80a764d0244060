//! Where the CPU went in A and in B, compared: the functions whose share
//! of the samples grew or shrank, when both runs were recorded with
//! `record --cpu-profile`.
//!
//! Shares, not sample counts: two runs are rarely as long as each other,
//! nor sampled at the same rate, and a function that takes three quarters
//! of the time in both did not change because the run did. A share is a
//! function's self samples (taken in it, not in what it called) in percent
//! of its run's samples: the self shares of a run add up to 100, so what
//! one function gained the others lost, and the total share, which counts
//! a caller with everything under it, would name `main` for every change.

use std::collections::HashMap;

use serde::Serialize;

use crate::stacks::Profile;

/// How the shares of the CPU profile moved from A to B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuShift {
    /// Samples of run A.
    pub a_samples: u64,
    /// Samples of run B.
    pub b_samples: u64,
    /// Every function whose share grew, most points first; empty when a
    /// run has no sample, and shares mean nothing.
    pub grew: Vec<Moved>,
    /// Every function whose share shrank, most points first.
    pub shrank: Vec<Moved>,
}

/// One function whose share moved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Moved {
    /// The function as the `cpu` view names it (its file and offset where
    /// no symbol names it; `_[k]` marks the kernel's).
    pub function: String,
    /// The file its code is in.
    pub module: String,
    /// Its self samples in A, and their percent of A's samples.
    pub a_samples: u64,
    /// See `a_samples`.
    pub a_share: f64,
    /// Its self samples in B, and their percent of B's samples.
    pub b_samples: u64,
    /// See `b_samples`.
    pub b_share: f64,
    /// `b_share - a_share`: percentage points, negative where it shrank.
    pub points: f64,
}

impl CpuShift {
    /// Compares the profiles of two runs.
    pub fn compare(a: &Profile, b: &Profile) -> CpuShift {
        let (a_samples, a_own) = (a.total(), self_samples(a));
        let (b_samples, b_own) = (b.total(), self_samples(b));
        let mut shift = CpuShift {
            a_samples,
            b_samples,
            grew: Vec::new(),
            shrank: Vec::new(),
        };
        if a_samples == 0 || b_samples == 0 {
            return shift;
        }
        let mut keys: Vec<&(String, String)> = a_own.keys().chain(b_own.keys()).collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            let a_count = a_own.get(key).copied().unwrap_or(0);
            let b_count = b_own.get(key).copied().unwrap_or(0);
            let (a_share, b_share) = (share(a_count, a_samples), share(b_count, b_samples));
            let moved = Moved {
                function: key.0.clone(),
                module: key.1.clone(),
                a_samples: a_count,
                a_share,
                b_samples: b_count,
                b_share,
                points: b_share - a_share,
            };
            match moved.points {
                p if p > 0.0 => shift.grew.push(moved),
                p if p < 0.0 => shift.shrank.push(moved),
                _ => {}
            }
        }
        // Most points first; the same, by name, so that the text is the
        // same every time.
        let by_points = |x: &Moved, y: &Moved| {
            y.points
                .abs()
                .total_cmp(&x.points.abs())
                .then_with(|| (&x.function, &x.module).cmp(&(&y.function, &y.module)))
        };
        shift.grew.sort_by(by_points);
        shift.shrank.sort_by(by_points);
        shift
    }
}

/// The samples taken in each function, by (name, file), named as
/// [`crate::analysis::hotspots`] names them.
fn self_samples(profile: &Profile) -> HashMap<(String, String), u64> {
    let mut own: HashMap<(String, String), u64> = HashMap::new();
    for samples in &profile.samples {
        if let Some(leaf) = profile.stack(samples.stack).last() {
            let count = own.entry((leaf.label(), leaf.module.clone())).or_default();
            // Saturating: a hostile recording's counts may add up past u64.
            *count = count.saturating_add(samples.count);
        }
    }
    own
}

/// `part` in percent of `of`.
fn share(part: u64, of: u64) -> f64 {
    part as f64 * 100.0 / of.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::CpuShift;
    use crate::event::{CpuSamples, Frame, Record, Stack};
    use crate::stacks::Profile;

    /// A profile of `main` calling each of `leaves`, sampled as often as
    /// the count next to it.
    fn profile(leaves: &[(&str, u64)]) -> Profile {
        let mut profile = Profile::default();
        let frame = |id, name: &str| {
            Record::Frame(Frame {
                id,
                function: Some(name.to_owned()),
                module: "/usr/bin/hot".to_owned(),
                offset: None,
                kernel: false,
                inlined: false,
            })
        };
        profile.take(frame(0, "main"));
        for (i, &(name, count)) in leaves.iter().enumerate() {
            let id = i as u32 + 1;
            profile.take(frame(id, name));
            profile.take(Record::Stack(Stack {
                id,
                frames: vec![0, id],
            }));
            profile.take(Record::CpuSamples(CpuSamples {
                test: None,
                pid: 10,
                stack: id,
                count,
                first: 0,
                last: 0,
            }));
        }
        profile
    }

    fn names(list: &[super::Moved]) -> Vec<(&str, i64)> {
        list.iter()
            .map(|m| (m.function.as_str(), m.points.round() as i64))
            .collect()
    }

    #[test]
    fn shares_move_in_points_most_first_whatever_the_runs_lengths() {
        // 75/25 in 400 samples, then 25/60/15 in 2000: spin_a lost 50
        // points, spin_b gained 35, new gained 15; main has no self share.
        let a = profile(&[("spin_a", 300), ("spin_b", 100)]);
        let b = profile(&[("spin_a", 500), ("spin_b", 1200), ("new", 300)]);
        let shift = CpuShift::compare(&a, &b);
        assert_eq!((shift.a_samples, shift.b_samples), (400, 2000));
        assert_eq!(names(&shift.grew), [("spin_b", 35), ("new", 15)]);
        assert_eq!(names(&shift.shrank), [("spin_a", -50)]);
        let new = &shift.grew[1];
        assert_eq!((new.a_samples, new.a_share), (0, 0.0));
        assert_eq!((new.b_samples, new.b_share), (300, 15.0));
    }

    #[test]
    fn the_same_shares_or_a_run_without_samples_move_nothing() {
        let a = profile(&[("spin_a", 30), ("spin_b", 10)]);
        let b = profile(&[("spin_a", 300), ("spin_b", 100)]);
        let shift = CpuShift::compare(&a, &b);
        assert!(shift.grew.is_empty() && shift.shrank.is_empty());
        let shift = CpuShift::compare(&a, &Profile::default());
        assert_eq!((shift.a_samples, shift.b_samples), (40, 0));
        assert!(shift.grew.is_empty() && shift.shrank.is_empty());
    }
}
