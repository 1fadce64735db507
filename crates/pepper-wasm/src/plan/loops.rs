//! Loops the plan treats specially: exact edges' loops read through their induction
//! variable (`LoopCount`), and TPP's register loops (`RegisterLoop`).

use super::weights::counter_costs;
use super::*;

/// Exact edges: a loop whose induction variable gives the executions of the node that
/// steps it (a chord read at the loop's exits instead of a counter on every iteration).
/// `x0 = x` on the loop's entry edge; every edge that leaves the loop adds
/// `(x - x0) / step` to the u64 at `addr`.
#[derive(Clone, Debug)]
pub struct LoopCount {
    pub counter: crate::analysis::LoopCounter,
    pub addr: u32,
    pub exits: Vec<pepper_cfg::EdgeId>,
}

/// A natural loop: the header and every node that reaches one of its back edges (in-edges
/// other than the entry) without passing the header.
pub(crate) fn natural_body(
    cfg: &pepper_cfg::Cfg,
    header: pepper_cfg::NodeId,
    entry: pepper_cfg::EdgeId,
) -> Vec<bool> {
    let mut body = vec![false; cfg.num_nodes()];
    body[header.index()] = true;
    let mut stack: Vec<pepper_cfg::NodeId> = cfg
        .preds(header)
        .iter()
        .filter(|&&e| e != entry)
        .map(|&e| cfg.edge(e).0)
        .collect();
    while let Some(v) = stack.pop() {
        if !std::mem::replace(&mut body[v.index()], true) {
            stack.extend(cfg.preds(v).iter().map(|&e| cfg.edge(e).0));
        }
    }
    body
}

/// The edges that leave a natural loop's `body`.
pub(crate) fn loop_exits(cfg: &pepper_cfg::Cfg, body: &[bool]) -> Vec<pepper_cfg::EdgeId> {
    (0..cfg.num_edges())
        .map(pepper_cfg::EdgeId::new)
        .filter(|&e| {
            let (s, d) = cfg.edge(e);
            body[s.index()] && !body[d.index()]
        })
        .collect()
}

/// Targeted mode: a loop whose iterations mostly take one path keeps that path's count in
/// a local. Counting into an array slot is a load, an add and a store to the same slot
/// every iteration, and the next iteration's load waits for that store: a short loop
/// (musl's `memcmp`, zstd's match finders) then runs at the speed of store-to-load
/// forwarding. Its header does `if r == path { acc += 1 } else { count[r]++ }` instead,
/// and every edge that leaves the loop adds `acc` to the path's slot at `addr` (and
/// clears it). Only for innermost loops without calls (nothing else runs while `acc`
/// holds counts, so no `proc_exit` or unwinding can lose them; a trap can).
#[derive(Clone, Debug)]
pub struct RegisterLoop {
    pub header: pepper_cfg::NodeId,
    pub exits: Vec<pepper_cfg::EdgeId>,
    /// The path's number (unscaled).
    pub path: u64,
    pub addr: u32,
}

/// Loops whose counted path is estimated to take at least this share of the header's
/// path ends (each branch's more frequent outcome, multiplied along the path). Below it
/// the `r == path` test is mispredicted too often: at 0.3 Lua's `fmod` loop (two paths
/// about even) made Lua 2 points slower; 0.6 and 0.9 left it unchanged, and 0.6 kept
/// more of zstd's gain (5-round runs).
pub(crate) const REGISTER_LOOP_MIN_SHARE: f64 = 0.6;
/// Loops bigger than this (operators in the natural body) keep plain recording: there
/// `acc` would compete for registers, and an iteration is long enough to hide the store.
pub(crate) const REGISTER_LOOP_MAX_OPS: usize = 100;

