//! Static edge-frequency estimation (Wu & Larus, "Static branch frequency and program
//! profile analysis", MICRO 1994, simplified): branch probabilities from structural
//! heuristics, propagated through the loop nest.
//!
//! Why: without a profile, pepper must still guess which edges are hot, to put them in the
//! spanning tree of edge counting (they then carry no counter) and to give them value 0 in
//! path numbering. Loop depth alone ties every edge of a loop body; an interpreter's
//! dispatch loop then gets counters on its hot arms as often as on its error paths.
//!
//! Heuristics (each multiplies an out-edge's relative weight; probabilities are the
//! normalized weights of a node's out-edges):
//! - *dead end*: an edge from which EXIT cannot be reached (a trap, `abort`) is almost
//!   never taken;
//! - *loop exit* (Ball & Larus' loop branch heuristic): an edge that leaves a loop is
//!   taken about one time in eight;
//! - caller-supplied biases (`bias[e]`), for what only the instruction level knows.
//!
//! Frequencies: each loop header's *cyclic probability* (the chance that control entering
//! it comes back around) is computed innermost loop first, with inner loops already
//! scaled; then one pass in topological order scales each header by `1 / (1 - cp)`.

use crate::cfg::Cfg;
use crate::ids::{EdgeId, NodeId};

/// Relative weight of an edge that leaves a loop (its siblings weigh 1).
pub const LOOP_EXIT_WEIGHT: f64 = 1.0 / 8.0;
/// Relative weight of an edge that cannot reach EXIT.
pub const DEAD_END_WEIGHT: f64 = 1.0 / 1024.0;
/// A loop's iterations per entry are capped at this (cyclic probability `1 - 1/MAX`).
pub const MAX_LOOP_MULTIPLIER: f64 = 100.0;
/// Most iterations per entry a loop gets when its branch probabilities are measured.
pub const MAX_OBSERVED_MULTIPLIER: f64 = 1e6;

/// Estimated execution frequency of every edge, relative to one function entry.
/// `bias[e]` (if not empty) multiplies edge `e`'s relative weight among its siblings.
pub fn estimate_edge_frequencies(cfg: &Cfg, bias: &[f64]) -> Vec<f64> {
    profile_edge_frequencies(cfg, bias, &[])
}

/// Like [`estimate_edge_frequencies`], but the branches a profile observed keep the
/// probabilities it measured: `observed[e]` is edge `e`'s count for every out-edge of a node
/// the profile saw branch (`None` elsewhere). Those nodes get no structural heuristic, and
/// loops may run up to [`MAX_OBSERVED_MULTIPLIER`] times per entry instead of
/// [`MAX_LOOP_MULTIPLIER`], so that the result is the profile's own edge frequencies (the
/// flow equations with measured branch probabilities have exactly that solution) wherever
/// it saw the code run, and the static estimate elsewhere (`observed` empty: everywhere).
pub fn profile_edge_frequencies(cfg: &Cfg, bias: &[f64], observed: &[Option<u64>]) -> Vec<f64> {
    propagate(cfg, bias, observed, &[])
}

/// Like [`profile_edge_frequencies`], with the executions per function entry of some loop
/// headers known (`headers[v]`, counted exactly elsewhere). Such a loop runs as often as
/// said, whatever its branch probabilities give, and what leaves it is what entered it,
/// split among its exits by their probabilities. This is for profiles whose branch
/// probabilities come from short windows (ephemeral instrumentation): a window inside a
/// long loop sees its iterations but seldom its exit, so the probabilities alone would
/// have the loop run almost forever and nothing after it run at all.
pub fn profile_edge_frequencies_with_headers(
    cfg: &Cfg,
    observed: &[Option<u64>],
    headers: &[Option<f64>],
) -> Vec<f64> {
    propagate(cfg, &[], observed, headers)
}

