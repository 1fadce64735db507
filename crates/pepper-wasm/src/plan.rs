//! What instrumenting decides: the options, each function's plan (how it counts, where its
//! counters are) and the module's, which decoding reads back. `crate::instrument` makes it.

use crate::analysis::FunctionAnalysis;
pub use crate::module::CallSiteInfo;
use crate::module::FuncIndex;
use pepper_cfg::{EdgeCounting, NumberedDag};
pub use pepper_layout::{
    pep_tag, pep_untag, ContextMode, HashTable, MemoryLayout, COUNTERS_EXPORT, FRAME_BYTES,
    PATH_WINDOW_RING_LOG2, PEP_TAG_SHIFT,
};
use std::sync::Arc;

mod loops;
pub(crate) mod weights;

pub(crate) use loops::{readable_loops, register_loops};
pub use loops::{LoopCount, RegisterLoop};
use pepper_profile::Mode;

/// TPP's poisoned register (§4.1, A.2): the top two bits set. Hot increments after the
/// poisoning add less than 2^62 in all, so the value stays negative and is never mistaken
/// for a path number; a second cold edge sets it again rather than adding. (Array
/// functions add their path count to it: `FunctionPlan::poison`.)
pub const POISON: i64 = -(1 << 62);

/// How exact path counters are kept for one function (TPP §2.2).
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

    /// The register of a switched copy entered at a loop header (`crate::switch`): its
    /// first path end, at that header, ends no path of the program. The ring takes an
    /// empty word (0), which the sampler skips. A counted function starts at path number
    /// `num_paths` (from 0, `count[0]` was the function's path 0): the increments on the
    /// way to the header (a forced `if` arm's) lie on one path from the entry, so they
    /// add less than `num_paths` and the path end lands in `num_paths..2 * num_paths`,
    /// past every path of the function.
    pub fn entered_register(self, num_paths: u64) -> i64 {
        match self {
            Counting::Ring => 0,
            _ => (num_paths * self.scale()) as i64,
        }
    }
}

/// Default entries in each hashed function's path cache (4 KB per function).
pub const HASH_CACHE_ENTRIES: u32 = 256;

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
    pub(crate) fn site_counts(
        &self,
        func: u32,
        analysis: &FunctionAnalysis,
    ) -> Option<Vec<Option<&Vec<u64>>>> {
        let counts: Vec<Option<&Vec<u64>>> = analysis
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
    pub(crate) fn observed(
        &self,
        func: u32,
        analysis: &FunctionAnalysis,
    ) -> Option<Vec<Option<u64>>> {
        let counts = self.site_counts(func, analysis)?;
        Some(
            analysis
                .edges
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
    pub(crate) fn weights(&self, func: u32, analysis: &FunctionAnalysis) -> Option<Vec<u64>> {
        let observed = self.observed(func, analysis)?;
        Some(observed.into_iter().map(|c| c.unwrap_or(0)).collect())
    }

    /// TPP's local cold criterion (§4.1.1) for one function: a branch outcome is cold when
    /// it ran less than `threshold` of its branch's executions (for a k-way `br_table`,
    /// `threshold × 2/k`), or never (never-run branches of a function that did run are
    /// cold on every outcome). `None` when the guide never saw
    /// the function run: then nothing is pruned.
    pub(crate) fn cold_edges(
        &self,
        func: u32,
        analysis: &FunctionAnalysis,
        threshold: f64,
    ) -> Option<Vec<bool>> {
        let counts = self.site_counts(func, analysis)?;
        Some(
            analysis
                .edges
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
                        let k = analysis.sites[site.0 as usize].outcomes.len().max(2) as f64;
                        n == 0 || (n as f64) < threshold * total as f64 * 2.0 / k
                    })
                })
                .collect(),
        )
    }
}

