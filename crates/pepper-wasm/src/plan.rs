//! Instrumenting a module: analysis, numbering, memory layout and emission, per function.

use crate::analysis::{analyze, Action, FunctionAnalysis, Slot};
use crate::contexts::{CallSiteInfo, ContextEmit, ContextMode, FRAME_BYTES};
use crate::emit::{arm_code, memarg, ArmCode, EmitKind, Emitter, Locals, POISON};
use crate::module::{FuncIndex, ModuleFacts};
use crate::rewrite::{write_module, Additions};
use crate::switch::SwitchedFunction;
use pepper_cfg::{
    eliminate_obvious, number_pruned, DagEdgeKind, EdgeCounting, NumberedDag, PathDag,
    REGISTER_PATH_LIMIT,
};
use std::sync::Arc;

mod hash;
mod loops;
mod weights;

use hash::*;
pub use loops::*;
pub(crate) use weights::counting_tree_weights;
use weights::*;

/// A counter that `br_table` arms without their own counter increment; never read.
const DISCARD: u32 = 16;

use pepper_profile::Mode;
use wasm_encoder::{BlockType, Function, Instruction as I, ValType};

/// Name of the exported memory that holds pepper's counters.
pub const COUNTERS_EXPORT: &str = "pepper:counters";

/// How exact path counters are kept for one function (TPP §2.2, digest §1.4).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Counting {
    /// Not counted (skipped function, or edges mode).
    None,
    /// `count[r]++` on an array of `num_paths` u64 slots at byte address `base`.
    Array { base: u32 },
    /// The in-module hash table (functions with many paths), behind a direct-mapped cache
    /// of `MemoryLayout::hash_cache_entries` `[r + 1: u64][count: u64]` entries at byte address
    /// `cache`: a path end that hits its slot is one compare and one increment; a miss
    /// calls pepper's miss function, which moves the slot's count to the table and claims
    /// the slot. Without a cache (`hash_cache_log2` 0, Ball-Larus' and PP's original
    /// scheme, kept as the benchmark's classic baseline), every path end calls the table.
    Hash { cache: Option<u32> },
    /// PEP: append the tagged path word to the ring buffer the host sampler reads.
    Ring,
    /// PEP, deterministic: every `k`-th path end (over the whole module) goes to the hash
    /// table.
    Every { k: u32 },
}

impl Counting {
    /// What the path register holds per unit of path number: array functions keep the
    /// slot's byte offset (8 × the number, TPP A.1's addressing mode: a path end is
    /// `count[r]` with no shift), the others the number itself.
    pub fn scale(self) -> u64 {
        match self {
            Counting::Array { .. } => 8,
            _ => 1,
        }
    }
}

/// Default entries in each hashed function's path cache (4 KB per function).
pub const HASH_CACHE_ENTRIES: u32 = 256;

/// PEP: paths per function must stay below this so that the function's tag fits above the
/// path number in one 64-bit word (`(func + 1) << PEP_TAG_SHIFT | number`).
pub const PEP_TAG_SHIFT: u32 = 44;

/// The tag PEP puts above function `func`'s path numbers (0 when `func` does not fit).
pub fn pep_tag(func: u32) -> Option<u64> {
    ((func as u64 + 1) < (1 << (64 - PEP_TAG_SHIFT))).then(|| (func as u64 + 1) << PEP_TAG_SHIFT)
}

/// Splits a PEP path word into (function index, path number).
pub fn pep_untag(word: u64) -> Option<(u32, u64)> {
    let f = word >> PEP_TAG_SHIFT;
    (f > 0).then(|| ((f - 1) as u32, word & ((1 << PEP_TAG_SHIFT) - 1)))
}

/// An edge profile used to choose path numbering (PEP §3.4 smart numbering): per branch
/// (function index, original offset), its outcome counts.
#[derive(Clone, Debug, Default)]
pub struct Guide {
    pub counts: std::collections::HashMap<(u32, u64), Vec<u64>>,
    /// SHA-256 of the guide file, recorded in the profile.
    pub id: String,
}

impl Guide {
    pub fn from_profile(p: &pepper_profile::Profile, id: String) -> Guide {
        Guide {
            counts: p
                .branches
                .iter()
                .map(|b| ((b.func, b.offset), b.counts.clone()))
                .collect(),
            id,
        }
    }

    /// The guide's outcome counts of each branch site of one function, or `None` if the
    /// guide saw none of them run.
    fn site_counts(&self, func: u32, a: &FunctionAnalysis) -> Option<Vec<Option<&Vec<u64>>>> {
        let counts: Vec<Option<&Vec<u64>>> = a
            .sites
            .iter()
            .map(|s| self.counts.get(&(func, s.offset)))
            .collect();
        counts
            .iter()
            .flatten()
            .any(|c| c.iter().any(|&x| x > 0))
            .then_some(counts)
    }

    /// Per-CFG-edge branch outcome counts of one function from the guide (`None` for edges
    /// that are not outcomes of a branch the guide has), or `None` if the guide saw none of
    /// its branches run.
    fn observed(&self, func: u32, a: &FunctionAnalysis) -> Option<Vec<Option<u64>>> {
        let counts = self.site_counts(func, a)?;
        Some(
            a.edges
                .iter()
                .map(|info| {
                    let (site, outcome) = info.branch?;
                    counts[site.0 as usize].map(|c| c.get(outcome as usize).copied().unwrap_or(0))
                })
                .collect(),
        )
    }

    /// Per-CFG-edge weights of one function from the guide (branch outcome counts; 0 for
    /// edges that are not branch outcomes), or `None` if the guide saw none of its
    /// branches run.
    fn weights(&self, func: u32, a: &FunctionAnalysis) -> Option<Vec<u64>> {
        let observed = self.observed(func, a)?;
        Some(observed.into_iter().map(|c| c.unwrap_or(0)).collect())
    }

    /// TPP's local cold criterion (§4.1.1) for one function: a branch outcome is cold when
    /// it ran less than `threshold` of its branch's executions (for a k-way `br_table`,
    /// `threshold × 2/k`), or never (never-run branches of a function that did run are
    /// cold on every outcome). `None` when the guide never saw
    /// the function run: then nothing is pruned.
    fn cold_edges(&self, func: u32, a: &FunctionAnalysis, threshold: f64) -> Option<Vec<bool>> {
        let counts = self.site_counts(func, a)?;
        Some(
            a.edges
                .iter()
                .map(|info| {
                    info.branch.is_some_and(|(site, outcome)| {
                        let c = counts[site.0 as usize];
                        let total: u64 = c.map_or(0, |c| c.iter().sum());
                        let n = c
                            .and_then(|c| c.get(outcome as usize))
                            .copied()
                            .unwrap_or(0);
                        // A k-way `br_table` (an interpreter's dispatch, say) compares each
                        // target with its fair share: the threshold is scaled by 2/k, which
                        // is TPP's rule for two-way branches.
                        let k = a.sites[site.0 as usize].outcomes.len().max(2) as f64;
                        n == 0 || (n as f64) < threshold * total as f64 * 2.0 / k
                    })
                })
                .collect(),
        )
    }
}

