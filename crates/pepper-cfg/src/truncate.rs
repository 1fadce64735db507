//! Keeping path numbers inside the path register (functions with more paths than a 64-bit register holds are cut at chosen nodes).
//!
//! Stacked conditionals give 2^k paths, and real functions exceed 2^64. Neither paper says
//! which edge to truncate; pepper truncates *all* in-edges of one node at once, by making
//! that node a split node exactly like a loop header. That keeps one instrumentation shape
//! (a path end followed by a path start, at a node's first instruction) for headers and
//! truncation points alike. The node chosen is the one with the most paths through it,
//! `paths(ENTRY→w) × paths(w→EXIT)`, repeated until the count fits.

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
                let Some(w) = busiest_node(cfg, &dag, &splits, never_split) else {
                    return Err(err.into());
                };
                splits.push(w);
                truncated.push(w);
            }
        }
    }
}

/// The unsplit node with the largest saturating `paths_to × paths_from`.
fn busiest_node(
    cfg: &Cfg,
    dag: &PathDag,
    splits: &[NodeId],
    never_split: &[NodeId],
) -> Option<NodeId> {
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
    cfg.nodes()
        .filter(|&n| n != cfg.exit() && n != cfg.entry())
        .filter(|n| !splits.contains(n) && !never_split.contains(n))
        .filter_map(|n| dag.body(n).map(|v| (n, v)))
        // Splitting w turns to×from paths through it into to+from.
        .max_by_key(|&(n, v)| {
            let (t, f) = (to[v.index()], from[v.index()]);
            let gain = t.saturating_mul(f).saturating_sub(t.saturating_add(f));
            (gain, std::cmp::Reverse(n))
        })
        .map(|(n, _)| n)
}
