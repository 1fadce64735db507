//! Accuracy of an estimated profile against a reference of the same module (PEP §6.3-6.4,
//! TPP §5): Wall weight matching for paths, relative and absolute overlap for edges.
//!
//! Paths are matched by what they are (function, start, branch decisions, end), not by
//! number, so profiles numbered differently (plain vs. smart numbering from a guide) compare
//! correctly.

use crate::model::{Path, PathPoint, Profile, Step};
use serde::Serialize;
use std::collections::HashMap;

/// Paths whose reference flow exceeds this fraction of the total are "hot" (Wall, PEP §6.3).
pub const HOT_PATH_THRESHOLD: f64 = 0.00125;

/// What identifies a path independently of its number.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathKey {
    pub func: u32,
    pub start: PathPoint,
    pub end: PathPoint,
    pub steps: Vec<Step>,
}

impl PathKey {
    pub fn of(p: &Path) -> PathKey {
        PathKey {
            func: p.func,
            start: p.start.clone(),
            end: p.end.clone(),
            steps: p.steps.clone(),
        }
    }
}

/// Branch flow of a path execution: its number of branch decisions (PEP §6.3's `b_p`: `if`,
/// `br_if` and `br_table` with at least two distinct targets; a path with none counts 1 so
/// straight-line paths still carry weight).
pub fn branch_flow(p: &Path) -> f64 {
    p.count as f64 * p.steps.len().max(1) as f64
}

/// Per-function part of a comparison.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct FunctionAccuracy {
    pub func: u32,
    pub name: String,
    /// Share of the reference's total path flow in this function.
    pub reference_flow: f64,
    /// Share of the estimate's total path flow in this function.
    pub estimate_flow: f64,
    /// Hot reference paths in this function, and how many of them the estimate ranked hot.
    pub hot_paths: usize,
    pub hot_paths_found: usize,
    /// Relative overlap of this function's branches (None: no executed branch).
    pub edge_accuracy: Option<f64>,
}

/// The three accuracy measures of PEP §6.3-6.4, plus where the estimate goes wrong.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Accuracy {
    /// Wall weight matching with branch flow and the 0.125% hot threshold (None if the
    /// reference has no paths).
    pub path_accuracy: Option<f64>,
    /// Relative overlap of branch biases, weighted by reference branch frequency. A branch
    /// the estimate never saw is taken as unbiased (each outcome equally likely).
    pub edge_relative_overlap: Option<f64>,
    /// Absolute overlap of normalised edge (branch outcome) frequencies.
    pub edge_absolute_overlap: Option<f64>,
    /// The hottest reference branches that together carry 95% of its branch executions,
    /// and the share of them whose bias the estimate has within 5 points (relative
    /// overlap ≥ 95%): ephemeral instrumentation's bias error.
    #[serde(default)]
    pub hot_branches: usize,
    pub hot_biases_within_5pt: Option<f64>,
    /// Of the same branches, the share whose bias error (`1 -` relative overlap) is
    /// within the estimate's own `bias_margin`, a branch without one counting as outside:
    /// whether the estimate's 95% margins hold about 95% of the time. `None` when the
    /// estimate has no margins (only ephemeral profiles do).
    #[serde(default)]
    pub hot_biases_within_margin: Option<f64>,
    /// Σ|estimate − reference| over every branch outcome's count, over the reference's
    /// executions: Nagpurkar's code-region error, which unlike the overlaps also charges
    /// an estimate for getting totals wrong (a sampled profile scaled by the wrong factor).
    #[serde(default)]
    pub branch_count_error: Option<f64>,
    /// TPP's attribution of definite flow: 1 - overcount - undercount, each weighted by
    /// path length in blocks, relative to the reference's flow (TPP §5).
    pub aodf: Option<f64>,
    pub reference_paths: usize,
    pub estimate_paths: usize,
    pub hot_paths: usize,
    /// Per function, hottest (by reference flow) first.
    pub functions: Vec<FunctionAccuracy>,
    /// Calling-context accuracy, when both profiles have contexts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contexts: Option<crate::context_accuracy::ContextAccuracy>,
}

