//! Stage one: each function's plan. Analysis, then path numbering (paths modes, with
//! TPP's cold edges, obvious paths and register loops when targeted) or counter placement
//! (exact edges, with loops read by induction variable), and its call sites.

use super::memory::Allocator;
use super::Build;
use crate::analysis::{analyze, AnalysisError, FunctionAnalysis};
use crate::emit::POISON;
use crate::entries::GivenEntries;
use crate::plan::weights::*;
use crate::plan::*;
use pepper_cfg::{
    eliminate_obvious, number_pruned, EdgeCounting, NumberedDag, REGISTER_PATH_LIMIT,
};
use pepper_layout::{pep_tag, ContextMode, PEP_TAG_SHIFT};
use pepper_profile::Mode;
use std::sync::Arc;

/// Every function's plan, before memory is laid out.
pub(super) struct Planned {
    pub functions: Vec<FunctionPlan>,
    pub call_sites: Vec<CallSiteInfo>,
    /// The call site whose counter each site counts in ([`Plan::counted_at`]).
    pub counted_at: Vec<u32>,
    pub num_branches: u32,
    pub given: GivenEntries,
    pub warnings: Vec<String>,
    /// Contexts: each type index's canonical signature (indirect calls and the functions
    /// they may reach are matched by it); empty without contexts.
    pub sigs: std::collections::HashMap<u32, u32>,
}

impl Build<'_, '_> {
    /// Plans every function; `force_skip` (defined index, why) are left alone.
    pub(super) fn plan_functions(
        &self,
        force_skip: &[(usize, String)],
        mem: &mut Allocator,
    ) -> Result<Planned, InstrumentError> {
        let facts = self.facts;
        let mut out = Planned {
            functions: Vec::with_capacity(facts.bodies.len()),
            call_sites: Vec::new(),
            counted_at: Vec::new(),
            num_branches: 0,
            given: GivenEntries::default(),
            warnings: Vec::new(),
            sigs: Default::default(),
        };
        // Exact edges decide across functions which entry counts callers give (analyzing
        // every body first); other modes analyze each body as they go. Loop counts (exact
        // edges) and register loops (targeted) need to know whether anything can unwind.
        let mut analyses: Vec<Option<Result<FunctionAnalysis, AnalysisError>>> = Vec::new();
        let mut may_unwind = false;
        if self.mode.given_entries() || self.mode.prunes_cold() {
            let all: Vec<_> = facts.bodies.iter().map(analyze).collect();
            may_unwind = crate::entries::may_unwind(all.iter().map(|a| a.as_ref().ok()));
            if self.mode.given_entries() {
                let skipped: Vec<bool> = (0..all.len())
                    .map(|k| force_skip.iter().any(|s| s.0 == k))
                    .collect();
                out.given = GivenEntries::decide(facts, &all, &skipped);
            }
            analyses = all.into_iter().map(Some).collect();
        }
        for (k, body) in facts.bodies.iter().enumerate() {
            let index = facts.func_index(k);
            let name = facts.names.get(&index.0).cloned();
            let display = name.clone().unwrap_or_else(|| format!("func[{}]", index.0));
            let mut fp = FunctionPlan::new(index, name, out.num_branches, out.call_sites.len());
            if !self.mode.instruments() && self.contexts == ContextMode::Off {
                out.functions.push(fp);
                continue;
            }
            if let Some((_, why)) = force_skip.iter().find(|s| s.0 == k) {
                fp.skipped = Some(why.clone());
            }
            let analysis = analyses
                .get_mut(k)
                .and_then(Option::take)
                .unwrap_or_else(|| analyze(body));
            match analysis {
                Ok(a) => {
                    // Branch ids are assigned even when the function ends up skipped, so
                    // that the profile lists every branch instruction of the module.
                    out.num_branches += a.sites.len() as u32;
                    if self.mode.samples_paths() && pep_tag(index.0).is_none() {
                        fp.skipped = Some("function index too large for PEP's path tag".into());
                    }
                    if fp.skipped.is_none() {
                        let given = out.given.given.get(k).copied().unwrap_or(false);
                        self.place(&mut fp, &a, given, may_unwind, mem);
                    }
                    fp.analysis = Some(Arc::new(a));
                }
                Err(e) => fp.skipped = Some(e.to_string()),
            }
            if self.contexts != ContextMode::Off {
                // Listed for every function, instrumented or not: native stack samples
                // name call sites in functions pepper leaves alone too.
                match crate::contexts::call_sites(index.0, body) {
                    Ok(sites) => out.call_sites.extend(sites),
                    Err(e) => fp.skipped = Some(e.to_string()),
                }
            }
            if let Some(why) = &fp.skipped {
                out.warnings.push(format!(
                    "function {} ({display}) left uninstrumented: {why}",
                    index.0
                ));
            }
            out.functions.push(fp);
        }
        if self.contexts != ContextMode::Off {
            // Indirect calls by canonical signature (type indices may differ for one).
            out.sigs = facts.signature_ids();
            for s in &mut out.call_sites {
                s.sig = s.sig.and_then(|t| out.sigs.get(&t).copied());
            }
            out.counted_at = counted_at(&out.functions, out.call_sites.len());
        }
        Ok(out)
    }

