//! Call counts for every context from a sampled tree and exact per-call-site counts.
//!
//! Timer samples see where time goes, not how often calls happen: a context whose calls
//! are frequent but short is rarely on the stack when the timer fires, so a sampled tree
//! alone misses most contexts that matter by call count (Zhuang et al.'s finding for
//! stack-walk sampling). pepper also counts every call site
//! exactly (one increment per call), which pins down the first level of context. This
//! module combines the two. Walking the tree from the root, the calls of site `s` (in
//! function `F`, to callee `g`) made from context `n` of `F` are estimated as
//!
//! ```text
//! est(n·(s,g)) = N(s,g) · [ α · share_sampled + (1 − α) · est(n) / calls_into(F) ]
//! ```
//!
//! where `share_sampled` is the context's share of the sampled weight of `(s,g)` (its edge
//! weight over all contexts of `(s,g)`), the second term is the context-insensitive (gprof)
//! share, and `α = W/(W + k·unit)` trusts the samples more the more of them `(s,g)` has.
//! Contexts the samples never saw are thus still estimated, from the exact counts below
//! them, and contexts they saw often follow the samples. When the tree carries call
//! windows ([`crate::window`]), `share_sampled` is the context's share of the calls of
//! `(s,g)` seen in windows, which counts calls rather than time. Indirect sites split their count
//! among the callees seen there in proportion to sampled weight.

use crate::tree::{ContextTree, NodeIdx, ROOT};
use std::collections::{HashMap, VecDeque};

/// One call site with its exact count.
#[derive(Copy, Clone, Debug)]
pub struct SiteCount {
    pub caller: u32,
    /// Direct calls name their callee; indirect ones are split among possible callees.
    pub callee: Option<u32>,
    pub calls: u64,
    /// An indirect call's signature: it can only reach functions with the same one.
    pub sig: Option<u32>,
}

/// The exact entry count of a function that indirect calls may reach.
#[derive(Copy, Clone, Debug)]
pub struct EntryCount {
    pub func: u32,
    pub calls: u64,
    pub sig: u32,
}

/// Knobs of [`complete`].
#[derive(Copy, Clone, Debug)]
#[non_exhaustive]
pub struct CompleteOptions {
    /// Sampled weight worth one sample (the sampling period, in the weight's unit).
    pub unit: u64,
    /// Window weight worth one observed call (see [`crate::window`]).
    pub call_unit: u64,
    /// Samples at which the sampled share and the gprof share weigh the same.
    pub k: f64,
    /// Contexts estimated below this many calls are not added.
    pub min_calls: f64,
    /// Most nodes the completed tree may hold.
    pub budget: usize,
    /// Deepest context added.
    pub max_depth: usize,
}

impl Default for CompleteOptions {
    fn default() -> Self {
        CompleteOptions {
            unit: 1,
            call_unit: 1,
            k: 4.0,
            min_calls: 0.5,
            budget: 200_000,
            max_depth: 256,
        }
    }
}

