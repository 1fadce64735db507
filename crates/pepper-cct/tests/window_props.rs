//! Property: replaying a call log backwards from the stack it ends at places every call of
//! the log in its exact context. Random executions of a random program (direct and
//! indirect call sites) log what the guest logs (`func` at each entry, `site | RET` at
//! each return); the replay's per-context counts must equal the brute-force ones, for the
//! whole log and for any suffix of it (a window), each stretch standing for itself.

use pepper_cct::window::RET;
use pepper_cct::{EdgeMode, Pcct, Replay, SiteInfo, VecStack, NO_SITE, ROOT};
use proptest::prelude::*;
use std::collections::HashMap;

const FUNCS: u32 = 5;

/// Sites: 3 per function; site `3f + k` calls `(f + k + 1) % FUNCS` directly for k < 2, and
/// k = 2 is indirect (its callee picked at run time).
fn sites() -> Vec<SiteInfo> {
    (0..FUNCS * 3)
        .map(|s| SiteInfo {
            caller: s / 3,
            callee: (s % 3 < 2).then_some((s / 3 + s % 3 + 1) % FUNCS),
        })
        .collect()
}

type Ctx = Vec<(u32, u32)>;

proptest! {
    #[test]
    fn replay_places_every_call_in_its_context(
        ops in prop::collection::vec((0u32..3, 0u32..FUNCS, prop::bool::weighted(0.45)), 1..300),
        window in 0usize..400,
    ) {
        let sites = sites();
        // Model: (site into the frame, func) per frame, the log, and each entry's context.
        let mut stack: Vec<(u32, u32)> = vec![(NO_SITE, 0)];
        let mut log: Vec<u32> = Vec::new();
        let mut contexts: Vec<Option<Ctx>> = Vec::new();
        for (k, target, ret) in ops {
            if ret {
                if stack.len() > 1 {
                    let (site, _) = stack.pop().unwrap();
                    log.push(site | RET);
                    contexts.push(None);
                }
            } else {
                let caller = stack.last().unwrap().1;
                let site = 3 * caller + k;
                let callee = sites[site as usize].callee.unwrap_or(target);
                stack.push((site, callee));
                log.push(callee);
                contexts.push(Some(stack.clone()));
            }
        }
        // The sample: the model stack as Whaley's walk sees it.
        let mut p = Pcct::new(1 << 16, 1 << 10, EdgeMode::StrictNewEdges, FUNCS as usize);
        let mut s = VecStack::default();
        s.push(stack[0].1);
        for w in stack.windows(2) {
            s.call(w[1].0, w[1].1);
        }
        prop_assert!(p.sample(&mut s, 1));
        let from = log.len() - window.min(log.len());
        let mut r = Replay::default();
        let placed = p.replay_calls(&log[from..], &sites, 0, &mut r);
        let mut want: HashMap<Ctx, u64> = HashMap::new();
        for c in contexts[from..].iter().flatten() {
            *want.entry(c.clone()).or_default() += 1;
        }
        prop_assert_eq!(placed, want.values().sum::<u64>());
        prop_assert_eq!(r.cut, 0);
        let mut got: HashMap<Ctx, u64> = HashMap::new();
        for (i, n) in p.tree.nodes().skip(1) {
            if n.window_calls > 0 {
                got.insert(p.tree.context(i), n.window_calls);
            }
        }
        prop_assert_eq!(got, want);
        prop_assert_eq!(p.tree.node(ROOT).window_calls, 0);
    }
}