fn propagate(
    cfg: &Cfg,
    bias: &[f64],
    observed: &[Option<u64>],
    headers: &[Option<f64>],
) -> Vec<f64> {
    let n = cfg.num_nodes();
    let m = cfg.num_edges();
    let order = DfsOrder::new(cfg);

    // Nodes from which EXIT can be reached.
    let live = cfg.reaches_exit();

    let loops = Loops::new(cfg, &order);

    // Branch probabilities: measured where every out-edge has a count and some count is
    // non-zero, estimated elsewhere.
    let mut prob = vec![0.0; m];
    let mut measured = vec![false; n];
    for v in cfg.nodes() {
        let succs = cfg.succs(v);
        let counts: Option<Vec<u64>> = succs
            .iter()
            .map(|&e| observed.get(e.index()).copied().flatten())
            .collect();
        let weights: Vec<f64> = match counts {
            Some(c) if succs.len() >= 2 && c.iter().any(|&x| x > 0) => {
                measured[v.index()] = true;
                c.iter().map(|&x| x as f64).collect()
            }
            _ => succs
                .iter()
                .map(|&e| {
                    let d = cfg.edge(e).1;
                    let mut w = bias.get(e.index()).copied().unwrap_or(1.0).max(0.0);
                    if live[v.index()] && !live[d.index()] {
                        w *= DEAD_END_WEIGHT;
                    }
                    if loops.exits(v, d) {
                        w *= LOOP_EXIT_WEIGHT;
                    }
                    w
                })
                .collect(),
        };
        let total: f64 = weights.iter().sum();
        for (&e, w) in succs.iter().zip(weights) {
            prob[e.index()] = if total > 0.0 {
                w / total
            } else {
                1.0 / succs.len() as f64
            };
        }
    }

    // Cyclic probability of each loop, innermost (smallest) first.
    let mut scale = vec![1.0f64; n]; // 1 / (1 - cp) at headers
    let mut local = vec![0.0f64; n];
    // Per loop: the flow that leaves it per execution of its header.
    let mut leaves = vec![0.0f64; loops.list.len()];
    for l in &loops.by_size {
        let lp = &loops.list[*l];
        for &v in &lp.body {
            local[v] = 0.0;
        }
        local[lp.header] = 1.0;
        for &v in &lp.body {
            if v != lp.header {
                local[v] = order
                    .forward_in(cfg, NodeId::new(v))
                    .filter(|&e| loops.in_body(*l, cfg.edge(e).0.index()))
                    .map(|e| local[cfg.edge(e).0.index()] * prob[e.index()])
                    .sum::<f64>()
                    * scale[v];
            }
        }
        let cp: f64 = cfg
            .preds(NodeId::new(lp.header))
            .iter()
            .filter(|&&e| order.is_back(e) && loops.in_body(*l, cfg.edge(e).0.index()))
            .map(|&e| local[cfg.edge(e).0.index()] * prob[e.index()])
            .sum();
        // A loop the profile saw branch in may run as long as the profile says.
        let max = if lp.body.iter().any(|&v| measured[v]) {
            MAX_OBSERVED_MULTIPLIER
        } else {
            MAX_LOOP_MULTIPLIER
        };
        let cp = cp.clamp(0.0, 1.0 - 1.0 / max);
        scale[lp.header] = 1.0 / (1.0 - cp);
        leaves[*l] = lp
            .body
            .iter()
            .flat_map(|&v| cfg.succs(NodeId::new(v)).iter())
            .filter(|&&e| !loops.in_body(*l, cfg.edge(e).1.index()))
            .map(|&e| local[cfg.edge(e).0.index()] * prob[e.index()])
            .sum();
    }
    // Loops whose header count is known: their exits carry what entered them.
    let mut mult = vec![1.0f64; m];
    let known_loop: Vec<Option<usize>> = {
        let mut v = vec![None; n];
        for (l, lp) in loops.list.iter().enumerate() {
            if headers.get(lp.header).copied().flatten().is_some() {
                v[lp.header] = Some(l);
            }
        }
        v
    };

    // Global pass.
    let mut freq = vec![0.0f64; n];
    for &v in &order.topo {
        let inflow = if v == cfg.entry().index() {
            1.0
        } else {
            order
                .forward_in(cfg, NodeId::new(v))
                .map(|e| freq[cfg.edge(e).0.index()] * prob[e.index()] * mult[e.index()])
                .sum::<f64>()
        };
        freq[v] = inflow * scale[v];
        if let (Some(l), Some(h)) = (known_loop[v], headers.get(v).copied().flatten()) {
            freq[v] = h;
            let out = h * leaves[l];
            if inflow > 0.0 && out > 0.0 {
                for &b in &loops.list[l].body {
                    for &e in cfg.succs(NodeId::new(b)) {
                        if !loops.in_body(l, cfg.edge(e).1.index()) {
                            mult[e.index()] = inflow / out;
                        }
                    }
                }
            }
        }
    }
    (0..m)
        .map(|e| freq[cfg.edge(EdgeId::new(e)).0.index()] * prob[e] * mult[e])
        .collect()
}