/// Tuning knobs of the rewriter.
#[derive(Clone, Debug)]
pub struct InstrumentOptions {
    pub mode: Mode,
    /// Functions with at most this many paths count into arrays; more go to the hash table.
    pub array_max_paths: u64,
    /// Total bytes of path-counter arrays before the rest fall back to hashing.
    pub array_budget: u64,
    /// log2 of the hash table's capacity in entries (24 bytes each).
    pub hash_capacity_log2: u32,
    /// log2 of the entries in each hashed function's direct-mapped path cache; 0 for no
    /// cache (a table call at every path end).
    pub hash_cache_log2: u32,
    /// PEP: record every `k`-th path end in the guest (deterministic) instead of appending
    /// every path end to the ring for the host sampler.
    pub pep_every: Option<u32>,
    /// PEP: log2 of the ring buffer's length in entries.
    pub ring_log2: u32,
    /// Edge profile for smart numbering (paths and PEP modes) and for cold path
    /// elimination (targeted mode).
    pub guide: Option<std::sync::Arc<Guide>>,
    /// Targeted mode: a branch outcome taken less than this fraction of its branch's
    /// executions in the guide is cold (TPP(5, 15)'s 5%).
    pub cold_threshold: f64,
    /// Targeted mode: count a loop's most frequent path in a local ([`RegisterLoop`])
    /// where its entry carries less than this fraction of its header's executions in the
    /// guide (TPP(5, 15)'s 15% loop threshold: more than about 6.7 iterations per entry).
    /// 0 turns register loops off.
    pub loop_threshold: f64,
    /// Targeted mode: TPP's obvious path elimination (count obvious paths on a defining
    /// edge instead of with the path register). Off by default: counting an obvious path
    /// still takes one memory increment per execution, the same as `count[r]++`, and the
    /// register code it saves costs about nothing under Cranelift.
    pub obvious: bool,
    /// Calling contexts: a shadow stack for the sampler, or the exact tree.
    pub contexts: ContextMode,
    /// log2 of the shadow stack's length in frames.
    pub stack_log2: u32,
    /// Exact contexts: log2 of the context table's capacity in nodes.
    pub cct_capacity_log2: u32,
    /// Contexts: count calls per call site (one increment per call; the sampled tree's
    /// call estimates come from these).
    pub site_counters: bool,
    /// Native contexts: log every function entry and every return to a call site in a
    /// ring of 2^n words, so each stack sample carries a window of the calls just before
    /// it, each in its exact context (`pepper_cct::window`). `None`: no log.
    pub call_log_log2: Option<u32>,
    /// PEP with native contexts and no call log: replay the path ends each stack sample
    /// copies from PEP's ring as calls (`pepper_cct::paths`), which needs the ring to
    /// hold at least 2^[`PATH_WINDOW_RING_LOG2`] path ends and where each operator's code
    /// went (`FunctionPlan::op_offsets`). Nothing changes in the guest's code.
    pub path_windows: bool,
    /// Exact edges: read loops' induction variables at their exits instead of counting an
    /// edge on every iteration (see [`LoopCount`]).
    pub loop_counts: bool,
    /// PEP: keep a clean copy of every function next to its instrumented one and run the
    /// instrumented copy only while pepper's switch flag is set (`crate::switch`), with
    /// the flag checked where this says. Not with shadow stacks or call logs.
    pub switch: Option<crate::switch::SwitchPlacement>,
    /// Switch, for tests: every check steps a pseudo-random generator kept in the flag
    /// word and switches on one of its bits, so copies change at random checks in both
    /// directions, with no host involved.
    pub switch_chaos: bool,
}

/// Default for [`InstrumentOptions::array_max_paths`]: arrays up to 512 KB per function.
/// An array slot is a load-add-store; a hashed path end is a call, a hash and a probe
/// (about 11 cycles): on bzip2, whose sorting function has 8,235 paths, raising the limit
/// from 4,096 took exact-paths from +57% to +10% over uninstrumented. Only the pages of an
/// array that its paths touch are ever faulted in, so large sparse arrays cost little.
pub const DEFAULT_ARRAY_MAX_PATHS: u64 = 1 << 16;

/// log2 of PEP's ring length with path windows, at least: each stack sample copies the
/// ring (4,096 path ends, 32 KB; Lua completes that many in about 4 µs). Measured on Lua
/// at 1 ms: windows of 16,384 path ends placed no more calls correctly (call overlap
/// 83-89% against 87-93%) and cost a 128 KB copy per sample; more, shorter windows beat
/// fewer, longer ones (stack samples every 500 µs: 92-96%).
pub const PATH_WINDOW_RING_LOG2: u32 = 12;

impl Default for InstrumentOptions {
    fn default() -> Self {
        InstrumentOptions {
            mode: Mode::ExactPaths,
            array_max_paths: DEFAULT_ARRAY_MAX_PATHS,
            array_budget: 256 << 20,
            hash_capacity_log2: 20,
            hash_cache_log2: HASH_CACHE_ENTRIES.trailing_zeros(),
            pep_every: None,
            ring_log2: 12,
            guide: None,
            cold_threshold: 0.05,
            loop_threshold: 0.15,
            obvious: false,
            contexts: ContextMode::Off,
            stack_log2: 14,
            cct_capacity_log2: 18,
            site_counters: true,
            call_log_log2: None,
            path_windows: true,
            loop_counts: true,
            switch: None,
            switch_chaos: false,
        }
    }
}

/// The rewriter's decisions for one defined function: enough to decode its counters.
#[derive(Clone, Debug)]
pub struct FunctionPlan {
    pub index: FuncIndex,
    pub name: Option<String>,
    /// Why the function was left alone, if it was.
    pub skipped: Option<String>,
    /// Shared: path windows read it from the sampler thread during the run.
    pub analysis: Option<Arc<FunctionAnalysis>>,
    pub numbered: Option<Arc<NumberedDag>>,
    pub counting: Counting,
    /// Global id of this function's first branch site.
    pub first_branch: u32,
    /// Edges mode: the counter address of each CFG edge that is a chord of the counting
    /// tree (the rest are derived by flow conservation).
    pub edge_counter: Vec<Option<u32>>,
    pub edge_counting: Option<EdgeCounting>,
    /// Targeted mode: the u64 counter of executions of paths through cold edges, and how
    /// many CFG edges were cold.
    pub cold_counter: Option<u32>,
    pub cold_edges: u32,
    /// Targeted mode: the value a cold edge puts in the path register. Negative, so no path
    /// number is ever mistaken for it; in array functions (whose register holds 8 × the
    /// path number, [`Counting::scale`]) its low 32 bits are `8n` for `n` paths, so that a
    /// poisoned register plus the hot increments after it (less than `8n` in all) is the
    /// byte offset of one of the slots `n..2n`, which count cold executions with no test
    /// at the path end.
    pub poison: i64,
    /// Targeted mode: the counter of each obvious path (TPP §4.2), on its defining edge.
    pub obvious: Vec<ObviousCounter>,
    /// Edges mode: loops whose induction variable gives the count of the node that steps
    /// it, where the spanning tree found reading it cheaper than a counter.
    pub loop_counts: Vec<LoopCount>,
    /// Targeted mode: loops whose most frequent path is counted in a local.
    pub register_loops: Vec<RegisterLoop>,
    /// Module-wide id of this function's first call site (contexts).
    pub first_site: u32,
    /// PEP with native stacks: where each original operator's code begins in the
    /// rewritten body (bytes from the start of the body's locals), so that a sampled
    /// program counter maps back to its CFG node (`PathSites`). Empty otherwise.
    pub op_offsets: Arc<[u32]>,
    /// Switch: the function indices of its instrumented copy and its second clean copy
    /// (see `crate::switch`); `None` when the function has one body.
    pub copies: Option<(u32, u32)>,
    /// Ephemeral: the checked loops' header nodes and the addresses of their counters
    /// (every copy counts each iteration at its check).
    pub header_counters: Vec<(pepper_cfg::NodeId, u32)>,
}

/// An obvious path's counter: a u64 at `addr` (its array slot when the function counts
/// into an array) incremented on DAG edge `edge`; `guarded`: only while the path register
/// is not poisoned.
#[derive(Copy, Clone, Debug)]
pub struct ObviousCounter {
    pub edge: pepper_cfg::DagEdgeId,
    pub path: u64,
    pub addr: u32,
    pub guarded: bool,
}

/// Where things live in the profiler memory.
#[derive(Clone, Debug, Default)]
pub struct MemoryLayout {
    /// u32: hash entries in use.
    pub hash_used: u32,
    /// u64: path executions dropped because the hash table was full.
    pub hash_overflow: u32,
    pub hash_base: u32,
    pub hash_capacity: u32,
    /// Entries in each hashed function's path cache (a power of two).
    pub hash_cache_entries: u32,
    /// PEP ring: u32 count of path ends written (the next slot is `head % entries`).
    pub ring_head: u32,
    pub ring_base: u32,
    pub ring_entries: u32,
    /// PEP every-K: u32 path ends since the last sample.
    pub every_counter: u32,
    /// Contexts: u32 shadow stack pointer (bytes, unmasked: depth × 16).
    pub stack_pointer: u32,
    pub stack_base: u32,
    /// Frames in the shadow stack ring (a power of two; 0 without contexts).
    pub stack_entries: u32,
    /// Contexts: u64 call counter per call site.
    pub site_counters: u32,
    /// Call log: u32 count of events written (the next slot is `head % entries`).
    pub call_log_head: u32,
    /// Call log: u32 events, `func` at entries and `site | RET` at returns.
    pub call_log_base: u32,
    /// Events in the call log ring (a power of two; 0 without a log).
    pub call_log_entries: u32,
    /// Exact contexts: the context table (same entry layout as the path hash table).
    pub cct: HashTable,
    /// Switch: u32 flag, non-zero while instrumented copies should run (0 without one).
    /// Ephemeral: the first of one i32 budget per defined function.
    pub switch_flag: u32,
    /// Ephemeral: one u64 entry counter per defined function.
    pub entry_counts: u32,
    pub size: u64,
}