/// Tuning knobs of the rewriter.
#[derive(Clone, Debug)]
#[non_exhaustive]
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
    /// the flag checked where this says. Not with shadow stacks or call logs. Ephemeral
    /// windows check where this says too ([`EPHEMERAL_PLACEMENT`] when it does not), and
    /// ephemeral budgets always at `Outer`'s checks, which count what they spend.
    /// Under every placement, functions on a cycle of direct calls (`crate::callgraph`)
    /// without an outermost loop the copies can be entered at check the flag at their
    /// entry, and instrumented copies call them at `F` (a recursion without loops passes
    /// no loop header). A check at a loop nest the instrumented copy cannot leave at only
    /// enters it (`switch::Shape::enters_only`); such functions get a third clean copy,
    /// `F_resume`, which the instrumented copy leaves into there. Ephemeral's copies
    /// count a spanning tree's chords, as exact edges do, with their entries and leaves
    /// per loop ([`SwitchCount`]).
    pub switch: Option<SwitchPlacement>,
    /// Switch, for tests: every check steps a pseudo-random generator kept in the flag
    /// word and switches on one of its bits, so copies change at random checks in both
    /// directions, with no host involved.
    // For pepper's differential tests (`tests/random_modules.rs`), not for profiling.
    #[doc(hidden)]
    pub switch_chaos: bool,
    /// Switch: hint every check's `if` unlikely in a `metadata.code.branch_hint` section,
    /// so engines that read hints (wasmtime's `Config::wasm_branch_hinting`) lay the
    /// switching code out of line and the clean code falls through its checks.
    pub switch_hints: bool,
    /// Ephemeral in windows (the default): one module-wide flag, set by the runtime for a
    /// window every epoch, instead of a budget per function; no entry or loop counts in
    /// clean code. The counts are the windows' executions, scaled to the run (see
    /// `decode::ephemeral`). `false`: budgets, as `pepper run --persistence`.
    pub ephemeral_windows: bool,
    /// Which core module of its component this is (its position among the component's
    /// core modules), written into pepper's memory's tag so that the runtime finds each
    /// instrumented module's memory; 0 for a plain module.
    pub module_slot: u32,
}

/// Default for [`InstrumentOptions::array_max_paths`]: arrays up to 512 KB per function.
/// An array slot is a load-add-store; a hashed path end is a call, a hash and a probe
/// (about 11 cycles), so a hot function with thousands of paths (a sorting routine, say)
/// is far cheaper counted in an array. Only the pages of an array that its paths touch
/// are ever faulted in, so large sparse arrays cost little.
pub const DEFAULT_ARRAY_MAX_PATHS: u64 = 1 << 16;

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
            switch_hints: true,
            ephemeral_windows: true,
            module_slot: 0,
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
    /// Switch: the function index of its third clean copy, `F_resume`, when it has loops
    /// whose checks only enter the instrumented copy (see `crate::switch`).
    pub resume: Option<u32>,
    /// Ephemeral: the checked loops' header nodes and the addresses of their counters
    /// (every copy counts each iteration at its check).
    pub header_counters: Vec<(pepper_cfg::NodeId, u32)>,
    /// Ephemeral: each loop its instrumented copy can be entered at or left at, with
    /// their counters.
    pub switch_counts: Vec<SwitchCount>,
}

/// A loop header where an ephemeral copy counting edges is entered or left: an execution
/// that starts or stops there, a virtual ENTRY→header or header→EXIT edge for flow
/// conservation (`pepper_cfg::EdgeCounting::derive_with`).
#[derive(Clone, Debug)]
pub struct SwitchCount {
    pub header: pepper_cfg::NodeId,
    /// The edges whose code runs on the copy's way in to the loop (`switch::way_in`):
    /// their counters count each entry once more than the program took them.
    pub way_in: Vec<pepper_cfg::EdgeId>,
    /// u64 counters of the copy's entries at the loop and its leaves there.
    pub entered: u32,
    pub left: u32,
}

impl FunctionPlan {
    /// Its numbered paths (0 when it counts none).
    pub fn num_paths(&self) -> u64 {
        self.numbered.as_ref().map_or(0, |nd| nd.numbering.total())
    }

    /// A function that counts nothing yet: `first_branch` and `first_site` are the
    /// module-wide ids its branches and call sites start at.
    pub(crate) fn new(
        index: FuncIndex,
        name: Option<String>,
        first_branch: u32,
        first_site: usize,
    ) -> FunctionPlan {
        FunctionPlan {
            index,
            name,
            skipped: None,
            analysis: None,
            numbered: None,
            counting: Counting::None,
            first_branch,
            edge_counter: Vec::new(),
            edge_counting: None,
            cold_counter: None,
            cold_edges: 0,
            poison: POISON,
            obvious: Vec::new(),
            loop_counts: Vec::new(),
            register_loops: Vec::new(),
            first_site: first_site as u32,
            op_offsets: Arc::from([]),
            copies: None,
            resume: None,
            header_counters: Vec::new(),
            switch_counts: Vec::new(),
        }
    }