/// The sampled tree extended with estimated contexts, and estimated calls per node (nodes
/// of `tree` keep their indices; added nodes follow).
pub fn complete(
    tree: &ContextTree,
    sites: &[SiteCount],
    entries: &[EntryCount],
    opts: &CompleteOptions,
) -> (ContextTree, Vec<f64>) {
    // The sampled tree, same indices, with room for the contexts estimated below.
    let mut out = tree.clone();
    out.raise_budget(opts.budget);

    let (weight, windowed) = sampled_calls(tree, sites.len());
    let (unit, call_unit) = (opts.unit.max(1) as f64, opts.call_unit.max(1) as f64);
    let callees = site_callees(sites, entries, &weight);
    let mut calls_into: HashMap<u32, f64> = HashMap::new();
    let mut sites_of: HashMap<u32, Vec<u32>> = HashMap::new();
    for (s, site) in sites.iter().enumerate() {
        sites_of.entry(site.caller).or_default().push(s as u32);
        for &(g, n) in &callees[s] {
            *calls_into.entry(g).or_default() += n;
        }
    }

    let (incl, fn_incl) = inclusive(&out);
    let mut est = vec![0.0f64; out.len()];
    let mut queue: VecDeque<(NodeIdx, usize)> = VecDeque::new();
    // Outermost frames: entered from the host once per activation we know of; detached
    // roots get their function's share of its calls by sampled weight.
    let mut fn_weight: HashMap<u32, u64> = HashMap::new();
    for (_, n) in out.nodes().skip(1) {
        *fn_weight.entry(n.func).or_default() += n.edge_weight;
    }
    let roots: Vec<NodeIdx> = out.children(ROOT).collect();
    for r in roots {
        let n = out.node(r);
        est[r.index()] = if n.detached() {
            calls_into.get(&n.func).copied().unwrap_or(0.0) * n.edge_weight as f64
                / fn_weight.get(&n.func).copied().unwrap_or(1).max(1) as f64
        } else {
            calls_into.get(&n.func).copied().unwrap_or(0.0).max(1.0)
        };
        queue.push_back((r, 1));
    }
    while let Some((n, depth)) = queue.pop_front() {
        let f = out.node(n).func;
        let into = calls_into.get(&f).copied().unwrap_or(0.0).max(1.0);
        let here = est[n.index()];
        // This context's share of f's calls: by sampled time where f was sampled enough,
        // by its own estimated calls (gprof) otherwise.
        let t = fn_incl.get(&f).copied().unwrap_or(0.0);
        let beta = if t > 0.0 {
            t / (t + opts.k * unit)
        } else {
            0.0
        };
        let time_share = if t > 0.0 {
            incl.get(n.index()).copied().unwrap_or(0.0) / t
        } else {
            0.0
        };
        let prior = beta * time_share + (1.0 - beta) * here / into;
        // Sampled frames entered from code without call-site counts (another core module
        // of a component: an adapter that runs the program's entry or calls back into
        // it) count like outermost frames: their function's known calls by sampled
        // weight, at least the one the sample saw.
        let unsited: Vec<NodeIdx> = out
            .children(n)
            .filter(|&c| out.node(c).site as usize >= sites.len())
            .collect();
        for c in unsited {
            let cn = out.node(c);
            est[c.index()] = (calls_into.get(&cn.func).copied().unwrap_or(0.0)
                * cn.edge_weight as f64
                / fn_weight.get(&cn.func).copied().unwrap_or(1).max(1) as f64)
                .max(1.0);
            queue.push_back((c, depth + 1));
        }
        let Some(fsites) = sites_of.get(&f) else {
            continue;
        };
        for &s in fsites {
            for &(g, n_sg) in &callees[s as usize] {
                let existing = out.find_child(n, s, g);
                let (w, sampled, unit) = match windowed.get(&(s, g)) {
                    Some(&w) => (
                        w as f64,
                        existing.map_or(0.0, |c| out.node(c).window_calls as f64),
                        call_unit,
                    ),
                    None => (
                        weight.get(&(s, g)).copied().unwrap_or(0) as f64,
                        existing.map_or(0.0, |c| out.node(c).edge_weight as f64),
                        unit,
                    ),
                };
                let alpha = if w > 0.0 {
                    w / (w + opts.k * unit)
                } else {
                    0.0
                };
                let share = if w > 0.0 { sampled / w } else { 0.0 };
                let e = n_sg * (alpha * share + (1.0 - alpha) * prior);
                let child = match existing {
                    Some(c) => c,
                    None if e >= opts.min_calls && depth < opts.max_depth => {
                        match out.new_child(n, s, g) {
                            Some(c) => c,
                            None => continue,
                        }
                    }
                    None => continue,
                };
                if child.index() >= est.len() {
                    est.resize(child.index() + 1, 0.0);
                }
                est[child.index()] = e;
                queue.push_back((child, depth + 1));
            }
        }
    }
    est.resize(out.len(), 0.0);
    (out, est)
}

/// A weight per (call site, callee).
type PairWeights = HashMap<(u32, u32), u64>;

