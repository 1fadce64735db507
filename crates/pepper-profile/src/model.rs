//! The profile data model (serialized as JSON; schema in `docs/profile-format.md`).

use serde::{Deserialize, Serialize};

pub use crate::mode::Mode;

/// The original (uninstrumented) module the profile describes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ModuleInfo {
    /// Path as given on the command line.
    pub path: String,
    /// Lowercase hex SHA-256 of the module bytes (of the binary, after `.wat` translation).
    pub sha256: String,
    pub size: u64,
}

/// How the guest run ended and what it cost.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RunInfo {
    pub args: Vec<String>,
    /// The guest's exit code (0 when `_start` returned normally).
    pub exit_code: Option<i32>,
    /// The trap message if the guest trapped. Paths in progress in the frames that were
    /// active at the trap or `proc_exit` are not counted (they never completed).
    pub trap: Option<String>,
    pub instrument_ms: f64,
    pub compile_ms: f64,
    pub run_ms: f64,
}

/// One function of the original module.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Function {
    /// Index in the original module's function index space (imports first); in a profile
    /// of several core modules ([`Profile::modules`]), another module's function has a
    /// [`crate::foreign_function`] id.
    pub index: u32,
    pub name: Option<String>,
    /// `false` when the rewriter left the function alone; `skipped` says why.
    pub instrumented: bool,
    pub skipped: Option<String>,
    /// Number of acyclic paths in the function's P-DAG (exact-paths mode).
    pub num_paths: Option<u64>,
    /// `array` or `hash` (exact-paths mode).
    pub counting: Option<String>,
    /// Nodes where paths were cut to keep numbers in 62 bits (besides loop headers).
    pub truncated_nodes: u32,
    /// Targeted mode: branch outcomes the guide called cold (left out of numbering) and
    /// the executions of paths that took one of them (counted, not told apart). A large
    /// `cold_executions` means the guide does not describe this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_edges: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_executions: Option<u64>,
    /// Targeted mode: paths counted on a defining edge instead of by the path register
    /// (TPP's obvious paths), and DAG edges (real and dummy) left without register code
    /// because only obvious paths take them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obvious_paths: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninstrumented_edges: Option<u32>,
    /// Targeted mode: loops whose most frequent path was counted in a local and added to
    /// its counter when the loop was left (no memory increment per iteration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub register_loops: Option<u32>,
    /// Sampled modes: the function has far more of the stack samples' self time than
    /// of the path or branch estimate, so its counts are not to be trusted; why, where
    /// pepper knows ([`crate::blind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under_sampled: Option<String>,
}

/// The kind of a branch instruction.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BranchKind {
    If,
    BrIf,
    BrTable,
}

impl BranchKind {
    pub fn name(self) -> &'static str {
        match self {
            BranchKind::If => "if",
            BranchKind::BrIf => "br_if",
            BranchKind::BrTable => "br_table",
        }
    }
}

/// One branch instruction of the original module and its outcome counts.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Branch {
    /// Dense id, the position in [`Profile::branches`].
    pub id: u32,
    pub func: u32,
    /// Byte offset of the instruction in the original module file (as `wasm-tools print
    /// --print-offsets` and `wasm-objdump -d` show it); in a profile of several core
    /// modules, in the branch's own module.
    pub offset: u64,
    pub kind: BranchKind,
    /// One entry per outcome. `if` and `br_if`: `["taken", "not-taken"]` (taken = condition
    /// non-zero: the `then` arm, or the branch jumps). `br_table`: one per *distinct* target
    /// label, `"depth N (arms i,j,...)"`, the default arm marked `default`.
    pub outcomes: Vec<String>,
    /// Executions per outcome, aligned with `outcomes`.
    pub counts: Vec<u64>,
    /// `file:line` from DWARF, when the module has it.
    pub location: Option<String>,
    /// Inlining, from DWARF: the function whose source `location` is in, then each
    /// function it was inlined into with the line of that inlined call, innermost first
    /// (`["mainGtU", "mainSort (blocksort.c:894)"]`); empty when the code is not inlined.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inlined: Vec<String>,
    /// Ephemeral mode: the outcomes the instrumented copies recorded (the sample that
    /// `counts` are estimated from), and the 95% margin of the bias (the majority
    /// outcome's share) that sample gives, in share points (Wilson score interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias_margin: Option<f64>,
}