    /// The function indices of all its switch copies (`F_inst`, `F_clean`, `F_resume`).
    pub fn copy_indices(&self) -> impl Iterator<Item = u32> + '_ {
        let (inst, clean) = self.copies.unzip();
        inst.into_iter().chain(clean).chain(self.resume)
    }
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
    /// Contexts with site counters: the call site whose counter each site's calls are
    /// counted in, itself or an earlier site of its CFG node
    /// (`instrument::functions::counted_at`); by site id.
    pub counted_at: Vec<u32>,
    /// `module::name` of each imported function, by function index.
    pub imports: Vec<String>,
    /// Whether the output has pepper's counters memory (false: the module is unchanged).
    pub rewritten: bool,
    /// Contexts: (function, counter address, canonical signature) of each function that
    /// indirect calls may reach and whose entries are counted.
    pub entry_counters: Vec<(u32, u32, u32)>,
    /// Exact edges: functions whose entries their callers' counts give, callers first.
    pub given_entries: crate::entries::GivenEntries,
    /// PEP with call-site counters: where each function's entries are counted exactly,
    /// by function index (see [`crate::entries::counted_entries`]); empty otherwise.
    pub counted_entries: std::collections::HashMap<u32, crate::entries::CountedEntries>,
    /// Whether stack samples replay PEP's ring as calls ([`InstrumentOptions::path_windows`]).
    pub path_windows: bool,
    /// Where clean code checks the switch flag, when functions have switchable copies.
    pub switch: Option<SwitchPlacement>,
    /// How many of the switch's checks the module hints unlikely
    /// ([`InstrumentOptions::switch_hints`]).
    pub switch_hints: usize,
    /// Ephemeral in windows ([`InstrumentOptions::ephemeral_windows`]).
    pub ephemeral_windows: bool,
    /// [`InstrumentOptions::module_slot`].
    pub module_slot: u32,
    pub warnings: Vec<String>,
    /// Custom sections (or parts of them) the instrumented module leaves out because they
    /// locate code by offset and rewriting moved it: DWARF, branch hints of rewritten
    /// functions, source maps. Not a warning: the original module keeps them, and pepper
    /// reads DWARF from the original.
    pub dropped_sections: Vec<String>,
}

/// Why a module could not be instrumented.
#[derive(Debug, thiserror::Error)]
pub enum InstrumentError {
    #[error("invalid module: {0}")]
    Invalid(#[from] wasmparser::BinaryReaderError),
    #[error("rewriting failed: {0}")]
    Encode(String),
    #[error("the profiler memory would need {0} bytes, more than a 32-bit memory holds; lower --array-budget")]
    TooLarge(u64),
}

/// Where clean code checks the flag.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum SwitchPlacement {
    /// Function entries only: a long-running activation never switches.
    Entries,
    /// Function entries and the headers of outermost loops (loops in no other loop).
    #[default]
    Outer,
    /// As `Outer`, and the headers of loops that hold loops behind more than
    /// [`SHALLOW_DETOURS`] constructs that are not loops, where the check only enters the
    /// instrumented copy, which leaves at its next check into `F_resume` (see
    /// `crate::switch`). A window then finds a frame that runs such a nest in clean code
    /// (a Rust `match` arm's loops behind a dozen blocks, inside a loop the function passes
    /// once), which `Outer` never sees. Nests nearer their loops' bodies are left to
    /// `Outer`'s checks: checking those too made the clean code measurably slower.
    Nests,
    /// Function entries and the headers of loops that call, hold other loops or are in no
    /// other loop; only call-free innermost loops inside another loop are left without a
    /// check (after HotSpot's rule for safepoint polls in counted loops): they end, and the
    /// check of the loop around them runs, soon enough.
    Loops,
    /// As `Outer`, and the headers of loops that call or hold loops where the way in from
    /// the function's start passes at most [`SHALLOW_DETOURS`] constructs that are not
    /// loops: an interpreter's dispatch loop inside the loops its calls and returns
    /// restart. Clean code can be re-entered there as cheaply as at an outermost loop, so
    /// the instrumented copy leaves at every one of them, where under `Loops` it runs on to
    /// the end of the outermost iteration.
    Shallow,
    /// Function entries and every loop header, as `All`, but the instrumented copy also
    /// leaves where `Shallow` leaves it and at loops that hold loops where the way in
    /// passes at most [`DEEP_DETOURS`] constructs that are not loops: a window then finds
    /// frames in deep loop nests (a sort's, behind `if`s) between their outermost
    /// iterations. Every loop has a way in: an innermost loop can run long inside a loop
    /// that iterates rarely, and without a check its time goes to the code after it.
    Deep,
    /// Function entries and every loop header.
    All,
}

