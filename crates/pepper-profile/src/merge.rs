//! Merging profiles of the same module: several runs (inputs), or the stores of a
//! multi-threaded embedder, each of which profiles on its own (pepper's profiling state is
//! per store) and is summed at the end.
//!
//! Counts add: branch outcomes, paths (matched by what they are, as in `compare`, and
//! required to carry the same number), call sites, calling contexts (matched by their chain
//! of call sites), hot-function times and sampling statistics. What cannot be summed
//! meaningfully is refused with an error that names the profile: another module, another
//! mode, or paths numbered differently (PEP or targeted runs with different guides).

use crate::compare::PathKey;
use crate::contexts::{ContextNode, Contexts, HotFunction};
use crate::model::{Path, Profile};
use std::collections::HashMap;

/// Why two profiles cannot be merged. `index` is the position of the offending profile in
/// the input (0 is the first, which the others are checked against).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MergeError {
    #[error("nothing to merge")]
    Empty,
    #[error("profile {index} is of module {found}, the first of {expected}")]
    Module {
        index: usize,
        expected: String,
        found: String,
    },
    #[error("profile {index} was recorded in mode {found}, the first in {expected}")]
    Mode {
        index: usize,
        expected: &'static str,
        found: &'static str,
    },
    #[error("profile {index} {what} differs from the first profile's: {detail}")]
    Shape {
        index: usize,
        what: &'static str,
        detail: String,
    },
    /// The sum is not a profile a reader accepts (its counts add up to more than 2^64):
    /// refused rather than written for `report` to reject later.
    #[error("the merged profile would not read back: {0}")]
    Unreadable(String),
}

/// How a merged profile's warning starts; the number of runs follows.
const MERGED: &str = "merged from ";

impl Profile {
    /// Sums `profiles` (at least one) into one profile. The first profile gives everything
    /// that is not a count (run arguments, sampling parameters); `run_ms` and the other
    /// times add up, and a warning records how many profiles went in.
    pub fn merge(profiles: &[Profile]) -> Result<Profile, MergeError> {
        let (first, rest) = profiles.split_first().ok_or(MergeError::Empty)?;
        let mut out = first.clone();
        let mut index = Index::of(&out);
        for (i, p) in rest.iter().enumerate() {
            out.add(i + 1, p, &mut index)?;
        }
        if !rest.is_empty() {
            out.sort_paths();
            if let Some(c) = &mut out.contexts {
                // Every profile has contexts here (`add` refuses a mix).
                c.sum_by_function(profiles.iter().filter_map(|p| p.contexts.as_ref()));
            }
            // Time lines and detected phases belong to one run: a sum has neither.
            if out.timeline.take().is_some() | out.phases.take().is_some() {
                out.warnings
                    .push("time lines and detected phases are per run; a merge drops them".into());
            }
            // A profile that is itself a merge counts for the runs it sums.
            let runs: u64 = profiles.iter().map(Profile::runs).sum();
            out.warnings.retain(|w| !w.starts_with(MERGED));
            out.warnings.push(format!(
                "{MERGED}{runs} profiles: counts are sums over their runs"
            ));
        }
        let counts = out.paths.iter().map(|p| p.count);
        let outcomes = out.branches.iter().flat_map(|b| b.counts.iter().copied());
        if counts.chain(outcomes).any(|n| n == u64::MAX) {
            out.warnings.push(
                "a count reached 2^64-1 in the merge and stopped there: it is a lower bound".into(),
            );
        }
        out.cap_paths(crate::MAX_PATH_STEPS);
        out.validate()
            .map_err(|e| MergeError::Unreadable(e.to_string()))?;
        Ok(out)
    }

    /// Paths in the order profiles keep them: by function, hottest first.
    pub(crate) fn sort_paths(&mut self) {
        self.paths.sort_by(|a, b| {
            (a.func, std::cmp::Reverse(a.count), a.number).cmp(&(
                b.func,
                std::cmp::Reverse(b.count),
                b.number,
            ))
        });
    }

    /// How many runs this profile sums (1 unless `pepper merge` wrote it).
    fn runs(&self) -> u64 {
        self.warnings
            .iter()
            .find_map(|w| w.strip_prefix(MERGED)?.split(' ').next()?.parse().ok())
            .unwrap_or(1)
    }

