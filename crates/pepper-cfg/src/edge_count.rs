//! Optimal edge counting (Knuth; Ball & Larus 1994): count only the *chords* of a maximum
//! spanning tree and derive every other edge from flow conservation.
//!
//! The CFG plus a virtual EXIT→ENTRY edge is a circulation: at every node, inflow equals
//! outflow. Counting the edges outside a spanning tree determines the tree edges uniquely.
//! Heavy (hot, or expensive to instrument) edges go in the tree, so they carry no code.
//!
//! Counts known from elsewhere are free chords: a function's entries (its callers'
//! counts), and a node's executions (a loop's induction variable says how often the node
//! that steps it ran). A node count is the count of a virtual edge between the node's
//! two halves (in-edges arrive at the first, out-edges leave the second).

use crate::cfg::Cfg;
use crate::ids::{EdgeId, NodeId};

/// Which edges need a counter.
#[derive(Clone, Debug)]
pub struct EdgeCounting {
    /// Per CFG edge: `true` if it must be counted (a chord).
    pub chord: Vec<bool>,
    /// The virtual EXIT→ENTRY edge is a chord whose count (the function's entries) comes
    /// from elsewhere, for free: from its callers' counts, when only counted direct calls
    /// can enter it. `false`: it is a tree edge, derived like the others.
    pub entries_given: bool,
    /// Nodes whose execution counts [`derive`](Self::derive) will be given (in this
    /// order, ascending): those of the offered ones that the tree took as chords.
    pub nodes_given: Vec<NodeId>,
}

struct UnionFind(Vec<usize>);
impl UnionFind {
    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }
    fn union(&mut self, a: usize, b: usize) -> bool {
        let (a, b) = (self.find(a), self.find(b));
        if a == b {
            return false;
        }
        self.0[a] = b;
        true
    }
}

impl EdgeCounting {
    /// Chooses the chords of a maximum-weight spanning tree. `weight[e]` is the cost of
    /// counting edge `e` (expected frequency times instrumentation cost); the virtual
    /// EXIT→ENTRY edge is always in the tree.
    pub fn new(cfg: &Cfg, weight: &[u64]) -> EdgeCounting {
        Self::build(cfg, weight, false, &[])
    }

    /// Like [`EdgeCounting::new`], for a function whose entry count will be given to
    /// [`derive`](Self::derive): the virtual EXIT→ENTRY edge is then the cheapest chord
    /// there is, so the tree keeps one more real edge and a run makes one increment fewer
    /// per entry (unless EXIT is unreachable, where the virtual edge stays in the tree).
    pub fn with_given_entries(cfg: &Cfg, weight: &[u64]) -> EdgeCounting {
        Self::build(cfg, weight, true, &[])
    }

    /// Like [`EdgeCounting::new`], with the entry count for free (if `entries_given`) and
    /// the execution counts of `nodes` at a price: `(v, w)` offers node `v`'s count as a
    /// chord of weight `w` (what reading it costs, in the units of `weight`). The spanning
    /// tree decides, like for any edge, whether it is cheaper than the chord it would
    /// replace; the ones taken are [`nodes_given`](Self::nodes_given) (never ENTRY or
    /// EXIT, which have one half only).
    pub fn with_given(
        cfg: &Cfg,
        weight: &[u64],
        entries_given: bool,
        nodes: &[(NodeId, u64)],
    ) -> EdgeCounting {
        Self::build(cfg, weight, entries_given, nodes)
    }

    /// An empty placement: no edge counted, entries given (or unknown).
    pub fn uncounted(cfg: &Cfg, entries_given: bool) -> EdgeCounting {
        EdgeCounting {
            chord: vec![false; cfg.num_edges()],
            entries_given,
            nodes_given: Vec::new(),
        }
    }