    /// Decides how `fp` counts: numbered paths, edge counters, or (contexts only) nothing.
    fn place(
        &self,
        fp: &mut FunctionPlan,
        analysis: &FunctionAnalysis,
        given: bool,
        may_unwind: bool,
        mem: &mut Allocator,
    ) {
        if self.mode.paths() {
            match self.number(fp, analysis) {
                Ok(nd) => {
                    let nd = self.count_paths(fp, analysis, nd, may_unwind, mem);
                    fp.numbered = Some(Arc::new(nd));
                }
                Err(e) => fp.skipped = Some(e.to_string()),
            }
        } else if self.mode.edges() {
            self.count_edges(fp, analysis, given, may_unwind, mem);
        } else {
            // Contexts only: the function keeps its shape, no edge carries code.
            fp.edge_counter = vec![None; analysis.cfg.num_edges()];
        }
    }

    /// Smart path numbering (PEP §3.4) by the guide or the static estimate; targeted mode
    /// numbers only the paths that avoid the guide's cold edges (TPP).
    fn number(
        &self,
        fp: &FunctionPlan,
        analysis: &FunctionAnalysis,
    ) -> Result<NumberedDag, pepper_cfg::DagError> {
        let opts = self.opts;
        let func = fp.index.0;
        let guided = opts.guide.as_ref().and_then(|g| g.weights(func, analysis));
        let weights = dag_weights(guided.unwrap_or_else(|| static_numbering_weights(analysis)));
        // One limit for every paths mode, so that exact and PEP profiles cut the same
        // monster functions at the same places and their paths compare.
        let limit = REGISTER_PATH_LIMIT.min(1 << PEP_TAG_SHIFT);
        let cold = match (self.mode, &opts.guide) {
            (Mode::Targeted, Some(g)) => g.cold_edges(func, analysis, opts.cold_threshold),
            _ => None,
        };
        number_pruned(
            &analysis.cfg,
            &analysis.headers,
            &[analysis.funnel],
            Some(&weights),
            limit,
            cold.as_deref(),
        )
    }