/// [`RegisterLoop`]s of an array function (slots at `base`): innermost loops without
/// calls whose exits have a place for code, that run more than about 6.7 iterations per
/// entry (`loop_threshold`, TPP(5, 15)'s 15%: fewer and the flush at the exit costs what
/// it saves), counting the path that follows each branch's more frequent outcome from the
/// header back to it, when that path's estimated share of the header's path ends is at
/// least [`REGISTER_LOOP_MIN_SHARE`].
pub(crate) fn register_loops(
    analysis: &FunctionAnalysis,
    nd: &pepper_cfg::NumberedDag,
    freqs: &[u64],
    base: u32,
    loop_threshold: f64,
) -> Vec<RegisterLoop> {
    let (cfg, dag, num) = (&analysis.cfg, &nd.dag, &nd.numbering);
    let costs = counter_costs(analysis);
    let weight = |e: pepper_cfg::DagEdgeId| match dag.edge(e).kind {
        pepper_cfg::DagEdgeKind::Real(c) => freqs[c.index()],
        _ => 0,
    };
    analysis
        .loops
        .iter()
        .filter_map(|&(h, entry)| {
            if !dag.is_split(h) {
                return None;
            }
            let body = natural_body(cfg, h, entry);
            let inner = analysis
                .loops
                .iter()
                .any(|&(g, _)| g != h && body[g.index()]);
            let calls = (0..cfg.num_nodes()).any(|n| body[n] && analysis.node_calls[n]);
            let ops = analysis
                .op_nodes
                .iter()
                .flatten()
                .filter(|n| body[n.index()])
                .count();
            if inner || calls || ops > REGISTER_LOOP_MAX_OPS {
                return None;
            }
            let exits = loop_exits(cfg, &body);
            if exits.iter().any(|e| costs[e.index()].is_none()) {
                return None;
            }
            let header: u64 = cfg.preds(h).iter().map(|e| freqs[e.index()]).sum();
            if header == 0 || freqs[entry.index()] as f64 >= loop_threshold * header as f64 {
                return None;
            }
            // Follow the more frequent outcome of every branch from the header's start.
            let start = dag.split_entry(h)?;
            let (mut number, mut share, mut v) = (num.val(start), 1.0, dag.edge(start).dst);
            let end = loop {
                let succs: Vec<_> = dag
                    .succs(v)
                    .iter()
                    .copied()
                    .filter(|&e| num.is_hot(e))
                    .collect();
                let total: u64 = succs.iter().map(|&e| weight(e)).sum();
                let e = *succs
                    .iter()
                    .max_by_key(|&&e| (weight(e), std::cmp::Reverse(e.index())))?;
                if succs.len() > 1 {
                    share *= weight(e) as f64 / total.max(1) as f64;
                }
                number += num.val(e);
                v = dag.edge(e).dst;
                if v == dag.exit() {
                    break e;
                }
            };
            (end == dag.split_exit(h)? && share >= REGISTER_LOOP_MIN_SHARE).then(|| RegisterLoop {
                header: h,
                exits,
                path: number,
                addr: base + 8 * number as u32,
            })
        })
        .collect()
}

/// Loops of `a` whose induction variable exact edges can read: the node that steps it is
/// in the loop's natural body (so it runs only between an entry and an exit), and every
/// edge that leaves the body has a place for code. With the edges that leave each (and no
/// address yet).
pub(crate) fn readable_loops(analysis: &FunctionAnalysis) -> Vec<LoopCount> {
    let costs = counter_costs(analysis);
    let cfg = &analysis.cfg;
    analysis
        .loop_counters
        .iter()
        .filter_map(|lc| {
            let body = natural_body(cfg, lc.header, lc.entry);
            if !body[lc.node.index()] {
                return None;
            }
            let exits = loop_exits(cfg, &body);
            let placeable = exits.iter().all(|e| costs[e.index()].is_some())
                && costs[lc.entry.index()].is_some();
            placeable.then_some(LoopCount {
                counter: *lc,
                addr: 0,
                exits,
            })
        })
        .collect()
}