/// Sampled weight per (site, callee), and calls seen in call windows per (site, callee).
/// Where windows saw a (site, callee) pair, they split its calls among its contexts by
/// number; timer samples' edge weights split them by time otherwise (pairs called long
/// before any window, such as the program's outer frames, are seen only by the timer).
fn sampled_calls(tree: &ContextTree, num_sites: usize) -> (PairWeights, PairWeights) {
    let mut weight: PairWeights = HashMap::new();
    let mut windowed: PairWeights = HashMap::new();
    for (_, n) in tree.nodes().skip(1) {
        if (n.site as usize) < num_sites {
            *weight.entry((n.site, n.func)).or_default() += n.edge_weight;
            if n.window_calls > 0 {
                *windowed.entry((n.site, n.func)).or_default() += n.window_calls;
            }
        }
    }
    (weight, windowed)
}

/// Each site's callees with their estimated calls: a direct site's exact count; an
/// indirect site's split by the callees samples saw it call, then resolved against the
/// exact entry counts (`resolve_indirect`).
fn site_callees(
    sites: &[SiteCount],
    entries: &[EntryCount],
    weight: &PairWeights,
) -> Vec<Vec<(u32, f64)>> {
    let mut callees: Vec<Vec<(u32, f64)>> = sites
        .iter()
        .map(|s| match s.callee {
            Some(g) => vec![(g, s.calls as f64)],
            None => Vec::new(),
        })
        .collect();
    let mut seen: HashMap<u32, Vec<(u32, u64)>> = HashMap::new();
    let mut elsewhere: HashMap<u32, Vec<(u32, u64)>> = HashMap::new();
    for (&(s, g), &w) in weight {
        match sites[s as usize].callee {
            None => seen.entry(s).or_default().push((g, w)),
            Some(callee) if callee != g => elsewhere.entry(s).or_default().push((g, w)),
            Some(_) => {}
        }
    }
    // A site's exact count split among the callees samples saw it call, by weight.
    let split = |s: u32, gs: &[(u32, u64)]| -> Vec<(u32, f64)> {
        let total: u64 = gs.iter().map(|x| x.1).sum::<u64>().max(1);
        let n = sites[s as usize].calls as f64;
        gs.iter()
            .map(|&(g, w)| (g, n * w as f64 / total as f64))
            .collect()
    };
    // A direct call that samples only ever saw land in other functions calls an import
    // that wasm code implements (another core module of a component: the adapter's
    // `fd_write` behind the program's import), or tail-called on: its calls go where
    // the samples saw them go.
    for (&s, gs) in &mut elsewhere {
        let callee = sites[s as usize].callee.expect("a direct site");
        if !weight.contains_key(&(s, callee)) {
            gs.sort_unstable();
            callees[s as usize] = split(s, gs);
        }
    }
    for (&s, gs) in &seen {
        callees[s as usize] = split(s, gs);
    }
    resolve_indirect(sites, entries, &seen, &mut callees);
    callees
}

/// Sampled inclusive time of each node and, per function, over all its contexts: how a
/// function's own calls split among its contexts when samples show where it spends its
/// time but not which call sites it used there.
fn inclusive(out: &ContextTree) -> (Vec<f64>, HashMap<u32, f64>) {
    let mut incl: Vec<f64> = out.nodes().map(|(_, n)| n.self_weight as f64).collect();
    for i in (1..incl.len()).rev() {
        if let Some(p) = out.node(NodeIdx(i as u32)).parent {
            incl[p.index()] += incl[i];
        }
    }
    let mut fn_incl: HashMap<u32, f64> = HashMap::new();
    for (i, n) in out.nodes().skip(1) {
        *fn_incl.entry(n.func).or_default() += incl[i.index()];
    }
    (incl, fn_incl)
}

