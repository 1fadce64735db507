//! Which intervals to profile, and what the profile of a run estimated from them is
//! worth: periodic sampling (every N-th interval) against phase-aware sampling (one
//! representative interval per phase), evaluated as the dissertation does (§6.3) on an
//! exhaustive time line.

use crate::{Counts, Signature, Tracker};
use std::collections::BTreeMap;

/// Profiles of sampled intervals, by phase, and the whole-run estimate they give.
#[derive(Clone, Debug)]
pub struct PhaseProfiles<K: Ord + Copy> {
    sums: Vec<(BTreeMap<K, f64>, u32)>,
}

impl<K: Ord + Copy> Default for PhaseProfiles<K> {
    fn default() -> Self {
        PhaseProfiles { sums: Vec::new() }
    }
}

impl<K: Ord + Copy> PhaseProfiles<K> {
    /// Adds one profiled interval of `phase`.
    pub fn add(&mut self, phase: usize, counts: impl IntoIterator<Item = (K, u64)>) {
        if self.sums.len() <= phase {
            self.sums.resize_with(phase + 1, Default::default);
        }
        let (sum, n) = &mut self.sums[phase];
        for (k, c) in counts {
            *sum.entry(k).or_default() += c as f64;
        }
        *n += 1;
    }

    /// The run's estimate: each phase's mean profiled interval times the intervals the
    /// phase ran; a phase never profiled borrows its nearest profiled phase's
    /// ([`Tracker::stand_in`]).
    pub fn estimate(&self, tracker: &Tracker) -> BTreeMap<K, f64> {
        let mut out = BTreeMap::new();
        for p in 0..tracker.len() {
            let Some(src) = tracker.stand_in(p) else {
                continue;
            };
            let Some((sum, n)) = self.sums.get(src).filter(|s| s.1 > 0) else {
                continue;
            };
            let scale = tracker.intervals(p) as f64 / *n as f64;
            for (&k, &c) in sum {
                *out.entry(k).or_default() += c * scale;
            }
        }
        out
    }
}

/// What a sampling strategy profiled and estimated.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The intervals profiled.
    pub sampled: Vec<usize>,
    pub estimate: BTreeMap<u32, f64>,
}

/// Every `every`-th interval (the middle one of each stretch of `every`), scaled by the
/// intervals over the intervals sampled.
pub fn periodic(intervals: &[&Counts], every: usize) -> Outcome {
    let every = every.max(1);
    let sampled: Vec<usize> = (every / 2..intervals.len()).step_by(every).collect();
    let scale = intervals.len() as f64 / sampled.len().max(1) as f64;
    let mut estimate = BTreeMap::new();
    for &i in &sampled {
        for &(e, c) in intervals[i] {
            *estimate.entry(e).or_default() += c as f64 * scale;
        }
    }
    Outcome { sampled, estimate }
}

/// Phase-aware: `tracker` classifies each interval as it ends (by `signatures`, which may
/// come from a cheaper source than the profile itself), and an interval is profiled when
/// the tracker asked for it after the previous one.
pub fn phase_aware(intervals: &[&Counts], signatures: &[Signature], tracker: Tracker) -> Outcome {
    let mut tracker = tracker;
    let mut profiles = PhaseProfiles::default();
    let mut sampled = Vec::new();
    let mut next = false;
    for (i, (c, s)) in intervals.iter().zip(signatures).enumerate() {
        let p = tracker.classify(s);
        if next {
            tracker.sampled(p);
            profiles.add(p, c.iter().copied());
            sampled.push(i);
        }
        next = tracker.wants_sample();
    }
    Outcome {
        sampled,
        estimate: profiles.estimate(&tracker),
    }
}

/// The exhaustive profile.
pub fn exhaustive(intervals: &[&Counts]) -> BTreeMap<u32, f64> {
    let mut out = BTreeMap::new();
    for c in intervals {
        for &(e, n) in c.iter() {
            *out.entry(e).or_default() += n as f64;
        }
    }
    out
}

/// The dissertation's code-region error (§6.3): Σ|estimate − exact| / Σ exact.
pub fn error(estimate: &BTreeMap<u32, f64>, exact: &BTreeMap<u32, f64>) -> f64 {
    let total: f64 = exact.values().sum();
    if total <= 0.0 {
        return 0.0;
    }
    let mut diff = 0.0;
    for (k, &x) in exact {
        diff += (estimate.get(k).copied().unwrap_or(0.0) - x).abs();
    }
    for (k, &e) in estimate {
        if !exact.contains_key(k) {
            diff += e;
        }
    }
    diff / total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 40 intervals of A then 40 of B: phase-aware needs 2 intervals for a near-exact
    /// estimate, periodic sampling as few gets one side wrong.
    #[test]
    fn phase_aware_profiles_each_phase_once() {
        let a = [(1u32, 100u64), (2, 50)];
        let b = [(3u32, 80u64)];
        let v: Vec<&Counts> = (0..80)
            .map(|i| if i < 40 { &a[..] } else { &b[..] })
            .collect();
        let sigs: Vec<Signature> = v.iter().map(|c| Signature::new(c)).collect();
        let exact = exhaustive(&v);
        let pa = phase_aware(&v, &sigs, Tracker::new(0.3));
        assert_eq!(pa.sampled, vec![2, 42]);
        assert!(error(&pa.estimate, &exact) < 1e-9);
        let p = periodic(&v, 40);
        assert_eq!(p.sampled, vec![20, 60]);
        assert!(error(&p.estimate, &exact) < 1e-9);
        let p = periodic(&v, 80);
        assert_eq!(p.sampled, vec![40]);
        assert!(error(&p.estimate, &exact) > 0.9);
    }

    #[test]
    fn error_counts_missing_and_spurious_elements() {
        let exact: BTreeMap<u32, f64> = [(1, 10.0), (2, 10.0)].into();
        let est: BTreeMap<u32, f64> = [(1, 12.0), (3, 4.0)].into();
        assert!((error(&est, &exact) - (2.0 + 10.0 + 4.0) / 20.0).abs() < 1e-12);
    }
}
