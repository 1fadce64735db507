//! Phase analysis of a profile's time line, and the online detector's phases scored
//! against an exact run's.

use crate::{cluster, oracle, score, Counts, Label, Score, Signature};
use pepper_profile::{DetectedPhases, Timeline};

/// Intervals within this Manhattan distance of a phase's centroid (75% overlap) belong
/// to it in the baseline phases `pepper compare` scores detectors against.
pub const BASELINE_THRESHOLD: f64 = 0.5;

/// The intervals' count vectors.
pub fn counts(t: &Timeline) -> Vec<&Counts> {
    t.intervals.iter().map(|i| &i.counts[..]).collect()
}

/// The intervals' signatures.
pub fn signatures(t: &Timeline) -> Vec<Signature> {
    t.intervals
        .iter()
        .map(|i| Signature::new(&i.counts))
        .collect()
}

/// Each interval's weight for scores: its path ends, or 1 when the clock is time.
pub fn weights(t: &Timeline) -> Vec<u64> {
    t.intervals
        .iter()
        .map(|i| {
            if t.clock == "path-ends" {
                i.path_ends
            } else {
                1
            }
        })
        .collect()
}

/// Whether the sampler read nothing of an interval the guest ran (a busy machine can
/// make it fall a whole ring behind: the run counts those path ends lost).
pub fn is_hole(i: &pepper_profile::Interval) -> bool {
    i.counts.is_empty() && i.path_ends > 0
}

/// The phase finder's group of each interval ([`cluster`] at `threshold`). A hole is
/// not a phase of its own: an empty vector is at distance 1 from every other, so it
/// would make one, and split a stretch of one phase wherever the sampler fell behind.
/// It takes the group of the read interval before it (after it, at the start).
pub fn phase_ids(t: &Timeline, threshold: f64) -> Vec<u32> {
    let read: Vec<usize> = (0..t.intervals.len())
        .filter(|&k| !is_hole(&t.intervals[k]))
        .collect();
    let sigs: Vec<Signature> = read
        .iter()
        .map(|&k| Signature::new(&t.intervals[k].counts))
        .collect();
    let ids = cluster(&sigs, threshold);
    let mut out = Vec::with_capacity(t.intervals.len());
    let mut next = 0;
    for k in 0..t.intervals.len() {
        if next < read.len() && read[next] == k {
            next += 1;
        }
        // The last read interval at or before k, else the first one after it.
        out.push(ids.get(next.max(1) - 1).copied().unwrap_or(0));
    }
    out
}

/// The baseline: per interval, in a stable stretch of at least `mpl` intervals of one
/// phase (see [`crate::oracle`]).
pub fn baseline(t: &Timeline, mpl: usize) -> Vec<Label> {
    oracle(&phase_ids(t, BASELINE_THRESHOLD), mpl)
}

/// Detected phases as labels on `t`'s intervals: an interval is in the detected phase
/// whose span holds its middle path end (so a detector run and an exact run of the same
/// program and input line up by path ends even if their intervals differ).
pub fn labels(t: &Timeline, d: &DetectedPhases) -> Vec<Label> {
    t.intervals
        .iter()
        .map(|i| {
            let mid = i.start + i.path_ends / 2;
            d.phases
                .iter()
                .position(|p| p.start_path_end <= mid && mid < p.end_path_end)
                .map(|k| k as u32)
        })
        .collect()
}

/// Scores `detected` (from any run with a path-end time line) against the baseline of
/// `exact`'s time line at the detector's minimum phase length.
pub fn score_against(exact: &Timeline, detected: &DetectedPhases) -> Score {
    let b = baseline(exact, detected.mpl as usize);
    score(&b, &labels(exact, detected), &weights(exact))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pepper_profile::Interval;

    fn interval(counts: Vec<(u32, u64)>) -> Interval {
        Interval {
            path_ends: 100,
            counts,
            ..Interval::default()
        }
    }

    /// Holes take the phase before them (after them at the start) instead of making one.
    #[test]
    fn unread_intervals_join_the_phase_around_them() {
        let a = || interval(vec![(1, 100)]);
        let b = || interval(vec![(2, 100)]);
        let hole = || interval(vec![]);
        let t = Timeline {
            intervals: vec![hole(), a(), hole(), a(), b(), hole(), hole(), b(), a()],
            ..Timeline::default()
        };
        assert_eq!(phase_ids(&t, 0.5), [0, 0, 0, 0, 1, 1, 1, 1, 0]);
        // Without the filling, the holes are a third phase.
        assert_eq!(cluster(&signatures(&t), 0.5), [0, 1, 0, 1, 2, 0, 0, 2, 1]);
        let none = Timeline {
            intervals: vec![hole(), hole()],
            ..Timeline::default()
        };
        assert_eq!(phase_ids(&none, 0.5), [0, 0]);
    }
}
