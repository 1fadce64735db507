//! Edge weights for counter placement and smart numbering: static estimates, or a guide's
//! measured frequencies, times what instrumenting each edge costs.

use super::LoopCount;
use crate::analysis::{Action, FunctionAnalysis};
use pepper_cfg::{DagEdgeKind, PathDag};

/// Static cost of counting each edge, for the spanning tree: its estimated frequency
/// (Wu-Larus, [`pepper_cfg::estimate_edge_frequencies`]; with a guide, the guide's counts
/// wherever it saw the function branch; `freqs`, from [`frequencies`]) times the code a
/// counter there needs. Heavy edges go in the tree and carry no counter.
pub(crate) fn edge_weights(analysis: &FunctionAnalysis, freqs: &[u64]) -> Vec<u64> {
    counting_tree_weights(analysis, |e| freqs[e] * counter_cost(analysis, e))
}

/// What a counter on edge `e` costs: a `br_if`'s taken edge or a `br_table` arm (unless
/// its code runs at its target) more than an edge with a place of its own.
pub(crate) fn counter_cost(analysis: &FunctionAnalysis, e: usize) -> u64 {
    let info = &analysis.edges[e];
    match info.branch {
        Some((site, 0))
            if analysis.sites[site.0 as usize].kind == pepper_profile::BranchKind::BrIf =>
        {
            3
        }
        Some((site, _))
            if analysis.sites[site.0 as usize].kind == pepper_profile::BranchKind::BrTable
                && !info.at_target =>
        {
            3
        }
        _ => 2,
    }
}

/// What reading a loop's count costs, in [`edge_weights`]' units: at every exit, a
/// counter plus the subtraction (and division) of the induction variable; at the entry,
/// the copy (a register held through the loop). The spanning tree takes the count only
/// where that is cheaper than the chord it replaces: not for loops that run about once
/// per entry, whose counter is best left on an edge.
pub(crate) fn loop_count_weight(analysis: &FunctionAnalysis, freqs: &[u64], l: &LoopCount) -> u64 {
    let exits: u64 = l
        .exits
        .iter()
        .map(|e| freqs[e.index()] * (counter_cost(analysis, e.index()) + 1))
        .sum();
    exits + freqs[l.counter.entry.index()]
}

/// Spanning-tree weights for edge counting: `weight(e)` for every edge but the funnel's
/// edge to EXIT, which has no instruction to carry a counter and so always stays in the
/// tree.
pub(crate) fn counting_tree_weights(
    analysis: &FunctionAnalysis,
    weight: impl Fn(usize) -> u64,
) -> Vec<u64> {
    (0..analysis.cfg.num_edges())
        .map(|e| {
            if analysis.cfg.edge(pepper_cfg::EdgeId::new(e)).0 == analysis.funnel {
                u64::MAX
            } else {
                weight(e)
            }
        })
        .collect()
}

/// Frequencies of every CFG edge as integer weights (1024 per function entry, saturating
/// far below `u64::MAX` so that costs can multiply them): the static estimate, or with
/// `observed` branch counts, those counts propagated (estimates where they say nothing).
pub(crate) fn frequencies(
    analysis: &FunctionAnalysis,
    observed: Option<&[Option<u64>]>,
) -> Vec<u64> {
    let bias = branch_biases(analysis);
    pepper_cfg::profile_edge_frequencies(&analysis.cfg, &bias, observed.unwrap_or_default())
        .into_iter()
        .map(|f| (f * 1024.0).clamp(0.0, 1e15) as u64)
        .collect()
}