    /// Where a numbered function's path ends go: PEP's ring or every-K, an array, or the
    /// hash table; targeted mode's cold counter, obvious paths and register loops.
    fn count_paths(
        &self,
        fp: &mut FunctionPlan,
        analysis: &FunctionAnalysis,
        mut nd: NumberedDag,
        may_unwind: bool,
        mem: &mut Allocator,
    ) -> NumberedDag {
        let (mode, opts) = (self.mode, self.opts);
        let n = nd.numbering.total();
        // Targeted: slots n..2n catch poisoned registers (see `FunctionPlan::poison`), so
        // a path end needs no test.
        let slots = match mode.prunes_cold() {
            true => 2 * n,
            false => n,
        };
        fp.counting = if mode.samples_paths() {
            match opts.pep_every {
                Some(k) => {
                    mem.any_hash = true;
                    Counting::Every { k: k.max(1) }
                }
                None => Counting::Ring,
            }
        } else if n <= opts.array_max_paths && mem.array_bytes + 8 * slots <= opts.array_budget {
            mem.array_bytes += 8 * slots;
            fp.poison = POISON + 8 * n as i64;
            Counting::Array {
                base: mem.alloc(8 * slots),
            }
        } else {
            mem.any_hash = true;
            let entries = mem.layout.hash_cache_entries;
            Counting::Hash {
                cache: (entries > 0).then(|| mem.alloc(16 * entries as u64)),
            }
        };
        if !mode.prunes_cold() {
            return nd;
        }
        fp.cold_counter = Some(mem.alloc(8));
        fp.cold_edges = (0..analysis.cfg.num_edges())
            .filter(|&e| nd.edge_val(pepper_cfg::EdgeId::new(e)).is_none())
            .count() as u32;
        if opts.obvious {
            let costs = counter_costs(analysis);
            let ob = eliminate_obvious(&nd.dag, &nd.numbering, &|e| {
                dag_counter_cost(&costs, &nd.dag, e)
            });
            fp.obvious = ob
                .paths
                .iter()
                .map(|o| ObviousCounter {
                    edge: o.counter,
                    path: o.number,
                    guarded: o.guarded,
                    addr: match fp.counting {
                        Counting::Array { base } => base + 8 * o.number as u32,
                        _ => mem.alloc(8),
                    },
                })
                .collect();
            nd.obvious = Some(ob);
        } else if let (Counting::Array { base }, false) = (fp.counting, may_unwind) {
            // Not with obvious paths, which count some iteration paths on an edge already
            // (into the same slot).
            let observed = opts
                .guide
                .as_ref()
                .and_then(|g| g.observed(fp.index.0, analysis));
            let freqs = frequencies(analysis, observed.as_deref());
            fp.register_loops = register_loops(analysis, &nd, &freqs, base, opts.loop_threshold);
        }
        nd
    }

    /// Exact edges (and ephemeral copies counting edges): counters on the chords of a
    /// maximum spanning tree, loops read by their induction variable where they can be
    /// (not in ephemeral copies).
    fn count_edges(
        &self,
        fp: &mut FunctionPlan,
        analysis: &FunctionAnalysis,
        given: bool,
        may_unwind: bool,
        mem: &mut Allocator,
    ) {
        let opts = self.opts;
        let ec = if analysis.sites.is_empty() {
            // No branch, nothing to report: the one count such a function has (its
            // entries) would cost an increment per call for no output. (With given
            // entries, its edges are still known, for its callees.)
            EdgeCounting::uncounted(&analysis.cfg, given)
        } else {
            let observed = opts
                .guide
                .as_ref()
                .and_then(|g| g.observed(fp.index.0, analysis));
            let freqs = frequencies(analysis, observed.as_deref());
            let weights = edge_weights(analysis, &freqs);
            // Unwinding skips loop exits, and so what a loop's count adds there; an
            // ephemeral copy entered or left inside a loop runs part of its iterations.
            let loops = if may_unwind || !opts.loop_counts || self.ephemeral {
                Vec::new()
            } else {
                readable_loops(analysis)
            };
            let offered: Vec<_> = loops
                .iter()
                .map(|l| (l.counter.node, loop_count_weight(analysis, &freqs, l)))
                .collect();
            let ec = EdgeCounting::with_given(&analysis.cfg, &weights, given, &offered);
            fp.loop_counts = loops
                .into_iter()
                .filter(|l| ec.nodes_given.contains(&l.counter.node))
                .map(|l| LoopCount {
                    addr: mem.alloc(8),
                    ..l
                })
                .collect();
            ec
        };
        fp.edge_counter = ec.chord.iter().map(|&c| c.then(|| mem.alloc(8))).collect();
        fp.edge_counting = Some(ec);
    }
}

