//! Components: one profile of several core modules.
//!
//! A component holds several core modules (the program, the WASI adapter, shims that break
//! import cycles). pepper profiles each selected core module on its own, with the same
//! decoder as a plain module: function indices are that module's, branch ids dense from 0.
//! [`Profile::merge_modules`] joins those profiles into one profile of the component: the
//! *primary* module's functions keep their indices, every other module's functions get
//! [`foreign_function`] ids, the ids native stacks already give them in calling contexts,
//! so the primary's context tree names the same functions the merged lists hold.
//! [`Profile::module_profile`] takes one module's part back out, to guide that module's
//! next run.

use crate::contexts::{CallSite, ContextNode, Contexts, HotFunction};
use crate::model::{Branch, Function, Lost, Path, Profile, Step};
use serde::{Deserialize, Serialize};

/// A function of one of a component's other core modules (an adapter, a shim) as it appears
/// in calling contexts and in a profile of several modules: one id above every module's
/// function index space (wasm allows a million functions), `None` when the indices do not
/// fit. Native stacks in a component walk through every core module's frames, not only the
/// profiled one's.
pub fn foreign_function(module: usize, func: u32) -> Option<u32> {
    (module < FOREIGN_MODULES && func < 1 << FOREIGN_FUNC_BITS)
        .then_some(FOREIGN | (module as u32) << FOREIGN_FUNC_BITS | func)
}

/// The (core module, function index) a [`foreign_function`] id stands for.
pub fn foreign_parts(id: u32) -> Option<(usize, u32)> {
    let parts = (
        ((id & !FOREIGN) >> FOREIGN_FUNC_BITS) as usize,
        id & ((1 << FOREIGN_FUNC_BITS) - 1),
    );
    (id & FOREIGN != 0 && id != u32::MAX).then_some(parts)
}

/// The flag that marks a [`foreign_function`] id.
pub const FOREIGN: u32 = 1 << 31;
/// The bits of a [`foreign_function`] id that hold the function index.
pub const FOREIGN_FUNC_BITS: u32 = 20;
/// Module indices that fit between the flag and the function bits (the last one would
/// make `u32::MAX`, which calling contexts keep for the host).
pub const FOREIGN_MODULES: usize = (1 << (31 - FOREIGN_FUNC_BITS)) - 1;

/// Which module a function id of a profile belongs to: `None` for the primary module's
/// plain indices (and a plain module's, and the host's `u32::MAX`), `Some(m)` for a
/// [`foreign_function`] id of the component's core module `m`.
pub fn module_of(func: u32) -> Option<usize> {
    foreign_parts(func).map(|(m, _)| m)
}

/// One of a component's core modules that a profile covers ([`Profile::modules`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CoreModule {
    /// Position among the component's top-level core modules: the `module` of its
    /// functions' [`foreign_function`] ids.
    pub index: u32,
    /// Its name in the component; the other modules' function names start with it
    /// (`adapter::fd_write`).
    pub name: String,
    /// Lowercase hex SHA-256 of the core module's bytes, and their size: what a guide taken
    /// out with [`Profile::module_profile`] is checked against. Branch and call-site
    /// offsets of this module's functions are offsets in these bytes.
    pub sha256: String,
    pub size: u64,
}

impl Profile {
    /// One profile of a component from the profiles of its core modules, each as the
    /// decoder writes it for one module (`modules` empty, function indices its own, branch
    /// ids dense from 0).
    ///
    /// The result is `primary`'s profile (its mode, module, run, sampling, time line and
    /// phases: one run's, which other modules' cannot be added to) with the others' parts
    /// added under [`foreign_function`] ids: their functions (named `module::function`,
    /// since two modules may both have a `memcpy`), their branches after the primary's with
    /// the ids shifted, their paths, and their call sites after the primary's (not their
    /// context trees: the primary's stack samples already walk through every module's
    /// frames). `lost` adds up. Others' warnings follow the primary's, each prefixed with
    /// `module NAME: `. Functions no foreign id can hold (an index past 2^20, which wasm's
    /// limit of a million functions rules out) are left out with their branches, paths
    /// and call sites, with a warning; so is a module whose index no foreign id can hold or
    /// another module already has (it is then not in `modules` either). Paths are sorted as
    /// [`Profile::merge`] sorts them, and capped again at [`crate::MAX_PATH_STEPS`] in all.
    pub fn merge_modules(
        primary: (CoreModule, Profile),
        others: Vec<(CoreModule, Profile)>,
    ) -> Profile {
        let (first, mut out) = primary;
        out.version = crate::VERSION;
        out.modules = vec![first];
        for (module, p) in others {
            out.add_module(module, p);
        }
        out.functions.sort_by_key(|f| f.index);
        out.sort_paths();
        if let Some(c) = &mut out.contexts {
            // The primary's entry first where two name one id.
            c.imports.sort_by_key(|i| i.0);
            c.imports.dedup_by_key(|i| i.0);
        }
        out.cap_paths(crate::MAX_PATH_STEPS);
        out
    }