/// A DFS from the entry: its back edges, and a topological order of the reachable nodes
/// over the other edges.
struct DfsOrder {
    back: Vec<bool>,
    topo: Vec<usize>,
    /// Position in `topo` (`usize::MAX` when unreachable).
    pos: Vec<usize>,
}

impl DfsOrder {
    fn new(cfg: &Cfg) -> DfsOrder {
        let dfs = cfg.dfs();
        let topo: Vec<usize> = dfs.postorder.iter().rev().map(|v| v.index()).collect();
        let mut pos = vec![usize::MAX; cfg.num_nodes()];
        for (k, &v) in topo.iter().enumerate() {
            pos[v] = k;
        }
        DfsOrder {
            back: dfs.back,
            topo,
            pos,
        }
    }

    fn is_back(&self, e: EdgeId) -> bool {
        self.back[e.index()]
    }

    /// In-edges of `v` that are not back edges and come from reachable nodes.
    fn forward_in<'a>(&'a self, cfg: &'a Cfg, v: NodeId) -> impl Iterator<Item = EdgeId> + 'a {
        cfg.preds(v).iter().copied().filter(move |&e| {
            !self.back[e.index()] && self.pos[cfg.edge(e).0.index()] != usize::MAX
        })
    }
}

struct Loop {
    header: usize,
    /// Body nodes (header included) in topological order.
    body: Vec<usize>,
    parent: Option<usize>,
}

/// Natural loops, one per header (the union over its back edges).
struct Loops {
    list: Vec<Loop>,
    /// Loop indices, smallest body first (inner loops before the loops around them).
    by_size: Vec<usize>,
    /// Innermost loop of each node.
    innermost: Vec<Option<usize>>,
}

impl Loops {
    fn new(cfg: &Cfg, order: &DfsOrder) -> Loops {
        let n = cfg.num_nodes();
        let mut header_loop: Vec<Option<usize>> = vec![None; n];
        let mut list: Vec<Loop> = Vec::new();
        let mut mark = vec![usize::MAX; n];
        for v in cfg.nodes() {
            let backs: Vec<EdgeId> = cfg
                .preds(v)
                .iter()
                .copied()
                .filter(|&e| order.is_back(e))
                .collect();
            if backs.is_empty() {
                continue;
            }
            let id = list.len();
            let h = v.index();
            mark[h] = id;
            let mut body = vec![h];
            let mut stack: Vec<usize> = Vec::new();
            for e in backs {
                let s = cfg.edge(e).0.index();
                if mark[s] != id {
                    mark[s] = id;
                    body.push(s);
                    stack.push(s);
                }
            }
            while let Some(x) = stack.pop() {
                for &e in cfg.preds(NodeId::new(x)) {
                    let s = cfg.edge(e).0.index();
                    if mark[s] != id && order.pos[s] != usize::MAX {
                        mark[s] = id;
                        body.push(s);
                        stack.push(s);
                    }
                }
            }
            body.sort_by_key(|&x| order.pos[x]);
            header_loop[h] = Some(id);
            list.push(Loop {
                header: h,
                body,
                parent: None,
            });
        }
        let mut by_size: Vec<usize> = (0..list.len()).collect();
        by_size.sort_by_key(|&l| (list[l].body.len(), l));
        let mut innermost: Vec<Option<usize>> = vec![None; n];
        for &l in by_size.iter().rev() {
            list[l].parent = innermost[list[l].header];
            for &v in &list[l].body {
                innermost[v] = Some(l);
            }
        }
        Loops {
            list,
            by_size,
            innermost,
        }
    }

    /// Whether node `v` lies in loop `l`: `l` is `v`'s innermost loop or one around it.
    /// (Loops nest, as wasm's structured loops always do; in an irreducible graph a body
    /// shared by two unnested loops counts for the smaller one, which only blurs the
    /// estimate.)
    fn in_body(&self, l: usize, v: usize) -> bool {
        let mut at = self.innermost[v];
        while let Some(x) = at {
            if x == l {
                return true;
            }
            // Parents were assigned before their children, so the chain ends.
            at = self.list[x].parent;
        }
        false
    }