impl Branch {
    /// Where the branch is in the source, for people: `file:line`, and when its code was
    /// inlined, `file:line (in f, inlined into g (file:line))`.
    pub fn place(&self) -> Option<String> {
        let at = self.location.as_deref()?;
        Some(match self.inlined.split_first() {
            None => at.to_string(),
            Some((inner, outer)) => {
                let into: Vec<String> = outer.iter().map(|o| format!("inlined into {o}")).collect();
                format!("{at} (in {inner}, {})", into.join(", "))
            }
        })
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// One step of a path: a branch and the outcome taken.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Step {
    pub branch: u32,
    pub outcome: u32,
}

/// Where a path starts or ends.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PathPoint {
    FunctionEntry,
    FunctionExit,
    /// A loop header (`loop` instruction at `offset`).
    LoopHeader {
        offset: u64,
    },
    /// A node where pepper cut paths to bound their number (block starting at `offset`).
    Truncation {
        offset: u64,
    },
    /// A tail call (`return_call*` at `offset`).
    TailCall {
        offset: u64,
    },
    /// A `throw` or `throw_ref` at `offset`.
    Throw {
        offset: u64,
    },
}

/// One acyclic path and how often it ran.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Path {
    pub func: u32,
    /// Ball-Larus path number in the function's P-DAG.
    pub number: u64,
    pub count: u64,
    pub start: PathPoint,
    pub end: PathPoint,
    /// Branch decisions along the path, in execution order.
    pub steps: Vec<Step>,
    /// Original offsets of the first instruction of each block on the path.
    pub blocks: Vec<u64>,
    /// Operators the path runs in its own function (calls count one each): its work,
    /// which blocks alone misjudge where one long block does most of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<u32>,
}

/// Counts the profiler could not attribute.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Lost {
    /// Path executions dropped because the in-guest hash table was full.
    pub hash_overflow: u64,
    /// Paths left out to bound the profile's size ([`MAX_PATH_STEPS`]), the coldest, and
    /// the executions they had. Branch counts still count them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub capped_paths: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub capped_executions: u64,
}

/// The most path steps (branch outcomes and blocks, over all paths) a profile keeps.
/// Real programs' path profiles stay far below it; a loop whose every iteration takes
/// another path through hundreds of branches would otherwise write hundreds of megabytes
/// that no reader can load.
pub const MAX_PATH_STEPS: usize = 1_000_000;

impl Profile {
    /// Keeps the hottest paths, as many as fit in `max_steps` (the decoder applies
    /// [`MAX_PATH_STEPS`] as it regenerates; a merge of capped profiles applies it
    /// again) and leaves the others out,
    /// counted in `lost` and said in a warning. Branch counts are left as they are, so
    /// call this after deriving them from the paths.
    pub fn cap_paths(&mut self, max_steps: usize) {
        let size = |p: &Path| p.steps.len() + p.blocks.len() + 1;
        if self.paths.iter().map(size).sum::<usize>() <= max_steps {
            return;
        }
        let mut order: Vec<usize> = (0..self.paths.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.paths[i].count));
        let mut keep = vec![false; self.paths.len()];
        let mut used = 0;
        for i in order {
            used += size(&self.paths[i]);
            if used > max_steps {
                break;
            }
            keep[i] = true;
        }
        let total: u128 = self.paths.iter().map(|p| p.count as u128).sum();
        let mut keep = keep.into_iter();
        let (mut paths, mut executions) = (0u64, 0u64);
        self.paths.retain(|p| {
            let kept = keep.next().unwrap_or(false);
            if !kept {
                paths += 1;
                executions = executions.saturating_add(p.count);
            }
            kept
        });
        self.lost.capped_paths = self.lost.capped_paths.saturating_add(paths);
        self.lost.capped_executions = self.lost.capped_executions.saturating_add(executions);
        self.warnings.push(capped_warning(
            max_steps,
            paths,
            executions as f64 / total.max(1) as f64,
        ));
    }
}

