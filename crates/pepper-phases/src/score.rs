//! The online detector's accuracy against a baseline (§4.2.2 of the dissertation).

use crate::Label;

/// The dissertation's accuracy score and its three parts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score {
    /// Share of the run (by weight) where detector and baseline agree (both in phase or
    /// both in transition).
    pub correlation: f64,
    /// Baseline boundaries the detector matched.
    pub sensitivity: f64,
    /// Detected boundaries that match none.
    pub false_positives: f64,
    /// Correlation/2 + Sensitivity/4 + (1 − FalsePositives)/4, in [0, 1].
    pub score: f64,
}

/// Phases as [start, end) intervals: maximal runs of one phase's label (two phases
/// back to back are two, with a boundary between them).
pub fn spans(labels: &[Label]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (i, l) in labels.iter().enumerate() {
        if l.is_none() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.1 == i && labels[last.0] == *l => last.1 = i + 1,
            _ => out.push((i, i + 1)),
        }
    }
    out
}

/// Scores `detected` against `baseline` (labels, one per interval: the phase it is in,
/// or `None` in transition; `weights`, the path ends of each interval, weigh the
/// correlation).
///
/// Matching follows §4.2.2: a detected phase start matches a baseline phase if it lies at
/// or after that phase's start and before its end; a detected end, if it lies at or after
/// the baseline phase's end and before the next baseline phase's start (or at its end,
/// when the next phase starts right there; the end of the run counts as one past the
/// last interval, so phases running to the end can match); each
/// baseline boundary takes the closest unmatched candidate (one to one). With no baseline
/// phase, sensitivity is 1 (nothing to miss); with no detected phase, false positives are 0.
pub fn score(baseline: &[Label], detected: &[Label], weights: &[u64]) -> Score {
    assert_eq!(baseline.len(), detected.len());
    assert_eq!(baseline.len(), weights.len());
    let total: u64 = weights.iter().sum();
    let agree: u64 = (0..baseline.len())
        .filter(|&i| baseline[i].is_some() == detected[i].is_some())
        .map(|i| weights[i])
        .sum();
    let correlation = if total == 0 {
        1.0
    } else {
        agree as f64 / total as f64
    };
    let b = spans(baseline);
    let d = spans(detected);
    let n = baseline.len();
    let mut used_starts = vec![false; d.len()];
    let mut used_ends = vec![false; d.len()];
    let mut matched = 0usize;
    for (k, &(s, e)) in b.iter().enumerate() {
        let next = b.get(k + 1).map_or(n + 1, |p| p.0);
        let mut take = |used: &mut Vec<bool>,
                        at: &dyn Fn(&(usize, usize)) -> usize,
                        lo: usize,
                        hi: usize,
                        to: usize| {
            let best = d
                .iter()
                .enumerate()
                .filter(|&(j, p)| !used[j] && (lo..hi).contains(&at(p)))
                .min_by_key(|&(_, p)| at(p).abs_diff(to));
            if let Some((j, _)) = best {
                used[j] = true;
                matched += 1;
            }
        };
        take(&mut used_starts, &|p| p.0, s, e, s);
        // A phase followed at once by the next one still has an end to match.
        take(&mut used_ends, &|p| p.1, e, next.max(e + 1), e);
    }
    let sensitivity = if b.is_empty() {
        1.0
    } else {
        matched as f64 / (2 * b.len()) as f64
    };
    let false_positives = if d.is_empty() {
        0.0
    } else {
        (2 * d.len() - matched) as f64 / (2 * d.len()) as f64
    };
    Score {
        correlation,
        sensitivity,
        false_positives,
        score: correlation / 2.0 + sensitivity / 4.0 + (1.0 - false_positives) / 4.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `T` in transition, any other letter a phase.
    fn labels(s: &str) -> Vec<Label> {
        s.chars().map(|c| (c != 'T').then_some(c as u32)).collect()
    }

    #[test]
    fn phases_back_to_back_have_a_boundary() {
        // Baseline: A [0, 3) then B [3, 6). A detector that sees one long phase matches
        // the first start and the last end only.
        let b = labels("AAABBB");
        let d = labels("PPPPPP");
        let s = score(&b, &d, &[1; 6]);
        assert_eq!(spans(&b), vec![(0, 3), (3, 6)]);
        assert_eq!(
            (s.correlation, s.sensitivity, s.false_positives),
            (1.0, 0.5, 0.0)
        );
        let s = score(&b, &labels("PPPQQQ"), &[1; 6]);
        assert_eq!(s.score, 1.0);
    }

    #[test]
    fn a_perfect_detector_scores_one() {
        let b = labels("TTPPPPTTPPPT");
        let s = score(&b, &b, &[1; 12]);
        assert_eq!(
            (s.correlation, s.sensitivity, s.false_positives, s.score),
            (1.0, 1.0, 0.0, 1.0)
        );
    }

    #[test]
    fn a_late_detector_matches_both_boundaries_but_loses_correlation() {
        // Baseline phase [2, 8); detected [4, 9): start 4 is inside [2, 8), end 9 lies in
        // [8, 13). Correlation: intervals 2, 3 and 8 disagree: 9/12.
        let b = labels("TTPPPPPPTTTT");
        let d = labels("TTTTPPPPPTTT");
        let s = score(&b, &d, &[1; 12]);
        assert!((s.correlation - 0.75).abs() < 1e-12);
        assert_eq!((s.sensitivity, s.false_positives), (1.0, 0.0));
        assert!((s.score - (0.375 + 0.25 + 0.25)).abs() < 1e-12);
    }

    #[test]
    fn hand_computed_split_phase() {
        // Baseline: one phase [0, 6). Detected: [1, 3) and [4, 6).
        // Start candidates in [0, 6): 1 and 4, the closest to 0 is 1: matched.
        // End candidates in [6, 7): 6 (the second phase's end): matched.
        // Sens = 2/2; FP = (4 - 2)/4 = .5; Corr: intervals 0 and 3 disagree, 4/6.
        let b = labels("PPPPPP");
        let d = labels("TPPTPP");
        let s = score(&b, &d, &[1; 6]);
        assert!((s.correlation - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!((s.sensitivity, s.false_positives), (1.0, 0.5));
        assert!((s.score - (1.0 / 3.0 + 0.25 + 0.125)).abs() < 1e-12);
    }

    #[test]
    fn an_early_start_does_not_match_and_weights_count() {
        // Detected start 1 lies before the baseline's start 2: unmatched; the ends match.
        let b = labels("TTPPTT");
        let d = labels("TPPPTT");
        let s = score(&b, &d, &[1, 10, 1, 1, 1, 1]);
        assert!((s.correlation - 5.0 / 15.0).abs() < 1e-12);
        assert_eq!((s.sensitivity, s.false_positives), (0.5, 0.5));
    }
}
