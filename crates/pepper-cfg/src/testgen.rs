//! Generators and oracles for property tests: random CFGs and brute-force
//! path enumeration. Kept in a normal module so other crates and fuzzers can reuse them.

use crate::cfg::Cfg;
use crate::dag::PathDag;
use crate::ids::{DagEdgeId, NodeId};

/// A small deterministic generator (Knuth's MMIX LCG) for tests that need reproducible
/// random choices without a proptest strategy.
pub fn lcg(mut seed: u64) -> impl FnMut() -> usize {
    move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    }
}

/// A random graph from a list of `(src, dst)` choices: node 0 is the entry, node 1 the exit,
/// nodes `2..n` interior. Every interior node gets at least one out-edge (taken from
/// `choices`, falling back to the exit), so the shape covers diamonds, ladders, parallel
/// edges, irreducible cycles and dead ends.
pub fn random_cfg(n: usize, choices: &[(usize, usize)], dead_ends: &[usize]) -> Cfg {
    let mut cfg = Cfg::new();
    let nodes: Vec<NodeId> = std::iter::once(cfg.entry())
        .chain(std::iter::once(cfg.exit()))
        .chain((2..n.max(2)).map(|_| cfg.add_node()))
        .collect();
    let n = nodes.len();
    let mut has_out = vec![false; n];
    for &(s, d) in choices {
        let (s, d) = (s % n, d % n);
        if s == 1 || dead_ends.contains(&s) {
            continue; // the exit and dead ends have no successors
        }
        cfg.add_edge(nodes[s], nodes[d]);
        has_out[s] = true;
    }
    for s in (0..n).filter(|&s| s != 1) {
        if !has_out[s] && !dead_ends.contains(&s) {
            cfg.add_edge(nodes[s], nodes[(s + 1) % n]);
        }
    }
    cfg
}

/// All ENTRY→EXIT paths of a DAG, by depth-first enumeration (stops after `cap` paths).
pub fn enumerate_paths(dag: &PathDag, cap: usize) -> Vec<Vec<DagEdgeId>> {
    let mut out = Vec::new();
    let mut stack: Vec<(crate::dag::Vertex, Vec<DagEdgeId>)> = vec![(dag.entry(), Vec::new())];
    while let Some((v, path)) = stack.pop() {
        if out.len() >= cap {
            break;
        }
        if v == dag.exit() {
            out.push(path);
            continue;
        }
        for &e in dag.succs(v) {
            let mut p = path.clone();
            p.push(e);
            stack.push((dag.edge(e).dst, p));
        }
    }
    out
}

/// A ladder of `k` diamonds: 2^k paths.
pub fn diamond_ladder(k: usize) -> Cfg {
    let mut cfg = Cfg::new();
    let mut cur = cfg.entry();
    for _ in 0..k {
        let (a, b, j) = (cfg.add_node(), cfg.add_node(), cfg.add_node());
        cfg.add_edge(cur, a);
        cfg.add_edge(cur, b);
        cfg.add_edge(a, j);
        cfg.add_edge(b, j);
        cur = j;
    }
    cfg.add_edge(cur, cfg.exit());
    cfg
}
