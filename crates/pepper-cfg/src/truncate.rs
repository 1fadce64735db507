//! Keeping path numbers inside the path register (functions with more paths than a 64-bit register holds are cut at chosen nodes).
//!
//! Stacked conditionals give 2^k paths, and real functions exceed 2^64. Neither paper says
//! which edge to truncate; pepper truncates *all* in-edges of one node at once, by making
//! that node a split node exactly like a loop header. That keeps one instrumentation shape
//! (a path end followed by a path start, at a node's first instruction) for headers and
//! truncation points alike. The node chosen is the one with the most paths through it,
//! `paths(ENTRY→w) × paths(w→EXIT)`, repeated until the count fits; a function that needs
//! many cuts gets them in one pass (see [`number_pruned`]).

use crate::cfg::Cfg;
use crate::dag::{CycleError, PathDag};
use crate::ids::{DagEdgeId, NodeId};
use crate::numbering::{NumberingError, PathNumbering};
use crate::obvious::ObviousPaths;

/// Why a function could not be numbered.
#[derive(Debug, thiserror::Error)]
pub enum DagError {
    #[error(transparent)]
    Cycle(#[from] CycleError),
    /// Even with every node split, a single node has more out-edges than the limit allows.
    #[error(transparent)]
    TooManyPaths(#[from] NumberingError),
}

/// The default register limit: path numbers stay below 2^62, so `r` plus any one increment
/// never wraps an i64 and there is headroom for TPP-style poisoning later.
pub const REGISTER_PATH_LIMIT: u64 = 1 << 62;

/// Computes per-DAG-edge frequencies for smart numbering (PEP §3.4).
pub type EdgeFrequencies = dyn Fn(&PathDag) -> Vec<u64>;

/// A DAG with its numbering and the split nodes that produced it.
#[derive(Clone, Debug)]
pub struct NumberedDag {
    pub dag: PathDag,
    pub numbering: PathNumbering,
    /// Loop headers and truncation points: where paths end and start.
    pub splits: Vec<NodeId>,
    /// The subset of `splits` added by truncation.
    pub truncated: Vec<NodeId>,
    /// Targeted mode: obvious paths and the code they make unnecessary.
    pub obvious: Option<ObviousPaths>,
}

impl NumberedDag {
    /// The increment a real CFG edge carries (0 for edges left out of the DAG as
    /// unreachable and for edges only obvious paths take), or `None` when pruned numbering
    /// left the edge cold.
    pub fn edge_val(&self, e: crate::EdgeId) -> Option<u64> {
        match self.dag.real_edge(e) {
            Some(d) if !self.numbering.is_hot(d) => None,
            Some(d) if self.is_removed(d) => Some(0),
            Some(d) => Some(self.numbering.val(d)),
            None => Some(0),
        }
    }

    /// Whether obvious path elimination took DAG edge `e`'s register code away.
    pub fn is_removed(&self, e: DagEdgeId) -> bool {
        self.obvious.as_ref().is_some_and(|o| o.is_removed(e))
    }

    /// Whether a path start at DAG edge `e` sets the register (always, unless obvious path
    /// elimination found that nothing reads it).
    pub fn restarts(&self, e: DagEdgeId) -> bool {
        self.obvious.as_ref().is_none_or(|o| o.restarts(e))
    }

    /// Whether silent recording point `e` must still count a poisoned register as cold.
    pub fn checks_cold(&self, e: DagEdgeId) -> bool {
        self.obvious.as_ref().is_some_and(|o| o.checks_cold(e))
    }

    /// Whether recording point `e` (an edge into EXIT) keeps its `count[r]++`.
    pub fn records(&self, e: DagEdgeId) -> bool {
        self.obvious.as_ref().is_none_or(|o| o.records(e))
    }
}

/// Builds and numbers the P-DAG of `cfg`, splitting `headers` and, if the path count
/// exceeds `limit`, more nodes until it fits.
pub fn number_with_limit(
    cfg: &Cfg,
    headers: &[NodeId],
    never_split: &[NodeId],
    freq: Option<&EdgeFrequencies>,
    limit: u64,
) -> Result<NumberedDag, DagError> {
    number_pruned(cfg, headers, never_split, freq, limit, None)
}

/// [`number_with_limit`] numbering only hot paths: `cold` marks CFG edges to leave out
/// (TPP's cold path elimination; see [`PathNumbering::new_pruned`]).
pub fn number_pruned(
    cfg: &Cfg,
    headers: &[NodeId],
    never_split: &[NodeId],
    freq: Option<&EdgeFrequencies>,
    limit: u64,
    cold: Option<&[bool]>,
) -> Result<NumberedDag, DagError> {
    let mut splits: Vec<NodeId> = headers.to_vec();
    let mut truncated = Vec::new();
    // Nodes that may not be split (the entry and exit too), and nodes already split.
    let mut blocked = vec![false; cfg.num_nodes()];
    for &n in headers
        .iter()
        .chain(never_split)
        .chain([&cfg.entry(), &cfg.exit()])
    {
        blocked[n.index()] = true;
    }
    // The busiest node is cut, one per round, so that functions that need a few cuts get
    // the fewest. A function that still does not fit after a few rounds (thousands of
    // stacked conditionals in one body: a big C `switch`, a generated parser) is cut in
    // one pass over it instead, and then, if nodes that may not be cut keep it too big,
    // in rounds that take twice as many nodes each time: the rounds, each a pass over the
    // whole function, stay few, and the rewriter stays linear in the function's size.
    let mut batch = 1usize;
    let mut rounds = 0u32;
    loop {
        let dag = PathDag::build(cfg, &splits)?;
        let weights = freq.map(|f| f(&dag));
        let dag_cold: Option<Vec<bool>> = cold.map(|c| {
            dag.edges()
                .map(|(_, de)| matches!(de.kind, crate::DagEdgeKind::Real(e) if c[e.index()]))
                .collect()
        });
        match PathNumbering::new_pruned(&dag, weights.as_deref(), limit, dag_cold.as_deref()) {
            Ok(numbering) => {
                return Ok(NumberedDag {
                    dag,
                    numbering,
                    splits,
                    truncated,
                    obvious: None,
                });
            }
            Err(err) => {
                rounds += 1;
                let chosen = match rounds {
                    r if r == SINGLE_ROUNDS => cuts_in_one_pass(&dag, &blocked, limit),
                    r if r > SINGLE_ROUNDS => {
                        batch = batch.saturating_mul(2);
                        busiest_nodes(cfg, &dag, &blocked, batch)
                    }
                    _ => busiest_nodes(cfg, &dag, &blocked, 1),
                };
                let chosen = if chosen.is_empty() && rounds == SINGLE_ROUNDS {
                    busiest_nodes(cfg, &dag, &blocked, 1)
                } else {
                    chosen
                };
                if chosen.is_empty() {
                    return Err(err.into());
                }
                for w in chosen {
                    blocked[w.index()] = true;
                    splits.push(w);
                    truncated.push(w);
                }
            }
        }
    }
}

/// Rounds that cut the busiest node each, before the function is cut in one pass.
const SINGLE_ROUNDS: u32 = 8;

/// Cuts for a function that needs many, in one pass: in topological order, every node
/// reached by more than `limit / (edges + 1)` paths is cut (its paths end there and a new
/// one starts). Every path then ends on an edge from a node that few enough paths reach,
/// so the function's count fits `limit`, unless nodes that may not be cut carry more.
fn cuts_in_one_pass(dag: &PathDag, blocked: &[bool], limit: u64) -> Vec<NodeId> {
    let cap = (u128::from(limit) / (dag.num_edges() as u128 + 1)).max(2);
    let mut to = vec![0u128; dag.num_vertices()];
    to[dag.entry().index()] = 1;
    let mut cuts = Vec::new();
    for &v in dag.topo() {
        if to[v.index()] > cap {
            if let Some(n) = dag.node_of(v) {
                if !blocked[n.index()] && !dag.is_split(n) && dag.body(n) == Some(v) {
                    cuts.push(n);
                    to[v.index()] = 1;
                }
            }
        }
        let t = to[v.index()];
        for &e in dag.succs(v) {
            let d = dag.edge(e).dst.index();
            to[d] = to[d].saturating_add(t);
        }
    }
    cuts
}

/// Up to `count` unsplit nodes with the largest saturating `paths_to × paths_from`, the
/// busiest first (ties to the lower node).
fn busiest_nodes(cfg: &Cfg, dag: &PathDag, blocked: &[bool], count: usize) -> Vec<NodeId> {
    let nv = dag.num_vertices();
    let mut from = vec![0u128; nv];
    for &v in dag.topo().iter().rev() {
        from[v.index()] = if v == dag.exit() {
            1
        } else {
            dag.succs(v).iter().fold(0u128, |a, &e| {
                a.saturating_add(from[dag.edge(e).dst.index()])
            })
        };
    }
    let mut to = vec![0u128; nv];
    to[dag.entry().index()] = 1;
    for &v in dag.topo() {
        for &e in dag.succs(v) {
            let d = dag.edge(e).dst.index();
            to[d] = to[d].saturating_add(to[v.index()]);
        }
    }
    let mut gains: Vec<(u128, std::cmp::Reverse<NodeId>)> = cfg
        .nodes()
        .filter(|&n| !blocked[n.index()])
        .filter_map(|n| dag.body(n).map(|v| (n, v)))
        // Splitting w turns to×from paths through it into to+from.
        .map(|(n, v)| {
            let (t, f) = (to[v.index()], from[v.index()]);
            let gain = t.saturating_mul(f).saturating_sub(t.saturating_add(f));
            (gain, std::cmp::Reverse(n))
        })
        .collect();
    let count = count.min(gains.len());
    if count == 0 {
        return Vec::new();
    }
    if count < gains.len() {
        gains.select_nth_unstable_by(count - 1, |a, b| b.cmp(a));
        gains.truncate(count);
    }
    gains.sort_unstable_by(|a, b| b.cmp(a));
    gains
        .into_iter()
        .map(|(_, std::cmp::Reverse(n))| n)
        .collect()
}
