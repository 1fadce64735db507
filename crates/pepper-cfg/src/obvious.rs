//! TPP's obvious path elimination (TPP §4.2) on a numbered P-DAG.
//!
//! A path is *obvious* when one of its edges (a *defining* edge) lies on no other path: the
//! path then runs exactly as often as that edge. A recording point (an edge into EXIT) that
//! only obvious paths reach needs no path register and no `count[r]++`; edges from which
//! every path ends at such a point need no register update either.
//!
//! TPP reads the defining edges' counts from an edge profile of the same run. pepper has no
//! such profile in targeted mode, so each obvious path gets a plain counter on one of its
//! defining edges instead: one constant-address increment per execution, in place of the
//! register arithmetic along the path and the indexed increment at its end. The caller says
//! where a counter can go and what it costs there ([`eliminate_obvious`]'s `cost`); a
//! recording point with an obvious path that has no usable defining edge keeps its code.
//!
//! Cold path elimination makes more paths obvious (TPP §4.3), but a path through a cold edge
//! may share a defining edge with a hot one, and TPP then counts it as the hot path. pepper
//! keeps hot counts exact instead: a defining edge that cold flow can reach counts only
//! when the register is not poisoned (`counter += r >= 0`, no branch), a counter goes only on
//! a defining edge after which the path has no way out, and a silent recording point that
//! cold flow can reach still adds `r < 0` to the function's cold counter.
//!
//! Loop disconnection (TPP §4.2.1) needs nothing here: the P-DAG already ends every path at a
//! loop header and starts the next one there (PEP §3.2), which is exactly TPP's truncation of
//! every loop's entry, exit and back edges.

use crate::dag::{DagEdgeKind, PathDag};
use crate::ids::DagEdgeId;
use crate::numbering::PathNumbering;

/// Which parts of a numbered DAG need no path-register code.
#[derive(Clone, Debug, Default)]
pub struct ObviousPaths {
    /// Per DAG edge: hot and on exactly one hot path.
    pub defining: Vec<bool>,
    /// Per DAG edge: a recording point (edge into EXIT) that only obvious paths reach
    /// (Fig. 8's answer).
    pub obvious: Vec<bool>,
    /// Per DAG edge: a recording point (edge into EXIT) left without recording code, because
    /// only obvious paths reach it or because it is never executed (a dead end).
    pub silent: Vec<bool>,
    /// Per DAG edge: hot, but no hot path through it reaches a recording point that keeps
    /// its code, so it carries no register update (and a path start there no reset).
    pub removed: Vec<bool>,
    /// Per DAG edge: a silent recording point that a cold edge can reach, where a poisoned
    /// register must still be counted as a cold path.
    pub cold_check: Vec<bool>,
    /// The function has cold edges: every path start must reset the register, so that only
    /// the current path's cold edges make it negative.
    pub keep_restarts: bool,
    /// The paths that end at silent recording points, each counted on one defining edge.
    pub paths: Vec<ObviousPath>,
}

/// One obvious path and the defining edge that carries its counter.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ObviousPath {
    /// Its Ball-Larus number under the (unchanged) numbering, so its count decodes like any
    /// other path's.
    pub number: u64,
    pub counter: DagEdgeId,
    /// Cold flow can reach the counter's edge: count only while the register is not
    /// poisoned.
    pub guarded: bool,
}

impl ObviousPaths {
    /// Whether recording code stays at recording point `e`.
    pub fn records(&self, e: DagEdgeId) -> bool {
        !self.silent.get(e.index()).copied().unwrap_or(false)
    }
    pub fn is_removed(&self, e: DagEdgeId) -> bool {
        self.removed.get(e.index()).copied().unwrap_or(false)
    }
    /// Whether a path start at DAG edge `e` still sets the register.
    pub fn restarts(&self, e: DagEdgeId) -> bool {
        self.keep_restarts || !self.is_removed(e)
    }
    pub fn checks_cold(&self, e: DagEdgeId) -> bool {
        self.cold_check.get(e.index()).copied().unwrap_or(false)
    }
}