    fn build(
        cfg: &Cfg,
        weight: &[u64],
        entries_given: bool,
        offered: &[(NodeId, u64)],
    ) -> EdgeCounting {
        let mut offered: Vec<(NodeId, u64)> = offered
            .iter()
            .copied()
            .filter(|&(v, _)| v != cfg.entry() && v != cfg.exit())
            .collect();
        offered.sort();
        offered.dedup_by_key(|o| o.0);
        let nodes: Vec<NodeId> = offered.iter().map(|o| o.0).collect();
        let halves = Halves::new(cfg, &nodes);
        let (n, m) = (cfg.num_nodes(), cfg.num_edges());
        let mut uf = UnionFind((0..n + nodes.len()).collect());
        if !entries_given {
            uf.union(cfg.exit().index(), cfg.entry().index());
        }
        // Real edges, then (from m on) the edge between the halves of each offered node.
        let weight_of = |e: usize| if e < m { weight[e] } else { offered[e - m].1 };
        let mut order: Vec<usize> = (0..m + nodes.len()).collect();
        order.sort_by_key(|&e| (std::cmp::Reverse(weight_of(e)), e));
        let mut chord = vec![true; m];
        let mut nodes_given = Vec::new();
        for e in order {
            let (s, d) = if e < m {
                halves.ends(cfg, e)
            } else {
                (nodes[e - m].index(), n + e - m)
            };
            let joins = uf.union(s, d);
            if e < m {
                chord[e] = !joins;
            } else if !joins {
                // A chord: the node's count is read. (In the tree, its halves are one node
                // again and its count is derived like any other.)
                nodes_given.push(nodes[e - m]);
            }
        }
        nodes_given.sort();
        // The free virtual edge is a chord only if the real edges already connect its
        // ends; otherwise it joins the tree (its count would be derived anyway).
        let entries_given = entries_given && !uf.union(cfg.exit().index(), cfg.entry().index());
        EdgeCounting {
            chord,
            entries_given,
            nodes_given,
        }
    }

    /// How many counter increments a run with these edge counts makes (the chords' sum).
    pub fn increments(&self, counts: &[u64]) -> u64 {
        counts
            .iter()
            .zip(&self.chord)
            .filter(|(_, &c)| c)
            .map(|(&n, _)| n)
            .sum()
    }

    /// All edge counts from the chord counts (`chord_counts[e]` is read only for chords),
    /// when [`entries_given`](Self::entries_given) the function's `entries`, and the
    /// execution counts of [`nodes_given`](Self::nodes_given) (`node_counts`, in that
    /// order), by flow conservation at each node, leaves of the tree first. Nodes that do
    /// not conserve flow (a trap or `proc_exit` stopped the function midway) can make a
    /// derived count slightly off; negative results are clamped to zero.
    pub fn derive(
        &self,
        cfg: &Cfg,
        chord_counts: &[u64],
        entries: u64,
        node_counts: &[u64],
    ) -> Vec<u64> {
        self.derive_with(cfg, chord_counts, entries, node_counts, &[])
    }