    fn add(&mut self, index: usize, p: &Profile, ix: &mut Index) -> Result<(), MergeError> {
        let shape = |what, detail: String| MergeError::Shape {
            index,
            what,
            detail,
        };
        if p.module.sha256 != self.module.sha256 {
            return Err(MergeError::Module {
                index,
                expected: self.module.sha256.clone(),
                found: p.module.sha256.clone(),
            });
        }
        if p.mode != self.mode {
            return Err(MergeError::Mode {
                index,
                expected: self.mode.name(),
                found: p.mode.name(),
            });
        }
        same_len("branches", &p.branches, &self.branches).map_err(|d| shape("branch list", d))?;
        for (a, b) in self.branches.iter_mut().zip(&p.branches) {
            if (a.func, a.offset, a.kind, &a.outcomes) != (b.func, b.offset, b.kind, &b.outcomes) {
                return Err(shape(
                    "branch list",
                    format!(
                        "branch {} is at offset {:#x}, not {:#x}",
                        b.id, b.offset, a.offset
                    ),
                ));
            }
            for (x, y) in a.counts.iter_mut().zip(&b.counts) {
                *x = x.saturating_add(*y);
            }
        }
        self.merge_functions(p)
            .map_err(|d| shape("function list", d))?;
        self.merge_paths(&p.paths, ix)
            .map_err(|d| shape("path numbering", d))?;
        self.lost.hash_overflow = self.lost.hash_overflow.saturating_add(p.lost.hash_overflow);
        match (&mut self.sampling, &p.sampling) {
            (Some(a), Some(b)) => {
                if a.guide != b.guide
                    || (a.design.as_str(), a.every) != (b.design.as_str(), b.every)
                    || a.weights != b.weights
                {
                    return Err(shape(
                        "sampling",
                        "different sampling design or guide; paths would not be comparable".into(),
                    ));
                }
                let mut b = b.clone();
                for (x, y) in a.counts_mut().into_iter().zip(b.counts_mut()) {
                    *x = x.saturating_add(*y);
                }
            }
            (None, None) => {}
            _ => return Err(shape("sampling", "one is sampled, the other not".into())),
        }
        match (&mut self.contexts, &p.contexts) {
            (Some(a), Some(b)) => a
                .merge(b, &mut ix.nodes)
                .map_err(|d| shape("calling contexts", d))?,
            (None, None) => {}
            (Some(_), None) | (None, Some(_)) => {
                return Err(shape(
                    "calling contexts",
                    "one has calling contexts, the other not".into(),
                ))
            }
        }
        self.run.instrument_ms += p.run.instrument_ms;
        self.run.compile_ms += p.run.compile_ms;
        self.run.run_ms += p.run.run_ms;
        if self.run.trap.is_none() {
            self.run.trap.clone_from(&p.run.trap);
        }
        for w in &p.warnings {
            if !self.warnings.contains(w) {
                self.warnings.push(w.clone());
            }
        }
        Ok(())
    }

    fn merge_functions(&mut self, p: &Profile) -> Result<(), String> {
        same_len("functions", &p.functions, &self.functions)?;
        for (a, b) in self.functions.iter_mut().zip(&p.functions) {
            if (a.index, a.num_paths, a.cold_edges) != (b.index, b.num_paths, b.cold_edges) {
                return Err(format!(
                    "function {} has {:?} paths and {:?} cold edges, not {:?} and {:?}",
                    b.index, b.num_paths, b.cold_edges, a.num_paths, a.cold_edges
                ));
            }
            if let (Some(x), Some(y)) = (&mut a.cold_executions, b.cold_executions) {
                *x = x.saturating_add(y);
            }
        }
        Ok(())
    }

    /// Paths are matched by function, ends and branch decisions; a match must carry the
    /// same number (same numbering), and one number must not name two different paths.
    fn merge_paths(&mut self, paths: &[Path], ix: &mut Index) -> Result<(), String> {
        for q in paths {
            let key = PathKey::of(q);
            match (ix.paths.get(&key), ix.numbers.get(&(q.func, q.number))) {
                (Some(&i), Some(&j)) if i == j => {
                    self.paths[i].count = self.paths[i].count.saturating_add(q.count)
                }
                (None, None) => {
                    ix.paths.insert(key, self.paths.len());
                    ix.numbers.insert((q.func, q.number), self.paths.len());
                    self.paths.push(q.clone());
                }
                _ => {
                    return Err(format!(
                        "path {} of function {} is numbered differently (were they run with different guides?)",
                        q.number, q.func
                    ))
                }
            }
        }
        Ok(())
    }
}