/// Splits each indirect site's exact count among the functions it may reach (same
/// signature, entries counted) so that every such function's exact entry count, less its
/// direct calls, is met: iterative proportional fitting (RAS) of the site × callee matrix,
/// seeded with the sampled weights (pairs never sampled get a small seed, so a callee no
/// sample saw still gets the calls only an indirect site can have made). Sites whose
/// signature reaches no counted function keep the sampled split.
fn resolve_indirect(
    sites: &[SiteCount],
    entries: &[EntryCount],
    seen: &HashMap<u32, Vec<(u32, u64)>>,
    callees: &mut [Vec<(u32, f64)>],
) {
    if entries.is_empty() {
        return;
    }
    let mut direct: HashMap<u32, f64> = HashMap::new();
    for s in sites {
        if let Some(g) = s.callee {
            *direct.entry(g).or_default() += s.calls as f64;
        }
    }
    let mut by_sig: HashMap<u32, Vec<(u32, f64)>> = HashMap::new();
    for e in entries {
        let left = (e.calls as f64 - direct.get(&e.func).copied().unwrap_or(0.0)).max(0.0);
        by_sig.entry(e.sig).or_default().push((e.func, left));
    }
    let mut groups: HashMap<u32, Vec<u32>> = HashMap::new();
    for (s, site) in sites.iter().enumerate() {
        if let (None, Some(sig)) = (site.callee, site.sig) {
            if site.calls > 0 && by_sig.contains_key(&sig) {
                groups.entry(sig).or_default().push(s as u32);
            }
        }
    }
    for (sig, group) in groups {
        let targets = &by_sig[&sig];
        let col_total: f64 = targets.iter().map(|t| t.1).sum();
        if col_total <= 0.0 {
            continue;
        }
        // Seed: sampled weight, plus a small share for pairs no sample saw.
        let mut x: Vec<Vec<f64>> = group
            .iter()
            .map(|&s| {
                let sampled = seen.get(&s);
                let total: f64 = sampled.map_or(0.0, |v| v.iter().map(|p| p.1 as f64).sum());
                targets
                    .iter()
                    .map(|&(g, _)| {
                        let w = sampled
                            .and_then(|v| v.iter().find(|p| p.0 == g))
                            .map_or(0.0, |p| p.1 as f64);
                        if total > 0.0 {
                            w / total + 1e-6
                        } else {
                            1.0
                        }
                    })
                    .collect()
            })
            .collect();
        let rows: Vec<f64> = group
            .iter()
            .map(|&s| sites[s as usize].calls as f64)
            .collect();
        let row_total: f64 = rows.iter().sum();
        // Margins must agree: scale the columns to the rows' total (calls made through
        // tables from outside, or entries from the host, make them differ slightly).
        let cols: Vec<f64> = targets
            .iter()
            .map(|t| t.1 * row_total / col_total)
            .collect();
        // Until the rows are within half a call of their counts, within a work budget
        // (pairs that should be empty shrink slowly).
        let cells = (group.len() * targets.len()).max(1);
        let max_iter = (50_000_000 / cells).clamp(20, 2000);
        for _ in 0..max_iter {
            for (c, &want) in cols.iter().enumerate() {
                let sum: f64 = x.iter().map(|row| row[c]).sum();
                if sum > 0.0 {
                    x.iter_mut().for_each(|row| row[c] *= want / sum);
                }
            }
            let mut off = 0.0f64;
            for (r, row) in x.iter_mut().enumerate() {
                let sum: f64 = row.iter().sum();
                off = off.max((sum - rows[r]).abs());
                if sum > 0.0 {
                    row.iter_mut().for_each(|v| *v *= rows[r] / sum);
                }
            }
            if off < 0.05 {
                break;
            }
        }
        for (r, &s) in group.iter().enumerate() {
            callees[s as usize] = targets
                .iter()
                .zip(&x[r])
                .filter(|(_, &v)| v >= 0.5)
                .map(|(&(g, _), &v)| (g, v))
                .collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::NO_SITE;

    fn site(caller: u32, callee: u32, calls: u64) -> SiteCount {
        SiteCount {
            caller,
            callee: Some(callee),
            calls,
            sig: None,
        }
    }

    /// main calls f from site 0 (30×) and g from site 1 (10×); g calls f (site 2, 10×);
    /// f calls leaf (site 3) 80×.
    fn two_contexts_of_f() -> [SiteCount; 4] {
        [
            site(0, 1, 30),
            site(0, 2, 10),
            site(2, 1, 10),
            site(1, 3, 80),
        ]
    }

    fn est_of(t: &ContextTree, est: &[f64], path: &[(u32, u32)]) -> f64 {
        let mut n = ROOT;
        for &(s, f) in path {
            n = t.find_child(n, s, f).expect("context exists");
        }
        est[n.index()]
    }

    #[test]
    fn unsampled_contexts_follow_exact_site_counts() {
        // Only main was sampled. main calls a (site 0) 10 times; a calls b (site 1) 20 times.
        let mut t = ContextTree::new(10);
        let m = t.child(ROOT, NO_SITE, 0).unwrap();
        t.node_mut(m).edge_weight = 1;
        let sites = [site(0, 1, 10), site(1, 2, 20)];
        let (c, est) = complete(&t, &sites, &[], &CompleteOptions::default());
        assert_eq!(est_of(&c, &est, &[(NO_SITE, 0)]), 1.0);
        assert_eq!(est_of(&c, &est, &[(NO_SITE, 0), (0, 1)]), 10.0);
        assert_eq!(est_of(&c, &est, &[(NO_SITE, 0), (0, 1), (1, 2)]), 20.0);
    }

    #[test]
    fn a_callee_with_two_contexts_splits_its_calls_like_its_activations() {
        // main calls f from site 0 (30×) and g from site 1 (10×); g calls f (site 2, 10×);
        // f calls leaf (site 3) 80×: 2 per activation, 60 under main→f and 20 under g→f.
        let mut t = ContextTree::new(10);
        let m = t.child(ROOT, NO_SITE, 0).unwrap();
        t.node_mut(m).edge_weight = 1;
        let sites = two_contexts_of_f();
        let (c, est) = complete(&t, &sites, &[], &CompleteOptions::default());
        let main = (NO_SITE, 0);
        assert!((est_of(&c, &est, &[main, (0, 1), (3, 3)]) - 60.0).abs() < 1e-9);
        assert!((est_of(&c, &est, &[main, (1, 2), (2, 1), (3, 3)]) - 20.0).abs() < 1e-9);
    }

    #[test]
    fn many_samples_override_the_gprof_share() {
        // As above, but the samples saw every leaf call under g→f: with much weight, the
        // estimate follows them.
        let mut t = ContextTree::new(10);
        let m = t.child(ROOT, NO_SITE, 0).unwrap();
        let g = t.child(m, 1, 2).unwrap();
        let f = t.child(g, 2, 1).unwrap();
        let leaf = t.child(f, 3, 3).unwrap();
        t.node_mut(leaf).edge_weight = 1_000_000;
        let sites = two_contexts_of_f();
        let (c, est) = complete(&t, &sites, &[], &CompleteOptions::default());
        let main = (NO_SITE, 0);
        let under_g = est_of(&c, &est, &[main, (1, 2), (2, 1), (3, 3)]);
        assert!(under_g > 79.9, "{under_g}");
        // Under main→f the estimate falls below half a call: the context is not added.
        let f = c
            .find_child(c.find_child(ROOT, NO_SITE, 0).unwrap(), 0, 1)
            .unwrap();
        assert_eq!(c.find_child(f, 3, 3), None);
    }

    /// In a component: the adapter's `run` (100, no call sites) enters main (0); main's
    /// site 0 calls import 1 (40×), which the adapter's `write` (101) implements; `write`
    /// calls back into main's `realloc` (2), which calls 3 from site 1 (6×).
    #[test]
    fn frames_of_code_without_site_counts_keep_the_calls_below_them() {
        let mut t = ContextTree::new(20);
        let run = t.child(ROOT, NO_SITE, 100).unwrap();
        let main = t.child(run, NO_SITE, 0).unwrap();
        let write = t.child(main, 0, 101).unwrap();
        let realloc = t.child(write, NO_SITE, 2).unwrap();
        for n in [run, main, write, realloc] {
            t.node_mut(n).edge_weight = 1;
        }
        let sites = [site(0, 1, 40), site(2, 3, 6)];
        let (c, est) = complete(&t, &sites, &[], &CompleteOptions::default());
        let path = [(NO_SITE, 100), (NO_SITE, 0), (0, 101)];
        assert_eq!(est_of(&c, &est, &path[..2]), 1.0, "entered once");
        assert_eq!(est_of(&c, &est, &path), 40.0, "the import's calls");
        assert_eq!(
            c.find_child(c.find_child(run, NO_SITE, 0).unwrap(), 0, 1),
            None
        );
        let below = [path.as_slice(), &[(NO_SITE, 2), (1, 3)]].concat();
        assert_eq!(est_of(&c, &est, &below), 6.0, "calls below a callback");
    }

    #[test]
    fn indirect_calls_split_by_sampled_callees_and_recursion_stops() {
        // main's indirect site 0 (100 calls) was seen calling 1 three times as often as 2;
        // 1 recurses through site 1 (50 of its 150 calls).
        let mut t = ContextTree::new(10);
        let m = t.child(ROOT, NO_SITE, 0).unwrap();
        let a = t.child(m, 0, 1).unwrap();
        let b = t.child(m, 0, 2).unwrap();
        t.node_mut(a).edge_weight = 300;
        t.node_mut(b).edge_weight = 100;
        let sites = [
            SiteCount {
                caller: 0,
                callee: None,
                calls: 100,
                sig: None,
            },
            site(1, 1, 50),
        ];
        let opts = CompleteOptions {
            k: 0.0,
            ..Default::default()
        };
        let (c, est) = complete(&t, &sites, &[], &opts);
        let main = (NO_SITE, 0);
        assert!((est_of(&c, &est, &[main, (0, 1)]) - 75.0).abs() < 1e-9);
        assert!((est_of(&c, &est, &[main, (0, 2)]) - 25.0).abs() < 1e-9);
        // Recursion: 50 of 125 calls into 1 recurse, so each level keeps 40%.
        let d1 = est_of(&c, &est, &[main, (0, 1), (1, 1)]);
        assert!(d1 > 0.0);
        assert!(
            c.len() < 40,
            "recursion was cut off by min_calls: {}",
            c.len()
        );
    }
}

#[cfg(test)]
mod indirect_tests {
    use super::*;
    use crate::tree::NO_SITE;

    #[test]
    fn entry_counts_resolve_indirect_calls_no_sample_saw() {
        // main (0) has two indirect sites of one signature: site 0 (70 calls) and site 1
        // (30). Function 1 was entered 70 times, function 2 30 times, nothing else calls
        // them, and samples saw site 0 call function 1 only. Function 2's calls can only
        // come from site 1.
        let mut t = ContextTree::new(10);
        let m = t.child(ROOT, NO_SITE, 0).unwrap();
        let a = t.child(m, 0, 1).unwrap();
        t.node_mut(a).edge_weight = 5000;
        let ind = |calls| SiteCount {
            caller: 0,
            callee: None,
            calls,
            sig: Some(7),
        };
        let sites = [ind(70), ind(30)];
        let entries = [
            EntryCount {
                func: 1,
                calls: 70,
                sig: 7,
            },
            EntryCount {
                func: 2,
                calls: 30,
                sig: 7,
            },
        ];
        let (c, est) = complete(&t, &sites, &entries, &CompleteOptions::default());
        let main = c.find_child(ROOT, NO_SITE, 0).unwrap();
        let get = |s, f| c.find_child(main, s, f).map_or(0.0, |n| est[n.index()]);
        assert!((get(0, 1) - 70.0).abs() < 0.5, "{}", get(0, 1));
        assert!((get(1, 2) - 30.0).abs() < 0.5, "{}", get(1, 2));
        assert!(get(0, 2) < 0.5 && get(1, 1) < 0.5);
    }
}
