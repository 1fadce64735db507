//! The offline phase finder and analyzer (§3.2.2, §3.2.3), and the baseline phases the
//! online detector is scored against.

use crate::{Counts, Label, Signature};

/// Groups intervals into phases (which need not be contiguous): each interval joins the
/// phase whose centroid is nearest, if within `threshold` (Manhattan, in [0, 2]), else it
/// opens a new phase. The dissertation leaves the grouping rule open (leader clustering
/// in temporal order is the minimal faithful reading); centroids rather than leaders keep
/// a phase from drifting with its first interval's noise. Empty intervals (nothing ran)
/// form a phase of their own. Returns each interval's phase id, numbered by first
/// appearance.
pub fn cluster(sigs: &[Signature], threshold: f64) -> Vec<u32> {
    let mut centroids: Vec<(Signature, u64)> = Vec::new();
    sigs.iter()
        .map(|s| {
            let best = centroids
                .iter()
                .enumerate()
                .map(|(k, (c, _))| (k, c.distance(s)))
                .filter(|&(_, d)| d <= threshold)
                .min_by(|a, b| a.1.total_cmp(&b.1));
            match best {
                Some((k, _)) => {
                    let (c, n) = &mut centroids[k];
                    *c = c.mean_with(*n, s);
                    *n += 1;
                    k as u32
                }
                None => {
                    centroids.push((s.clone(), 1));
                    (centroids.len() - 1) as u32
                }
            }
        })
        .collect()
}

/// A stretch of consecutive intervals in one phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub phase: u32,
    pub start: usize,
    pub len: usize,
}

/// The maximal runs of equal ids.
pub fn runs(ids: &[u32]) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        match out.last_mut() {
            Some(r) if r.phase == id => r.len += 1,
            _ => out.push(Run {
                phase: id,
                start: i,
                len: 1,
            }),
        }
    }
    out
}

/// The baseline: an interval is in its phase (`ids`, from [`cluster`] over an exact time
/// line) when it lies in a run of at least `mpl` consecutive intervals of that phase,
/// else in transition.
///
/// The dissertation's baseline (§4.2.1) selects loop and recursion instances of at least
/// MPL branches from a call-loop trace; pepper's time line has per-interval vectors, not
/// such a trace, so the baseline here is its stable stretches: repetition found by
/// similarity over the whole run, with the same minimum phase length that models what a
/// client can amortise.
pub fn oracle(ids: &[u32], mpl: usize) -> Vec<Label> {
    let mut out = vec![None; ids.len()];
    for r in runs(ids).into_iter().filter(|r| r.len >= mpl.max(1)) {
        out[r.start..r.start + r.len].fill(Some(r.phase));
    }
    out
}

/// What the analyzer reports about one phase.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseSummary {
    pub id: u32,
    /// Intervals in the phase, and the runs (occurrences) they form.
    pub intervals: usize,
    pub occurrences: usize,
    pub first: usize,
    pub longest: usize,
    /// Share of the run's weight (path ends) in this phase.
    pub share: f64,
    /// The phase's elements by weight, heaviest first, with their share of the phase.
    pub top: Vec<(u32, f64)>,
}

/// The analyzer: per phase, its intervals, occurrences, longest run, share of `weights`
/// (one per interval) and its `top` heaviest elements, phases by share, largest first.
pub fn summarize(
    ids: &[u32],
    counts: &[&Counts],
    weights: &[u64],
    top: usize,
) -> Vec<PhaseSummary> {
    let phases = ids.iter().map(|&i| i as usize + 1).max().unwrap_or(0);
    let total: u64 = weights.iter().sum::<u64>().max(1);
    let rs = runs(ids);
    let mut out: Vec<PhaseSummary> = (0..phases)
        .map(|p| {
            let members: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] as usize == p).collect();
            let mine = rs.iter().filter(|r| r.phase as usize == p);
            let sig = Signature::of_sum(members.iter().map(|&i| counts[i]));
            let mut elems = sig.elems().to_vec();
            elems.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            elems.truncate(top);
            PhaseSummary {
                id: p as u32,
                intervals: members.len(),
                occurrences: mine.clone().count(),
                first: members.first().copied().unwrap_or(0),
                longest: mine.map(|r| r.len).max().unwrap_or(0),
                share: members.iter().map(|&i| weights[i]).sum::<u64>() as f64 / total as f64,
                top: elems,
            }
        })
        .collect();
    out.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.id.cmp(&b.id)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Planted phases: A A A A B B B A A A with a little noise in each.
    fn planted() -> Vec<Vec<(u32, u64)>> {
        let a = |k: u64| vec![(1, 100 + k), (2, 50), (9, k)];
        let b = |k: u64| vec![(5, 80), (6, 70 + k)];
        vec![a(1), a(3), a(0), a(2), b(1), b(4), b(0), a(5), a(1), a(2)]
    }

    #[test]
    fn the_finder_recovers_planted_phases() {
        let sigs: Vec<_> = planted().iter().map(|c| Signature::new(c)).collect();
        let ids = cluster(&sigs, 0.3);
        assert_eq!(ids, vec![0, 0, 0, 0, 1, 1, 1, 0, 0, 0]);
        let rs = runs(&ids);
        assert_eq!(rs.len(), 3);
        assert_eq!(
            rs[1],
            Run {
                phase: 1,
                start: 4,
                len: 3
            }
        );
        let n = None;
        assert_eq!(
            oracle(&ids, 4),
            vec![Some(0), Some(0), Some(0), Some(0), n, n, n, n, n, n]
        );
        assert_eq!(oracle(&ids, 3)[4..7], [Some(1); 3]);
        let counts = planted();
        let refs: Vec<&Counts> = counts.iter().map(|c| &c[..]).collect();
        let s = summarize(&ids, &refs, &[1; 10], 2);
        assert_eq!(s[0].id, 0);
        assert_eq!((s[0].intervals, s[0].occurrences, s[0].longest), (7, 2, 4));
        assert!((s[0].share - 0.7).abs() < 1e-12);
        assert_eq!(s[0].top[0].0, 1);
        assert_eq!(s[1].top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![5, 6]);
    }

    #[test]
    fn a_tight_threshold_splits_everything() {
        let sigs: Vec<_> = planted().iter().map(|c| Signature::new(c)).collect();
        let ids = cluster(&sigs, 0.0);
        assert!(ids.iter().max().unwrap() >= &5);
    }
}