/// The call site whose counter each call site counts in: the first call site of its CFG
/// node in an instrumented function, since a node runs its calls once per execution (an
/// interpreter's calls then often increment no counter of their own). That holds where every call returns or the run ends: an exception
/// that some frame catches would leave the node's later calls unmade, so where anything
/// may throw, or a body could not be analyzed (exception handlers among them), every
/// site keeps its own counter. A run that ends inside a call (a trap, `proc_exit`)
/// leaves the later sites of that call's node one call high for each frame it ended,
/// as exact edges' entries given by callers do.
pub(crate) fn counted_at(functions: &[FunctionPlan], num_sites: usize) -> Vec<u32> {
    let mut at: Vec<u32> = (0..num_sites as u32).collect();
    if crate::entries::may_unwind(functions.iter().map(|fp| fp.analysis.as_deref())) {
        return at;
    }
    for fp in functions.iter().filter(|fp| fp.skipped.is_none()) {
        let Some(a) = &fp.analysis else { continue };
        let mut first = std::collections::HashMap::new();
        for (k, &(_, node)) in a.call_nodes.iter().enumerate() {
            let site = fp.first_site + k as u32;
            if let Some(n) = node {
                at[site as usize] = *first.entry(n).or_insert(site);
            }
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use crate::{ContextMode, InstrumentOptions};

    /// Sites of `$work` (0-3) and `_start` (4); `extra` goes into the module.
    fn sampled(extra: &str) -> crate::Instrumented {
        let wasm = wat::parse_str(format!(
            r#"(module
                 (func $leaf (param i32) (result i32) (local.get 0))
                 (func $work (param i32)
                   (drop (call $leaf (local.get 0)))
                   (drop (call $leaf (local.get 0)))
                   (if (local.get 0) (then (drop (call $leaf (i32.const 1)))))
                   (drop (call $leaf (local.get 0))))
                 (func (export "_start") (call $work (i32.const 1)))
                 {extra})"#
        ))
        .unwrap();
        let opts = InstrumentOptions {
            mode: pepper_profile::Mode::None,
            contexts: ContextMode::Sampled,
            ..Default::default()
        };
        crate::instrument(&wasm, &opts).unwrap()
    }

    /// The 64-bit additions in the output: counter increments, and whatever else the
    /// context code adds the same in both modules of a test.
    fn increments(wasm: &[u8]) -> usize {
        let mut n = 0;
        for payload in wasmparser::Parser::new(0).parse_all(wasm) {
            if let wasmparser::Payload::CodeSectionEntry(body) = payload.unwrap() {
                let mut ops = body.get_operators_reader().unwrap();
                while !ops.eof() {
                    n += usize::from(matches!(ops.read().unwrap(), wasmparser::Operator::I64Add));
                }
            }
        }
        n
    }

    #[test]
    fn calls_in_one_node_count_in_its_first_calls_counter() {
        let i = sampled("");
        assert_eq!(i.plan.counted_at, vec![0, 0, 2, 3, 4]);
        // One increment fewer than where every site counts (below).
        let throwing = sampled(r#"(tag $t) (func (throw $t))"#);
        assert_eq!(increments(&i.wasm) + 1, increments(&throwing.wasm));
        // The second site reads the first one's count.
        let mut mem = vec![0u8; i.plan.layout.size as usize];
        let at = i.plan.layout.site_counters as usize;
        mem[at..at + 8].copy_from_slice(&7u64.to_le_bytes());
        let sampled = crate::decode::SampledContexts {
            sampling: Default::default(),
            pcct: pepper_cct::Pcct::new(100, 64, pepper_cct::EdgeMode::StrictNewEdges, 8),
        };
        let c = i
            .plan
            .contexts_profile(&mem, Some(sampled), None, &|_| None, &mut Vec::new())
            .unwrap();
        let calls: Vec<u64> = c.call_sites.iter().map(|s| s.calls).collect();
        assert_eq!(calls, [7, 7, 0, 0, 0]);
    }

    #[test]
    fn where_anything_may_throw_every_site_counts_its_own_calls() {
        let i = sampled(r#"(tag $t) (func (throw $t))"#);
        assert_eq!(i.plan.counted_at, vec![0, 1, 2, 3, 4]);
    }
}
