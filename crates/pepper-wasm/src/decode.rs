//! Decoding: turning the profiler memory of a finished run into a [`Profile`]. Reads what
//! placement decided (`crate::plan`), never emits code.
//!
//! Exact paths: every non-zero counter is a path number, regenerated once into its branch
//! sequence (PEP §3.3) and stored with the profile, so reports need no module. The edge
//! profile is then derived from the paths (PEP §3.3). Exact edges: counters are read as is.

use crate::analysis::NodeKind;
use crate::plan::{Counting, FunctionPlan, Plan};
use pepper_cfg::DagEdgeKind;
use pepper_profile::{
    Branch, Function, Lost, Mode, ModuleInfo, Path, PathPoint, Profile, RunInfo, Sampling, Step,
    FORMAT, VERSION,
};
use std::collections::HashMap;

/// What the runtime knows about the run, to be stored with the profile.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub module: ModuleInfo,
    pub run: RunInfo,
    /// Warnings from outside the rewriter (runtime, DWARF).
    pub warnings: Vec<String>,
    /// PEP: how sampling went, and the host sampler's (path word, samples) pairs (empty
    /// for the in-guest every-K design, whose samples are in the profiler memory).
    pub sampling: Option<(Sampling, Vec<(u64, u64)>)>,
    /// The PCCT the host sampler built from the shadow stack.
    pub contexts: Option<SampledContexts>,
    /// Ephemeral in windows: what the windows counted, split into random groups by the
    /// runtime, each an image of pepper's memory holding only its group's counts (they
    /// sum to the counters). Their spread gives each branch's `bias_margin`
    /// (`decode::ephemeral`); empty: binomial margins.
    pub window_groups: Vec<Vec<u8>>,
}

use pepper_layout::{read_u32, read_u64};

mod calibrate;
mod contexts;
pub(crate) mod ephemeral;
pub mod path_calls;

pub use contexts::{site_offsets, SampledContexts};
pub use path_calls::PathSites;

/// Every CFG edge's count in an exact-edges run: the chords' counters, the rest derived
/// (with `entries` where the callers give them). Ephemeral copies counting edges also
/// start and stop at loop headers: their entries there, less what the way in counted,
/// and their leaves are virtual edges (`FunctionPlan::switch_counts`).
fn edge_counts(
    fp: &FunctionPlan,
    a: &crate::analysis::FunctionAnalysis,
    ec: &pepper_cfg::EdgeCounting,
    mem: &[u8],
    entries: u64,
) -> Vec<u64> {
    let mut chords: Vec<u64> = fp
        .edge_counter
        .iter()
        .map(|c| c.map_or(0, |addr| read_u64(mem, addr as u64)))
        .collect();
    let mut extra = Vec::with_capacity(2 * fp.switch_counts.len());
    for s in &fp.switch_counts {
        let entered = read_u64(mem, s.entered as u64);
        for e in &s.way_in {
            chords[e.index()] = chords[e.index()].saturating_sub(entered);
        }
        extra.push((a.cfg.entry(), s.header, entered));
        extra.push((s.header, a.cfg.exit(), read_u64(mem, s.left as u64)));
    }
    let nodes: Vec<u64> = ec
        .nodes_given
        .iter()
        .map(|&v| {
            fp.loop_counts
                .iter()
                .find(|l| l.counter.node == v)
                .map_or(0, |l| read_u64(mem, l.addr as u64))
        })
        .collect();
    ec.derive_with(&a.cfg, &chords, entries, &nodes, &extra)
}

/// How often node `v` ran, from its function's edge counts.
fn node_count(a: &crate::analysis::FunctionAnalysis, counts: &[u64], v: pepper_cfg::NodeId) -> u64 {
    let edges = if v == a.cfg.entry() {
        a.cfg.succs(v)
    } else {
        a.cfg.preds(v)
    };
    edges.iter().map(|e| counts[e.index()]).sum()
}

/// Exact-edges counter increments of a run: how many were made, and how many the best
/// placement for this run's counts (a spanning tree of its true edge counts) would make.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Increments {
    pub made: u64,
    pub ideal: u64,
}