/// An open-addressing table in profiler memory: `[key: u64][count: u64][func + 1: u32][pad]`
/// entries, a u32 count of entries in use and a u64 count of insertions refused when full.
#[derive(Copy, Clone, Debug, Default)]
pub struct HashTable {
    pub base: u32,
    pub capacity: u32,
    pub used: u32,
    pub overflow: u32,
}

impl MemoryLayout {
    /// PEP ring: (head address, ring address, entries), as the host sampler needs them.
    pub fn ring(&self) -> (u32, u32, u32) {
        (self.ring_head, self.ring_base, self.ring_entries)
    }

    /// Call log: (head address, ring address, entries); `None` without one.
    pub fn call_log(&self) -> Option<(u32, u32, u32)> {
        (self.call_log_entries > 0).then_some((
            self.call_log_head,
            self.call_log_base,
            self.call_log_entries,
        ))
    }
}

/// The result of instrumenting a module: the new bytes and the plan to decode its counters.
#[derive(Clone, Debug)]
pub struct Plan {
    pub mode: Mode,
    pub functions: Vec<FunctionPlan>,
    pub layout: MemoryLayout,
    pub num_branches: u32,
    pub contexts: ContextMode,
    /// Every call instruction of the instrumented functions (contexts), by id.
    pub call_sites: Vec<CallSiteInfo>,
    /// `module::name` of each imported function, by function index.
    pub imports: Vec<String>,
    /// Whether the output has pepper's counters memory (false: the module is unchanged).
    pub rewritten: bool,
    /// Contexts: (function, counter address, canonical signature) of each function that
    /// indirect calls may reach and whose entries are counted.
    pub entry_counters: Vec<(u32, u32, u32)>,
    /// Exact edges: functions whose entries their callers' counts give, callers first.
    pub given_entries: crate::entries::GivenEntries,
    /// Whether stack samples replay PEP's ring as calls ([`InstrumentOptions::path_windows`]).
    pub path_windows: bool,
    /// Where clean code checks the switch flag, when functions have switchable copies.
    pub switch: Option<crate::switch::SwitchPlacement>,
    pub warnings: Vec<String>,
    /// Custom sections (or parts of them) the instrumented module leaves out because they
    /// locate code by offset and rewriting moved it: DWARF, branch hints of rewritten
    /// functions, source maps. Not a warning: the original module keeps them, and pepper
    /// reads DWARF from the original.
    pub dropped_sections: Vec<String>,
}

pub struct Instrumented {
    pub wasm: Vec<u8>,
    pub plan: Plan,
}

#[derive(Debug, thiserror::Error)]
pub enum InstrumentError {
    #[error("invalid module: {0}")]
    Invalid(#[from] wasmparser::BinaryReaderError),
    #[error("rewriting failed: {0}")]
    Encode(String),
    #[error("the profiler memory would need {0} bytes, more than a 32-bit memory holds; lower --array-budget")]
    TooLarge(u64),
}

struct Bump(u64);
impl Bump {
    fn alloc(&mut self, bytes: u64) -> u32 {
        let at = (self.0 + 7) & !7;
        self.0 = at + bytes;
        at as u32
    }
}

/// Instruments `wasm` for `opts.mode`, leaving any function it cannot handle unchanged (with
/// a warning naming it). The output validates and behaves like the input; see
/// `tests/differential.rs`.
pub fn instrument(wasm: &[u8], opts: &InstrumentOptions) -> Result<Instrumented, InstrumentError> {
    let facts = ModuleFacts::parse(wasm)?;
    let mut validator = wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all());
    validator.validate_all(wasm)?;
    let mut force_skip: Vec<(usize, String)> = Vec::new();
    // A rewriter bug must never cost the user a run: if the output does not validate, the
    // function at fault is left uninstrumented and the module rewritten again.
    for _ in 0..32 {
        let (bytes, plan) = build(wasm, &facts, opts, &force_skip)?;
        let mut v = wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all());
        match v.validate_all(&bytes) {
            Ok(_) => return Ok(Instrumented { wasm: bytes, plan }),
            Err(e) => {
                let Some(k) = function_at(&bytes, e.offset() as usize) else {
                    return Err(InstrumentError::Encode(e.to_string()));
                };
                if force_skip.iter().any(|s| s.0 == k) {
                    return Err(InstrumentError::Encode(e.to_string()));
                }
                force_skip.push((
                    k,
                    format!("internal rewriter error ({e}); left uninstrumented"),
                ));
            }
        }
    }
    Err(InstrumentError::Encode(
        "too many functions failed validation".into(),
    ))
}

/// Which defined function's body contains `offset` in `wasm`.
fn function_at(wasm: &[u8], offset: usize) -> Option<usize> {
    let mut k = 0;
    for p in wasmparser::Parser::new(0).parse_all(wasm) {
        if let Ok(wasmparser::Payload::CodeSectionEntry(body)) = p {
            let r = body.range();
            if (r.start as usize..=r.end as usize).contains(&offset) {
                return Some(k);
            }
            k += 1;
        }
    }
    None
}