/// Number of hot paths from ENTRY to each vertex (`to`) and from each vertex to EXIT
/// (`from`), saturating at 2: obvious-path detection only asks "exactly one?".
fn single_path_sets(dag: &PathDag, num: &PathNumbering) -> (Vec<u8>, Vec<u8>) {
    let nv = dag.num_vertices();
    let mut to = vec![0u8; nv];
    to[dag.entry().index()] = 1;
    for &v in dag.topo() {
        for &e in dag.succs(v) {
            if num.is_hot(e) {
                let d = dag.edge(e).dst.index();
                to[d] = (to[d] + to[v.index()]).min(2);
            }
        }
    }
    let mut from = vec![0u8; nv];
    from[dag.exit().index()] = 1;
    for &v in dag.topo().iter().rev() {
        for &e in dag.succs(v) {
            if num.is_hot(e) {
                let d = dag.edge(e).dst.index();
                from[v.index()] = (from[v.index()] + from[d]).min(2);
            }
        }
    }
    (to, from)
}

/// Finds the obvious paths of `dag`'s hot paths (all of them without cold pruning) and the
/// code they make unnecessary.
///
/// `cost(e)` is the price of a counter on DAG edge `e`, or `None` where no counter can go;
/// each obvious path is counted on its cheapest defining edge (ties: the latest).
pub fn eliminate_obvious(
    dag: &PathDag,
    num: &PathNumbering,
    cost: &dyn Fn(DagEdgeId) -> Option<u32>,
) -> ObviousPaths {
    let ne = dag.num_edges();
    let (to, from) = single_path_sets(dag, num);
    // Step 1 (§4.2.2): u→w is defining iff one path reaches u and one path leaves w.
    let defining: Vec<bool> = (0..ne)
        .map(|i| {
            let e = DagEdgeId::new(i);
            let de = dag.edge(e);
            num.is_hot(e) && to[de.src.index()] == 1 && from[de.dst.index()] == 1
        })
        .collect();
    let is_rp = |e: DagEdgeId| num.is_hot(e) && dag.edge(e).dst == dag.exit();
    // Vertices some cold edge leads to (a poisoned register can arrive there), and vertices
    // with one way on: past a defining edge whose path has only those, flow cannot leave it.
    let mut tainted = vec![false; dag.num_vertices()];
    for &v in dag.topo() {
        for &e in dag.succs(v) {
            if tainted[v.index()] || !num.is_hot(e) {
                tainted[dag.edge(e).dst.index()] = true;
            }
        }
    }
    let keep_restarts = (0..ne).any(|i| !num.is_hot(DagEdgeId::new(i)));
    let one_way = |v: crate::dag::Vertex| v == dag.exit() || dag.succs(v).len() == 1;

    // Step 2 (Fig. 8, with a visited set so every edge is queued once): a recording point
    // reached from ENTRY along non-defining edges only is on a non-obvious path.
    let mut non_obvious = vec![false; ne];
    let mut queued = vec![false; ne];
    let mut work: Vec<DagEdgeId> = Vec::new();
    let push = |e: DagEdgeId, work: &mut Vec<DagEdgeId>, queued: &mut Vec<bool>| {
        if num.is_hot(e) && !defining[e.index()] && !queued[e.index()] {
            queued[e.index()] = true;
            work.push(e);
        }
    };
    for &e in dag.succs(dag.entry()) {
        push(e, &mut work, &mut queued);
    }
    while let Some(e) = work.pop() {
        if is_rp(e) {
            non_obvious[e.index()] = true;
        } else {
            for &f in dag.succs(dag.edge(e).dst) {
                push(f, &mut work, &mut queued);
            }
        }
    }

    let mut preds: Vec<Vec<DagEdgeId>> = vec![Vec::new(); dag.num_vertices()];
    for (e, de) in dag.edges() {
        if num.is_hot(e) {
            preds[de.dst.index()].push(e);
        }
    }
    // Choose a counter for every path of every obvious recording point; a point where some
    // path has no usable defining edge keeps its recording code.
    let mut silent = vec![false; ne];
    let mut paths = Vec::new();
    for (e, de) in dag.edges() {
        if !is_rp(e) {
            continue;
        }
        if matches!(de.kind, DagEdgeKind::DeadEnd(_)) {
            // Never executed (a trap ends the activation): nothing to record or count.
            silent[e.index()] = true;
            continue;
        }
        if non_obvious[e.index()] {
            continue;
        }
        let mut chosen = Vec::new();
        let all_placed = paths_into(dag, &preds, e).into_iter().all(|p| {
            // p[i] may count the path only if every vertex after it has one way on.
            let mut sealed = vec![false; p.len()];
            let mut ok = true;
            for i in (0..p.len()).rev() {
                ok &= one_way(dag.edge(p[i]).dst);
                sealed[i] = ok;
            }
            // Cheapest first, then latest: a path cut short by a trap or `proc_exit` after
            // its counter has run is still counted, so the closer to its end, the better.
            let best = p
                .iter()
                .enumerate()
                .filter(|&(i, f)| sealed[i] && defining[f.index()])
                .filter_map(|(i, &f)| cost(f).map(|c| (c, std::cmp::Reverse(i), f)))
                .min();
            match best {
                Some((_, _, f)) => {
                    let number = p.iter().map(|&g| num.val(g)).sum();
                    chosen.push(ObviousPath {
                        number,
                        counter: f,
                        guarded: tainted[dag.edge(f).src.index()],
                    });
                    true
                }
                None => false,
            }
        });
        if all_placed {
            silent[e.index()] = true;
            paths.extend(chosen);
        }
    }

    // Step 3: edges with no path to a recording point that keeps its code lose theirs.
    let mut keeps = vec![false; ne];
    for &v in dag.topo().iter().rev() {
        for &e in dag.succs(v) {
            let d = dag.edge(e).dst;
            keeps[e.index()] = num.is_hot(e)
                && if d == dag.exit() {
                    !silent[e.index()]
                } else {
                    dag.succs(d).iter().any(|f| keeps[f.index()])
                };
        }
    }
    let removed = (0..ne)
        .map(|i| num.is_hot(DagEdgeId::new(i)) && !keeps[i])
        .collect();
    let cold_check = (0..ne)
        .map(|i| {
            let de = dag.edge(DagEdgeId::new(i));
            silent[i] && tainted[de.src.index()] && !matches!(de.kind, DagEdgeKind::DeadEnd(_))
        })
        .collect();
    let obvious = (0..ne)
        .map(|i| is_rp(DagEdgeId::new(i)) && !non_obvious[i])
        .collect();
    ObviousPaths {
        defining,
        obvious,
        silent,
        removed,
        cold_check,
        keep_restarts,
        paths,
    }
}

/// Every hot ENTRY→EXIT path that ends with recording point `rp`. Only called for obvious
/// points, where each such path owns a defining edge, so there are at most as many paths
/// as edges.
fn paths_into(dag: &PathDag, preds: &[Vec<DagEdgeId>], rp: DagEdgeId) -> Vec<Vec<DagEdgeId>> {
    let mut out = Vec::new();
    let mut stack = vec![vec![rp]];
    while let Some(suffix) = stack.pop() {
        let first = *suffix.last().expect("suffixes are never empty");
        let src = dag.edge(first).src;
        if src == dag.entry() {
            let mut p = suffix;
            p.reverse();
            out.push(p);
            continue;
        }
        for &e in &preds[src.index()] {
            let mut s = suffix.clone();
            s.push(e);
            stack.push(s);
        }
    }
    out
}