impl Plan {
    /// Every exact-edges function's edge counts (by position in `functions`; `None` when
    /// it has no edge counting): functions that count their own entries first, then those
    /// whose entries are their call sites' counts, callers first.
    fn all_edge_counts(&self, mem: &[u8]) -> Vec<Option<Vec<u64>>> {
        let parts = |k: usize| {
            let fp = &self.functions[k];
            Some((fp, fp.analysis.as_ref()?, fp.edge_counting.as_ref()?))
        };
        let given = &self.given_entries;
        let mut out: Vec<Option<Vec<u64>>> = (0..self.functions.len())
            .map(|k| {
                let (fp, a, ec) = parts(k)?;
                (!given.given.get(k).copied().unwrap_or(false))
                    .then(|| edge_counts(fp, a, ec, mem, 0))
            })
            .collect();
        for (f, sites) in &given.order {
            let entries = sites
                .iter()
                .map(|&(g, v)| match (&out[g], parts(g)) {
                    (Some(counts), Some((_, a, _))) => node_count(a, counts, v),
                    _ => 0,
                })
                .sum();
            if let Some((fp, a, ec)) = parts(*f) {
                out[*f] = Some(edge_counts(fp, a, ec, mem, entries));
            }
        }
        out
    }

    /// Counter increments of an exact-edges run (`None` in other modes): a deterministic
    /// measure of counter placement, free of timing noise.
    pub fn edge_increments(&self, mem: &[u8]) -> Option<Increments> {
        if !self.mode.given_entries() {
            return None;
        }
        let mut total = Increments::default();
        let all = self.all_edge_counts(mem);
        for (fp, counts) in self.functions.iter().zip(&all) {
            let (Some(a), Some(ec), Some(counts)) = (&fp.analysis, &fp.edge_counting, counts)
            else {
                continue;
            };
            let weights = crate::plan::weights::counting_tree_weights(a, |e| counts[e]);
            // The best placement with the same knowledge: entries and loop counts given
            // where they are (each loop exit adds its loop's count: one increment more).
            let read: Vec<_> = ec.nodes_given.iter().map(|&v| (v, 0)).collect();
            let ideal =
                pepper_cfg::EdgeCounting::with_given(&a.cfg, &weights, ec.entries_given, &read);
            let flushes: u64 = fp
                .loop_counts
                .iter()
                .flat_map(|l| &l.exits)
                .map(|e| counts[e.index()])
                .sum();
            total.made += ec.increments(counts) + flushes;
            total.ideal += ideal.increments(counts) + flushes;
        }
        Some(total)
    }

    /// Builds the profile from the counters memory (`None` when the run has no
    /// instrumentation or the memory could not be read). `location` maps an original
    /// code offset to `file:line`, when the module has DWARF.
    pub fn profile(
        &self,
        mem: Option<&[u8]>,
        outcome: RunOutcome,
        location: &dyn Fn(u64) -> Option<String>,
    ) -> Profile {
        let mut warnings = self.warnings.clone();
        warnings.extend(outcome.warnings);
        let window_groups = outcome.window_groups;
        let empty = Vec::new();
        let mem = mem.unwrap_or(&empty);
        let branches = self.branches(mem, location);
        let mut lost = Lost::default();
        let (mut sampling, mut host_samples) = match outcome.sampling {
            Some((s, words)) => (Some(s), words),
            None => (None, Vec::new()),
        };
        if let Some(s) = sampling.as_mut() {
            s.calibrated = self.calibrate_samples(mem, &mut host_samples, s.taken) as u64;
        }
        let mut from_paths: Vec<Vec<u64>> =
            branches.iter().map(|b| vec![0; b.outcomes.len()]).collect();
        let paths = match self.mode.paths() {
            true => self.paths(
                mem,
                host_samples,
                (&mut lost, &mut warnings),
                &mut from_paths,
            ),
            false => Vec::new(),
        };
        let functions = self
            .functions
            .iter()
            .map(|fp| function(self, fp, mem))
            .collect();
        // PEP without call-site counters: the calls its sampled paths pass stand in.
        let estimated_calls = (self.layout.site_counters == 0
            && self.mode.samples_paths()
            && self.contexts != pepper_layout::ContextMode::Off)
            .then(|| path_calls::site_calls_from_paths(self, &paths));
        let contexts = self.contexts_profile(
            mem,
            outcome.contexts,
            estimated_calls.as_deref(),
            location,
            &mut warnings,
        );
        let mut profile = Profile {
            format: FORMAT.to_string(),
            version: VERSION,
            mode: self.mode,
            module: outcome.module,
            modules: Vec::new(),
            run: outcome.run,
            functions,
            branches,
            paths,
            lost,
            sampling,
            contexts,
            timeline: None,
            phases: None,
            warnings,
        };
        if self.mode.paths() {
            // Every path's outcomes, the capped ones' too.
            for (b, c) in profile.branches.iter_mut().zip(from_paths) {
                b.counts = c;
            }
        }
        if self.mode.samples_edges() {
            ephemeral::estimate(self, mem, &window_groups, &mut profile);
        }
        profile
    }