/// `SwitchPlacement::Shallow`: the most constructs other than loops on the way into a
/// checked inner loop. Each one is a test the copies entered there run every time that
/// construct starts (see `switch::splice`); a loop inside a dispatch `br_table`'s cases
/// has dozens.
pub const SHALLOW_DETOURS: usize = 2;

/// Where PEP's bursts' clean code checks when `pepper run` and the library are not told:
/// `deep`, whose instrumented copy also leaves at loop nests behind up to
/// [`DEEP_DETOURS`] constructs, where under `shallow` a burst entered in a nest runs on
/// to the next loop it leaves at (in a sort, to the end of a long iteration). It checks
/// every loop, however many constructs lead to it: a loop without a check (a Rust
/// program's hot nest behind many blocks, a comparison loop inlined into a loop that
/// iterates rarely) would be missing from the profile.
pub const PEP_PLACEMENT: SwitchPlacement = SwitchPlacement::Deep;

/// Where ephemeral windows' clean code checks when [`InstrumentOptions::switch`] does not
/// say. `nests` also reaches a hot loop nest a frame enters in clean code behind many
/// blocks, which `outer` misses; missing a program's hot code entirely is worse than
/// the checks' cost.
pub const EPHEMERAL_PLACEMENT: SwitchPlacement = SwitchPlacement::Nests;

/// `SwitchPlacement::Deep`: as [`SHALLOW_DETOURS`] for loops that hold loops, high enough
/// for a sort's loops nested in `if`s and low enough to leave out most of a dispatch
/// `br_table`'s cases.
pub const DEEP_DETOURS: usize = 8;

impl SwitchPlacement {
    pub const ALL: [SwitchPlacement; 7] = [
        SwitchPlacement::Entries,
        SwitchPlacement::Outer,
        SwitchPlacement::Nests,
        SwitchPlacement::Loops,
        SwitchPlacement::Shallow,
        SwitchPlacement::Deep,
        SwitchPlacement::All,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SwitchPlacement::Entries => "entries",
            SwitchPlacement::Outer => "outer",
            SwitchPlacement::Nests => "nests",
            SwitchPlacement::Loops => "loops",
            SwitchPlacement::Shallow => "shallow",
            SwitchPlacement::Deep => "deep",
            SwitchPlacement::All => "all",
        }
    }

    pub fn parse(s: &str) -> Option<SwitchPlacement> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Whether this placement checks loop nests where the copy does not leave (past
    /// `Shallow`'s and `Deep`'s detour limits; every inner nest under `Nests`), so that
    /// a check there only enters the instrumented copy (`switch::Shape::enters_only`).
    pub fn has_nest_entries(self) -> bool {
        matches!(
            self,
            SwitchPlacement::Nests | SwitchPlacement::Shallow | SwitchPlacement::Deep
        )
    }

    /// Whether a function's clean code checks the flag at its entry. Everywhere under
    /// `entries` and `all`; otherwise only where calls come from outside the module or
    /// through tables (`outside`): direct calls from instrumented code go to the callee's
    /// instrumented copy anyway ([`Redirect`]).
    pub fn entry_check(self, outside: bool) -> bool {
        match self {
            SwitchPlacement::Entries | SwitchPlacement::All => true,
            SwitchPlacement::Outer
            | SwitchPlacement::Nests
            | SwitchPlacement::Loops
            | SwitchPlacement::Shallow
            | SwitchPlacement::Deep => outside,
        }
    }
}