/// Wall weight matching (PEP §6.3): the share of the hot reference flow that lies on paths
/// the estimate also ranks among its `|H_actual|` hottest.
fn path_accuracy(reference: &[Path], estimate: &[Path]) -> (Option<f64>, Vec<PathKey>, Vec<bool>) {
    let total: f64 = reference.iter().map(branch_flow).sum();
    if total <= 0.0 {
        return (None, Vec::new(), Vec::new());
    }
    let mut hot: Vec<(PathKey, f64)> = reference
        .iter()
        .filter(|p| branch_flow(p) > HOT_PATH_THRESHOLD * total)
        .map(|p| (PathKey::of(p), branch_flow(p)))
        .collect();
    hot.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut est: Vec<(PathKey, f64)> = estimate
        .iter()
        .map(|p| (PathKey::of(p), branch_flow(p)))
        .collect();
    // Ties broken by key so the metric does not depend on input order.
    est.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let top: std::collections::HashSet<&PathKey> =
        est.iter().take(hot.len()).map(|(k, _)| k).collect();
    let hot_flow: f64 = hot.iter().map(|h| h.1).sum();
    let found: Vec<bool> = hot.iter().map(|(k, _)| top.contains(k)).collect();
    let matched: f64 = hot
        .iter()
        .zip(&found)
        .filter(|(_, f)| **f)
        .map(|(h, _)| h.1)
        .sum();
    let keys = hot.into_iter().map(|h| h.0).collect();
    (Some(matched / hot_flow), keys, found)
}

/// AoDF (TPP §5): per path, `len` = blocks on it (at least 1).
fn aodf(reference: &[Path], estimate: &[Path]) -> Option<f64> {
    let len = |p: &Path| p.blocks.len().max(1) as f64;
    let mut by_key: HashMap<PathKey, (f64, f64, f64)> = HashMap::new();
    for p in reference {
        let e = by_key.entry(PathKey::of(p)).or_insert((0.0, 0.0, len(p)));
        e.0 += p.count as f64;
    }
    for p in estimate {
        let e = by_key.entry(PathKey::of(p)).or_insert((0.0, 0.0, len(p)));
        e.1 += p.count as f64;
    }
    let total: f64 = by_key.values().map(|(r, _, l)| r * l).sum();
    if total <= 0.0 {
        return None;
    }
    let (mut over, mut under) = (0.0, 0.0);
    for (r, e, l) in by_key.values() {
        over += (e - r).max(0.0) * l;
        under += (r - e).max(0.0) * l;
    }
    Some(1.0 - over / total - under / total)
}

/// Relative overlap of one branch: `1 - ½ Σ_outcomes |p_ref - p_est|` (the binary formula
/// `1 - |taken_ref - taken_est|` for two outcomes).
fn branch_overlap(reference: &[u64], estimate: &[u64]) -> f64 {
    let rt: u64 = reference.iter().sum();
    let et: u64 = estimate.iter().sum();
    let n = reference.len().max(1) as f64;
    let diff: f64 = reference
        .iter()
        .enumerate()
        .map(|(i, &r)| {
            let pr = r as f64 / rt as f64;
            let pe = if et == 0 {
                1.0 / n
            } else {
                estimate.get(i).copied().unwrap_or(0) as f64 / et as f64
            };
            (pr - pe).abs()
        })
        .sum();
    1.0 - diff / 2.0
}