    /// Adds one non-primary module's profile `p` to a profile of several modules.
    fn add_module(&mut self, module: CoreModule, p: Profile) {
        let name = module.name.clone();
        let m = module.index as usize;
        let primary = self.modules[0].index;
        if let Some(twin) = self.modules.iter().find(|c| c.index == module.index) {
            let twin = twin.name.clone();
            return self.warn(format!(
                "module {name}: left out, its index {m} is module {twin}'s too"
            ));
        }
        if m >= FOREIGN_MODULES {
            return self.warn(format!(
                "module {name}: left out, its index {m} is past the {FOREIGN_MODULES} modules \
                 function ids can tell apart"
            ));
        }
        self.modules.push(module);
        let id = |f: u32| foreign_function(m, f);
        let mut unfit = 0usize;
        for f in p.functions {
            match id(f.index) {
                Some(index) => {
                    let own = f.name.unwrap_or_else(|| format!("func[{}]", f.index));
                    self.functions.push(Function {
                        index,
                        name: Some(format!("{name}::{own}")),
                        ..f
                    });
                }
                None => unfit += 1,
            }
        }
        if unfit > 0 {
            self.warn(format!(
                "module {name}: {unfit} functions have indices past the {} a function id \
                 holds; left out with their branches, paths and call sites",
                1u32 << FOREIGN_FUNC_BITS
            ));
        }
        // Positions in `p.branches` (its ids) to ids here.
        let mut ids = vec![None; p.branches.len()];
        for (i, b) in p.branches.into_iter().enumerate() {
            if let Some(func) = id(b.func) {
                ids[i] = Some(self.branches.len() as u32);
                self.branches.push(Branch {
                    id: self.branches.len() as u32,
                    func,
                    ..b
                });
            }
        }
        for q in p.paths {
            let steps: Option<Vec<Step>> = (q.steps.iter())
                .map(|s| {
                    Some(Step {
                        branch: (*ids.get(s.branch as usize)?)?,
                        outcome: s.outcome,
                    })
                })
                .collect();
            if let (Some(func), Some(steps)) = (id(q.func), steps) {
                self.paths.push(Path { func, steps, ..q });
            }
        }
        self.lost = sum(&self.lost, &p.lost);
        if p.mode != self.mode {
            self.warn(format!(
                "module {name}: recorded in mode {}, the profile's is {}",
                p.mode.name(),
                self.mode.name()
            ));
        }
        if let Some(c) = p.contexts {
            self.add_contexts(primary, m, c);
        }
        for w in p.warnings {
            self.warn(format!("module {name}: {w}"));
        }
    }