fn build(
    wasm: &[u8],
    facts: &ModuleFacts<'_>,
    opts: &InstrumentOptions,
    force_skip: &[(usize, String)],
) -> Result<(Vec<u8>, Plan), InstrumentError> {
    let mode = opts.mode;
    let mut warnings = Vec::new();
    let mut functions = Vec::with_capacity(facts.bodies.len());
    // 0: hash entries used, 8: hash overflow, 16: discard slot for uncounted br_table
    // arms, 24: PEP ring head, 32: PEP every-K counter, 40: shadow stack pointer, 44: call
    // log head, 48: context table entries used, 56: context table overflow.
    let mut bump = Bump(64);
    let mut layout = MemoryLayout {
        hash_used: 0,
        hash_overflow: 8,
        ring_head: 24,
        every_counter: 32,
        stack_pointer: 40,
        call_log_head: 44,
        cct: HashTable {
            used: 48,
            overflow: 56,
            ..Default::default()
        },
        ..Default::default()
    };
    layout.hash_cache_entries = match opts.hash_cache_log2 {
        0 => 0,
        l => 1 << l.min(16),
    };
    let contexts = opts.contexts;
    // Ephemeral instrumentation is the switch with a budget per function: checks at entry
    // and outermost loops (the cheapest placement that still reaches long loops).
    let ephemeral = mode == Mode::Ephemeral;
    let switch = match ephemeral {
        true => Some(crate::switch::SwitchPlacement::Outer),
        false => opts.switch.filter(|_| mode == Mode::Pep),
    }
    .filter(|_| !contexts.shadow() && opts.call_log_log2.is_none());
    let path_windows = opts.path_windows
        && switch.is_none()
        && mode == Mode::Pep
        && contexts == ContextMode::Native
        && opts.pep_every.is_none()
        && opts.call_log_log2.is_none();
    let mut call_sites: Vec<CallSiteInfo> = Vec::new();
    let mut array_bytes = 0u64;
    let mut next_branch = 0u32;
    let mut any_hash = false;

    // Exact edges decide across functions which entry counts callers give (analyzing
    // every body first); other modes analyze each body as they go. Loop counts (exact
    // edges) and register loops (targeted) need to know whether anything can unwind.
    let mut analyses: Vec<Option<Result<FunctionAnalysis, crate::analysis::AnalysisError>>> =
        Vec::new();
    let mut given = crate::entries::GivenEntries::default();
    let mut may_unwind = false;
    if mode == Mode::ExactEdges || mode == Mode::Targeted {
        let all: Vec<_> = facts.bodies.iter().map(analyze).collect();
        may_unwind = crate::entries::may_unwind(&all);
        if mode == Mode::ExactEdges {
            let skipped: Vec<bool> = (0..all.len())
                .map(|k| force_skip.iter().any(|s| s.0 == k))
                .collect();
            given = crate::entries::GivenEntries::decide(facts, &all, &skipped);
        }
        analyses = all.into_iter().map(Some).collect();
    }

    for (k, body) in facts.bodies.iter().enumerate() {
        let index = facts.func_index(k);
        let name = facts.names.get(&index.0).cloned();
        let display = name.clone().unwrap_or_else(|| format!("func[{}]", index.0));
        let mut fp = FunctionPlan {
            index,
            name,
            skipped: None,
            analysis: None,
            numbered: None,
            counting: Counting::None,
            first_branch: next_branch,
            edge_counter: Vec::new(),
            edge_counting: None,
            cold_counter: None,
            cold_edges: 0,
            poison: POISON,
            obvious: Vec::new(),
            loop_counts: Vec::new(),
            register_loops: Vec::new(),
            first_site: call_sites.len() as u32,
            op_offsets: Arc::from([]),
            copies: None,
            header_counters: Vec::new(),
        };
        if mode == Mode::None && contexts == ContextMode::Off {
            functions.push(fp);
            continue;
        }
        if let Some((_, why)) = force_skip.iter().find(|s| s.0 == k) {
            fp.skipped = Some(why.clone());
        }
        let analysis = match analyses
            .get_mut(k)
            .and_then(Option::take)
            .unwrap_or_else(|| analyze(body))
        {
            Ok(a) => Some(a),
            Err(e) => {
                fp.skipped = Some(e.to_string());
                None
            }
        };
        if let Some(a) = analysis {
            // Branch ids are assigned even when the function ends up skipped, so that the
            // profile lists every branch instruction of the module.
            next_branch += a.sites.len() as u32;
            if mode == Mode::Pep && pep_tag(index.0).is_none() {
                fp.skipped = Some("function index too large for PEP's path tag".into());
            }
            if fp.skipped.is_none() {
                if mode.paths() {
                    let guided = opts.guide.as_ref().and_then(|g| g.weights(index.0, &a));
                    let weights =
                        dag_weights(guided.unwrap_or_else(|| static_numbering_weights(&a)));
                    // One limit for every paths mode, so that exact and PEP profiles cut the
                    // same monster functions at the same places and their paths compare.
                    let limit = REGISTER_PATH_LIMIT.min(1 << PEP_TAG_SHIFT);
                    let cold = match (mode, &opts.guide) {
                        (Mode::Targeted, Some(g)) => g.cold_edges(index.0, &a, opts.cold_threshold),
                        _ => None,
                    };
                    match number_pruned(
                        &a.cfg,
                        &a.headers,
                        &[a.funnel],
                        Some(&weights),
                        limit,
                        cold.as_deref(),
                    ) {
                        Ok(nd) => {
                            let n = nd.numbering.total();
                            // Targeted: slots n..2n catch poisoned registers (see
                            // `FunctionPlan::poison`), so a path end needs no test.
                            let slots = if mode == Mode::Targeted { 2 * n } else { n };
                            fp.counting = if mode == Mode::Pep {
                                match opts.pep_every {
                                    Some(k) => {
                                        any_hash = true;
                                        Counting::Every { k: k.max(1) }
                                    }
                                    None => Counting::Ring,
                                }
                            } else if n <= opts.array_max_paths
                                && array_bytes + 8 * slots <= opts.array_budget
                            {
                                array_bytes += 8 * slots;
                                fp.poison = POISON + 8 * n as i64;
                                Counting::Array {
                                    base: bump.alloc(8 * slots),
                                }
                            } else {
                                any_hash = true;
                                Counting::Hash {
                                    cache: (layout.hash_cache_entries > 0)
                                        .then(|| bump.alloc(16 * layout.hash_cache_entries as u64)),
                                }
                            };
                            if mode == Mode::Targeted {
                                fp.cold_counter = Some(bump.alloc(8));
                                fp.cold_edges = (0..a.cfg.num_edges())
                                    .filter(|&e| nd.edge_val(pepper_cfg::EdgeId::new(e)).is_none())
                                    .count() as u32;
                            }
                            let mut nd = nd;
                            if mode == Mode::Targeted && opts.obvious {
                                let costs = counter_costs(&a);
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
                                            _ => bump.alloc(8),
                                        },
                                    })
                                    .collect();
                                nd.obvious = Some(ob);
                            }
                            // Not with obvious paths, which count some iteration paths
                            // on an edge already (into the same slot).
                            if let (Mode::Targeted, Counting::Array { base }, false, false) =
                                (mode, fp.counting, may_unwind, opts.obvious)
                            {
                                let observed =
                                    opts.guide.as_ref().and_then(|g| g.observed(index.0, &a));
                                let freqs = frequencies(&a, observed.as_deref());
                                fp.register_loops =
                                    register_loops(&a, &nd, &freqs, base, opts.loop_threshold);
                            }
                            fp.numbered = Some(Arc::new(nd));
                        }
                        Err(e) => fp.skipped = Some(e.to_string()),
                    }
                } else if mode == Mode::ExactEdges {
                    let given = given.given.get(k).copied().unwrap_or(false);
                    let ec = if a.sites.is_empty() {
                        // No branch, nothing to report: the one count such a function has
                        // (its entries) would cost an increment per call for no output.
                        // (With given entries, its edges are still known, for its callees.)
                        EdgeCounting::uncounted(&a.cfg, given)
                    } else {
                        let observed = opts.guide.as_ref().and_then(|g| g.observed(index.0, &a));
                        let freqs = frequencies(&a, observed.as_deref());
                        let weights = edge_weights(&a, &freqs);
                        // Unwinding skips loop exits, and so what a loop's count adds there.
                        let loops = if may_unwind || !opts.loop_counts {
                            Vec::new()
                        } else {
                            readable_loops(&a)
                        };
                        let offered: Vec<_> = loops
                            .iter()
                            .map(|l| (l.counter.node, loop_count_weight(&a, &freqs, l)))
                            .collect();
                        let ec = EdgeCounting::with_given(&a.cfg, &weights, given, &offered);
                        fp.loop_counts = loops
                            .into_iter()
                            .filter(|l| ec.nodes_given.contains(&l.counter.node))
                            .map(|l| LoopCount {
                                addr: bump.alloc(8),
                                ..l
                            })
                            .collect();
                        ec
                    };
                    fp.edge_counter = ec.chord.iter().map(|&c| c.then(|| bump.alloc(8))).collect();
                    fp.edge_counting = Some(ec);
                } else {
                    // Contexts only: the function keeps its shape, no edge carries code.
                    fp.edge_counter = vec![None; a.cfg.num_edges()];
                }
            }
            fp.analysis = Some(Arc::new(a));
        }
        if contexts != ContextMode::Off {
            // Listed for every function, instrumented or not: native stack samples name
            // call sites in functions pepper leaves alone too.
            match crate::contexts::call_sites(index.0, body) {
                Ok(sites) => call_sites.extend(sites),
                Err(e) => fp.skipped = Some(e.to_string()),
            }
        }
        if let Some(why) = &fp.skipped {
            warnings.push(format!(
                "function {} ({display}) left uninstrumented: {why}",
                index.0
            ));
        }
        functions.push(fp);
    }

    // Increment / arm tables for br_table, one contiguous data segment.
    let tables_start = bump.alloc(0);
    let mut table_bytes: Vec<u8> = Vec::new();
    let mut tables: Vec<Vec<(usize, u32)>> = vec![Vec::new(); functions.len()];
    let mut arm_codes: Vec<Vec<(usize, ArmCode)>> = vec![Vec::new(); functions.len()];
    for (k, fp) in functions.iter().enumerate() {
        let Some(a) = fp.analysis.as_ref().filter(|_| fp.skipped.is_none()) else {
            continue;
        };
        for (pos, (_, _, act)) in a.actions.iter().enumerate() {
            let Action::BrTable { arms, bare } = act else {
                continue;
            };
            let entries: Option<Vec<u8>> = match mode {
                Mode::ExactPaths | Mode::Pep | Mode::Targeted | Mode::Ephemeral => {
                    fp.numbered.as_ref().and_then(|nd| {
                        let (poison, scale) = (fp.poison, fp.counting.scale());
                        let code = arm_code(nd, &a.edges, arms, *bare, poison, scale);
                        let bytes = match &code {
                            ArmCode::Table(vals) => {
                                Some(vals.iter().flat_map(|v| v.to_le_bytes()).collect())
                            }
                            ArmCode::Before(_) | ArmCode::Pads(_) => None,
                        };
                        arm_codes[k].push((pos, code));
                        bytes
                    })
                }
                Mode::ExactEdges => {
                    let addrs = arms.iter().map(|&e| match fp.edge_counter[e.index()] {
                        Some(at) if !a.edges[e.index()].at_target => at,
                        _ => DISCARD,
                    });
                    Some(addrs.flat_map(|s| s.to_le_bytes()).collect())
                }
                Mode::None => None,
            };
            if let Some(bytes) = entries {
                while !(tables_start as usize + table_bytes.len()).is_multiple_of(8) {
                    table_bytes.push(0);
                }
                tables[k].push((pos, tables_start + table_bytes.len() as u32));
                table_bytes.extend(bytes);
            }
        }
    }
    bump.0 = tables_start as u64 + table_bytes.len() as u64;

    let cap_log2 = if any_hash { opts.hash_capacity_log2 } else { 4 };
    layout.hash_capacity = 1 << cap_log2;
    layout.hash_base = bump.alloc(24 * layout.hash_capacity as u64);
    if mode == Mode::Pep && opts.pep_every.is_none() {
        let ring_log2 = if path_windows {
            opts.ring_log2.max(PATH_WINDOW_RING_LOG2)
        } else {
            opts.ring_log2
        };
        layout.ring_entries = 1 << ring_log2.clamp(4, 20);
        layout.ring_base = bump.alloc(8 * layout.ring_entries as u64);
    }
    let counters = contexts != ContextMode::Off && opts.site_counters;
    if contexts.shadow() {
        layout.stack_entries = 1 << opts.stack_log2.clamp(4, 20);
        layout.stack_base = bump.alloc((FRAME_BYTES * layout.stack_entries) as u64);
    }
    // Indirect calls: canonical signatures, and an entry counter in every function they
    // may reach, so that each such function's calls are known even when no sample sees
    // which indirect site made them.
    // (Only with contexts: otherwise there are no call sites and no entry counters.)
    let sigs = if contexts == ContextMode::Off {
        Default::default()
    } else {
        facts.signature_ids()
    };
    for s in &mut call_sites {
        s.sig = s.sig.and_then(|t| sigs.get(&t).copied());
    }
    let mut entry_counters = Vec::new();
    if counters {
        layout.site_counters = bump.alloc(8 * call_sites.len() as u64);
        for fp in &functions {
            let f = fp.index.0;
            if fp.skipped.is_none() && fp.analysis.is_some() && facts.address_taken.contains(&f) {
                if let Some(sig) = facts.func_type(f).and_then(|t| sigs.get(&t).copied()) {
                    entry_counters.push((f, bump.alloc(8), sig));
                }
            }
        }
    }
    if let (true, Some(log2)) = (contexts != ContextMode::Off, opts.call_log_log2) {
        layout.call_log_entries = 1 << log2.clamp(8, 20);
        layout.call_log_base = bump.alloc(4 * layout.call_log_entries as u64);
    }
    let shapes = match switch {
        Some(_) => crate::switch::shapes(wasm)?,
        None => Vec::new(),
    };
    // Ephemeral: per function, the checked loops' header counters.
    let mut header_counters = vec![0u32; functions.len()];
    if ephemeral {
        layout.switch_flag = bump.alloc(4 * functions.len() as u64);
        layout.entry_counts = bump.alloc(8 * functions.len() as u64);
        for (k, s) in shapes.iter().enumerate().take(functions.len()) {
            let n = s.targets(crate::switch::SwitchPlacement::Outer).len() as u64;
            header_counters[k] = bump.alloc(8 * n);
        }
    } else if switch.is_some() {
        layout.switch_flag = bump.alloc(8);
    }
    if contexts == ContextMode::Exact {
        layout.cct.capacity = 1 << opts.cct_capacity_log2.clamp(4, 24);
        layout.cct.base = bump.alloc(24 * layout.cct.capacity as u64);
    }
    layout.size = bump.0;
    if layout.size > (u32::MAX as u64) - (1 << 20) {
        return Err(InstrumentError::TooLarge(layout.size));
    }

    let plan = Plan {
        mode,
        functions,
        layout,
        num_branches: next_branch,
        contexts,
        call_sites,
        imports: facts.imports.clone(),
        rewritten: false,
        entry_counters,
        given_entries: given,
        path_windows,
        switch,
        warnings,
        dropped_sections: Vec::new(),
    };
    let context_code = contexts.shadow() || counters || plan.layout.call_log_entries > 0;
    if (mode == Mode::None && !context_code) || facts.bodies.is_empty() {
        return Ok((wasm.to_vec(), plan));
    }
    let mut plan = plan;
    plan.rewritten = true;

    // Types pepper appends: the hash function's, and `[] -> results` for wrapper blocks of
    // multi-result functions.
    let hash_type = facts.num_types;
    let mut extra_types: Vec<(Vec<ValType>, Vec<ValType>)> = vec![
        (vec![ValType::I32, ValType::I64, ValType::I64], vec![]),
        (vec![ValType::I32, ValType::I64], vec![ValType::I32]),
        (vec![ValType::I32, ValType::I64, ValType::I32], vec![]),
    ];
    let mem = facts.num_memories;
    let hash_fn = facts.num_imported_funcs + facts.bodies.len() as u32;
    let enter_fn = hash_fn + 1;
    let miss_fn = hash_fn + 2;
    let mut bodies: Vec<Option<Function>> = Vec::with_capacity(plan.functions.len());
    let mut op_offsets = Vec::new();
    // Switch copies, appended after pepper's own functions: (type, body) and the copies
    // of each function, decided first so that instrumented copies can call each other.
    let mut copy_fns: Vec<(u32, Function)> = Vec::new();
    let mut copies: Vec<(usize, (u32, u32))> = Vec::new();
    let mut switchable: Vec<Option<(u32, Vec<I<'static>>)>> = vec![None; plan.functions.len()];
    if switch.is_some() {
        let mut next = hash_fn + 3;
        for (k, fp) in plan.functions.iter().enumerate() {
            if fp.analysis.is_none() || fp.skipped.is_some() {
                continue;
            }
            let mut locals = Vec::new();
            for l in facts.bodies[k].get_locals_reader()? {
                let (n, t) = l?;
                locals.extend(std::iter::repeat_n(val_type(t)?, n as usize));
            }
            let np = facts.defined_sig(k).map_or(0, |s| s.params.len());
            if let Some(mut zeros) = crate::switch::copy_zeros(np, &locals) {
                zeros.push(I::I32Const(0));
                switchable[k] = Some((next, zeros));
                next += 2;
            }
        }
    }
    // Not to functions that tables reach: their entry counters (contexts) are in `F`,
    // which checks the flag at entry anyway.
    let redirect = |f: u32| {
        let k = f.checked_sub(facts.num_imported_funcs)? as usize;
        if facts.address_taken.contains(&f) {
            return None;
        }
        switchable.get(k)?.clone()
    };
    let entry_counter: std::collections::HashMap<u32, u32> =
        plan.entry_counters.iter().map(|e| (e.0, e.1)).collect();
    for (k, fp) in plan.functions.iter().enumerate() {
        let (Some(a), None) = (&fp.analysis, &fp.skipped) else {
            bodies.push(None);
            continue;
        };
        let sig = facts.defined_sig(k).ok_or_else(|| {
            InstrumentError::Encode(format!("function {} has no function type", fp.index.0))
        })?;
        let results: Vec<ValType> = sig
            .results
            .iter()
            .map(|&t| val_type(t))
            .collect::<Result<_, _>>()?;
        let wrapper = match results.len() {
            0 => BlockType::Empty,
            1 => BlockType::Result(results[0]),
            _ => {
                let pos = extra_types
                    .iter()
                    .position(|t| t.0.is_empty() && t.1 == results);
                let pos = pos.unwrap_or_else(|| {
                    extra_types.push((vec![], results.clone()));
                    extra_types.len() - 1
                });
                BlockType::FunctionType(facts.num_types + pos as u32)
            }
        };
        let kind = || match mode {
            Mode::ExactPaths | Mode::Pep | Mode::Targeted | Mode::Ephemeral => EmitKind::Paths {
                numbered: fp
                    .numbered
                    .as_ref()
                    .expect("paths mode numbers every instrumented function"),
                counting: fp.counting,
                func: fp.index.0,
                tag: match mode {
                    Mode::Pep => pep_tag(fp.index.0).unwrap_or(0),
                    _ => 0,
                },
                layout: &plan.layout,
                cold_counter: fp.cold_counter,
                poison: fp.poison,
                obvious: &fp.obvious,
                register_loops: &fp.register_loops,
                hash_fn,
                miss_fn,
                tables: &tables[k],
                arm_codes: &arm_codes[k],
            },
            _ => EmitKind::Edges {
                counter: &fp.edge_counter,
                tables: &tables[k],
                loops: &fp.loop_counts,
            },
        };
        let ctx = || {
            context_code.then_some((
                ContextEmit {
                    mode: contexts,
                    layout: &plan.layout,
                    mem,
                    func: fp.index.0,
                    enter_fn,
                    counters,
                    entry_counter: entry_counter.get(&fp.index.0).copied(),
                    imported_funcs: facts.num_imported_funcs,
                },
                fp.first_site,
            ))
        };
        let num_params = sig.params.len() as u32;
        if let (Some(placement), Some((first, _))) = (switch, &switchable[k]) {
            let first = *first;
            let params: Vec<ValType> = sig
                .params
                .iter()
                .map(|&t| val_type(t))
                .collect::<Result<_, _>>()?;
            let f = fp.index.0;
            let switched = SwitchedFunction {
                facts,
                k,
                a,
                wrapper,
                mem,
                flag: match ephemeral {
                    true => plan.layout.switch_flag + 4 * k as u32,
                    false => plan.layout.switch_flag,
                },
                budget: ephemeral.then(|| crate::switch::Budget {
                    entries: plan.layout.entry_counts + 8 * k as u32,
                    headers: header_counters[k],
                }),
                params: &params,
                results: &results,
                shape: &shapes[k],
                placement,
                chaos: opts.switch_chaos,
                entry_check: ephemeral
                    || placement.entry_check(
                        facts.address_taken.contains(&f) || facts.entry_points.contains(&f),
                    ),
                copies: (first, first + 1),
            };
            let no_counters = vec![None; a.cfg.num_edges()];
            let clean = || EmitKind::Edges {
                counter: &no_counters,
                tables: &[],
                loops: &[],
            };
            // Ephemeral: calls go to the callee's `F`, which spends its own budget.
            let no_redirect = |_: u32| None;
            let redirect: crate::switch::Redirect<'_> = match ephemeral {
                true => &no_redirect,
                false => &redirect,
            };
            let (f, inst, clean_copy, ty) = switched
                .emit(kind(), clean, ctx, redirect, &mut extra_types)?
                .ok_or_else(|| InstrumentError::Encode(format!("function {f}: no copies")))?;
            let ty = facts.num_types + ty;
            debug_assert_eq!(first, hash_fn + 3 + copy_fns.len() as u32);
            copy_fns.push((ty, inst));
            copy_fns.push((ty, clean_copy));
            copies.push((k, (first, first + 1)));
            bodies.push(Some(f));
            continue;
        }
        let (body, offsets) = emit_body(facts, k, a, num_params, wrapper, mem, kind(), ctx())?;
        bodies.push(Some(body));
        if plan.path_windows {
            op_offsets.push((k, offsets));
        }
    }
    for (k, offsets) in op_offsets {
        plan.functions[k].op_offsets = Arc::from(offsets);
    }
    for (k, c) in copies {
        plan.functions[k].copies = Some(c);
        if ephemeral {
            let (shape, a) = (&shapes[k], plan.functions[k].analysis.as_ref());
            let targets = shape.targets(crate::switch::SwitchPlacement::Outer);
            plan.functions[k].header_counters = targets
                .iter()
                .zip(0u32..)
                .filter_map(|(&t, i)| {
                    let node = a?.op_nodes.get(shape.loops[t].op).copied().flatten()?;
                    Some((node, header_counters[k] + 8 * i))
                })
                .collect();
        }
    }
    let path_table = HashTable {
        base: plan.layout.hash_base,
        capacity: plan.layout.hash_capacity,
        used: plan.layout.hash_used,
        overflow: plan.layout.hash_overflow,
    };
    let mut cct = plan.layout.cct;
    if cct.capacity == 0 {
        // Not called without exact contexts; any valid table will do.
        cct = path_table;
    }
    let additions = Additions {
        extra_types,
        functions: vec![
            (hash_type, hash_function(mem, &path_table, false)),
            (hash_type + 1, hash_function(mem, &cct, true)),
            (hash_type + 2, cache_miss_function(mem, hash_fn)),
        ]
        .into_iter()
        .chain(copy_fns)
        .collect(),
        memory_pages: plan.layout.size.div_ceil(65536).max(1),
        memory_index: mem,
        data: (tables_start, table_bytes),
    };
    let (bytes, dropped) = write_module(wasm, facts, bodies, &additions)?;
    plan.dropped_sections = dropped;
    Ok((bytes, plan))
}

