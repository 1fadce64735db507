//! A continuous profile's last stretch: what a run counted between two snapshots of its
//! profile (`pepper serve`'s live endpoint answers "the last N seconds" this way).

use crate::contexts::{ContextNode, Contexts};
use crate::model::Profile;
use std::collections::HashMap;

impl Profile {
    /// What this profile counted after `earlier`, a snapshot of the same run taken before
    /// it: every count less the earlier one's. Branches and call sites are matched by
    /// position and place, paths by function and number, context nodes by their chain of
    /// (call site, function) from the root, as `merge` matches them. A count the earlier
    /// profile does not have is kept whole; paths that did not run since are left out.
    pub fn since(&self, earlier: &Profile) -> Profile {
        let mut out = self.clone();
        for (b, e) in out.branches.iter_mut().zip(&earlier.branches) {
            if (b.func, b.offset) == (e.func, e.offset) {
                for (x, y) in b.counts.iter_mut().zip(&e.counts) {
                    *x = x.saturating_sub(*y);
                }
            }
        }
        let before: HashMap<(u32, u64), u64> = (earlier.paths.iter())
            .map(|p| ((p.func, p.number), p.count))
            .collect();
        for p in &mut out.paths {
            p.count = p
                .count
                .saturating_sub(*before.get(&(p.func, p.number)).unwrap_or(&0));
        }
        out.paths.retain(|p| p.count > 0);
        if let (Some(s), Some(e)) = (&mut out.sampling, &earlier.sampling) {
            let mut e = e.clone();
            for (x, y) in s.counts_mut().into_iter().zip(e.counts_mut()) {
                *x = x.saturating_sub(*y);
            }
        }
        if let (Some(c), Some(e)) = (&mut out.contexts, &earlier.contexts) {
            c.subtract(e);
        }
        out.run.run_ms = (out.run.run_ms - earlier.run.run_ms).max(0.0);
        // A stretch of a run has no time line of its own to speak of.
        out.timeline = None;
        out.phases = None;
        out
    }
}

impl Contexts {
    /// Takes `e`'s counts (an earlier snapshot of the same tree) off this tree's.
    fn subtract(&mut self, e: &Contexts) {
        for (x, y) in self.call_sites.iter_mut().zip(&e.call_sites) {
            if (x.func, x.offset) == (y.func, y.offset) {
                x.calls = x.calls.saturating_sub(y.calls);
            }
        }
        // This tree's nodes by (parent, site, function, detached); the earlier tree's
        // parents come before their children, so each maps to one of ours in one pass.
        let index: HashMap<(u32, Option<u32>, u32, bool), u32> = (self.nodes.iter().enumerate())
            .filter_map(|(i, n)| Some(((n.parent?, n.site, n.func, n.detached), i as u32)))
            .collect();
        let mut map: Vec<Option<u32>> = vec![None; e.nodes.len()];
        let take = |m: &mut ContextNode, n: &ContextNode| {
            m.calls = m.calls.saturating_sub(n.calls);
            m.self_us = m.self_us.saturating_sub(n.self_us);
            m.edge_us = m.edge_us.saturating_sub(n.edge_us);
        };
        if let (Some(r), Some(s)) = (self.nodes.first_mut(), e.nodes.first()) {
            take(r, s);
            map[0] = Some(0);
        }
        for (i, n) in e.nodes.iter().enumerate().skip(1) {
            let parent = n
                .parent
                .and_then(|p| map.get(p as usize).copied().flatten());
            let at = parent.and_then(|p| index.get(&(p, n.site, n.func, n.detached)).copied());
            if let Some(at) = at {
                take(&mut self.nodes[at as usize], n);
            }
            map[i] = at;
        }
        let hot: HashMap<u32, u64> = (e.hot_functions.iter())
            .map(|h| (h.func, h.self_us))
            .collect();
        for h in &mut self.hot_functions {
            h.self_us = h.self_us.saturating_sub(*hot.get(&h.func).unwrap_or(&0));
        }
        self.hot_functions.retain(|h| h.self_us > 0);
        self.hot_functions
            .sort_by_key(|h| (std::cmp::Reverse(h.self_us), h.func));
        if let (Some(x), Some(y)) = (&mut self.sampling, &e.sampling) {
            for (a, b) in [
                (&mut x.samples, y.samples),
                (&mut x.detached, y.detached),
                (&mut x.truncated, y.truncated),
                (&mut x.in_host, y.in_host),
                (&mut x.empty, y.empty),
                (&mut x.torn, y.torn),
            ] {
                *a = a.saturating_sub(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::contexts::ContextKind;
    use crate::testing::{branch, node, path, profile, tree};

    #[test]
    fn the_last_stretch_is_the_difference_of_two_snapshots() {
        let mut before = profile(
            vec![branch(0, &[10, 5])],
            vec![path(0, 7, &[]), path(1, 3, &[])],
        );
        // Root, f at site 0, g under f at site 1.
        let nodes = |f: u64, g: u64| {
            vec![
                node(None, u32::MAX, None, 0, 0),
                node(Some(0), 1, Some(0), f, f * 10),
                node(Some(1), 2, Some(1), g, g * 10),
            ]
        };
        before.contexts = Some(tree(ContextKind::Sampled, nodes(2, 1), &[(1, 20), (2, 10)]));
        let mut after = profile(
            vec![branch(0, &[25, 5])],
            vec![path(0, 7, &[]), path(1, 9, &[])],
        );
        let mut c = tree(ContextKind::Sampled, nodes(5, 1), &[(1, 50), (2, 10)]);
        // A context first seen after the earlier snapshot: kept whole.
        c.nodes.push(node(Some(0), 3, Some(2), 4, 40));
        after.contexts = Some(c);
        let d = after.since(&before);
        assert_eq!(d.branches[0].counts, [15, 0]);
        assert_eq!(d.paths.len(), 1, "path 0 did not run since");
        assert_eq!((d.paths[0].number, d.paths[0].count), (1, 6));
        let c = d.contexts.unwrap();
        let calls: Vec<(u32, u64, u64)> = (c.nodes.iter())
            .map(|n| (n.func, n.calls, n.self_us))
            .collect();
        assert_eq!(calls, [(u32::MAX, 0, 0), (1, 3, 30), (2, 0, 0), (3, 4, 40)]);
        let hot: Vec<(u32, u64)> = c
            .hot_functions
            .iter()
            .map(|h| (h.func, h.self_us))
            .collect();
        assert_eq!(hot, [(1, 30)], "g took no time since");
        // Nothing since: nothing left.
        let none = after.since(&after);
        assert!(none.paths.is_empty() && none.branches[0].counts == [0, 0]);
    }
}