    /// Adds module `m`'s call sites and imports to the profile's contexts, or makes its
    /// contexts, tree included, the profile's when the primary recorded none.
    fn add_contexts(&mut self, primary: u32, m: usize, c: Contexts) {
        let id = |x| to_merged(primary, m, x);
        if self.contexts.is_none() {
            let nodes: Option<Vec<ContextNode>> = (c.nodes.iter())
                .map(|n| {
                    Some(ContextNode {
                        func: id(n.func)?,
                        ..n.clone()
                    })
                })
                .collect();
            let hot: Option<Vec<HotFunction>> = (c.hot_functions.iter())
                .map(|h| {
                    Some(HotFunction {
                        func: id(h.func)?,
                        self_us: h.self_us,
                    })
                })
                .collect();
            let (nodes, hot_functions) = match (nodes, hot) {
                (Some(n), Some(h)) => (n, h),
                // A function id the profile cannot hold: no tree rather than a wrong one.
                _ => (Vec::new(), Vec::new()),
            };
            self.contexts = Some(Contexts {
                kind: c.kind,
                call_sites: Vec::new(),
                nodes,
                hot_functions,
                imports: Vec::new(),
                sampling: c.sampling.clone(),
                overflow: c.overflow,
            });
        }
        let into = self.contexts.as_mut().expect("made above");
        for s in c.call_sites {
            let callee = match s.callee {
                Some(g) => match id(g) {
                    Some(g) => Some(g),
                    None => continue,
                },
                None => None,
            };
            let Some(func) = id(s.func) else { continue };
            into.call_sites.push(CallSite {
                id: into.call_sites.len() as u32,
                func,
                callee,
                ..s
            });
        }
        into.imports
            .extend((c.imports.into_iter()).filter_map(|(x, name)| Some((id(x)?, name))));
    }

    /// Adds `w` to the warnings unless it is there already.
    fn warn(&mut self, w: String) {
        if !self.warnings.contains(&w) {
            self.warnings.push(w);
        }
    }

    /// One module's part of a profile of several modules ([`Profile::merge_modules`]):
    /// `None` the primary's, `Some(m)` core module `m`'s, as that module's own profile
    /// would have it: function indices its own (names without the `module::` prefix),
    /// branch ids dense from 0 (path steps following), its call sites renumbered from 0
    /// (no context tree, which is the whole run's; `contexts` is `None` without call
    /// sites), its warnings without their prefix, `modules` empty and `module`'s hash and
    /// size the module's (empty for a module the profile does not list, so that no module
    /// passes for it). Mode, run, sampling and `lost` (which cannot be split) stay the
    /// profile's; the time line and phases stay with the primary only. Of a plain profile,
    /// `None` gives the profile back.
    pub fn module_profile(&self, m: Option<usize>) -> Profile {
        let primary = self.modules.first();
        let entry = match m {
            None => primary,
            Some(m) => (self.modules.iter().skip(1)).find(|c| c.index as usize == m),
        };
        let mine = |x: u32| x != u32::MAX && module_of(x) == m;
        let local = |x: u32| to_module(primary.map(|c| c.index), m, x);
        let prefix = match m {
            Some(_) => entry.map(|c| format!("{}::", c.name)),
            None => None,
        };
        let functions = (self.functions.iter())
            .filter(|f| mine(f.index))
            .map(|f| {
                let index = local(f.index);
                let name = match &prefix {
                    None => f.name.clone(),
                    Some(prefix) => {
                        (f.name.as_deref()).and_then(|n| match n.strip_prefix(prefix) {
                            Some(own) if own == format!("func[{index}]") => None,
                            Some(own) => Some(own.to_string()),
                            None => Some(n.to_string()),
                        })
                    }
                };
                Function {
                    index,
                    name,
                    ..f.clone()
                }
            })
            .collect();
        let mut ids = vec![None; self.branches.len()];
        let mut branches = Vec::new();
        for (i, b) in self
            .branches
            .iter()
            .enumerate()
            .filter(|(_, b)| mine(b.func))
        {
            ids[i] = Some(branches.len() as u32);
            branches.push(Branch {
                id: branches.len() as u32,
                func: local(b.func),
                ..b.clone()
            });
        }
        let paths = (self.paths.iter())
            .filter(|q| mine(q.func))
            .filter_map(|q| {
                let steps = (q.steps.iter())
                    .map(|s| {
                        Some(Step {
                            branch: (*ids.get(s.branch as usize)?)?,
                            outcome: s.outcome,
                        })
                    })
                    .collect::<Option<Vec<Step>>>()?;
                Some(Path {
                    func: local(q.func),
                    steps,
                    ..q.clone()
                })
            })
            .collect();
        let contexts = self.contexts.as_ref().and_then(|c| {
            let call_sites: Vec<CallSite> = (c.call_sites.iter())
                .filter(|s| mine(s.func))
                .enumerate()
                .map(|(id, s)| CallSite {
                    id: id as u32,
                    func: local(s.func),
                    callee: s.callee.map(local),
                    ..s.clone()
                })
                .collect();
            let imports = (c.imports.iter())
                .filter(|i| mine(i.0))
                .map(|(x, name)| (local(*x), name.clone()))
                .collect();
            (!call_sites.is_empty()).then(|| Contexts {
                kind: c.kind,
                call_sites,
                nodes: Vec::new(),
                hot_functions: Vec::new(),
                imports,
                sampling: None,
                overflow: 0,
            })
        });
        let prefixes: Vec<String> = (self.modules.iter().skip(1))
            .map(|c| format!("module {}: ", c.name))
            .collect();
        let warnings = match m {
            None => (self.warnings.iter())
                .filter(|w| !prefixes.iter().any(|p| w.starts_with(p.as_str())))
                .cloned()
                .collect(),
            Some(_) => match entry {
                Some(e) => (self.warnings.iter())
                    .filter_map(|w| w.strip_prefix(&format!("module {}: ", e.name)))
                    .map(str::to_string)
                    .collect(),
                None => Vec::new(),
            },
        };
        let mut module = self.module.clone();
        match entry {
            Some(e) => (module.sha256, module.size) = (e.sha256.clone(), e.size),
            None if m.is_some() => (module.sha256, module.size) = (String::new(), 0),
            None => {}
        }
        Profile {
            format: self.format.clone(),
            version: self.version,
            mode: self.mode,
            module,
            modules: Vec::new(),
            run: self.run.clone(),
            functions,
            branches,
            paths,
            lost: self.lost.clone(),
            sampling: self.sampling.clone(),
            contexts,
            timeline: self.timeline.clone().filter(|_| m.is_none()),
            phases: self.phases.clone().filter(|_| m.is_none()),
            warnings,
        }
    }
}

