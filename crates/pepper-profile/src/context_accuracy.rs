//! Calling-context accuracy of an estimated tree against a reference tree.
//!
//! Contexts are matched by what they are: the chain of (call-site offset, function) from the
//! outermost frame, so trees built by different runs (and different node numberings) compare.
//! The measures follow the calling-context-profiling literature: Arnold &
//! Sweeney's *degree of overlap* (Σ over contexts of the smaller of the two normalized
//! weights) and Zhuang et al.'s *hot-edge coverage* (the share of the reference's hot
//! contexts that the estimate has at all), plus hot-function precision (Whaley's
//! hot-method counters, scored against the reference's).

use crate::contexts::{ContextKind, Contexts};
use serde::Serialize;
use std::collections::HashMap;

/// A reference context is hot when it carries at least this share of all calls.
pub const HOT_CONTEXT_THRESHOLD: f64 = 0.001;
/// A function is hot when it carries at least this share of the total (self time, or calls
/// for exact trees).
pub const HOT_FUNCTION_THRESHOLD: f64 = 0.01;
/// An estimated hot function counts as right when the reference gives it at least this
/// share: half the hot threshold, so a function sitting on the threshold is not scored on
/// sampling noise.
pub const HOT_FUNCTION_SLACK: f64 = 0.005;

type Key = Vec<(Option<u64>, u32)>;

/// How well an estimated calling context tree matches the reference.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ContextAccuracy {
    /// Degree of overlap of call counts per context (a sampled estimate's are estimated from
    /// its exact call-site counts; without those, its sampled edge weights stand in).
    pub call_overlap: f64,
    /// The same with recursion folded as in Ammons, Ball and Larus' CCT: a call to a
    /// function already on the context's chain counts at that ancestor's context. What the
    /// difference to `call_overlap` measures is how calls were split among recursion depths.
    pub call_overlap_folded: f64,
    /// Degree of overlap of self time per context (both trees sampled).
    pub time_overlap: Option<f64>,
    /// Reference contexts with at least 0.1% of calls, and the share of them the estimate has
    /// (Zhuang et al.'s hot-edge coverage: a context is the tree edge into it).
    pub hot_contexts: usize,
    pub hot_context_coverage: Option<f64>,
    /// Of the functions the estimate calls hot (≥ 1% of its total), the share the
    /// reference gives at least 0.5%; by self time when both trees are sampled, by calls
    /// otherwise.
    pub hot_functions: usize,
    pub hot_function_precision: Option<f64>,
    /// Of the reference's hot functions, the share the estimate gives at least 0.5%.
    pub hot_function_recall: Option<f64>,
    pub reference_contexts: usize,
    pub estimate_contexts: usize,
}

fn keyed(c: &Contexts, value: impl Fn(usize) -> u64) -> HashMap<Key, u64> {
    keyed_as(c, value, false)
}

/// Weights per context key; with `fold`, a call to a function already on the chain maps to
/// that ancestor's key (and its callees extend that key), as in an ABL CCT.
fn keyed_as(c: &Contexts, value: impl Fn(usize) -> u64, fold: bool) -> HashMap<Key, u64> {
    let mut out: HashMap<Key, u64> = HashMap::new();
    // Parents precede children, so each node's key extends its parent's.
    let mut keys: Vec<Key> = Vec::with_capacity(c.nodes.len());
    for (i, n) in c.nodes.iter().enumerate() {
        let mut k = match n.parent {
            Some(p) => keys[p as usize].clone(),
            None => Vec::new(),
        };
        if n.parent.is_some() {
            match k.iter().position(|&(_, f)| f == n.func).filter(|_| fold) {
                Some(at) => k.truncate(at + 1),
                None => {
                    let site = n
                        .site
                        .and_then(|s| c.call_sites.get(s as usize))
                        .map(|s| s.offset);
                    k.push((site, n.func));
                }
            }
            *out.entry(k.clone()).or_default() += value(i);
        }
        keys.push(k);
    }
    out
}

/// Σ min of the two normalized weight maps (1.0 when identical; None when either is empty).
fn overlap(a: &HashMap<Key, u64>, b: &HashMap<Key, u64>) -> Option<f64> {
    let (ta, tb) = (a.values().sum::<u64>(), b.values().sum::<u64>());
    if ta == 0 || tb == 0 {
        return None;
    }
    Some(
        a.iter()
            .map(|(k, &wa)| {
                let wb = b.get(k).copied().unwrap_or(0);
                (wa as f64 / ta as f64).min(wb as f64 / tb as f64)
            })
            .sum(),
    )
}

