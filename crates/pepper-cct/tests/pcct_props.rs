//! Property: with a walk buffer deep enough for every stack, Whaley's marker-bounded walk
//! loses nothing. Every sample's weight lands on the context of its full stack (as a full
//! stack walk would find it), and in strict mode each context's edge weight is the weight of
//! the samples in which an activation of it was new (never seen by an earlier sample).

use pepper_cct::{EdgeMode, Pcct, VecStack, NO_SITE, ROOT};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

#[derive(Clone, Debug)]
enum Op {
    Call { site: u32, func: u32 },
    Return,
    Sample { weight: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u32..4, 0u32..4).prop_map(|(site, func)| Op::Call { site, func }),
        3 => Just(Op::Return),
        2 => (1u64..5).prop_map(|weight| Op::Sample { weight }),
    ]
}

type Ctx = Vec<(u32, u32)>;

proptest! {
    #[test]
    fn marker_walk_equals_full_walk(ops in prop::collection::vec(op(), 1..200)) {
        let mut p = Pcct::new(1 << 20, 1 << 10, EdgeMode::StrictNewEdges, 4);
        let mut s = VecStack::default();
        s.push(0);
        // Brute force: the model stack with activation ids.
        let mut model: Vec<(u32, u32, u64)> = vec![(NO_SITE, 0, 0)];
        let mut next_id = 1u64;
        let mut seen: HashSet<u64> = HashSet::new();
        let mut self_w: HashMap<Ctx, u64> = HashMap::new();
        let mut edge_w: HashMap<Ctx, u64> = HashMap::new();
        for op in ops {
            match op {
                Op::Call { site, func } => {
                    s.call(site, func);
                    model.push((site, func, next_id));
                    next_id += 1;
                }
                Op::Return => {
                    if model.len() > 1 {
                        s.pop();
                        model.pop();
                    }
                }
                Op::Sample { weight } => {
                    p.sample(&mut s, weight);
                    let mut ctx: Ctx = Vec::new();
                    for &(site, func, id) in &model {
                        ctx.push((site, func));
                        if seen.insert(id) {
                            *edge_w.entry(ctx.clone()).or_default() += weight;
                        }
                    }
                    *self_w.entry(ctx).or_default() += weight;
                }
            }
        }
        let mut got_self: HashMap<Ctx, u64> = HashMap::new();
        let mut got_edge: HashMap<Ctx, u64> = HashMap::new();
        for (n, node) in p.tree.nodes() {
            if n == ROOT {
                continue;
            }
            if node.self_weight > 0 {
                got_self.insert(p.tree.context(n), node.self_weight);
            }
            if node.edge_weight > 0 {
                got_edge.insert(p.tree.context(n), node.edge_weight);
            }
        }
        prop_assert_eq!(got_self, self_w);
        prop_assert_eq!(got_edge, edge_w);
        prop_assert_eq!(p.detached, 0);
    }
}