/// A function id of module `m`'s own profile as a profile whose primary module is
/// `primary` has it: the module's own indices become [`foreign_function`] ids, the
/// primary's (foreign ids there, when native stacks walked through it) plain indices;
/// other modules' foreign ids and the host stay. `None` when the id does not fit.
fn to_merged(primary: u32, m: usize, x: u32) -> Option<u32> {
    match foreign_parts(x) {
        _ if x == u32::MAX => Some(x),
        Some((k, f)) if k == primary as usize => Some(f),
        Some(_) => Some(x),
        None => foreign_function(m, x),
    }
}

/// The inverse of [`to_merged`]: a function id of a profile of several modules (primary
/// `primary`) as module `m`'s own profile (`None`: the primary's) has it.
fn to_module(primary: Option<u32>, m: Option<usize>, x: u32) -> u32 {
    match (m, foreign_parts(x)) {
        (None, _) => x,
        (Some(k), Some((j, f))) if j == k => f,
        (Some(_), None) if x != u32::MAX => primary
            .and_then(|p| foreign_function(p as usize, x))
            .unwrap_or(x),
        _ => x,
    }
}

/// `a` and `b` added field by field, saturating.
fn sum(a: &Lost, b: &Lost) -> Lost {
    Lost {
        hash_overflow: a.hash_overflow.saturating_add(b.hash_overflow),
        capped_paths: a.capped_paths.saturating_add(b.capped_paths),
        capped_executions: a.capped_executions.saturating_add(b.capped_executions),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contexts::ContextKind;
    use crate::testing::{branch, function, node, path, profile, tree};

    /// Adapter function `f`'s id.
    fn adapter(f: u32) -> u32 {
        foreign_function(0, f).unwrap()
    }

    fn core(index: u32, name: &str) -> CoreModule {
        CoreModule {
            index,
            name: name.into(),
            sha256: format!("{index:064}"),
            size: 100 + index as u64,
        }
    }

    fn at(func: u32, p: Path) -> Path {
        Path { func, ..p }
    }

    fn on(func: u32, b: Branch) -> Branch {
        Branch { func, ..b }
    }

    fn site(id: u32, func: u32, callee: Option<u32>, calls: u64) -> CallSite {
        CallSite {
            id,
            func,
            offset: 200 + id as u64,
            callee,
            sig: callee.is_none().then_some(0),
            calls,
            location: None,
        }
    }

    /// The program, core module 1 and primary: `main` (1) and `helper` (2) with a branch
    /// each, and a sampled tree whose samples walked into the adapter's `write`.
    fn program() -> Profile {
        let mut p = profile(
            vec![on(1, branch(0, &[2, 2])), on(2, branch(1, &[3, 1]))],
            vec![
                at(1, path(0, 2, &[(0, 0)])),
                at(1, path(1, 2, &[(0, 1)])),
                at(2, path(0, 3, &[(1, 0)])),
                at(2, path(1, 1, &[(1, 1)])),
            ],
        );
        p.module.sha256 = core(1, "program").sha256;
        p.functions = vec![function(1, Some("main")), function(2, Some("helper"))];
        let mut t = tree(
            ContextKind::Sampled,
            vec![
                node(None, u32::MAX, None, 0, 0),
                node(Some(0), 1, None, 1, 10),
                node(Some(1), adapter(2), Some(1), 4, 40),
            ],
            &[(adapter(2), 40), (1, 10)],
        );
        t.call_sites = vec![site(0, 1, Some(2), 3), site(1, 1, Some(0), 4)];
        t.imports = vec![(0, "wasi_snapshot_preview1::fd_write".into())];
        p.contexts = Some(t);
        p.lost.hash_overflow = 1;
        p.warnings = vec!["w1".into()];
        p
    }

    /// The adapter, core module 0: `write` (2) with one branch and an unnamed 3 with two.
    fn adapter_profile() -> Profile {
        let mut p = profile(
            vec![
                on(2, branch(0, &[5, 0])),
                on(3, branch(1, &[1, 1])),
                on(3, branch(2, &[0, 2])),
            ],
            vec![
                at(2, path(0, 5, &[(0, 0)])),
                at(3, path(0, 1, &[(1, 0), (2, 1)])),
                at(3, path(1, 1, &[(1, 1), (2, 1)])),
            ],
        );
        p.functions = vec![function(2, Some("write")), function(3, None)];
        let mut t = tree(
            ContextKind::Sampled,
            vec![
                node(None, u32::MAX, None, 0, 0),
                node(Some(0), 2, None, 9, 90),
            ],
            &[(2, 90)],
        );
        t.call_sites = vec![site(0, 2, Some(0), 7), site(1, 3, None, 2)];
        t.imports = vec![(0, "wasi:io/streams::write".into())];
        p.contexts = Some(t);
        p.lost = Lost {
            hash_overflow: 2,
            capped_paths: 3,
            capped_executions: 4,
        };
        p.warnings = vec!["w1".into(), "w2".into()];
        p
    }

    /// A shim, core module 2: one function (0) with one branch, no contexts.
    fn shim() -> Profile {
        let mut p = profile(vec![branch(0, &[1, 0])], vec![path(0, 1, &[(0, 0)])]);
        p.functions = vec![function(0, Some("f"))];
        p.warnings = vec!["w3".into(), "w3".into()];
        p
    }

    fn merged() -> Profile {
        Profile::merge_modules(
            (core(1, "program"), program()),
            vec![
                (core(0, "adapter"), adapter_profile()),
                (core(2, "shim"), shim()),
            ],
        )
    }

    #[test]
    fn foreign_ids_sit_above_every_modules_functions() {
        let write = foreign_function(0, 0).unwrap();
        assert!(write > 1_000_000, "above any module's functions");
        assert_eq!(foreign_parts(write), Some((0, 0)));
        assert_eq!(foreign_parts(7), None);
        assert_eq!(foreign_parts(u32::MAX), None, "the host");
        let last = foreign_function(FOREIGN_MODULES - 1, (1 << FOREIGN_FUNC_BITS) - 1);
        assert_eq!(
            foreign_parts(last.unwrap()),
            Some((FOREIGN_MODULES - 1, 0xF_FFFF))
        );
        assert_eq!(foreign_function(FOREIGN_MODULES, 0), None);
        assert_eq!(foreign_function(0, 1 << FOREIGN_FUNC_BITS), None);
        assert_eq!(foreign_function(5, 3), Some(1 << 31 | 5 << 20 | 3));
        assert_eq!(module_of(foreign_function(5, 3).unwrap()), Some(5));
        assert_eq!(module_of(3), None);
        assert_eq!(module_of(u32::MAX), None);
    }

    /// The other modules' functions get foreign ids and `module::` names, their branches
    /// ids after the primary's (path steps following), their call sites ids after the
    /// primary's; the primary's tree stays as it is, and the result is a valid profile.
    #[test]
    fn other_modules_join_under_foreign_ids() {
        let m = merged();
        m.validate().unwrap();
        assert_eq!(m.version, crate::VERSION);
        let names: Vec<_> = (m.modules.iter())
            .map(|c| (c.index, c.name.as_str()))
            .collect();
        assert_eq!(names, [(1, "program"), (0, "adapter"), (2, "shim")]);
        let shim0 = foreign_function(2, 0).unwrap();
        let functions: Vec<_> = (m.functions.iter())
            .map(|f| (f.index, f.name.as_deref().unwrap()))
            .collect();
        assert_eq!(
            functions,
            [
                (1, "main"),
                (2, "helper"),
                (adapter(2), "adapter::write"),
                (adapter(3), "adapter::func[3]"),
                (shim0, "shim::f"),
            ]
        );
        assert_eq!(m.function_name(adapter(3)), "adapter::func[3]");
        assert_eq!(m.function(shim0).unwrap().name.as_deref(), Some("shim::f"));
        let branches: Vec<_> = m.branches.iter().map(|b| (b.id, b.func)).collect();
        assert_eq!(
            branches,
            [
                (0, 1),
                (1, 2),
                (2, adapter(2)),
                (3, adapter(3)),
                (4, adapter(3)),
                (5, shim0)
            ]
        );
        assert_eq!(m.branches[4].counts, [0, 2]);
        let paths: Vec<_> = (m.paths.iter())
            .map(|p| {
                let steps: Vec<_> = p.steps.iter().map(|s| (s.branch, s.outcome)).collect();
                (p.func, p.number, steps)
            })
            .collect();
        assert_eq!(
            paths,
            [
                (1, 0, vec![(0, 0)]),
                (1, 1, vec![(0, 1)]),
                (2, 0, vec![(1, 0)]),
                (2, 1, vec![(1, 1)]),
                (adapter(2), 0, vec![(2, 0)]),
                (adapter(3), 0, vec![(3, 0), (4, 1)]),
                (adapter(3), 1, vec![(3, 1), (4, 1)]),
                (shim0, 0, vec![(5, 0)]),
            ]
        );
        // The paths still explain the branch counts.
        let counts: Vec<_> = m.branches.iter().map(|b| b.counts.clone()).collect();
        assert_eq!(m.edges_from_paths(), counts);
        assert_eq!(
            m.lost,
            Lost {
                hash_overflow: 3,
                capped_paths: 3,
                capped_executions: 4
            }
        );
        assert_eq!(m.module, program().module);
        let c = m.contexts.as_ref().unwrap();
        let p = program().contexts.unwrap();
        assert_eq!((&c.nodes, &c.hot_functions), (&p.nodes, &p.hot_functions));
        let sites: Vec<_> = (c.call_sites.iter())
            .map(|s| (s.id, s.func, s.callee, s.calls))
            .collect();
        assert_eq!(
            sites,
            [
                (0, 1, Some(2), 3),
                (1, 1, Some(0), 4),
                (2, adapter(2), Some(adapter(0)), 7),
                (3, adapter(3), None, 2),
            ]
        );
        assert_eq!(m.function_name(adapter(0)), "wasi:io/streams::write");
        assert_eq!(m.function_name(0), "wasi_snapshot_preview1::fd_write");
        assert_eq!(
            m.warnings,
            [
                "w1",
                "module adapter: w1",
                "module adapter: w2",
                "module shim: w3"
            ]
        );
        // Modules given out of index order: branches in the order given, functions by id
        // (which `Profile::function` looks them up by).
        let swapped = Profile::merge_modules(
            (core(1, "program"), program()),
            vec![
                (core(2, "shim"), shim()),
                (core(0, "adapter"), adapter_profile()),
            ],
        );
        swapped.validate().unwrap();
        assert_eq!(swapped.branches[2].func, shim0);
        assert!(swapped.functions.is_sorted_by_key(|f| f.index));
        assert_eq!(swapped.function_name(adapter(2)), "adapter::write");
    }

    /// A merged profile is written and read back unchanged; a profile of one module has no
    /// `modules` key, so version 3 readers see what they always saw, and a version 3 file
    /// still reads.
    #[test]
    fn merged_profiles_round_trip_and_plain_ones_look_as_before() {
        let m = merged();
        let mut bytes = Vec::new();
        m.write(&mut bytes).unwrap();
        assert_eq!(Profile::read(&bytes[..]).unwrap(), m);
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(json["modules"][1]["name"], "adapter");
        let plain = program();
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("modules").is_none(), "{json}");
        let mut old = json;
        old["version"] = 3.into();
        let back = Profile::read(old.to_string().as_bytes()).unwrap();
        assert!(back.modules.is_empty());
        assert_eq!(back.functions, plain.functions);
    }

    /// Each module's part taken back out is the profile it came from: functions, branches,
    /// paths and call sites under its own ids, its warnings, its module's hash.
    #[test]
    fn a_modules_part_comes_back_out_as_it_went_in() {
        let m = merged();
        for (k, core, input) in [
            (None, core(1, "program"), program()),
            (Some(0), core(0, "adapter"), adapter_profile()),
            (Some(2), core(2, "shim"), shim()),
        ] {
            let back = m.module_profile(k);
            back.validate().unwrap();
            assert_eq!(back.functions, input.functions, "{k:?}");
            assert_eq!(back.branches, input.branches, "{k:?}");
            assert_eq!(back.paths, input.paths, "{k:?}");
            assert!(back.modules.is_empty());
            assert_eq!(
                (&back.module.sha256, back.module.size),
                (&core.sha256, core.size)
            );
            let sites = |p: &Profile| p.contexts.as_ref().map(|c| c.call_sites.clone());
            assert_eq!(sites(&back), sites(&input), "{k:?}");
            assert!(back.contexts.iter().all(|c| c.nodes.is_empty()));
        }
        let adapter = m.module_profile(Some(0));
        assert_eq!(adapter.warnings, ["w1", "w2"]);
        assert_eq!(
            adapter.contexts.unwrap().imports,
            adapter_profile().contexts.unwrap().imports
        );
        assert_eq!(m.module_profile(None).warnings, ["w1"]);
        // A module the profile does not cover: nothing of it, and no hash to pass for it.
        let none = m.module_profile(Some(7));
        assert!(none.functions.is_empty() && none.branches.is_empty());
        assert!(none.module.sha256.is_empty());
        // A plain profile's primary part is the profile.
        assert_eq!(shim().module_profile(None), shim());
    }

    /// Without a tree of the primary's, the first other module's tree is taken, its ids
    /// made the profile's: its own functions foreign, the primary's (foreign there) plain.
    #[test]
    fn another_modules_tree_stands_in_for_a_missing_one() {
        let mut primary = program();
        primary.contexts = None;
        let mut other = adapter_profile();
        let c = other.contexts.as_mut().unwrap();
        let main = foreign_function(1, 1).unwrap();
        c.nodes.push(node(Some(1), main, Some(0), 1, 5));
        let m = Profile::merge_modules(
            (core(1, "program"), primary),
            vec![(core(0, "adapter"), other)],
        );
        m.validate().unwrap();
        let c = m.contexts.unwrap();
        let funcs: Vec<_> = c.nodes.iter().map(|n| n.func).collect();
        assert_eq!(funcs, [u32::MAX, adapter(2), 1]);
        assert_eq!(c.hot_functions[0].func, adapter(2));
        assert_eq!(c.call_sites.len(), 2);
        assert_eq!(c.call_sites[0].func, adapter(2));
    }

    /// A module given twice, or one whose index no function id can hold, is left out with a
    /// warning; the rest merges.
    #[test]
    fn modules_without_ids_of_their_own_are_left_out() {
        let m = Profile::merge_modules(
            (core(1, "program"), program()),
            vec![
                (core(1, "again"), shim()),
                (core(FOREIGN_MODULES as u32, "far"), shim()),
                (core(2, "shim"), shim()),
            ],
        );
        m.validate().unwrap();
        let names: Vec<_> = m.modules.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["program", "shim"]);
        assert_eq!(m.functions.len(), 3);
        assert_eq!(m.branches.len(), 3);
        assert!(m
            .warnings
            .iter()
            .any(|w| w.starts_with("module again: left out")));
        assert!(m
            .warnings
            .iter()
            .any(|w| w.starts_with("module far: left out")));
    }
}