/// The warning of a profile whose coldest `paths` (`share` of its path executions) were
/// left out by a cap of `max_steps` ([`MAX_PATH_STEPS`]).
pub fn capped_warning(max_steps: usize, paths: u64, share: f64) -> String {
    format!(
        "the profile keeps its hottest paths up to {max_steps} steps: {paths} colder \
         paths ({:.2}% of path executions) are left out; branch counts still count them",
        100.0 * share
    )
}

/// How a sampled (PEP) profile was taken. Path counts in such a profile are samples, not
/// executions; `path_ends / samples` scales them to estimated executions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Sampling {
    /// `ring` (a host thread reads a ring buffer of completed paths; PEP(SAMPLES, STRIDE)
    /// bursts per timer tick) or `every` (every K-th path end, counted in the guest;
    /// deterministic).
    pub design: String,
    pub samples: u32,
    pub stride: u32,
    pub interval_us: u64,
    /// `every` design: K.
    pub every: u64,
    pub ticks: u64,
    /// Path samples recorded.
    pub taken: u64,
    /// Path ends the guest executed (all of them, sampled or not) when known.
    pub path_ends: u64,
    /// Samples lost: overwritten in the ring before the sampler read them, or beyond the
    /// sample table's capacity.
    pub lost: u64,
    /// SHA-256 of the guide profile whose edge profile chose the numbering (smart
    /// numbering), if one was used.
    pub guide: Option<String>,
    /// Ring design: what a burst's samples stand for, `rate` (the guest's path-end rate
    /// at the tick times the time since the last burst) or `ticks` (the path ends since the
    /// last tick); empty in profiles from before the choice existed (they used `ticks`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub weights: String,
    /// Ring design, rate weights: ticks at which the guest ran but completed no path
    /// while the sampler watched its rate (in a host call); their bursts weigh nothing.
    /// Absent when zero and in older profiles.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_ticks: u64,
    /// Ring design, rate weights: ticks at which the guest hardly ran while watched (it
    /// waited for a core, or slept in a host call), judged by its thread's CPU clock: no
    /// burst, and the next burst stands for its work meanwhile. Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub off_cpu_ticks: u64,
    /// PEP with call-site counters: functions whose sampled paths were scaled so that
    /// their paths from entry add up to their counted entries (the other functions'
    /// paths by the ratio over those). Absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub calibrated: u64,
    /// Switch: bursts the guest thread's signal handler took over and measured on the
    /// guest's CPU clock, the sampler thread having been away (waiting for a core) when
    /// the burst was due to end. Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub guest_bursts: u64,
    /// Switchable instrumentation: where clean code checks the flag, one of `pepper run
    /// --switch`'s placements (`entries`, `outer`, `nests`, `loops`, `shallow`, `deep`,
    /// `all`); empty when the instrumented code always runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub switch: String,
    /// Switch (PEP's bursts, ephemeral windows): where its flag was: `pepper` (pepper's
    /// own memory, the only place today); older profiles may say `program` (a word of the
    /// program's memory 0); empty without a switch.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub switch_flag: String,
    /// Switch: microseconds the flag was set (the instrumented copies ran from each
    /// function's next check until their next check after it was cleared): the sampler
    /// thread's wall time, or the guest's CPU time in bursts its handler took over.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub switched_on_us: u64,
    /// Switch: path ends the instrumented copies completed (`path_ends` is then the
    /// estimate of all of them, from the rate at each burst).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub instrumented_path_ends: u64,
    /// Ephemeral windows: CPU time the guest's thread used while profiled, and of it while
    /// a window was open (both absent where the thread's CPU clock could not be read, and
    /// in older profiles). The windows' share of the guest's work is read from these, not
    /// from wall time: a guest descheduled for part of a window did none of its work then.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub guest_cpu_us: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub switched_on_cpu_us: u64,
}