    /// [`derive`](Self::derive) for executions that may start and stop inside the
    /// function: `extra` are counted virtual edges `(from, to, count)` besides the CFG's,
    /// such as ENTRY→H for executions that began at node H and H→EXIT for those that
    /// stopped there (a switched copy entered and left at a loop header). Each one closes
    /// a cycle of its own, so the tree and its chords stay as they are.
    pub fn derive_with(
        &self,
        cfg: &Cfg,
        chord_counts: &[u64],
        entries: u64,
        node_counts: &[u64],
        extra: &[(NodeId, NodeId, u64)],
    ) -> Vec<u64> {
        let halves = Halves::new(cfg, &self.nodes_given);
        let n = cfg.num_nodes() + self.nodes_given.len();
        let m = cfg.num_edges();
        let given = self.nodes_given.len();
        // Edge m is the virtual EXIT→ENTRY edge, m + 1 + j the edge between the halves of
        // `nodes_given[j]`, m + 1 + given + j the `j`-th extra edge.
        let ends = |e: usize| {
            if e < m {
                halves.ends(cfg, e)
            } else if e == m {
                (cfg.exit().index(), cfg.entry().index())
            } else if e <= m + given {
                let j = e - m - 1;
                (self.nodes_given[j].index(), cfg.num_nodes() + j)
            } else {
                let (s, d, _) = extra[e - m - 1 - given];
                (halves.out_of(s), d.index())
            }
        };
        let total = m + 1 + given + extra.len();
        let mut known: Vec<Option<i128>> = (0..total)
            .map(|e| {
                if e < m {
                    self.chord[e].then(|| chord_counts[e] as i128)
                } else if e == m {
                    self.entries_given.then_some(entries as i128)
                } else if e <= m + given {
                    Some(node_counts.get(e - m - 1).copied().unwrap_or(0) as i128)
                } else {
                    Some(extra[e - m - 1 - given].2 as i128)
                }
            })
            .collect();
        let mut incident: Vec<Vec<usize>> = vec![Vec::new(); n];
        for e in 0..total {
            let (s, d) = ends(e);
            incident[s].push(e);
            if d != s {
                incident[d].push(e);
            }
        }
        // Per node, how many of its edges are still unknown: kept up to date rather than
        // recounted, since a switch's node has thousands of edges.
        let mut unknown: Vec<usize> = (0..n)
            .map(|v| incident[v].iter().filter(|&&e| known[e].is_none()).count())
            .collect();
        let mut stack: Vec<usize> = (0..n).filter(|&v| unknown[v] == 1).collect();
        while let Some(v) = stack.pop() {
            if unknown[v] != 1 {
                continue;
            }
            let Some(&e) = incident[v].iter().find(|&&e| known[e].is_none()) else {
                continue;
            };
            let (mut inflow, mut outflow) = (0i128, 0i128);
            for &f in &incident[v] {
                let Some(c) = known[f] else { continue };
                let (s, d) = ends(f);
                if d == v {
                    inflow += c;
                }
                if s == v {
                    outflow += c;
                }
            }
            let (s, _) = ends(e);
            let val = if s == v {
                inflow - outflow
            } else {
                outflow - inflow
            };
            known[e] = Some(val.max(0));
            let (s, d) = ends(e);
            for w in [s, d].into_iter().take(if s == d { 1 } else { 2 }) {
                unknown[w] -= 1;
                if unknown[w] == 1 {
                    stack.push(w);
                }
            }
        }
        (0..m).map(|e| known[e].unwrap_or(0) as u64).collect()
    }
}

/// Where each edge starts and ends once some nodes are split in two halves: the first
/// half keeps the node's index (in-edges), the second is `num_nodes + j` for the `j`-th
/// split node (out-edges; a self-loop goes from the second half to the first).
struct Halves(Vec<Option<usize>>);

impl Halves {
    fn new(cfg: &Cfg, nodes: &[NodeId]) -> Halves {
        let mut second = vec![None; cfg.num_nodes()];
        for (j, v) in nodes.iter().enumerate() {
            second[v.index()] = Some(cfg.num_nodes() + j);
        }
        Halves(second)
    }

    fn ends(&self, cfg: &Cfg, e: usize) -> (usize, usize) {
        let (s, d) = cfg.edge(EdgeId::new(e));
        (self.out_of(s), d.index())
    }

