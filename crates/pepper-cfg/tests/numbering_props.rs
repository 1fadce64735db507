//! Property tests on random CFGs (numbering is a bijection, regeneration inverts it, edge values sum to path numbers, smart numbering keeps both).

use pepper_cfg::testgen::{diamond_ladder, enumerate_paths, random_cfg};
use pepper_cfg::{number_with_limit, Cfg, PathDag, PathNumbering, REGISTER_PATH_LIMIT};
use proptest::prelude::*;
use std::collections::BTreeSet;

fn numbered(cfg: &Cfg, freq: Option<Vec<u64>>) -> (PathDag, PathNumbering) {
    let headers = cfg.dfs_back_edge_targets();
    let dag = PathDag::build(cfg, &headers).expect("splitting DFS back-edge targets is acyclic");
    dag.verify().expect("dag invariants");
    let freq = freq.map(|f| {
        (0..dag.num_edges())
            .map(|i| f[i % f.len()])
            .collect::<Vec<_>>()
    });
    let num = PathNumbering::new(&dag, freq.as_deref(), u64::MAX).expect("small graphs fit");
    num.verify(&dag).expect("numbering invariants");
    (dag, num)
}

fn graph() -> impl Strategy<Value = Cfg> {
    (
        3usize..12,
        prop::collection::vec((0usize..12, 0usize..12), 1..30),
        prop::collection::vec(2usize..12, 0..3),
    )
        .prop_map(|(n, edges, dead)| random_cfg(n, &edges, &dead))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Test 1 + 4: numbers are unique and dense, and regeneration round-trips.
    #[test]
    fn unique_dense_and_round_trip(cfg in graph(), freq in prop::option::of(prop::collection::vec(0u64..100, 1..8))) {
        let (dag, num) = numbered(&cfg, freq);
        let paths = enumerate_paths(&dag, 20_000);
        prop_assume!(paths.len() < 20_000);
        let mut seen = BTreeSet::new();
        for p in &paths {
            let sum: u64 = p.iter().map(|&e| num.val(e)).sum();
            prop_assert!(seen.insert(sum), "duplicate path number {}", sum);
            prop_assert_eq!(&num.regenerate(&dag, sum).unwrap(), p);
        }
        prop_assert_eq!(seen.len() as u64, num.total());
        prop_assert_eq!(seen.iter().copied().collect::<Vec<_>>(), (0..num.total()).collect::<Vec<_>>());
        prop_assert!(num.regenerate(&dag, num.total()).is_err());
    }

    /// TPP cold path elimination: with some edges cold, exactly the paths avoiding them are
    /// numbered, uniquely and densely, and round-trip; every edge on a hot path is hot and
    /// every other edge is cold (transitive coldness), so code that poisons on cold edges
    /// never lets a path through one reach a valid number.
    #[test]
    fn pruned_numbering_numbers_exactly_the_hot_paths(
        cfg in graph(),
        cold_bits in prop::collection::vec(any::<bool>(), 1..40),
    ) {
        let headers = cfg.dfs_back_edge_targets();
        let dag = PathDag::build(&cfg, &headers).expect("acyclic");
        let cold: Vec<bool> = (0..dag.num_edges()).map(|i| cold_bits[i % cold_bits.len()]).collect();
        let num = PathNumbering::new_pruned(&dag, None, u64::MAX, Some(&cold)).expect("fits");
        num.verify(&dag).expect("numbering invariants");
        let all = enumerate_paths(&dag, 20_000);
        prop_assume!(all.len() < 20_000);
        let hot: Vec<&Vec<pepper_cfg::DagEdgeId>> =
            all.iter().filter(|p| p.iter().all(|e| !cold[e.index()])).collect();
        let mut seen = BTreeSet::new();
        for p in &hot {
            prop_assert!(p.iter().all(|&e| num.is_hot(e)));
            let sum: u64 = p.iter().map(|&e| num.val(e)).sum();
            prop_assert!(seen.insert(sum), "duplicate path number {}", sum);
            prop_assert_eq!(&num.regenerate(&dag, sum).unwrap(), *p);
        }
        prop_assert_eq!(seen.len() as u64, num.total());
        let on_hot: BTreeSet<_> = hot.iter().flat_map(|p| p.iter().copied()).collect();
        for (e, _) in dag.edges() {
            prop_assert_eq!(num.is_hot(e), on_hot.contains(&e), "edge {:?}", e);
        }
    }

    /// Edge counts from path counts, by runs of sorted numbers, equal the sums of walking
    /// every path (numbers out of range skipped, repeated numbers adding up).
    #[test]
    fn edge_counts_equal_the_walks(
        cfg in graph(),
        picks in prop::collection::vec((0u64..1_000, 1u64..50), 0..40),
    ) {
        let (dag, num) = numbered(&cfg, None);
        let paths: Vec<(u64, u64)> = picks
            .iter()
            .map(|&(r, c)| (r % (num.total() + 2), c))
            .collect();
        let mut walked = vec![0u64; dag.num_edges()];
        for &(r, c) in &paths {
            if r < num.total() {
                num.for_each_edge(&dag, r, |e| walked[e.index()] += c).unwrap();
            } else {
                let refused = num.for_each_edge(&dag, r, |_| ()).is_err();
                prop_assert!(refused, "path {} of {} walked", r, num.total());
            }
        }
        prop_assert_eq!(num.edge_counts(&dag, &paths), walked);
    }

    /// Test 5: every prefix regenerates from its prefix sum and location.
    #[test]
    fn partial_round_trip(cfg in graph()) {
        let (dag, num) = numbered(&cfg, None);
        let paths = enumerate_paths(&dag, 2_000);
        for p in &paths {
            let mut sum = 0;
            for (i, &e) in p.iter().enumerate() {
                sum += num.val(e);
                let at = dag.edge(e).dst;
                prop_assert_eq!(&num.regenerate_partial(&dag, sum, at).unwrap()[..], &p[..=i]);
            }
        }
    }

    /// Test 2: smart numbering gives the hottest out-edge of every vertex value 0.
    #[test]
    fn smart_numbering_zero_on_hottest(cfg in graph(), freq in prop::collection::vec(0u64..1000, 1..8)) {
        let (dag, num) = numbered(&cfg, Some(freq.clone()));
        let f: Vec<u64> = (0..dag.num_edges()).map(|i| freq[i % freq.len()]).collect();
        for &v in dag.topo() {
            let succs = dag.succs(v);
            if let Some(&hot) = succs.iter().max_by_key(|e| (f[e.index()], std::cmp::Reverse(e.index()))) {
                prop_assert_eq!(num.val(hot), 0);
            }
        }
    }

    /// Truncation always produces a numbering under the limit that still round-trips.
    #[test]
    fn truncation_respects_limit(cfg in graph(), limit in 1u64..6) {
        let headers = cfg.dfs_back_edge_targets();
        let Ok(nd) = number_with_limit(&cfg, &headers, &[], None, limit) else {
            // Only allowed when even splitting every node cannot get under the limit.
            let all: Vec<_> = cfg.nodes().filter(|&n| n != cfg.entry()).collect();
            let mut splits = headers.clone();
            splits.extend(all);
            let dag = PathDag::build(&cfg, &splits).unwrap();
            prop_assert!(PathNumbering::new(&dag, None, u64::MAX).unwrap().total() > limit);
            return Ok(());
        };
        prop_assert!(nd.numbering.total() <= limit);
        nd.numbering.verify(&nd.dag).unwrap();
        for r in 0..nd.numbering.total() {
            nd.numbering.regenerate(&nd.dag, r).unwrap();
        }
    }
}