pub(crate) fn val_type(t: wasmparser::ValType) -> Result<ValType, InstrumentError> {
    use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
    RoundtripReencoder
        .val_type(t)
        .map_err(|e| InstrumentError::Encode(e.to_string()))
}

/// Re-encodes one body with the emitter's code spliced in at the analysis' action points,
/// and the context code (`ctx`, with the function's first call-site id) at entry, exits
/// and calls.
#[allow(clippy::too_many_arguments)]
fn emit_body<'f>(
    facts: &ModuleFacts<'f>,
    k: usize,
    a: &FunctionAnalysis,
    num_params: u32,
    wrapper: BlockType,
    mem: u32,
    kind: EmitKind<'_>,
    ctx: Option<(ContextEmit<'_>, u32)>,
) -> Result<(Function, Vec<u32>), InstrumentError> {
    let e = emit_instructions(
        facts,
        k,
        a,
        num_params,
        wrapper,
        mem,
        kind,
        ctx,
        BodyCopy::Only,
        None,
    )?;
    Ok(e.finish())
}

/// Which of a function's bodies is emitted.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum BodyCopy {
    /// The function's only body, or its clean body `F` under the switch.
    Only,
    /// A copy that the switch enters (`F_inst`, `F_clean`): the original locals are
    /// parameters, followed by the loop `id` (see `crate::switch`), and the entry
    /// bookkeeping of contexts is `F`'s.
    Entered,
}