/// Compares `estimate` against `reference`; both must describe the same module (the caller
/// checks the hashes) so branch ids agree.
pub fn compare(reference: &Profile, estimate: &Profile) -> Accuracy {
    let (path_acc, hot_keys, found) = path_accuracy(&reference.paths, &estimate.paths);

    // Edges: relative overlap per branch, absolute overlap over all outcomes.
    let ref_total: u64 = reference.branches.iter().map(|b| b.total()).sum();
    let est_total: u64 = estimate.branches.iter().map(|b| b.total()).sum();
    let est_counts: HashMap<u32, &[u64]> = estimate
        .branches
        .iter()
        .map(|b| (b.id, b.counts.as_slice()))
        .collect();
    let margins: HashMap<u32, f64> = (estimate.branches.iter())
        .filter_map(|b| Some((b.id, b.bias_margin?)))
        .collect();
    let mut rel_num = 0.0;
    let mut abs = 0.0;
    let mut per_func_edges: HashMap<u32, (f64, f64)> = HashMap::new();
    for b in &reference.branches {
        let t = b.total();
        let est = est_counts.get(&b.id).copied().unwrap_or(&[]);
        if t > 0 {
            let acc = branch_overlap(&b.counts, est);
            rel_num += t as f64 * acc;
            let e = per_func_edges.entry(b.func).or_default();
            e.0 += t as f64 * acc;
            e.1 += t as f64;
        }
        if ref_total > 0 && est_total > 0 {
            for (i, &r) in b.counts.iter().enumerate() {
                let e = est.get(i).copied().unwrap_or(0);
                abs += (r as f64 / ref_total as f64).min(e as f64 / est_total as f64);
            }
        }
    }

    let mut count_diff = 0.0;
    let ref_ids: std::collections::HashSet<u32> = reference.branches.iter().map(|b| b.id).collect();
    for b in &reference.branches {
        let est = est_counts.get(&b.id).copied().unwrap_or(&[]);
        for (i, &r) in b.counts.iter().enumerate() {
            count_diff += (est.get(i).copied().unwrap_or(0) as f64 - r as f64).abs();
        }
    }
    for b in estimate
        .branches
        .iter()
        .filter(|b| !ref_ids.contains(&b.id))
    {
        count_diff += b.total() as f64;
    }

    // Bias error on the branches that carry 95% of the executions.
    let mut hot: Vec<&crate::model::Branch> = reference
        .branches
        .iter()
        .filter(|b| b.total() > 0)
        .collect();
    hot.sort_by(|a, b| b.total().cmp(&a.total()).then(a.id.cmp(&b.id)));
    let (mut carried, mut hot_n, mut within, mut within_margin) = (0u64, 0usize, 0usize, 0usize);
    for b in hot {
        if carried as f64 >= 0.95 * ref_total as f64 {
            break;
        }
        carried += b.total();
        hot_n += 1;
        let est = est_counts.get(&b.id).copied().unwrap_or(&[]);
        let overlap = branch_overlap(&b.counts, est);
        within += usize::from(overlap >= 0.95 - 1e-12);
        within_margin += usize::from(margins.get(&b.id).is_some_and(|&m| 1.0 - overlap <= m));
    }

    // Per function.
    let flow_by_func = |paths: &[Path]| {
        let mut m: HashMap<u32, f64> = HashMap::new();
        for p in paths {
            *m.entry(p.func).or_default() += branch_flow(p);
        }
        let total: f64 = m.values().sum();
        (m, total)
    };
    let (ref_flow, ref_flow_total) = flow_by_func(&reference.paths);
    let (est_flow, est_flow_total) = flow_by_func(&estimate.paths);
    let mut hot_by_func: HashMap<u32, (usize, usize)> = HashMap::new();
    for (k, f) in hot_keys.iter().zip(&found) {
        let e = hot_by_func.entry(k.func).or_default();
        e.0 += 1;
        e.1 += *f as usize;
    }
    let mut funcs: Vec<u32> = ref_flow
        .keys()
        .chain(est_flow.keys())
        .chain(per_func_edges.keys())
        .copied()
        .collect();
    funcs.sort_unstable();
    funcs.dedup();
    let share = |m: &HashMap<u32, f64>, total: f64, f: u32| {
        if total > 0.0 {
            m.get(&f).copied().unwrap_or(0.0) / total
        } else {
            0.0
        }
    };
    let mut functions: Vec<FunctionAccuracy> = funcs
        .into_iter()
        .map(|f| {
            let (hot, hot_found) = hot_by_func.get(&f).copied().unwrap_or((0, 0));
            FunctionAccuracy {
                func: f,
                name: reference.function_name(f),
                reference_flow: share(&ref_flow, ref_flow_total, f),
                estimate_flow: share(&est_flow, est_flow_total, f),
                hot_paths: hot,
                hot_paths_found: hot_found,
                edge_accuracy: per_func_edges
                    .get(&f)
                    .filter(|e| e.1 > 0.0)
                    .map(|e| e.0 / e.1),
            }
        })
        .collect();
    functions.sort_by(|a, b| {
        b.reference_flow
            .total_cmp(&a.reference_flow)
            .then(a.func.cmp(&b.func))
    });

    Accuracy {
        contexts: match (&reference.contexts, &estimate.contexts) {
            (Some(r), Some(e)) => Some(crate::context_accuracy::compare_contexts(r, e)),
            _ => None,
        },
        path_accuracy: path_acc,
        aodf: aodf(&reference.paths, &estimate.paths),
        edge_relative_overlap: (ref_total > 0).then(|| rel_num / ref_total as f64),
        edge_absolute_overlap: (ref_total > 0 && est_total > 0).then_some(abs),
        hot_branches: hot_n,
        hot_biases_within_5pt: (hot_n > 0).then(|| within as f64 / hot_n as f64),
        hot_biases_within_margin: (hot_n > 0 && !margins.is_empty())
            .then(|| within_margin as f64 / hot_n as f64),
        branch_count_error: (ref_total > 0).then(|| count_diff / ref_total as f64),
        reference_paths: reference.paths.len(),
        estimate_paths: estimate.paths.len(),
        hot_paths: hot_keys.len(),
        functions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{branch, path, profile};

    /// Reference: A (1000 × 2 branches = flow 2000), B (500 × 1 = 500), C (1 × 1 = 1).
    /// Hot threshold 0.125% of 2501 ≈ 3.1, so H_actual = {A, B}. The estimate ranks B, C, A:
    /// its top two are {B, C}, which catch only B: path accuracy 500 / 2500 = 20%.
    #[test]
    fn wall_weight_matching_by_hand() {
        let r = profile(
            vec![],
            vec![
                path(0, 1000, &[(0, 0), (2, 0)]),
                path(1, 500, &[(0, 1)]),
                path(2, 1, &[(2, 1)]),
            ],
        );
        let e = profile(
            vec![],
            vec![
                path(0, 10, &[(0, 0), (2, 0)]),
                path(1, 90, &[(0, 1)]),
                path(2, 80, &[(2, 1)]),
            ],
        );
        let a = compare(&r, &e);
        assert_eq!(a.hot_paths, 2);
        assert!((a.path_accuracy.unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(
            (a.functions[0].hot_paths, a.functions[0].hot_paths_found),
            (2, 1)
        );
        // Identical profiles score 100%.
        assert_eq!(compare(&r, &r).path_accuracy, Some(1.0));
    }

    /// AoDF: reference A 10 × 2 blocks, B 10 × 1 block (flow 30); estimate A 10, B 5 and
    /// a path C the reference never ran, 2 × 1 block. Under 5, over 2: 1 - 7/30.
    #[test]
    fn aodf_by_hand() {
        let mut a = path(0, 10, &[(0, 0)]);
        a.blocks = vec![1, 2];
        let mut b = path(1, 10, &[(0, 1)]);
        b.blocks = vec![1];
        let r = profile(vec![], vec![a.clone(), b.clone()]);
        b.count = 5;
        let mut c = path(2, 2, &[(1, 0)]);
        c.blocks = vec![3];
        let e = profile(vec![], vec![a, b, c]);
        assert!((compare(&r, &e).aodf.unwrap() - (1.0 - 7.0 / 30.0)).abs() < 1e-12);
        assert_eq!(compare(&r, &r).aodf, Some(1.0));
    }

    /// Paths are matched by their decisions: renumbered paths still match.
    #[test]
    fn paths_match_across_numberings() {
        let r = profile(vec![], vec![path(0, 7, &[(0, 0)]), path(1, 3, &[(0, 1)])]);
        let e = profile(vec![], vec![path(5, 7, &[(0, 0)]), path(9, 3, &[(0, 1)])]);
        assert_eq!(compare(&r, &e).path_accuracy, Some(1.0));
    }

    /// Branch 0: same bias (75% taken) → 1. Branch 1: never run in the reference → no
    /// weight. Branch 2: reference always taken, estimate never saw it → unbiased → 0.5.
    /// Relative overlap = (400 × 1 + 100 × 0.5) / 500 = 90%.
    /// Absolute overlap: reference outcome shares 0.6, 0.2 | 0, 0 | 0.2, 0; estimate
    /// 3/14, 1/14 | 5/14, 5/14 | 0, 0 → Σ min = 4/14.
    #[test]
    fn edge_overlaps_by_hand() {
        let r = profile(
            vec![
                branch(0, &[300, 100]),
                branch(1, &[0, 0]),
                branch(2, &[100, 0]),
            ],
            vec![],
        );
        let e = profile(
            vec![branch(0, &[3, 1]), branch(1, &[5, 5]), branch(2, &[0, 0])],
            vec![],
        );
        let a = compare(&r, &e);
        assert!((a.edge_relative_overlap.unwrap() - 0.9).abs() < 1e-12);
        assert!((a.edge_absolute_overlap.unwrap() - 4.0 / 14.0).abs() < 1e-12);
        assert_eq!(a.path_accuracy, None, "no reference paths");
        let same = compare(&r, &r);
        assert!((same.edge_relative_overlap.unwrap() - 1.0).abs() < 1e-12);
        assert!((same.edge_absolute_overlap.unwrap() - 1.0).abs() < 1e-12);
    }
}