/// Per-function totals: self time from the hot-function counters when sampled, calls when
/// exact.
fn function_weights(c: &Contexts) -> HashMap<u32, u64> {
    let mut out: HashMap<u32, u64> = HashMap::new();
    match c.kind {
        ContextKind::Sampled => {
            for h in &c.hot_functions {
                *out.entry(h.func).or_default() += h.self_us;
            }
        }
        ContextKind::Exact => {
            for n in c.nodes.iter().skip(1) {
                *out.entry(n.func).or_default() += n.calls;
            }
        }
    }
    out
}

fn hot_share(from: &HashMap<u32, u64>, other: &HashMap<u32, u64>) -> (usize, Option<f64>) {
    let (tf, to) = (from.values().sum::<u64>(), other.values().sum::<u64>());
    if tf == 0 || to == 0 {
        return (0, None);
    }
    let hot: Vec<u32> = from
        .iter()
        .filter(|(_, &w)| w as f64 >= HOT_FUNCTION_THRESHOLD * tf as f64)
        .map(|(&f, _)| f)
        .collect();
    let right = hot
        .iter()
        .filter(|f| other.get(f).copied().unwrap_or(0) as f64 >= HOT_FUNCTION_SLACK * to as f64)
        .count();
    (
        hot.len(),
        (!hot.is_empty()).then(|| right as f64 / hot.len() as f64),
    )
}