/// One emitted body before encoding, with where its operators went.
pub(crate) struct Emitted<'f> {
    /// Declared locals (after the parameters).
    pub locals: Vec<(u32, ValType)>,
    /// The original locals (not parameters), in order, one entry each.
    pub original_locals: Vec<ValType>,
    pub out: Vec<I<'f>>,
    /// Per original operator: where the code of the actions before it begins.
    pub pre_at: Vec<usize>,
    /// Per original operator: where its own code begins.
    pub op_at: Vec<usize>,
    /// Where the function's own code begins, after context and path bookkeeping.
    pub start: usize,
    pub locals_at: Locals,
}

impl Emitted<'_> {
    /// Encodes the body; returns it with each original operator's code offset in it.
    pub fn finish(self) -> (Function, Vec<u32>) {
        encode(self.locals, &self.out, &self.op_at)
    }
}

pub(crate) fn encode(
    locals: Vec<(u32, ValType)>,
    out: &[I<'_>],
    op_at: &[usize],
) -> (Function, Vec<u32>) {
    let mut f = Function::new(locals);
    let mut at = Vec::with_capacity(out.len() + 1);
    for ins in out {
        at.push(f.byte_len() as u32);
        f.instruction(ins);
    }
    at.push(f.byte_len() as u32);
    (f, op_at.iter().map(|&k| at[k]).collect())
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_instructions<'f>(
    facts: &ModuleFacts<'f>,
    k: usize,
    a: &FunctionAnalysis,
    num_params: u32,
    wrapper: BlockType,
    mem: u32,
    kind: EmitKind<'_>,
    ctx: Option<(ContextEmit<'_>, u32)>,
    copy: BodyCopy,
    redirect: Option<crate::switch::Redirect<'_>>,
) -> Result<Emitted<'f>, InstrumentError> {
    use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
    let body = &facts.bodies[k];
    let enc = |e: &dyn std::fmt::Display| {
        InstrumentError::Encode(format!("function {}: {e}", facts.func_index(k).0))
    };
    let mut locals: Vec<(u32, ValType)> = Vec::new();
    let mut original_locals = Vec::new();
    let mut num_locals = num_params;
    for l in body.get_locals_reader().map_err(|e| enc(&e))? {
        let (n, t) = l.map_err(|e| enc(&e))?;
        num_locals += n;
        let t = val_type(t)?;
        original_locals.extend(std::iter::repeat_n(t, n as usize));
        if copy == BodyCopy::Only {
            locals.push((n, t));
        }
    }
    if copy == BodyCopy::Entered {
        // The loop id parameter.
        num_locals += 1;
    }
    let locals_at = Locals {
        r: num_locals,
        c: num_locals + 1,
        a: num_locals + 2,
        h: num_locals + 3,
        t: num_locals + 4,
        s: num_locals + 5,
        e: num_locals + 6,
        loops: num_locals + 7,
    };
    let em = Emitter::new(locals_at, mem, a, kind);
    locals.push((1, ValType::I64));
    locals.push((3, ValType::I32));
    locals.push((1, ValType::I64));
    locals.push((2, ValType::I32));
    match &em.kind {
        EmitKind::Edges { loops, .. } => {
            for l in loops.iter() {
                locals.push((
                    1,
                    if l.counter.wide {
                        ValType::I64
                    } else {
                        ValType::I32
                    },
                ));
            }
        }
        EmitKind::Paths { register_loops, .. } if !register_loops.is_empty() => {
            locals.push((register_loops.len() as u32, ValType::I64));
        }
        EmitKind::Paths { .. } => {}
    }
    let paths = matches!(em.kind, EmitKind::Paths { .. });
    // Paths and contexts both need one place where every return meets.
    let funnel = paths || ctx.as_ref().is_some_and(|c| c.0.mode.shadow());
    let mut next_site = ctx.as_ref().map_or(0, |c| c.1);

    let mut out: Vec<I<'f>> = Vec::new();
    if let (Some((c, _)), BodyCopy::Only) = (&ctx, copy) {
        c.push(&mut out, &em.locals);
    }
    if funnel {
        out.push(I::Block(wrapper));
        em.prologue(&mut out);
    }
    let start = out.len();
    let mut reader = body.get_operators_reader().map_err(|e| enc(&e))?;
    let mut next = 0usize;
    // `returns` is in operator order, so one cursor walks it alongside the operators.
    let mut returns = a.returns.iter().peekable();
    let mut reenc = RoundtripReencoder;
    // Where each operator's own code begins in `out` (after the actions before it).
    let mut op_at = Vec::with_capacity(a.num_ops);
    let mut pre_at = Vec::with_capacity(a.num_ops + 1);
    for i in 0..a.num_ops {
        let op = reader.read().map_err(|e| enc(&e))?;
        pre_at.push(out.len());
        let mut opened = None;
        while let Some((at, Slot::Before, act)) = a.actions.get(next) {
            if *at != i {
                break;
            }
            if em.action(&mut out, next, act) {
                opened = Some((next, act));
            }
            next += 1;
        }
        op_at.push(out.len());
        let is_last = i + 1 == a.num_ops;
        let return_here = returns.next_if(|r| r.0 == i);
        if let Some((k, act)) = opened {
            em.close_opened(&mut out, k, act, &op);
        } else if funnel && is_last {
            out.push(I::End);
            em.epilogue(&mut out);
            if let Some((c, _)) = &ctx {
                c.pop(&mut out, &em.locals);
            }
            out.push(I::End);
        } else if let (true, Some(&(_, depth))) = (funnel, return_here) {
            out.push(I::Br(depth));
        } else {
            use wasmparser::Operator as O;
            let is_call = matches!(
                op,
                O::Call { .. } | O::CallIndirect { .. } | O::CallRef { .. }
            );
            // Tail calls and throws leave the function: publish like at an exit.
            let leaves = matches!(
                op,
                O::ReturnCall { .. }
                    | O::ReturnCallIndirect { .. }
                    | O::ReturnCallRef { .. }
                    | O::Throw { .. }
                    | O::ThrowRef
            );
            if is_call || leaves {
                em.before_call(&mut out);
            }
            let mut returns_to = None;
            if let Some((c, _)) = &ctx {
                if let Some((callee, _)) = crate::contexts::call_target(&op) {
                    c.call_site(&mut out, &em.locals, next_site);
                    returns_to = is_call.then_some((next_site, callee));
                    next_site += 1;
                }
                if leaves {
                    c.pop(&mut out, &em.locals);
                    c.log_stop(&mut out, &em.locals);
                }
            }
            let redirected = match (&op, redirect) {
                (O::Call { function_index: f }, Some(r)) => r(*f).map(|c| (c, false)),
                // Not a self tail call: a `return_call` to a function's own copy is how
                // it switches (`contexts::site_offsets` tells them apart by that).
                (O::ReturnCall { function_index: f }, Some(r)) if *f != facts.func_index(k).0 => {
                    r(*f).map(|c| (c, true))
                }
                _ => None,
            };
            match redirected {
                // The callee's instrumented copy, entered at its start.
                Some(((to, args), tail)) => {
                    out.extend(args);
                    out.push(if tail { I::ReturnCall(to) } else { I::Call(to) });
                }
                None => out.push(reenc.instruction(op).map_err(|e| enc(&e))?),
            }
            if is_call {
                em.after_call(&mut out);
            }
            if let (Some((c, _)), Some((site, callee))) = (&ctx, returns_to) {
                c.log_return(&mut out, &em.locals, site, callee);
            }
        }
        while let Some((at, Slot::After, act)) = a.actions.get(next) {
            if *at != i {
                break;
            }
            let opened = em.action(&mut out, next, act);
            debug_assert!(!opened, "code opens only before a branch");
            next += 1;
        }
    }
    pre_at.push(out.len());
    let locals_at = em.locals;
    Ok(Emitted {
        locals,
        original_locals,
        out,
        pre_at,
        op_at,
        start,
        locals_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact-edges plan of a module in text form.
    fn edges_plan(wat: &str) -> Plan {
        guided_edges_plan(wat, None)
    }

    fn guided_edges_plan(wat: &str, guide: Option<Guide>) -> Plan {
        let wasm = wat::parse_str(wat).unwrap();
        let opts = InstrumentOptions {
            mode: Mode::ExactEdges,
            guide: guide.map(std::sync::Arc::new),
            ..Default::default()
        };
        instrument(&wasm, &opts).unwrap().plan
    }

    fn analysis_of(wat: &str, func: usize) -> Arc<FunctionAnalysis> {
        edges_plan(wat).functions[func].analysis.clone().unwrap()
    }

    /// A `br_table` arm's code runs at its target exactly when nothing else reaches the
    /// target: not where a case falls through, nor where another branch shares the label.
    #[test]
    fn br_table_arms_with_their_own_target_run_their_code_there() {
        let a = analysis_of(
            r#"(module (func (param $i i32)
              (block $C
                (block $B
                  (block $A
                    (br_table $A $B $A $C (local.get $i)))
                  (br $C))
                (nop))))"#,
            0,
        );
        let at_target: Vec<(u32, bool)> = (0..a.cfg.num_edges())
            .filter_map(|e| Some((a.edges[e].branch?.1, a.edges[e].at_target)))
            .collect();
        // $A (arms 0 and 2): only the table reaches it; $B: likewise ($A's code leaves by
        // `br $C`); $C: the default arm, $A's `br` and $B's fall-through.
        assert_eq!(at_target, vec![(0, true), (1, true), (2, false)]);
        let placed = |e: usize| {
            a.actions
                .iter()
                .filter(|(_, _, act)| matches!(act, Action::Edge(x) if x.index() == e))
                .count()
        };
        for e in 0..a.cfg.num_edges() {
            let expected = usize::from(a.edges[e].at_target);
            if a.edges[e].branch.is_some() {
                assert_eq!(placed(e), expected, "edge {e}");
            }
        }
    }

    /// The CFG edge of outcome `o` of the function's `n`-th `if`.
    fn if_outcome(a: &FunctionAnalysis, n: usize, o: u32) -> usize {
        (0..a.cfg.num_edges())
            .filter(|&e| {
                a.edges[e].branch.is_some_and(|(s, k)| {
                    a.sites[s.0 as usize].kind == pepper_profile::BranchKind::If && k == o
                })
            })
            .nth(n)
            .unwrap()
    }

    /// Which loops exact edges reads by their induction variable: a local written once in
    /// the loop, as `x = x ± c` (i32 or i64, any small step), directly in that loop; not one
    /// the loop writes twice, not an outer loop's variable stepped in an inner loop, and not
    /// a loop that can leave through a `br_table` arm to a label that other branches share
    /// (no place for the read).
    #[test]
    fn loop_counts_read_induction_variables() {
        let plan = edges_plan(
            r#"(module
              (memory 1)
              (func (export "up") (param $n i32) (local $i i32)
                (loop $l
                  (if (i32.and (local.get $i) (i32.const 1)) (then (i32.store (i32.const 0) (local.get $i))))
                  (local.set $i (i32.add (local.get $i) (i32.const 1)))
                  (br_if $l (i32.lt_u (local.get $i) (local.get $n)))))
              (func (export "down") (param $p i64)
                (loop $l
                  (local.set $p (i64.sub (local.get $p) (i64.const 8)))
                  (br_if $l (i64.gt_s (local.get $p) (i64.const 0)))))
              (func (export "twice") (param $i i32)
                (loop $l
                  (local.set $i (i32.add (local.get $i) (i32.const 1)))
                  (if (local.get $i) (then (local.set $i (i32.const 5))))
                  (br_if $l (i32.lt_u (local.get $i) (i32.const 10)))))
              (func (export "nested") (param $i i32) (local $j i32)
                (loop $outer
                  (loop $inner
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (local.set $j (i32.add (local.get $j) (i32.const 1)))
                    (br_if $inner (i32.and (local.get $j) (i32.const 3))))
                  (br_if $outer (i32.lt_u (local.get $i) (i32.const 100)))))
              (func (export "table") (param $i i32)
                (block $out
                  (loop $l
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br_if $out (i32.eq (local.get $i) (i32.const 50)))
                    (br_table $l $out (i32.and (local.get $i) (i32.const 1))))))
              (func (export "table_own_exit") (param $i i32)
                (block $out
                  (loop $l
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br_table $l $out (i32.and (local.get $i) (i32.const 1)))))))"#,
        );
        let loops = |k: usize| {
            plan.functions[k]
                .loop_counts
                .iter()
                .map(|l| (l.counter.local, l.counter.wide, l.counter.step))
                .collect::<Vec<_>>()
        };
        assert_eq!(loops(0), vec![(1, false, 1)]);
        assert_eq!(loops(1), vec![(0, true, -8)]);
        assert!(loops(2).is_empty(), "written twice");
        // `$i` steps in the inner loop, so it counts the inner loop's node; the outer
        // loop has no variable of its own.
        assert_eq!(loops(3), vec![(0, false, 1)]);
        assert!(loops(4).is_empty(), "leaves through a br_table arm");
        // Unless that arm is the only way to its target, where the read then goes.
        assert_eq!(loops(5), vec![(0, false, 1)]);
        // Each read loop's node count replaced a counter on every iteration.
        let up = &plan.functions[0];
        let ec = up.edge_counting.as_ref().unwrap();
        assert_eq!(ec.nodes_given, vec![up.loop_counts[0].counter.node]);
    }

    /// A function without branches gets no counter in exact-edges mode (it has nothing to
    /// report); one with a branch gets some.
    #[test]
    fn exact_edges_leaves_branch_free_functions_alone() {
        let plan = edges_plan(
            r#"(module
              (func (export "leaf") (param i32) (result i32)
                (i32.add (local.get 0) (i32.const 1)))
              (func (export "branchy") (param i32) (result i32)
                (if (result i32) (local.get 0) (then (i32.const 1)) (else (i32.const 2)))))"#,
        );
        let counters = |k: usize| plan.functions[k].edge_counter.iter().flatten().count();
        assert_eq!(counters(0), 0);
        assert!(counters(1) > 0);
    }

    /// Counter placement weighs edges by the static frequency estimate, not just loop
    /// depth (which ties every edge of a loop body): in a loop, the arm that calls and the
    /// arm that traps weigh less than their siblings, so the spanning tree takes the
    /// siblings and the counters go on the rare arms; the loop body outweighs the code
    /// around it.
    #[test]
    fn edge_weights_follow_the_frequency_estimate() {
        let a = analysis_of(
            r#"(module
              (func $g)
              (func (export "f") (param i32) (result i32) (local i32)
                (if (local.get 0) (then (local.set 1 (i32.const 7))))
                (loop $l
                  (if (i32.eq (local.get 1) (i32.const 12345))
                    (then (call $g))
                    (else (local.set 1 (i32.add (local.get 1) (i32.const 1)))))
                  (if (i32.eq (local.get 1) (i32.const 99999))
                    (then unreachable))
                  (br_if $l (i32.lt_u (local.get 1) (local.get 0))))
                (local.get 1)))"#,
            1,
        );
        let w = edge_weights(&a, &frequencies(&a, None));
        let (outside, calls, plain) = (
            if_outcome(&a, 0, 0),
            if_outcome(&a, 1, 0),
            if_outcome(&a, 1, 1),
        );
        let (traps, continues) = (if_outcome(&a, 2, 0), if_outcome(&a, 2, 1));
        assert!(
            w[calls] * 2 < w[plain],
            "call arm {} vs {}",
            w[calls],
            w[plain]
        );
        assert!(
            w[traps] * 100 < w[continues],
            "trap arm {} vs {}",
            w[traps],
            w[continues]
        );
        assert!(
            w[outside] * 4 < w[plain],
            "outside the loop {} vs {}",
            w[outside],
            w[plain]
        );
    }

    /// With a guide, exact-edges places its counters by the guide's counts: an arm the
    /// static estimate calls rare (it calls) but the guide saw taken 99 times in 100 weighs
    /// more than its sibling, and the counter moves to the sibling. (The first `if` is
    /// there because a function's first branch counts its entries on every arm.)
    #[test]
    fn a_guide_moves_the_counter_to_the_arm_it_saw_rare() {
        const WAT: &str = r#"(module
              (func $g)
              (func (export "f") (param i32) (result i32)
                (if (i32.and (local.get 0) (i32.const 1))
                  (then (local.set 0 (i32.add (local.get 0) (i32.const 3)))))
                (if (i32.and (local.get 0) (i32.const 127))
                  (then (call $g))
                  (else (local.set 0 (i32.add (local.get 0) (i32.const 1)))))
                (local.get 0)))"#;
        // Whether a counter sits on an edge into or out of each arm's block.
        let counted = |plan: &Plan| {
            let f = &plan.functions[1];
            let a = f.analysis.as_ref().unwrap();
            let arm = |o| {
                let node = a.cfg.edge(pepper_cfg::EdgeId::new(if_outcome(a, 1, o))).1;
                (0..a.cfg.num_edges()).any(|e| {
                    let (x, y) = a.cfg.edge(pepper_cfg::EdgeId::new(e));
                    (x == node || y == node) && f.edge_counter[e].is_some()
                })
            };
            (arm(0), arm(1))
        };
        let plan = edges_plan(WAT);
        let a = plan.functions[1].analysis.clone().unwrap();
        let (calls, plain) = (if_outcome(&a, 1, 0), if_outcome(&a, 1, 1));
        let w = edge_weights(&a, &frequencies(&a, None));
        assert!(w[calls] < w[plain], "static: {} vs {}", w[calls], w[plain]);
        assert_eq!(
            counted(&plan),
            (true, false),
            "static: the calling arm is counted"
        );

        let site = a
            .sites
            .iter()
            .filter(|s| s.kind == pepper_profile::BranchKind::If)
            .nth(1);
        let mut guide = Guide::default();
        guide
            .counts
            .insert((1, site.unwrap().offset), vec![990, 10]);
        let observed = guide.observed(1, &a).unwrap();
        let w = edge_weights(&a, &frequencies(&a, Some(&observed)));
        assert!(
            w[calls] > 50 * w[plain],
            "guided: {} vs {}",
            w[calls],
            w[plain]
        );
        let plan = guided_edges_plan(WAT, Some(guide));
        assert_eq!(
            counted(&plan),
            (false, true),
            "guided: the rare arm is counted"
        );
    }
}