    /// Every branch of the module, with its outcome counts (exact edges and ephemeral
    /// copies; the other modes derive them from paths later).
    fn branches(&self, mem: &[u8], location: &dyn Fn(u64) -> Option<String>) -> Vec<Branch> {
        let mut counts = self.branch_counts(mem).into_iter();
        let mut branches = Vec::with_capacity(self.num_branches as usize);
        for fp in &self.functions {
            let Some(a) = &fp.analysis else { continue };
            for (i, s) in a.sites.iter().enumerate() {
                branches.push(Branch {
                    id: fp.first_branch + i as u32,
                    func: fp.index.0,
                    offset: s.offset,
                    kind: s.kind,
                    outcomes: s.outcomes.clone(),
                    counts: counts.next().unwrap_or_default(),
                    location: location(s.offset),
                    inlined: Vec::new(),
                    recorded: None,
                    bias_margin: None,
                });
            }
        }
        branches
    }

    /// Every branch's outcome counts in `mem`, in branch id order (zeros in modes that
    /// derive them from paths).
    pub(crate) fn branch_counts(&self, mem: &[u8]) -> Vec<Vec<u64>> {
        let edge_counts = match self.mode {
            Mode::ExactEdges | Mode::Ephemeral => self.all_edge_counts(mem),
            _ => Vec::new(),
        };
        let mut out = Vec::with_capacity(self.num_branches as usize);
        for (k, fp) in self.functions.iter().enumerate() {
            let Some(a) = &fp.analysis else { continue };
            let mut site_counts: Vec<Vec<u64>> =
                a.sites.iter().map(|s| vec![0; s.outcomes.len()]).collect();
            if let Some(Some(counts)) = edge_counts.get(k) {
                for (e, &count) in counts.iter().enumerate() {
                    if let Some((site, outcome)) = a.edges[e].branch {
                        site_counts[site.0 as usize][outcome as usize] += count;
                    }
                }
            }
            out.extend(site_counts);
        }
        out
    }