/// Scores `estimate`'s contexts against `reference`'s.
pub fn compare_contexts(reference: &Contexts, estimate: &Contexts) -> ContextAccuracy {
    let rc = keyed(reference, |i| reference.nodes[i].calls);
    let counted = estimate
        .nodes
        .iter()
        .any(|n| n.parent.is_some() && n.calls > 0);
    // A sampled tree without call counts: its edge weights are Whaley's (and
    // Arnold-Sweeney's) estimate of how often each context is entered.
    let estimate_calls = |i: usize| {
        let n = &estimate.nodes[i];
        if counted {
            n.calls
        } else {
            n.edge_us
        }
    };
    let ec = keyed(estimate, estimate_calls);
    let folded = overlap(
        &keyed_as(reference, |i| reference.nodes[i].calls, true),
        &keyed_as(estimate, estimate_calls, true),
    );
    let both_sampled =
        reference.kind == ContextKind::Sampled && estimate.kind == ContextKind::Sampled;
    let time_overlap = both_sampled
        .then(|| {
            overlap(
                &keyed(reference, |i| reference.nodes[i].self_us),
                &keyed(estimate, |i| estimate.nodes[i].self_us),
            )
        })
        .flatten();
    let total: u64 = rc.values().sum();
    let hot: Vec<&Key> = rc
        .iter()
        .filter(|(_, &w)| total > 0 && w as f64 >= HOT_CONTEXT_THRESHOLD * total as f64)
        .map(|(k, _)| k)
        .collect();
    let found = hot.iter().filter(|k| ec.contains_key(**k)).count();
    let (rf, ef) = if both_sampled || reference.kind == estimate.kind {
        (function_weights(reference), function_weights(estimate))
    } else {
        // Exact against sampled: compare calls with calls.
        let calls = |c: &Contexts| {
            let mut m: HashMap<u32, u64> = HashMap::new();
            for n in c.nodes.iter().skip(1) {
                *m.entry(n.func).or_default() += n.calls;
            }
            m
        };
        (calls(reference), calls(estimate))
    };
    let (hot_functions, precision) = hot_share(&ef, &rf);
    let (_, recall) = hot_share(&rf, &ef);
    ContextAccuracy {
        call_overlap: overlap(&rc, &ec).unwrap_or(0.0),
        call_overlap_folded: folded.unwrap_or(0.0),
        time_overlap,
        hot_contexts: hot.len(),
        hot_context_coverage: (!hot.is_empty()).then(|| found as f64 / hot.len() as f64),
        hot_functions,
        hot_function_precision: precision,
        hot_function_recall: recall,
        reference_contexts: reference.nodes.len().saturating_sub(1),
        estimate_contexts: estimate.nodes.len().saturating_sub(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, tree};

    /// main → a (site 0, 60 calls), main → a (site 1, 30 calls), main → b (site 2, 10).
    fn reference() -> Contexts {
        tree(
            ContextKind::Exact,
            vec![
                node(None, u32::MAX, None, 0, 0),
                node(Some(0), 0, None, 0, 0),
                node(Some(1), 1, Some(0), 60, 0),
                node(Some(1), 1, Some(1), 30, 0),
                node(Some(1), 2, Some(2), 10, 0),
            ],
            &[],
        )
    }

    #[test]
    fn identical_trees_overlap_fully() {
        let r = reference();
        let acc = compare_contexts(&r, &r);
        assert!((acc.call_overlap - 1.0).abs() < 1e-12);
        assert_eq!(acc.hot_contexts, 3);
        assert_eq!(acc.hot_context_coverage, Some(1.0));
    }

    /// main → r (site 0) → r (site 1) → r (site 1): 10, 20, 40 calls by depth. An estimate
    /// with the right total but depths 40, 20, 10 overlaps (10 + 20 + 10)/70 per context,
    /// and fully once recursion is folded (every r call is main → r).
    #[test]
    fn folding_recursion_scores_only_the_split_among_depths() {
        let chain = |calls: [u64; 3]| {
            tree(
                ContextKind::Exact,
                vec![
                    node(None, u32::MAX, None, 0, 0),
                    node(Some(0), 0, None, 0, 0),
                    node(Some(1), 1, Some(0), calls[0], 0),
                    node(Some(2), 1, Some(1), calls[1], 0),
                    node(Some(3), 1, Some(1), calls[2], 0),
                ],
                &[],
            )
        };
        let acc = compare_contexts(&chain([10, 20, 40]), &chain([40, 20, 10]));
        assert!((acc.call_overlap - 40.0 / 70.0).abs() < 1e-12, "{acc:?}");
        assert!((acc.call_overlap_folded - 1.0).abs() < 1e-12, "{acc:?}");
        // A different callee below the recursion still counts apart when folded.
        let mut moved = chain([10, 20, 40]);
        moved.nodes[4].func = 2;
        let acc = compare_contexts(&chain([10, 20, 40]), &moved);
        assert!(acc.call_overlap_folded < 0.5, "{acc:?}");
    }

    #[test]
    fn call_sites_are_part_of_the_context() {
        // The estimate merges both calls to `a` into site 0 and misses `b`:
        // overlap = min(.6, .9) + min(.3, 0) + min(.1, .1) = 0.7.
        let e = tree(
            ContextKind::Sampled,
            vec![
                node(None, u32::MAX, None, 0, 0),
                node(Some(0), 0, None, 0, 0),
                node(Some(1), 1, Some(0), 90, 0),
                node(Some(1), 2, Some(2), 10, 0),
            ],
            &[(1, 500), (2, 500)],
        );
        let acc = compare_contexts(&reference(), &e);
        assert!(
            (acc.call_overlap - 0.7).abs() < 1e-12,
            "{}",
            acc.call_overlap
        );
        assert_eq!(acc.hot_context_coverage, Some(2.0 / 3.0));
        // By calls: both estimated hot functions (1 and 2) are hot in the reference too.
        assert_eq!(acc.hot_functions, 2);
        assert_eq!(acc.hot_function_precision, Some(1.0));
    }

    #[test]
    fn hot_functions_by_time_when_both_are_sampled() {
        let mk = |hot: &[(u32, u64)]| {
            tree(
                ContextKind::Sampled,
                vec![
                    node(None, u32::MAX, None, 0, 0),
                    node(Some(0), 0, None, 1, 10),
                ],
                hot,
            )
        };
        // The estimate calls 3 functions hot; the reference gives function 9 only 0.1%.
        let r = mk(&[(1, 700), (2, 299), (9, 1)]);
        let e = mk(&[(1, 600), (2, 300), (9, 100)]);
        let acc = compare_contexts(&r, &e);
        assert_eq!(acc.hot_functions, 3);
        assert_eq!(acc.hot_function_precision, Some(2.0 / 3.0));
        assert_eq!(acc.hot_function_recall, Some(1.0));
        assert_eq!(acc.time_overlap, Some(1.0));
    }
}