    /// Whether edge `s → d` leaves a loop that contains `s`: `d` is outside `s`'s innermost
    /// loop (the loops containing `s` are nested, so that is the one to check).
    fn exits(&self, s: NodeId, d: NodeId) -> bool {
        self.innermost[s.index()].is_some_and(|l| !self.in_body(l, d.index()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testgen::{lcg, random_cfg};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// ENTRY → A; A → B, A → C (C traps); B → EXIT.
    #[test]
    fn dead_end_edges_are_cold() {
        let mut cfg = Cfg::new();
        let (a, b, c) = (cfg.add_node(), cfg.add_node(), cfg.add_node());
        let e0 = cfg.add_edge(cfg.entry(), a);
        let ab = cfg.add_edge(a, b);
        let ac = cfg.add_edge(a, c);
        let bx = cfg.add_edge(b, cfg.exit());
        let f = estimate_edge_frequencies(&cfg, &[]);
        assert!(close(f[e0.index()], 1.0));
        assert!(f[ab.index()] > 1000.0 * f[ac.index()]);
        assert!(close(f[ab.index()] + f[ac.index()], 1.0));
        assert!(close(f[bx.index()], f[ab.index()]));
    }

    /// A loop H → B → H (back) with exit B → X: the body runs 1 / (1 - 8/9) = 9 times per
    /// entry; a nested loop multiplies.
    #[test]
    fn loops_multiply_and_nest() {
        let mut cfg = Cfg::new();
        let (h, b, x) = (cfg.add_node(), cfg.add_node(), cfg.add_node());
        cfg.add_edge(cfg.entry(), h);
        let hb = cfg.add_edge(h, b);
        let back = cfg.add_edge(b, h);
        let out = cfg.add_edge(b, x);
        cfg.add_edge(x, cfg.exit());
        let f = estimate_edge_frequencies(&cfg, &[]);
        assert!(close(f[hb.index()], 9.0), "{}", f[hb.index()]);
        assert!(close(f[back.index()], 8.0));
        assert!(close(f[out.index()], 1.0));

        // Outer loop O → (inner loop H ⇄ B) → L → O | EXIT.
        let mut cfg = Cfg::new();
        let (o, h, b, l) = (
            cfg.add_node(),
            cfg.add_node(),
            cfg.add_node(),
            cfg.add_node(),
        );
        cfg.add_edge(cfg.entry(), o);
        cfg.add_edge(o, h);
        let hb = cfg.add_edge(h, b);
        cfg.add_edge(b, h);
        cfg.add_edge(b, l);
        let lo = cfg.add_edge(l, o);
        cfg.add_edge(l, cfg.exit());
        let f = estimate_edge_frequencies(&cfg, &[]);
        assert!(close(f[lo.index()], 8.0), "{}", f[lo.index()]);
        assert!(close(f[hb.index()], 81.0), "{}", f[hb.index()]);
    }

    /// With every branch's counts from a run, the frequencies are that run's edge counts,
    /// loops of a thousand iterations included (the static cap is 100).
    #[test]
    fn observed_counts_are_reproduced() {
        // entry → O → H → B → (T | F) → J → H (inner back) | L → O (outer back) | exit.
        let mut cfg = Cfg::new();
        let [o, h, b, t, f, j, l] = std::array::from_fn(|_| cfg.add_node());
        let edges = [
            (cfg.entry(), o),
            (o, h),
            (h, b),
            (b, t),
            (b, f),
            (t, j),
            (f, j),
            (j, h),
            (j, l),
            (l, o),
            (l, cfg.exit()),
        ];
        let ids: Vec<EdgeId> = edges.iter().map(|&(x, y)| cfg.add_edge(x, y)).collect();
        // Simulate: 37 outer iterations, 1000 + k inner ones, T taken 3 times in 10.
        let mut count = vec![0u64; ids.len()];
        let mut step = |k: usize| count[k] += 1;
        step(0);
        let mut i = 0u64;
        for k in 0..37u64 {
            step(1);
            for it in 0..1000 + k {
                step(2);
                i += 1;
                if (i * 7) % 10 < 3 {
                    step(3);
                    step(5);
                } else {
                    step(4);
                    step(6);
                }
                step(if it + 1 < 1000 + k { 7 } else { 8 });
            }
            step(if k + 1 < 37 { 9 } else { 10 });
        }
        let mut observed = vec![None; cfg.num_edges()];
        for k in [3, 4, 7, 8, 9, 10] {
            observed[ids[k].index()] = Some(count[k]);
        }
        let freq = profile_edge_frequencies(&cfg, &[], &observed);
        for (k, e) in ids.iter().enumerate() {
            let want = count[k] as f64;
            assert!(
                (freq[e.index()] - want).abs() <= 1e-6 * want.max(1.0),
                "edge {k}: {} vs {want}",
                freq[e.index()]
            );
        }
        // The static estimate alone caps the inner loop at 100 iterations per entry.
        let guess = estimate_edge_frequencies(&cfg, &[]);
        assert!(guess[ids[2].index()] < 0.1 * count[2] as f64);
    }

    /// A window that saw 500 iterations of a loop and (smoothed) one exit would have the
    /// loop run 500 times per entry; its exact header count says 100,000, and the code
    /// after it still runs once per entry.
    #[test]
    fn known_headers_fix_loops_whose_exits_windows_miss() {
        // entry → H → B → (H | A) ; A → (X | Y) → EXIT.
        let mut cfg = Cfg::new();
        let [h, b, a, x, y] = std::array::from_fn(|_| cfg.add_node());
        let edges = [
            (cfg.entry(), h),
            (h, b),
            (b, h),
            (b, a),
            (a, x),
            (a, y),
            (x, cfg.exit()),
            (y, cfg.exit()),
        ];
        let ids: Vec<EdgeId> = edges.iter().map(|&(s, d)| cfg.add_edge(s, d)).collect();
        let mut observed = vec![None; cfg.num_edges()];
        for (k, c) in [(2, 500), (3, 1), (4, 3), (5, 1)] {
            observed[ids[k].index()] = Some(c);
        }
        let mut headers = vec![None; cfg.num_nodes()];
        headers[h.index()] = Some(100_000.0);
        let f = profile_edge_frequencies_with_headers(&cfg, &observed, &headers);
        let at = |k: usize| f[ids[k].index()];
        assert!(close(at(1), 100_000.0), "{}", at(1));
        assert!(close(at(3), 1.0), "{}", at(3));
        assert!(
            close(at(4), 0.75) && close(at(5), 0.25),
            "{} {}",
            at(4),
            at(5)
        );
        let plain = profile_edge_frequencies(&cfg, &[], &observed);
        assert!(plain[ids[1].index()] < 1000.0);
    }

    /// On random CFGs: finite, non-negative, flow conserved at every reachable node whose
    /// loops were not capped, and entry flow 1.
    #[test]
    fn random_cfgs_conserve_flow() {
        let mut rnd = lcg(7);
        for case in 0..500 {
            let n = 2 + rnd() % 12;
            let edges: Vec<(usize, usize)> = (0..1 + rnd() % 30)
                .map(|_| (rnd() % n, rnd() % n))
                .collect();
            let dead_ends: Vec<usize> =
                (0..rnd() % 3).map(|_| 2 + rnd() % (n - 2).max(1)).collect();
            let cfg = random_cfg(n, &edges, &dead_ends);
            let bias: Vec<f64> = (0..cfg.num_edges())
                .map(|_| (1 + rnd() % 4) as f64)
                .collect();
            let f = estimate_edge_frequencies(&cfg, &bias);
            assert!(f.iter().all(|x| x.is_finite() && *x >= 0.0), "case {case}");
            // Out-flow of every reachable node with successors equals its in-flow
            // (entry: 1 + back edges into it).
            let order = DfsOrder::new(&cfg);
            for v in cfg.nodes() {
                if order.pos[v.index()] == usize::MAX || cfg.succs(v).is_empty() {
                    continue;
                }
                let out: f64 = cfg.succs(v).iter().map(|e| f[e.index()]).sum();
                let mut inflow: f64 = cfg
                    .preds(v)
                    .iter()
                    .filter(|&&e| order.pos[cfg.edge(e).0.index()] != usize::MAX)
                    .map(|e| f[e.index()])
                    .sum();
                if v == cfg.entry() {
                    inflow += 1.0;
                }
                // Capped or irreducible loops break conservation at their headers only.
                let header = cfg.preds(v).iter().any(|&e| order.is_back(e));
                if !header {
                    assert!(
                        close(out, inflow),
                        "case {case} node {v:?}: {out} vs {inflow}"
                    );
                }
            }
        }
    }
}