    /// Every counted path: array slots, the hash table and caches, PEP's samples. Each
    /// path's branch outcomes are added to `branch_counts` (indexed by branch id) as it
    /// is regenerated, and only the hottest paths that fit in
    /// [`pepper_profile::MAX_PATH_STEPS`] are kept with their steps: a function whose
    /// paths each pass thousands of branches would otherwise hold gigabytes of steps
    /// before any cap applied. The others are counted in `lost`, with a warning.
    fn paths(
        &self,
        mem: &[u8],
        host_samples: Vec<(u64, u64)>,
        (lost, warnings): (&mut Lost, &mut Vec<String>),
        branch_counts: &mut [Vec<u64>],
    ) -> Vec<Path> {
        let mut hashed: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
        let l = &self.layout;
        for slot in 0..l.hash_capacity as u64 {
            let at = l.hash_base as u64 + 24 * slot;
            let key = read_u32(mem, at + 16);
            if key != 0 {
                hashed
                    .entry(key - 1)
                    .or_default()
                    .push((read_u64(mem, at), read_u64(mem, at + 8)));
            }
        }
        lost.hash_overflow = read_u64(mem, l.hash_overflow as u64);
        // PEP words carry their function in the tag; group them like the hash table's.
        for (word, count) in host_samples {
            match pepper_layout::pep_untag(word) {
                Some((f, r)) => hashed.entry(f).or_default().push((r, count)),
                None => warnings.push(format!("sample word {word:#x} has no function tag")),
            }
        }
        // (function, path number, count), hottest first; `seq` keeps the readers' order.
        let mut counted: Vec<(&FunctionPlan, u64, u64)> = Vec::new();
        for fp in &self.functions {
            if let Some(counts) = self.path_counts(fp, mem, &mut hashed) {
                counted.extend(counts.into_iter().map(|(r, count)| (fp, r, count)));
            }
        }
        let mut order: Vec<usize> = (0..counted.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(counted[i].2), i));
        let (mut paths, mut used, mut full) = (Vec::new(), 0usize, false);
        let (mut capped, mut capped_executions, mut total) = (0u64, 0u64, 0u128);
        // Past the cap, each function's paths are gathered, and their DAG edges counted
        // at the end without regenerating them one by one.
        let mut past_cap: HashMap<u32, (&FunctionPlan, PathCounts)> = HashMap::new();
        for seq in order {
            let (fp, r, count) = counted[seq];
            let decoded = match full {
                true => {
                    let total = fp.numbered.as_ref().map_or(0, |nd| nd.numbering.total());
                    past_cap
                        .entry(fp.index.0)
                        .or_insert((fp, Vec::new()))
                        .1
                        .push((r, count));
                    r < total
                }
                false => match decode_path(fp, r, count) {
                    Some(p) => {
                        for st in &p.steps {
                            let c = &mut branch_counts[st.branch as usize][st.outcome as usize];
                            *c = c.saturating_add(count);
                        }
                        let size = p.steps.len() + p.blocks.len() + 1;
                        full = used + size > pepper_profile::MAX_PATH_STEPS;
                        if !full {
                            used += size;
                            paths.push((seq, p));
                        }
                        true
                    }
                    None => false,
                },
            };
            if !decoded {
                warnings.push(format!(
                    "function {}: counter for path {r} does not decode; dropped",
                    fp.index.0
                ));
                continue;
            }
            total += count as u128;
            if full {
                capped += 1;
                capped_executions = capped_executions.saturating_add(count);
            }
        }
        for (fp, paths) in past_cap.into_values() {
            if let Some(nd) = &fp.numbered {
                let counts = nd.numbering.edge_counts(&nd.dag, &paths);
                add_branch_counts(fp, &counts, branch_counts);
            }
        }
        if capped > 0 {
            lost.capped_paths = capped;
            lost.capped_executions = capped_executions;
            warnings.push(pepper_profile::capped_warning(
                pepper_profile::MAX_PATH_STEPS,
                capped,
                capped_executions as f64 / total.max(1) as f64,
            ));
        }
        paths.sort_unstable_by_key(|&(seq, _)| seq);
        paths.into_iter().map(|(_, p)| p).collect()
    }

    /// One function's (path number, count) pairs; `None` when it counts no paths.
    fn path_counts(
        &self,
        fp: &FunctionPlan,
        mem: &[u8],
        hashed: &mut HashMap<u32, Vec<(u64, u64)>>,
    ) -> Option<Vec<(u64, u64)>> {
        let l = &self.layout;
        let counts: Vec<(u64, u64)> = match fp.counting {
            Counting::Array { base } => {
                let n = fp.num_paths();
                (0..n)
                    .map(|r| (r, read_u64(mem, base as u64 + 8 * r)))
                    .filter(|&(_, c)| c > 0)
                    .collect()
            }
            Counting::Hash { .. } | Counting::Ring | Counting::Every { .. } => {
                let mut v = hashed.remove(&fp.index.0).unwrap_or_default();
                if let Counting::Hash { cache: Some(cache) } = fp.counting {
                    // Counts still in the function's cache.
                    for e in 0..l.hash_cache_entries as u64 {
                        let at = cache as u64 + 16 * e;
                        let key = read_u64(mem, at);
                        if key != 0 {
                            v.push((key - 1, read_u64(mem, at + 8)));
                        }
                    }
                }
                // Copies entered at a loop count their first path end past the last
                // (`Counting::entered_register`): no path of the program.
                let n = fp.num_paths();
                if let Counting::Hash { .. } = fp.counting {
                    v.retain(|&(r, _)| r < n);
                }
                if let Counting::Every { k } = fp.counting {
                    // Each sample stands for k path ends.
                    for w in &mut v {
                        w.0 = pepper_layout::pep_untag(w.0).map_or(u64::MAX, |x| x.1);
                        w.1 *= k as u64;
                    }
                }
                v.sort_unstable();
                v
            }
            Counting::None => return None,
        };
        // Obvious paths (targeted mode) counted outside the array sit in their own
        // counters; in array functions the counter is the path's own slot.
        Some(match fp.counting {
            Counting::Array { .. } => counts,
            _ => {
                let mut counts = counts;
                counts.extend(
                    fp.obvious
                        .iter()
                        .map(|o| (o.path, read_u64(mem, o.addr as u64)))
                        .filter(|&(_, c)| c > 0),
                );
                counts
            }
        })
    }
}