impl Sampling {
    /// The counts a run adds up as it goes (ticks, samples, path ends, time switched
    /// on...), for sums of runs and differences of snapshots.
    pub(crate) fn counts_mut(&mut self) -> [&mut u64; 11] {
        [
            &mut self.ticks,
            &mut self.taken,
            &mut self.path_ends,
            &mut self.lost,
            &mut self.idle_ticks,
            &mut self.off_cpu_ticks,
            &mut self.guest_bursts,
            &mut self.switched_on_us,
            &mut self.instrumented_path_ends,
            &mut self.guest_cpu_us,
            &mut self.switched_on_cpu_us,
        ]
    }
}

impl Sampling {
    /// Ephemeral windows: what the windows' branch counts are multiplied by to stand for
    /// the run, the guest's time over the windows' (CPU time where both were measured,
    /// else the run's wall time `run_ms` over the windows'); `None` without window time.
    pub fn window_scale(&self, run_ms: f64) -> Option<f64> {
        let (total, on) = match (self.guest_cpu_us, self.switched_on_cpu_us) {
            (all, on) if all > 0 && on > 0 => (all as f64, on as f64),
            _ => (run_ms * 1000.0, self.switched_on_us as f64),
        };
        (total > 0.0 && on > 0.0).then(|| (total / on).max(1.0))
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A complete profile of one run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Profile {
    pub format: String,
    pub version: u32,
    pub mode: Mode,
    pub module: ModuleInfo,
    /// The component's core modules this profile covers, the primary first (version 4):
    /// the primary's functions keep their indices, the others' have
    /// [`crate::foreign_function`] ids ([`Profile::merge_modules`]). Empty for a plain
    /// module, and for a component profiled through one core module.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<crate::CoreModule>,
    pub run: RunInfo,
    pub functions: Vec<Function>,
    pub branches: Vec<Branch>,
    pub paths: Vec<Path>,
    pub lost: Lost,
    /// PEP mode: how paths were sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
    /// Calling contexts (version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contexts: Option<crate::Contexts>,
    /// The run cut into intervals (`--timeline`, `--phases`, `--phase-aware`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
    /// The phases the online detector found while the program ran (`--phases`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<DetectedPhases>,
    pub warnings: Vec<String>,
}

/// A run cut into intervals, each with a compact vector of what ran in it: the input of
/// phase analysis (Nagpurkar's interval profiles).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// What ends an interval: `path-ends` (every `length` path ends, counted exactly from
    /// PEP's ring) or `time` (every `length` microseconds).
    pub clock: String,
    pub length: u64,
    /// What the vectors count per function: `path-ends` (every path end the function
    /// completed: its entries and loop iterations), `burst-samples` (the same, estimated
    /// from PEP's sampled path ends) or `stack-samples` (the stack samples whose
    /// innermost frame was in it).
    pub counts: String,
    /// Path ends the sampler could not read before the guest overwrote them (their
    /// intervals' vectors miss them; the positions stay exact).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost: u64,
    pub intervals: Vec<Interval>,
}

/// One interval of a [`Timeline`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Interval {
    /// Path ends the run completed before this interval (0 when unknown).
    pub start: u64,
    pub path_ends: u64,
    pub wall_us: u64,
    /// (function index, count), sorted by function.
    pub counts: Vec<(u32, u64)>,
    /// Phase-aware profiling: the phase the tracker put this interval in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<u32>,
    /// Phase-aware or periodic interval sampling: the instrumentation ran in this interval.
    #[serde(default, skip_serializing_if = "is_false")]
    pub profiled: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What the online phase detector decided during the run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DetectedPhases {
    /// The detector's configuration (window, sizes in intervals, model, analyzer).
    pub detector: String,
    /// The minimum phase length, in intervals, it was set up for.
    pub mpl: u32,
    /// Phases in the order detected, as intervals of the time line: [start, end).
    pub phases: Vec<PhaseSpan>,
}

/// One detected phase.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct PhaseSpan {
    /// First interval (the anchor when the detector anchors starts) and one past the last.
    pub start: u32,
    pub end: u32,
    /// The same bounds in path ends since the run began.
    pub start_path_end: u64,
    pub end_path_end: u64,
}

