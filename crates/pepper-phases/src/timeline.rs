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

/// The baseline: per interval, in a stable stretch of at least `mpl` intervals of one
/// phase (see [`crate::oracle`]).
pub fn baseline(t: &Timeline, mpl: usize) -> Vec<Label> {
    oracle(&cluster(&signatures(t), BASELINE_THRESHOLD), mpl)
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
