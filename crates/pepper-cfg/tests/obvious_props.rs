//! TPP obvious path elimination against brute-force path enumeration on random DAGs
//! (issue 4: "defining edges and obvious-path detection agree with a brute-force
//! enumeration"), and exact reconstruction of the path profile and the cold count from what
//! is left to count, with cold flow through the same code.

use pepper_cfg::testgen::{enumerate_paths, random_cfg};
use pepper_cfg::{
    eliminate_obvious, Cfg, DagEdgeId, DagEdgeKind, ObviousPaths, PathDag, PathNumbering,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

fn graph() -> impl Strategy<Value = Cfg> {
    (
        3usize..12,
        prop::collection::vec((0usize..12, 0usize..12), 1..30),
        prop::collection::vec(2usize..12, 0..3),
    )
        .prop_map(|(n, edges, dead)| random_cfg(n, &edges, &dead))
}

struct Case {
    dag: PathDag,
    num: PathNumbering,
    /// Every ENTRY→EXIT path, and the hot (numbered) ones.
    all: Vec<Vec<DagEdgeId>>,
    hot: Vec<Vec<DagEdgeId>>,
}

fn case(cfg: &Cfg, cold_bits: &[bool]) -> Option<Case> {
    let dag = PathDag::build(cfg, &cfg.dfs_back_edge_targets()).expect("acyclic");
    let cold: Vec<bool> = (0..dag.num_edges())
        .map(|i| !cold_bits.is_empty() && cold_bits[i % cold_bits.len()])
        .collect();
    let num = PathNumbering::new_pruned(&dag, None, u64::MAX, Some(&cold)).expect("fits");
    let all = enumerate_paths(&dag, 5_000);
    if all.len() >= 5_000 {
        return None;
    }
    let hot = all
        .iter()
        .filter(|p| p.iter().all(|&e| num.is_hot(e)))
        .cloned()
        .collect();
    Some(Case { dag, num, all, hot })
}

fn number(num: &PathNumbering, p: &[DagEdgeId]) -> u64 {
    p.iter().map(|&e| num.val(e)).sum()
}

fn is_dead_end(dag: &PathDag, e: DagEdgeId) -> bool {
    matches!(dag.edge(e).kind, DagEdgeKind::DeadEnd(_))
}

/// TPP's poisoned register, as pepper's emitter writes it.
const POISON: i64 = -(1 << 62);

/// Replays `runs[i]` executions of path `i` of the whole DAG (hot and cold) through the
/// code that obvious path elimination leaves: register updates on kept edges, the poison
/// on cold edges, `count[r]++` (or the cold counter) at recording points that keep it,
/// `cold += r < 0` where a silent point checks, and one counter per obvious path. A path
/// start that needs no reset leaves `stale` in the register. Returns the decoded path
/// profile and the cold count.
fn replay(c: &Case, ob: &ObviousPaths, runs: &[u64], stale: i64) -> (BTreeMap<u64, u64>, u64) {
    let mut counted: BTreeMap<u64, u64> = BTreeMap::new();
    let mut cold = 0;
    for (p, &n) in c.all.iter().zip(runs) {
        let last = *p.last().expect("paths end at EXIT");
        if is_dead_end(&c.dag, last) {
            continue; // a trap: nothing is recorded
        }
        let mut r = stale;
        for (i, &e) in p.iter().enumerate() {
            if !c.num.is_hot(e) {
                r = POISON;
            } else if i == 0 {
                if ob.restarts(e) {
                    r = c.num.val(e) as i64;
                }
            } else if !ob.is_removed(e) {
                r += c.num.val(e) as i64;
            }
            for o in ob.paths.iter().filter(|o| o.counter == e) {
                if !o.guarded || r >= 0 {
                    *counted.entry(o.number).or_default() += n;
                }
            }
        }
        if ob.records(last) {
            if r < 0 {
                cold += n;
            } else {
                *counted.entry(r as u64).or_default() += n;
            }
        } else if ob.checks_cold(last) && r < 0 {
            cold += n;
        }
    }
    counted.retain(|_, n| *n > 0);
    (counted, cold)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Defining edges, obvious recording points and removable edges equal their
    /// definitions, checked by enumerating every hot path.
    #[test]
    fn agrees_with_brute_force(
        cfg in graph(),
        cold_bits in prop::collection::vec(prop::bool::weighted(0.15), 0..20),
    ) {
        let Some(c) = case(&cfg, &cold_bits) else { return Ok(()) };
        let ob = eliminate_obvious(&c.dag, &c.num, &|_| Some(1));
        let mut on_paths: BTreeMap<DagEdgeId, usize> = BTreeMap::new();
        for p in &c.hot {
            for &e in p {
                *on_paths.entry(e).or_default() += 1;
            }
        }
        for (e, _) in c.dag.edges() {
            prop_assert_eq!(ob.defining[e.index()], on_paths.get(&e) == Some(&1), "defining {:?}", e);
        }
        let rps: BTreeSet<DagEdgeId> = c.hot.iter().map(|p| *p.last().unwrap()).collect();
        let mut obvious_numbers = BTreeSet::new();
        // Past a counter's edge the path must have one way on, or flow could leave it.
        let one_way = |v| v == c.dag.exit() || c.dag.succs(v).len() == 1;
        let sealed = |p: &[DagEdgeId], i: usize| p[i..].iter().all(|&e| one_way(c.dag.edge(e).dst));
        for &rp in &rps {
            let into: Vec<&Vec<DagEdgeId>> = c.hot.iter().filter(|p| p.last() == Some(&rp)).collect();
            let obvious = into.iter().all(|p| p.iter().any(|e| ob.defining[e.index()]));
            prop_assert_eq!(ob.obvious[rp.index()], obvious, "Fig. 8 on {:?}", rp);
            let countable = into.iter().all(|p| {
                (0..p.len()).any(|i| ob.defining[p[i].index()] && sealed(p, i))
            });
            let dead = is_dead_end(&c.dag, rp);
            prop_assert_eq!(!ob.records(rp), countable || dead, "recording point {:?}", rp);
            if countable && !dead {
                obvious_numbers.extend(into.iter().map(|p| number(&c.num, p)));
            }
        }
        let counted: BTreeSet<u64> = ob.paths.iter().map(|o| o.number).collect();
        prop_assert_eq!(&counted, &obvious_numbers);
        prop_assert_eq!(counted.len(), ob.paths.len(), "one counter per obvious path");
        for o in &ob.paths {
            prop_assert!(ob.defining[o.counter.index()]);
            let p = c.hot.iter().find(|p| number(&c.num, p) == o.number).unwrap();
            let i = p.iter().position(|&e| e == o.counter);
            prop_assert!(i.is_some_and(|i| sealed(p, i)), "counter on its own path, sealed");
        }
        for (e, _) in c.dag.edges() {
            let keeps = c.hot.iter().any(|p| p.contains(&e) && ob.records(*p.last().unwrap()));
            prop_assert_eq!(ob.removed[e.index()], c.num.is_hot(e) && !keeps, "removed {:?}", e);
        }
        // Every recording point keeping its code sees only register values of its paths.
        for p in c.hot.iter().filter(|p| ob.records(*p.last().unwrap())) {
            prop_assert!(p.iter().all(|&e| !ob.is_removed(e)));
        }
    }

    /// Whatever edges can hold counters, the recorded paths plus the obvious-path counters
    /// give back the exact path profile.
    #[test]
    fn reconstruction_is_exact(
        cfg in graph(),
        cold_bits in prop::collection::vec(prop::bool::weighted(0.15), 0..20),
        placeable in prop::collection::vec(prop::option::weighted(0.7, 0u32..4), 1..16),
        runs in prop::collection::vec(0u64..50, 1..64),
        stale in prop::sample::select(vec![POISON, 0, 3, 12_345]),
    ) {
        let Some(c) = case(&cfg, &cold_bits) else { return Ok(()) };
        let ob = eliminate_obvious(&c.dag, &c.num, &|e| placeable[e.index() % placeable.len()]);
        let runs: Vec<u64> = (0..c.all.len()).map(|i| runs[i % runs.len()]).collect();
        let mut truth: BTreeMap<u64, u64> = BTreeMap::new();
        let mut cold = 0;
        for (p, &n) in c.all.iter().zip(&runs) {
            if n == 0 || is_dead_end(&c.dag, *p.last().unwrap()) {
                continue;
            }
            if p.iter().all(|&e| c.num.is_hot(e)) {
                *truth.entry(number(&c.num, p)).or_default() += n;
            } else {
                cold += n;
            }
        }
        prop_assert_eq!(replay(&c, &ob, &runs, stale), (truth, cold));
        for o in &ob.paths {
            prop_assert!(placeable[o.counter.index() % placeable.len()].is_some());
        }
    }
}

/// A loop whose body is one straight path: the iteration path is obvious (its back edge is
/// defining) and so is the path into the loop, while the exit side, reached along two
/// paths without a defining edge, keeps its code.
#[test]
fn straight_loop_body_is_obvious() {
    // 0 → 2 (header) → 3 → 2 (back edge) ; 3 → 4 ; 0 → 4 ; 4 → 1 (exit)
    let mut cfg = Cfg::new();
    let (h, b, j) = (cfg.add_node(), cfg.add_node(), cfg.add_node());
    cfg.add_edge(cfg.entry(), h);
    cfg.add_edge(h, b);
    let back = cfg.add_edge(b, h);
    cfg.add_edge(b, j);
    cfg.add_edge(cfg.entry(), j);
    cfg.add_edge(j, cfg.exit());
    let c = case(&cfg, &[]).unwrap();
    let ob = eliminate_obvious(&c.dag, &c.num, &|_| Some(1));
    let back = c.dag.real_edge(back).unwrap();
    assert!(ob.defining[back.index()]);
    let split_exit = c
        .dag
        .edges()
        .find(|(_, de)| matches!(de.kind, DagEdgeKind::SplitExit(_)))
        .unwrap()
        .0;
    assert!(
        !ob.records(split_exit),
        "the header's recording point is obvious"
    );
    // Paths to the function exit: ENTRY→j→X and h_b→b→j→X; j's in-edges are the only
    // candidates and both are defining, so the exit is obvious too.
    let exit_rp = *c
        .hot
        .iter()
        .find(|p| number(&c.num, p) == 0)
        .unwrap()
        .last()
        .unwrap();
    assert!(!ob.records(exit_rp));
    assert_eq!(ob.paths.len(), c.hot.len());
    assert!(ob
        .removed
        .iter()
        .zip(c.dag.edges())
        .all(|(&r, (e, _))| r == c.num.is_hot(e)));
}

/// Two diamonds in a row: four paths, no edge on only one of them, nothing is obvious.
#[test]
fn diamond_ladder_has_no_obvious_path() {
    let cfg = pepper_cfg::testgen::diamond_ladder(2);
    let c = case(&cfg, &[]).unwrap();
    let ob = eliminate_obvious(&c.dag, &c.num, &|_| Some(1));
    assert!(ob.paths.is_empty());
    assert!(ob.silent.iter().all(|&s| !s));
    assert!(ob.removed.iter().all(|&r| !r));
}