impl Profile {
    /// The edge profile implied by the path profile: per branch, per outcome, the sum of the
    /// counts of the paths that take it (PEP §3.3).
    pub fn edges_from_paths(&self) -> Vec<Vec<u64>> {
        let mut counts: Vec<Vec<u64>> = self
            .branches
            .iter()
            .map(|b| vec![0; b.outcomes.len()])
            .collect();
        for p in &self.paths {
            for s in &p.steps {
                counts[s.branch as usize][s.outcome as usize] += p.count;
            }
        }
        counts
    }

    pub fn function(&self, index: u32) -> Option<&Function> {
        self.functions
            .binary_search_by_key(&index, |f| f.index)
            .ok()
            .map(|i| &self.functions[i])
    }

    /// A display name: the name section's, an import's `module::name`, or `func[N]`.
    pub fn function_name(&self, index: u32) -> String {
        if index == u32::MAX {
            return "(host)".into();
        }
        self.function(index)
            .and_then(|f| f.name.clone())
            .or_else(|| {
                self.contexts
                    .as_ref()
                    .and_then(|c| c.import_name(index))
                    .map(str::to_string)
            })
            .unwrap_or_else(|| format!("func[{index}]"))
    }
}

#[cfg(test)]
mod tests {
    use super::Sampling;

    /// Windows' counts are scaled by the guest's CPU time over the windows' where both
    /// were measured: wall time would count a descheduled window as work seen.
    #[test]
    fn window_scale_prefers_the_guests_cpu_time() {
        let s = Sampling {
            switched_on_us: 10_000,
            guest_cpu_us: 30_000,
            switched_on_cpu_us: 6_000,
            ..Default::default()
        };
        assert_eq!(s.window_scale(40.0), Some(5.0));
        // An older profile, or a clock that could not be read: wall time.
        let wall = Sampling {
            switched_on_cpu_us: 0,
            ..s.clone()
        };
        assert_eq!(wall.window_scale(40.0), Some(4.0));
        // Never below one (windows open all along), and nothing without window time.
        assert_eq!(wall.window_scale(5.0), Some(1.0));
        let none = Sampling::default();
        assert_eq!(none.window_scale(40.0), None);
    }
}

#[cfg(test)]
mod cap_tests {
    use crate::testing::{branch, path, profile};

    /// Over the cap, the hottest paths stay, the rest are counted as left out, and the
    /// branch counts do not change.
    #[test]
    fn a_capped_profile_keeps_its_hottest_paths_and_its_branch_counts() {
        let steps = [(0, 0), (0, 1), (0, 0)];
        let paths = (0..10).map(|n| path(n, 10 + n, &steps)).collect();
        let mut p = profile(vec![branch(0, &[50, 60])], paths);
        let branches = p.branches.clone();
        let before = p.clone();
        p.cap_paths(1_000);
        assert_eq!(p, before, "under the cap nothing changes");
        // Four steps a path (three outcomes and the path itself): three paths fit in 13.
        p.cap_paths(13);
        let kept: Vec<u64> = p.paths.iter().map(|q| q.number).collect();
        assert_eq!(kept, [7, 8, 9]);
        assert_eq!(p.lost.capped_paths, 7);
        assert_eq!(p.lost.capped_executions, (10..17).sum::<u64>());
        assert_eq!(p.branches, branches);
        assert!(p.warnings.iter().any(|w| w.contains("7 colder paths")));
        let mut bytes = Vec::new();
        p.write(&mut bytes).unwrap();
        assert_eq!(crate::Profile::read(&bytes[..]).unwrap(), p);
    }
}