/// `a` and `b` list the same number of `what`.
fn same_len<T>(what: &str, a: &[T], b: &[T]) -> Result<(), String> {
    if a.len() == b.len() {
        Ok(())
    } else {
        Err(format!("{} {what}, not {}", a.len(), b.len()))
    }
}

/// A context node's identity among its parent's children: (parent, call site, function,
/// detached).
type NodeKey = (u32, Option<u32>, u32, bool);

/// Where the merged profile keeps each path and context node, built once and kept up to
/// date as profiles are added.
struct Index {
    paths: HashMap<PathKey, usize>,
    numbers: HashMap<(u32, u64), usize>,
    nodes: HashMap<NodeKey, u32>,
}

impl Index {
    fn of(p: &Profile) -> Index {
        Index {
            paths: (p.paths.iter().enumerate())
                .map(|(i, q)| (PathKey::of(q), i))
                .collect(),
            numbers: (p.paths.iter().enumerate())
                .map(|(i, q)| ((q.func, q.number), i))
                .collect(),
            nodes: p.contexts.as_ref().map_or_else(HashMap::new, |c| {
                (c.nodes.iter().enumerate())
                    .filter_map(|(i, n)| Some(((n.parent?, n.site, n.func, n.detached), i as u32)))
                    .collect()
            }),
        }
    }
}