    /// The half of node `v` that its out-edges leave.
    fn out_of(&self, v: NodeId) -> usize {
        self.0[v.index()].unwrap_or(v.index())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testgen::{lcg, random_cfg};

    /// The chords' counts; other edges hold a value derivation must not read.
    fn chords_masked(counts: &[u64], ec: &EdgeCounting) -> Vec<u64> {
        counts
            .iter()
            .zip(&ec.chord)
            .map(|(&c, &k)| if k { c } else { u64::MAX })
            .collect()
    }

    /// A random CFG of 3 to 12 nodes and up to 25 edges.
    fn small_cfg(rnd: &mut impl FnMut() -> usize) -> Cfg {
        let n = 3 + rnd() % 10;
        let edges: Vec<(usize, usize)> = (0..1 + rnd() % 25)
            .map(|_| (rnd() % n, rnd() % n))
            .collect();
        random_cfg(n, &edges, &[])
    }

    /// A switch: ENTRY → hub → one of `k` cases → funnel → EXIT, case `i` taken `i + 1`
    /// times. Returns the graph and its edge counts.
    fn switch_cfg(k: usize) -> (Cfg, Vec<u64>) {
        let mut cfg = Cfg::new();
        let (hub, funnel) = (cfg.add_node(), cfg.add_node());
        let mut counts = Vec::new();
        let total: u64 = (1..=k as u64).sum();
        cfg.add_edge(cfg.entry(), hub);
        counts.push(total);
        for i in 0..k {
            let case = cfg.add_node();
            cfg.add_edge(hub, case);
            cfg.add_edge(case, funnel);
            counts.extend([i as u64 + 1, i as u64 + 1]);
        }
        cfg.add_edge(funnel, cfg.exit());
        counts.push(total);
        (cfg, counts)
    }

    /// A node of thousands of edges (a switch's dispatch, its funnel) is derived in time
    /// linear in them: four times the cases take about four times as long, not sixteen.
    /// (A complexity check with a wide margin, not a speed claim.)
    #[test]
    fn a_switch_of_thousands_of_cases_derives_in_linear_time() {
        let time = |k: usize| {
            let (cfg, counts) = switch_cfg(k);
            let ec = EdgeCounting::new(&cfg, &vec![1; cfg.num_edges()]);
            let chords = chords_masked(&counts, &ec);
            (0..2)
                .map(|_| {
                    let t = std::time::Instant::now();
                    let got = ec.derive(&cfg, &chords, 0, &[]);
                    assert_eq!(got, counts, "{k} cases");
                    t.elapsed()
                })
                .min()
                .expect("two runs")
        };
        let (small, large) = (time(3000), time(12000));
        let ratio = large.as_secs_f64() / small.as_secs_f64();
        assert!(
            ratio < 9.0,
            "{small:?} for 3000 cases, {large:?} for 12000 ({ratio:.1}x)"
        );
    }

    /// Counts from a random walk satisfy conservation; deriving from chords recovers all.
    #[test]
    fn derive_recovers_random_walk_counts() {
        let mut rnd = lcg(1);
        for case in 0..300 {
            let cfg = small_cfg(&mut rnd);
            let mut counts = vec![0u64; cfg.num_edges()];
            let mut walks = 0;
            // Walk ENTRY→EXIT several times (bounded), so flow is conserved.
            for _ in 0..5 {
                let mut v = cfg.entry();
                let mut path = Vec::new();
                for _ in 0..200 {
                    if v == cfg.exit() {
                        break;
                    }
                    let s = cfg.succs(v);
                    let e = s[rnd() % s.len()];
                    path.push(e);
                    v = cfg.edge(e).1;
                }
                if v == cfg.exit() {
                    walks += 1;
                    for e in path {
                        counts[e.index()] += 1;
                    }
                }
            }
            let weight: Vec<u64> = (0..cfg.num_edges()).map(|_| (rnd() % 100) as u64).collect();
            let ec = EdgeCounting::new(&cfg, &weight);
            let chords = chords_masked(&counts, &ec);
            let derived = ec.derive(&cfg, &chords, 0, &[]);
            // With the entries given, the same counts come back from one chord fewer
            // (where EXIT is reachable), and never from more increments.
            let given = EdgeCounting::with_given_entries(&cfg, &weight);
            let given_chords = given.chord.iter().filter(|&&c| c).count();
            let chords_before = ec.chord.iter().filter(|&&c| c).count();
            if given.entries_given {
                assert_eq!(given_chords + 1, chords_before, "case {case}");
            } else {
                assert_eq!(given_chords, chords_before, "case {case}");
            }
            let from_given = given.derive(&cfg, &chords_masked(&counts, &given), walks, &[]);
            // Node counts offered too (some random nodes, at random prices): each one taken
            // replaces a chord, and the same counts come back.
            let offered: Vec<(NodeId, u64)> = (0..1 + rnd() % 3)
                .map(|_| (NodeId::new(rnd() % cfg.num_nodes()), (rnd() % 100) as u64))
                .collect();
            let nodes = EdgeCounting::with_given(&cfg, &weight, true, &offered);
            assert!(nodes
                .nodes_given
                .iter()
                .all(|v| offered.iter().any(|o| o.0 == *v)));
            // Counted chords plus free ones: one per independent cycle, however split.
            assert_eq!(
                nodes.chord.iter().filter(|&&c| c).count()
                    + nodes.nodes_given.len()
                    + nodes.entries_given as usize,
                given_chords + given.entries_given as usize,
                "case {case}"
            );
            let inflow =
                |v: NodeId| -> u64 { cfg.preds(v).iter().map(|e| counts[e.index()]).sum() };
            let node_counts: Vec<u64> = nodes.nodes_given.iter().map(|&v| inflow(v)).collect();
            let from_nodes =
                nodes.derive(&cfg, &chords_masked(&counts, &nodes), walks, &node_counts);
            // A tree of the true counts is the cheapest placement: no other makes fewer
            // increments (a maximum spanning tree leaves the lightest chords).
            let ideal = EdgeCounting::new(&cfg, &counts);
            assert!(
                ideal.increments(&counts) <= ec.increments(&counts),
                "case {case}"
            );
            // Edges unreachable from the entry may not be determined; compare reachable ones.
            let reach = cfg.reachable();
            for e in 0..cfg.num_edges() {
                if reach[cfg.edge(EdgeId::new(e)).0.index()] {
                    assert_eq!(derived[e], counts[e], "case {case} edge {e}");
                    assert_eq!(
                        from_given[e], counts[e],
                        "case {case} edge {e}, entries given"
                    );
                    assert_eq!(
                        from_nodes[e], counts[e],
                        "case {case} edge {e}, node counts given"
                    );
                }
            }
        }
    }

    /// Walks that start and stop inside the function (a switched copy entered and left at
    /// loop headers) conserve flow once their starts and stops are counted as virtual
    /// ENTRY→H and H→EXIT edges: deriving with those recovers every edge.
    #[test]
    fn derive_with_virtual_starts_and_stops_recovers_partial_walks() {
        let mut rnd = lcg(7);
        let mut differ = 0;
        for case in 0..300 {
            let cfg = small_cfg(&mut rnd);
            let reach = cfg.reachable();
            let inner: Vec<NodeId> = (0..cfg.num_nodes())
                .map(NodeId::new)
                .filter(|&v| reach[v.index()] && v != cfg.entry() && v != cfg.exit())
                .collect();
            let mut counts = vec![0u64; cfg.num_edges()];
            let mut extra: std::collections::BTreeMap<(usize, usize), u64> = Default::default();
            for _ in 0..8 {
                // Half the walks start at an inner node, and every step may stop.
                let start = match (rnd() % 2, inner.is_empty()) {
                    (0, false) => inner[rnd() % inner.len()],
                    _ => cfg.entry(),
                };
                let mut v = start;
                let mut path = Vec::new();
                for _ in 0..200 {
                    if v == cfg.exit() || (v != cfg.entry() && rnd().is_multiple_of(8)) {
                        break;
                    }
                    let s = cfg.succs(v);
                    if s.is_empty() {
                        break;
                    }
                    let e = s[rnd() % s.len()];
                    path.push(e);
                    v = cfg.edge(e).1;
                }
                if v == cfg.entry() || (v != cfg.exit() && cfg.succs(v).is_empty()) {
                    continue;
                }
                for e in path {
                    counts[e.index()] += 1;
                }
                if start != cfg.entry() {
                    *extra
                        .entry((cfg.entry().index(), start.index()))
                        .or_default() += 1;
                }
                if v != cfg.exit() {
                    *extra.entry((v.index(), cfg.exit().index())).or_default() += 1;
                }
            }
            let extra: Vec<(NodeId, NodeId, u64)> = extra
                .into_iter()
                .map(|((s, d), c)| (NodeId::new(s), NodeId::new(d), c))
                .collect();
            let weight: Vec<u64> = (0..cfg.num_edges()).map(|_| (rnd() % 100) as u64).collect();
            let ec = EdgeCounting::new(&cfg, &weight);
            let derived = ec.derive_with(&cfg, &chords_masked(&counts, &ec), 0, &[], &extra);
            for e in 0..cfg.num_edges() {
                if reach[cfg.edge(EdgeId::new(e)).0.index()] {
                    assert_eq!(derived[e], counts[e], "case {case} edge {e}");
                }
            }
            // Without the virtual edges the same counts do not come back where walks
            // started or stopped inside (the reason they exist).
            if !extra.is_empty() {
                let plain = ec.derive(&cfg, &chords_masked(&counts, &ec), 0, &[]);
                differ += usize::from((0..cfg.num_edges()).any(|e| plain[e] != counts[e]));
            }
        }
        assert!(differ > 50, "{differ} cases needed the virtual edges");
    }
}
