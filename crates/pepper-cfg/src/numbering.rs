//! Ball-Larus path numbering (PEP Fig. 2 / Fig. 4) and greedy regeneration (Ball-Larus §3.5; PEP §3.3).

use crate::dag::{PathDag, Vertex};
use crate::ids::DagEdgeId;

/// Edge values and path counts of one [`PathDag`].
///
/// Invariant: for every vertex `v`, the sums of `val` along the paths from `v` to EXIT are
/// exactly `0..num_paths(v)`; out-edge `e = v→w` owns the interval
/// `[val(e), val(e) + num_paths(w))`, and these intervals tile `[0, num_paths(v))` in
/// numbering order.
#[derive(Clone, Debug)]
pub struct PathNumbering {
    num_paths: Vec<u64>,
    val: Vec<u64>,
    /// Out-edges of each vertex in numbering order (ascending `val`); cold edges excluded.
    order: Vec<Vec<DagEdgeId>>,
    /// Per edge: on some numbered (hot) path. All true without a cold set.
    hot: Vec<bool>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NumberingError {
    #[error("the function has {0} or more acyclic paths, above the limit of {1}")]
    TooManyPaths(u128, u64),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegenError {
    #[error("path number {0} is out of range (the function has {1} paths)")]
    OutOfRange(u64, u64),
    #[error("path number {0} does not reach the sample location")]
    WrongLocation(u64),
}

impl PathNumbering {
    /// Numbers the paths of `dag`. With `freq` (one weight per DAG edge), out-edges are
    /// numbered in decreasing frequency so the hottest out-edge of every vertex gets value 0
    /// and carries no instrumentation (PEP §3.4 smart numbering). Ties break by edge index,
    /// so re-instrumenting with the same profile reproduces the same numbering.
    pub fn new(dag: &PathDag, freq: Option<&[u64]>, limit: u64) -> Result<Self, NumberingError> {
        Self::new_pruned(dag, freq, limit, None)
    }

    /// Like [`new`](Self::new), but numbers only the hot paths (TPP §4.1 cold path
    /// elimination): edges marked in `cold` are left out, and so is every edge that then
    /// leads nowhere (transitive coldness: no hot path from it to EXIT). Cold edges get no
    /// value; code must poison the register when it takes one.
    pub fn new_pruned(
        dag: &PathDag,
        freq: Option<&[u64]>,
        limit: u64,
        cold: Option<&[bool]>,
    ) -> Result<Self, NumberingError> {
        let nv = dag.num_vertices();
        let mut hot = vec![false; dag.num_edges()];
        let mut paths = vec![0u128; nv];
        let mut val = vec![0u64; dag.num_edges()];
        let mut order: Vec<Vec<DagEdgeId>> = vec![Vec::new(); nv];
        for &v in dag.topo().iter().rev() {
            if v == dag.exit() {
                paths[v.index()] = 1;
                continue;
            }
            let mut succs: Vec<DagEdgeId> = dag
                .succs(v)
                .iter()
                .copied()
                .filter(|e| {
                    let locally_cold = cold.is_some_and(|c| c[e.index()]);
                    // Without pruning every edge is numbered (dead ends keep intervals
                    // non-empty); with pruning an edge into a vertex with no hot path to
                    // EXIT is cold too.
                    !locally_cold && (cold.is_none() || paths[dag.edge(*e).dst.index()] > 0)
                })
                .collect();
            for e in &succs {
                hot[e.index()] = true;
            }
            if let Some(freq) = freq {
                succs.sort_by_key(|e| (std::cmp::Reverse(freq[e.index()]), e.index()));
            }
            let mut n: u128 = 0;
            for &e in &succs {
                // Values are below num_paths(v); once that passes the limit we stop anyway.
                val[e.index()] = u64::try_from(n).unwrap_or(u64::MAX);
                n = n.saturating_add(paths[dag.edge(e).dst.index()]);
            }
            paths[v.index()] = n;
            order[v.index()] = succs;
        }
        if cold.is_some() {
            // An edge is hot only if a hot path reaches it from ENTRY, too.
            let mut reached = vec![false; nv];
            reached[dag.entry().index()] = true;
            for &v in dag.topo() {
                for &e in dag.succs(v) {
                    if !reached[v.index()] {
                        hot[e.index()] = false;
                    } else if hot[e.index()] {
                        reached[dag.edge(e).dst.index()] = true;
                    }
                }
            }
        }
        let total = paths[dag.entry().index()];
        if total > u128::from(limit) {
            return Err(NumberingError::TooManyPaths(total, limit));
        }
        // Every vertex's count is at most ENTRY's (each is entered by a dummy or reachable
        // from ENTRY), so all fit in u64 now.
        let num_paths = paths
            .into_iter()
            .map(|p| u64::try_from(p).unwrap_or(u64::MAX))
            .collect();
        Ok(PathNumbering {
            num_paths,
            val,
            order,
            hot,
        })
    }

    /// Whether edge `e` is on a numbered path (always, unless built with a cold set).
    pub fn is_hot(&self, e: DagEdgeId) -> bool {
        self.hot[e.index()]
    }

    /// Number of paths from ENTRY to EXIT: path numbers are `0..total()`.
    pub fn total(&self) -> u64 {
        self.num_paths[0]
    }
    pub fn num_paths(&self, v: Vertex) -> u64 {
        self.num_paths[v.index()]
    }
    pub fn val(&self, e: DagEdgeId) -> u64 {
        self.val[e.index()]
    }

    /// The largest `val` over all edges: what an increment table must hold.
    pub fn max_val(&self) -> u64 {
        self.val.iter().copied().max().unwrap_or(0)
    }

    /// The edges of path `r`, ENTRY to EXIT, dummies included (greedy, Ball-Larus §3.5).
    pub fn regenerate(&self, dag: &PathDag, r: u64) -> Result<Vec<DagEdgeId>, RegenError> {
        if r >= self.total() {
            return Err(RegenError::OutOfRange(r, self.total()));
        }
        self.walk(dag, r, None)
    }

    /// The prefix of the path whose register value is `p` when execution is at vertex `at`
    /// (PEP §3.3): the greedy walk on `p`, stopped at `at`.
    pub fn regenerate_partial(
        &self,
        dag: &PathDag,
        p: u64,
        at: Vertex,
    ) -> Result<Vec<DagEdgeId>, RegenError> {
        if p >= self.total() {
            return Err(RegenError::OutOfRange(p, self.total()));
        }
        self.walk(dag, p, Some(at))
    }

    /// Calls `visit` with each edge of path `r`, ENTRY to EXIT, as [`Self::regenerate`]
    /// lists them, without building the list: a path through thousands of branches is
    /// walked in place.
    pub fn for_each_edge(
        &self,
        dag: &PathDag,
        r: u64,
        visit: impl FnMut(DagEdgeId),
    ) -> Result<(), RegenError> {
        if r >= self.total() {
            return Err(RegenError::OutOfRange(r, self.total()));
        }
        self.walk_with(dag, r, None, visit)
    }

    /// How many times each DAG edge was taken, given how many times each path was:
    /// `paths` holds `(path number, count)` pairs (numbers below [`Self::total`]; the
    /// others are skipped), and the result, indexed by edge, sums `count` over the paths
    /// through each edge, as walking every path with [`Self::for_each_edge`] would.
    ///
    /// Why not walk them: a function whose paths each pass thousands of branches (a C
    /// `switch` compiled to a chain of tests) makes that walk quadratic in the function's
    /// size. Here the paths at a vertex are kept as runs of the sorted path numbers that
    /// share a prefix (their remainders at the vertex are the numbers minus the prefix's
    /// sum, so a run stays sorted), and each successor takes the part of each run whose
    /// remainders fall in its interval, found by binary search. Work grows with the
    /// number of distinct prefixes at each vertex, not with the paths' lengths.
    pub fn edge_counts(&self, dag: &PathDag, paths: &[(u64, u64)]) -> Vec<u64> {
        let mut counts = vec![0u64; dag.num_edges()];
        let mut sorted: Vec<(u64, u64)> = paths
            .iter()
            .copied()
            .filter(|&(r, _)| r < self.total())
            .collect();
        sorted.sort_unstable();
        // Prefix sums of the counts: a run's total in O(1).
        let mut below = Vec::with_capacity(sorted.len() + 1);
        below.push(0u64);
        for &(_, c) in &sorted {
            below.push(below.last().unwrap().saturating_add(c));
        }
        // The runs at each vertex: (start, end) in `sorted`, and the prefix's sum.
        let mut runs: Vec<Vec<(usize, usize, u64)>> = vec![Vec::new(); dag.num_vertices()];
        if !sorted.is_empty() {
            runs[dag.entry().index()].push((0, sorted.len(), 0));
        }
        for &v in dag.topo() {
            let here = std::mem::take(&mut runs[v.index()]);
            for (start, end, sum) in here {
                let run = &sorted[start..end];
                for &e in &self.order[v.index()] {
                    let w = dag.edge(e).dst;
                    let lo = sum + self.val[e.index()];
                    let hi = lo.saturating_add(self.num_paths[w.index()]);
                    let a = start + run.partition_point(|&(r, _)| r < lo);
                    let b = start + run.partition_point(|&(r, _)| r < hi);
                    if a < b {
                        counts[e.index()] = counts[e.index()].saturating_add(below[b] - below[a]);
                        if w != dag.exit() {
                            runs[w.index()].push((a, b, lo));
                        }
                    }
                }
            }
        }
        counts
    }

    fn walk(
        &self,
        dag: &PathDag,
        r: u64,
        stop: Option<Vertex>,
    ) -> Result<Vec<DagEdgeId>, RegenError> {
        let mut path = Vec::new();
        self.walk_with(dag, r, stop, |e| path.push(e))?;
        Ok(path)
    }

    fn walk_with(
        &self,
        dag: &PathDag,
        mut r: u64,
        stop: Option<Vertex>,
        mut visit: impl FnMut(DagEdgeId),
    ) -> Result<(), RegenError> {
        let orig = r;
        let mut v = dag.entry();
        while v != dag.exit() && Some(v) != stop {
            let succs = &self.order[v.index()];
            // Intervals are ascending; find the last edge whose value is <= r.
            let i = succs.partition_point(|&e| self.val[e.index()] <= r);
            let e = *succs
                .get(i.wrapping_sub(1))
                .ok_or(RegenError::OutOfRange(orig, self.total()))?;
            let w = dag.edge(e).dst;
            r -= self.val[e.index()];
            if r >= self.num_paths[w.index()] {
                return Err(RegenError::OutOfRange(orig, self.total()));
            }
            visit(e);
            v = w;
        }
        if stop.is_some() && Some(v) != stop {
            return Err(RegenError::WrongLocation(orig));
        }
        if stop.is_none() && r != 0 {
            return Err(RegenError::OutOfRange(orig, self.total()));
        }
        Ok(())
    }

    /// Checks the numbering invariant on every vertex (for tests and debug builds).
    pub fn verify(&self, dag: &PathDag) -> Result<(), String> {
        for &v in dag.topo() {
            if v == dag.exit() {
                continue;
            }
            let mut next = 0u64;
            for &e in &self.order[v.index()] {
                if self.val(e) != next {
                    return Err(format!("edge {e:?}: val {} != {next}", self.val(e)));
                }
                next += self.num_paths(dag.edge(e).dst);
            }
            if next != self.num_paths(v) {
                return Err(format!("vertex {v:?}: intervals do not tile"));
            }
        }
        Ok(())
    }
}