impl Contexts {
    /// Hot functions summed per function over `all` (hottest first), imports united.
    fn sum_by_function<'a>(&mut self, all: impl Iterator<Item = &'a Contexts> + Clone) {
        let mut hot: HashMap<u32, u64> = HashMap::new();
        for h in all.clone().flat_map(|c| &c.hot_functions) {
            let e = hot.entry(h.func).or_default();
            *e = e.saturating_add(h.self_us);
        }
        self.hot_functions = hot
            .into_iter()
            .map(|(func, self_us)| HotFunction { func, self_us })
            .collect();
        self.hot_functions
            .sort_by_key(|h| (std::cmp::Reverse(h.self_us), h.func));
        self.imports = all.flat_map(|c| c.imports.iter().cloned()).collect();
        self.imports.sort();
        self.imports.dedup();
    }

    /// Adds `b`'s counts to `self`: call sites by position, tree nodes by their chain of
    /// (call site, function) from the root (`index` locates `self`'s nodes). Hot functions
    /// and imports are summed once, by `Profile::merge`.
    fn merge(&mut self, b: &Contexts, index: &mut HashMap<NodeKey, u32>) -> Result<(), String> {
        if self.kind != b.kind {
            return Err("one tree is sampled, the other exact".into());
        }
        same_len("call sites", &b.call_sites, &self.call_sites)?;
        for (x, y) in self.call_sites.iter_mut().zip(&b.call_sites) {
            if (x.func, x.offset) != (y.func, y.offset) {
                return Err(format!(
                    "call site {} is at offset {:#x}, not {:#x}",
                    y.id, y.offset, x.offset
                ));
            }
            x.calls = x.calls.saturating_add(y.calls);
        }
        // b's parents come before their children, so each of b's nodes maps to one of ours
        // in one pass.
        let mut map = vec![0u32; b.nodes.len()];
        for (i, n) in b.nodes.iter().enumerate().skip(1) {
            let parent = map[n.parent.ok_or("a node other than the root has no parent")? as usize];
            let key = (parent, n.site, n.func, n.detached);
            let at = *index.entry(key).or_insert_with(|| {
                self.nodes.push(ContextNode {
                    parent: Some(parent),
                    calls: 0,
                    self_us: 0,
                    edge_us: 0,
                    inferred: true,
                    ..n.clone()
                });
                (self.nodes.len() - 1) as u32
            });
            let m = &mut self.nodes[at as usize];
            m.calls = m.calls.saturating_add(n.calls);
            m.self_us = m.self_us.saturating_add(n.self_us);
            m.edge_us = m.edge_us.saturating_add(n.edge_us);
            m.inferred &= n.inferred;
            map[i] = at;
        }
        if let (Some(r), Some(s)) = (self.nodes.first_mut(), b.nodes.first()) {
            r.calls = r.calls.saturating_add(s.calls);
            r.self_us = r.self_us.saturating_add(s.self_us);
            r.edge_us = r.edge_us.saturating_add(s.edge_us);
        }
        if let (Some(x), Some(y)) = (&mut self.sampling, &b.sampling) {
            // A mean over both runs' samples; a run that did not measure it (0) weighs
            // nothing.
            let weight = |s: &crate::ContextSampling| match s.signal_delivery_ns {
                0 => 0u128,
                _ => s.samples.max(1) as u128,
            };
            let (wx, wy) = (weight(x), weight(y));
            let sum = wx * x.signal_delivery_ns as u128 + wy * y.signal_delivery_ns as u128;
            if let Some(mean) = sum.checked_div(wx + wy) {
                x.signal_delivery_ns = mean as u64;
            }
            x.samples = x.samples.saturating_add(y.samples);
            x.detached = x.detached.saturating_add(y.detached);
            x.truncated = x.truncated.saturating_add(y.truncated);
            x.in_host = x.in_host.saturating_add(y.in_host);
            x.empty = x.empty.saturating_add(y.empty);
            x.torn = x.torn.saturating_add(y.torn);
            x.window_calls = x.window_calls.saturating_add(y.window_calls);
            x.window_weighted = x.window_weighted.saturating_add(y.window_weighted);
            x.window_cut = x.window_cut.saturating_add(y.window_cut);
        }
        self.overflow = self.overflow.saturating_add(b.overflow);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contexts::ContextKind;
    use crate::model::Mode;
    use crate::testing::{branch, node, path, profile, tree};

    #[test]
    fn counts_add_and_paths_only_one_run_took_join() {
        let mut a = profile(vec![branch(0, &[3, 0])], vec![path(0, 3, &[(0, 0)])]);
        a.timeline = Some(crate::Timeline::default());
        let b = profile(
            vec![branch(0, &[2, 4])],
            vec![path(0, 2, &[(0, 0)]), path(1, 4, &[(0, 1)])],
        );
        let m = Profile::merge(&[a, b]).unwrap();
        assert_eq!(m.branches[0].counts, vec![5, 4]);
        let paths: Vec<_> = m.paths.iter().map(|p| (p.number, p.count)).collect();
        assert_eq!(paths, vec![(0, 5), (1, 4)]);
        // The merged paths still explain the merged branch counts.
        assert_eq!(m.edges_from_paths(), vec![vec![5, 4]]);
        assert!(m.warnings.iter().any(|w| w.contains("merged from 2")));
        assert!(m.timeline.is_none());
        assert!(m.warnings.iter().any(|w| w.contains("a merge drops them")));
        // A merge of a merge counts every run once, in one warning.
        let again = Profile::merge(&[m.clone(), m]).unwrap();
        let merged: Vec<_> = again
            .warnings
            .iter()
            .filter(|w| w.starts_with(MERGED))
            .collect();
        assert_eq!(merged.len(), 1);
        assert!(
            merged[0].starts_with("merged from 4 profiles"),
            "{merged:?}"
        );
        assert_eq!(again.branches[0].counts, vec![10, 8]);
    }

    /// Counts that each fit but together exceed 2^64 make a file the reader refuses: the
    /// merge refuses it instead, and the refusal says why. A single count that reaches
    /// the limit stops there, with a warning.
    #[test]
    fn totals_past_64_bits_are_refused_not_written() {
        let c = (1u64 << 62) + 1;
        let two = |c: u64| {
            profile(
                vec![branch(0, &[c, c])],
                vec![path(0, c, &[(0, 0)]), path(1, c, &[(0, 1)])],
            )
        };
        let err = Profile::merge(&[two(c), two(c)]).unwrap_err();
        assert!(
            matches!(&err, MergeError::Unreadable(why) if why.contains("64-bit")),
            "{err}"
        );
        // Below the limit, the merge reads back.
        let m = Profile::merge(&[two(c / 2), two(c / 2)]).unwrap();
        let mut bytes = Vec::new();
        m.write(&mut bytes).unwrap();
        Profile::read(&bytes[..]).unwrap();
        assert!(!m.warnings.iter().any(|w| w.contains("stopped")));
        let one = || profile(vec![branch(0, &[u64::MAX - 1, 0])], vec![]);
        let m = Profile::merge(&[one(), one()]).unwrap();
        assert_eq!(m.branches[0].counts[0], u64::MAX);
        assert!(
            m.warnings.iter().any(|w| w.contains("stopped")),
            "{:?}",
            m.warnings
        );
    }

    #[test]
    fn what_cannot_be_summed_is_refused_naming_the_profile() {
        let two = |n0, n1| {
            profile(
                vec![branch(0, &[1, 1])],
                vec![path(n0, 1, &[(0, 0)]), path(n1, 1, &[(0, 1)])],
            )
        };
        let a = two(0, 1);
        // The same paths under other numbers: another numbering (another guide).
        let e = Profile::merge(&[a.clone(), a.clone(), two(1, 0)]).unwrap_err();
        assert!(
            matches!(
                e,
                MergeError::Shape {
                    index: 2,
                    what: "path numbering",
                    ..
                }
            ),
            "{e}"
        );
        let mut other_module = a.clone();
        other_module.module.sha256 = "01".into();
        assert!(matches!(
            Profile::merge(&[a.clone(), other_module]),
            Err(MergeError::Module { index: 1, .. })
        ));
        let mut other_mode = a.clone();
        other_mode.mode = Mode::Targeted;
        assert!(matches!(
            Profile::merge(&[a.clone(), other_mode]),
            Err(MergeError::Mode { index: 1, .. })
        ));
        let more_branches = profile(vec![branch(0, &[1, 1]), branch(1, &[0, 0])], vec![]);
        assert!(matches!(
            Profile::merge(&[a, more_branches]),
            Err(MergeError::Shape {
                what: "branch list",
                ..
            })
        ));
        assert_eq!(Profile::merge(&[]), Err(MergeError::Empty));
    }

    /// Trees join by call-site chain: a context both runs reached sums, one only the second
    /// reached is added under the right parent (after the parent, as the format requires).
    #[test]
    fn context_trees_join_by_call_site_chain() {
        let with_tree = |nodes, site_calls: [u64; 4]| {
            let mut t = tree(ContextKind::Exact, nodes, &[(1, 5)]);
            for (s, c) in t.call_sites.iter_mut().zip(site_calls) {
                s.calls = c;
            }
            let mut p = profile(vec![], vec![]);
            p.contexts = Some(t);
            p
        };
        let a = with_tree(
            vec![
                node(None, u32::MAX, None, 0, 0),
                node(Some(0), 1, None, 1, 10),
                node(Some(1), 2, Some(0), 4, 40),
            ],
            [4, 0, 0, 0],
        );
        let b = with_tree(
            vec![
                node(None, u32::MAX, None, 0, 0),
                node(Some(0), 1, None, 1, 10),
                node(Some(1), 2, Some(1), 7, 70),
                node(Some(1), 2, Some(0), 2, 20),
            ],
            [2, 7, 0, 0],
        );
        let c = Profile::merge(&[a, b]).unwrap().contexts.unwrap();
        let by_path: HashMap<_, _> = (1..c.nodes.len())
            .map(|n| (c.path(n), (c.nodes[n].calls, c.nodes[n].self_us)))
            .collect();
        let expected: HashMap<_, _> = [
            (vec![(None, 1)], (2, 20)),
            (vec![(None, 1), (Some(0), 2)], (6, 60)),
            (vec![(None, 1), (Some(1), 2)], (7, 70)),
        ]
        .into_iter()
        .collect();
        assert_eq!(by_path, expected);
        assert!(c
            .nodes
            .iter()
            .enumerate()
            .all(|(i, n)| n.parent.is_none_or(|p| (p as usize) < i)));
        let sites: Vec<u64> = c.call_sites.iter().map(|s| s.calls).collect();
        assert_eq!(sites, vec![6, 7, 0, 0]);
        assert_eq!(c.hot_functions[0].self_us, 10);
    }

    /// Signal delivery merges as a mean over the samples of the runs that measured it.
    #[test]
    fn signal_delivery_merges_as_a_mean_over_measured_samples() {
        let with = |samples, signal_delivery_ns| {
            let mut t = tree(
                ContextKind::Sampled,
                vec![node(None, u32::MAX, None, 0, 0)],
                &[],
            );
            t.sampling = Some(crate::ContextSampling {
                samples,
                signal_delivery_ns,
                ..Default::default()
            });
            let mut p = profile(vec![], vec![]);
            p.contexts = Some(t);
            p
        };
        let merged = |runs: &[Profile]| {
            let m = Profile::merge(runs).unwrap().contexts.unwrap();
            let s = m.sampling.unwrap();
            (s.samples, s.signal_delivery_ns)
        };
        assert_eq!(
            merged(&[with(100, 10_000), with(300, 20_000)]),
            (400, 17_500)
        );
        // A shadow-stack run (nothing measured) does not dilute the mean.
        assert_eq!(merged(&[with(100, 10_000), with(300, 0)]), (400, 10_000));
        assert_eq!(merged(&[with(100, 0), with(300, 0)]), (400, 0));
    }
}