/// Test 17: 64 and 70 stacked diamonds (2^64 and 2^70 paths) are truncated, never wrapped.
#[test]
fn huge_path_counts_are_truncated() {
    for k in [64, 70, 200] {
        let cfg = diamond_ladder(k);
        assert!(PathNumbering::new(&PathDag::build(&cfg, &[]).unwrap(), None, u64::MAX).is_err());
        let nd = number_with_limit(&cfg, &[], &[], None, REGISTER_PATH_LIMIT).unwrap();
        assert!(nd.numbering.total() <= REGISTER_PATH_LIMIT);
        assert!(!nd.truncated.is_empty());
        nd.numbering.verify(&nd.dag).unwrap();
        let last = nd.numbering.total() - 1;
        assert_eq!(
            nd.numbering
                .regenerate(&nd.dag, last)
                .unwrap()
                .last()
                .map(|&e| nd.dag.edge(e).dst),
            Some(nd.dag.exit())
        );
    }
}

/// A body of many thousand stacked conditionals (a big C `switch` lowered to blocks, a
/// generated parser) needs hundreds of cuts. They are made in one pass rather than one
/// rebuild of the function each, yet stay within twice the fewest that fit: each run of
/// diamonds between two cuts holds at most 61 of them (2^61 paths under the limit).
#[test]
fn many_cuts_are_made_in_one_pass_and_stay_few() {
    let k = 20_000;
    let cfg = diamond_ladder(k);
    let nd = number_with_limit(&cfg, &[], &[], None, REGISTER_PATH_LIMIT).unwrap();
    nd.numbering.verify(&nd.dag).unwrap();
    assert!(nd.numbering.total() <= REGISTER_PATH_LIMIT);
    let fewest = k / 62;
    assert!(
        nd.truncated.len() >= fewest && nd.truncated.len() <= 2 * fewest + 8,
        "{} cuts for {k} diamonds (fewest {fewest})",
        nd.truncated.len()
    );
}

/// A worked example: four paths, with path 3 one loop iteration.
#[test]
fn worked_example() {
    let mut cfg = Cfg::new();
    let (en, ex) = (cfg.entry(), cfg.exit());
    let (a, b, c, h, d, x) = (
        en,
        cfg.add_node(),
        cfg.add_node(),
        cfg.add_node(),
        cfg.add_node(),
        cfg.add_node(),
    );
    cfg.add_edge(a, b);
    cfg.add_edge(a, c);
    cfg.add_edge(b, h);
    cfg.add_edge(c, h);
    cfg.add_edge(h, x);
    cfg.add_edge(h, d);
    cfg.add_edge(d, h);
    cfg.add_edge(x, ex);
    assert_eq!(cfg.dfs_back_edge_targets(), vec![h]);
    let nd = number_with_limit(&cfg, &[h], &[], None, u64::MAX).unwrap();
    assert_eq!(nd.numbering.total(), 4);
    assert!(nd.truncated.is_empty());
}