/// Ball & Larus' call heuristic as relative weights of each edge among its siblings: a
/// successor that calls (and is not a join, which runs either way) is taken 22% of the
/// time. (Loop exits and dead ends are structural; `pepper_cfg` weighs those. The return
/// heuristic was measured too and changed nothing on the workloads.)
pub(crate) fn branch_biases(analysis: &FunctionAnalysis) -> Vec<f64> {
    let cfg = &analysis.cfg;
    (0..cfg.num_edges())
        .map(|e| {
            let (s, d) = cfg.edge(pepper_cfg::EdgeId::new(e));
            if cfg.succs(s).len() >= 2 && analysis.node_calls[d.index()] && cfg.preds(d).len() == 1
            {
                0.22 / 0.78
            } else {
                1.0
            }
        })
        .collect()
}

/// What a counter on each CFG edge costs in the emitted code, or `None` where the emitter
/// has no place for one that runs only when the edge is taken: a `br_table` arm (its code
/// is a table lookup), or the taken edge of a `br_if` whose label carries values (a
/// branch-free add of the condition would touch memory on every execution, taken or not).
/// Straight-line slots cost 1, a `br_if` trampoline 2.
pub(crate) fn counter_costs(analysis: &FunctionAnalysis) -> Vec<Option<u32>> {
    let mut cost = vec![None; analysis.cfg.num_edges()];
    let mut offer = |e: pepper_cfg::EdgeId, c: u32| {
        let slot: &mut Option<u32> = &mut cost[e.index()];
        *slot = Some(slot.map_or(c, |old| old.min(c)));
    };
    for (_, _, act) in &analysis.actions {
        match act {
            Action::Edge(x) | Action::TailExit(x) => offer(*x, 1),
            Action::SynthElse { not_taken: x } | Action::FallEdge { fall: x, .. } => offer(*x, 1),
            Action::BrIf {
                taken, bare: true, ..
            } => offer(*taken, 2),
            Action::BrIf { .. } => {}
            Action::BrTable { .. } | Action::NodeStart(_) => {}
        }
    }
    for &e in analysis.cfg.succs(analysis.funnel) {
        offer(e, 1); // the epilogue, where every return meets
    }
    cost
}

/// [`counter_costs`] for a DAG edge: dummies are path starts and ends, which have code.
pub(crate) fn dag_counter_cost(
    costs: &[Option<u32>],
    dag: &PathDag,
    e: pepper_cfg::DagEdgeId,
) -> Option<u32> {
    match dag.edge(e).kind {
        DagEdgeKind::FunctionEntry | DagEdgeKind::SplitEntry(_) | DagEdgeKind::SplitExit(_) => {
            Some(1)
        }
        DagEdgeKind::DeadEnd(_) => None,
        DagEdgeKind::Real(real) => costs[real.index()],
    }
}

/// Per-CFG-edge weights for smart numbering (PEP §3.4): the out-edge of a block with the
/// highest weight gets value 0 and so carries no code. Without a measured profile, a static
/// estimate: edges that stay deep in loops first, then a `br_if`'s taken edge (a zero there
/// leaves only a cheap add on the fall-through instead of a `select` before the branch).
pub(crate) fn static_numbering_weights(analysis: &FunctionAnalysis) -> Vec<u64> {
    (0..analysis.cfg.num_edges())
        .map(|e| {
            let (src, dst) = analysis.cfg.edge(pepper_cfg::EdgeId::new(e));
            let depth = analysis.node_depth[src.index()]
                .min(analysis.node_depth[dst.index()])
                .min(8);
            let taken_br_if = matches!(analysis.edges[e].branch, Some((site, 0))
                if analysis.sites[site.0 as usize].kind == pepper_profile::BranchKind::BrIf);
            10u64.pow(depth) * 4 + taken_br_if as u64
        })
        .collect()
}

/// Lifts per-CFG-edge weights to the P-DAG's edges (dummy edges weigh nothing).
pub(crate) fn dag_weights(cfg_weights: Vec<u64>) -> impl Fn(&pepper_cfg::PathDag) -> Vec<u64> {
    move |dag| {
        dag.edges()
            .map(|(_, de)| match de.kind {
                pepper_cfg::DagEdgeKind::Real(e) => cfg_weights[e.index()],
                _ => 0,
            })
            .collect()
    }
}