/// What the profile says about one function.
fn function(plan: &Plan, fp: &FunctionPlan, mem: &[u8]) -> Function {
    Function {
        index: fp.index.0,
        name: fp.name.clone(),
        instrumented: plan.rewritten && fp.skipped.is_none(),
        skipped: fp.skipped.clone(),
        num_paths: fp.numbered.as_ref().map(|nd| nd.numbering.total()),
        counting: match fp.counting {
            Counting::Array { .. } => Some("array".into()),
            Counting::Hash { .. } => Some("hash".into()),
            Counting::Ring => Some("ring".into()),
            Counting::Every { .. } => Some("every".into()),
            Counting::None => None,
        },
        cold_edges: fp.cold_counter.map(|_| fp.cold_edges),
        cold_executions: fp.cold_counter.map(|a| {
            let cold_slots = match (fp.counting, &fp.numbered) {
                (Counting::Array { base }, Some(nd)) => {
                    let n = nd.numbering.total();
                    (n..2 * n).map(|r| read_u64(mem, base as u64 + 8 * r)).sum()
                }
                _ => 0,
            };
            read_u64(mem, a as u64) + cold_slots
        }),
        obvious_paths: fp.cold_counter.map(|_| fp.obvious.len() as u32),
        uninstrumented_edges: fp.cold_counter.map(|_| {
            fp.numbered
                .as_ref()
                .and_then(|nd| nd.obvious.as_ref())
                .map_or(0, |o| o.removed.iter().filter(|&&r| r).count() as u32)
        }),
        register_loops: fp.cold_counter.map(|_| fp.register_loops.len() as u32),
        under_sampled: None,
        truncated_nodes: fp
            .numbered
            .as_ref()
            .map_or(0, |nd| nd.truncated.len() as u32),
    }
}

/// `(path number, count)` pairs of one function.
type PathCounts = Vec<(u64, u64)>;

/// Adds one function's DAG edge counts to the branch outcomes they take (indexed by
/// branch id).
fn add_branch_counts(fp: &FunctionPlan, dag_counts: &[u64], counts: &mut [Vec<u64>]) {
    let (Some(analysis), Some(nd)) = (fp.analysis.as_ref(), fp.numbered.as_ref()) else {
        return;
    };
    for (i, &n) in dag_counts.iter().enumerate().filter(|&(_, &n)| n > 0) {
        let DagEdgeKind::Real(ce) = nd.dag.edge(pepper_cfg::DagEdgeId::new(i)).kind else {
            continue;
        };
        if let Some((site, outcome)) = analysis.edges[ce.index()].branch {
            let c = &mut counts[(fp.first_branch + site.0) as usize][outcome as usize];
            *c = c.saturating_add(n);
        }
    }
}

/// Regenerates path `r` of one function into a profile [`Path`].
fn decode_path(fp: &FunctionPlan, r: u64, count: u64) -> Option<Path> {
    let (a, nd) = (fp.analysis.as_ref()?, fp.numbered.as_ref()?);
    let edges = nd.numbering.regenerate(&nd.dag, r).ok()?;
    let point = |n: pepper_cfg::NodeId| {
        let offset = a.node_offset[n.index()];
        if a.node_kind[n.index()] == NodeKind::LoopHeader {
            PathPoint::LoopHeader { offset }
        } else {
            PathPoint::Truncation { offset }
        }
    };
    let start = match nd.dag.edge(*edges.first()?).kind {
        DagEdgeKind::SplitEntry(n) => point(n),
        _ => PathPoint::FunctionEntry,
    };
    let end = match nd.dag.edge(*edges.last()?).kind {
        DagEdgeKind::SplitExit(n) => point(n),
        DagEdgeKind::Real(e) => match (a.edges[e.index()].tail_call, a.edges[e.index()].throw) {
            (Some(offset), _) => PathPoint::TailCall { offset },
            (_, Some(offset)) => PathPoint::Throw { offset },
            _ => PathPoint::FunctionExit,
        },
        _ => PathPoint::FunctionExit,
    };
    let mut steps = Vec::new();
    let mut blocks = Vec::new();
    let mut ops = 0u32;
    for &e in &edges {
        let de = nd.dag.edge(e);
        // A split header's code runs in its body half (where the next path starts), not
        // in the half where a path ends.
        if let Some(n) = nd.dag.node_of(de.dst) {
            if nd.dag.body(n) == Some(de.dst) {
                ops = ops.saturating_add(a.node_ops[n.index()]);
            }
        }
        if let DagEdgeKind::Real(ce) = de.kind {
            if let Some((site, outcome)) = a.edges[ce.index()].branch {
                steps.push(Step {
                    branch: fp.first_branch + site.0,
                    outcome,
                });
            }
        }
        if de.dst != nd.dag.exit() {
            if let Some(n) = nd.dag.node_of(de.dst) {
                if matches!(
                    a.node_kind[n.index()],
                    NodeKind::Entry | NodeKind::Other | NodeKind::LoopHeader
                ) && blocks.last() != Some(&a.node_offset[n.index()])
                {
                    blocks.push(a.node_offset[n.index()]);
                }
            }
        }
    }
    Some(Path {
        func: fp.index.0,
        number: r,
        count,
        start,
        end,
        steps,
        blocks,
        ops: Some(ops),
    })
}
