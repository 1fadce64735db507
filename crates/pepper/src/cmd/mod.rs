pub mod compare;
pub mod export;
pub mod hints;
pub mod instrument;
pub mod intervals;
pub mod merge;
pub mod phases;
mod progress;
pub mod report;
pub mod run;
pub mod view;

use anyhow::{Context, Result};
use std::path::Path;

/// How an earlier profile steers the rewriter (`run` and `instrument`).
#[derive(clap::Args, Debug)]
pub struct GuideArgs {
    /// An earlier profile of the same module (any mode with branch counts). Paths and PEP
    /// modes use it for smart numbering (PEP §3.4: the hottest branch outcomes get path
    /// value 0 and carry no code); targeted mode also prunes the outcomes it calls cold;
    /// exact-edges places its counters by its counts (the fewest increments for a run like
    /// the guide's), where the static estimate has to guess.
    /// A guide recorded from a different module is reported and ignored.
    #[arg(long, value_name = "PROFILE")]
    pub guide: Option<std::path::PathBuf>,
    /// Targeted mode: a branch outcome taken less than this fraction of its branch's
    /// executions in the guide is cold (TPP(5, 15): 0.05).
    #[arg(long, default_value_t = 0.05)]
    pub cold_threshold: f64,
    /// Targeted mode: an innermost loop without calls counts its most frequent path in a
    /// local (a register increment instead of a memory increment that the next
    /// iteration waits on), added to the path's counter when the loop is left, where
    /// the loop's entry carries less than this fraction of its header's executions in
    /// the guide (TPP(5, 15): 0.15, more than about 6.7 iterations per entry). 0: never.
    /// Counts stay exact, except that a trap inside such a loop loses the iterations of
    /// that loop execution. Not combined with --obvious.
    #[arg(long, default_value_t = 0.15)]
    pub loop_threshold: f64,
    /// Targeted mode: also TPP's obvious path elimination. A path that owns an edge no other
    /// hot path takes is counted by a counter on that edge, and code only such paths run
    /// carries no path register. Counts stay exact; off by default because on the bundled
    /// workloads it measured no faster (see bench/results/analysis.md).
    #[arg(long)]
    pub obvious: bool,
}

/// Profiling modes a user can pick on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeArg {
    /// Continuous path profiling (PEP): the path is always computed, recorded only when
    /// sampled; edges derived from the sampled paths. Low overhead, for always-on use.
    Pep,
    /// Count every Ball-Larus path (PEP's header-split variant); edges derived from paths.
    ExactPaths,
    /// Count every branch outcome: counters on the edges outside a spanning tree (placed by a
    /// static frequency estimate, or by --guide's counts, so hot edges carry none), the rest
    /// derived by flow.
    ExactEdges,
    /// Targeted path profiling (TPP): exact counts of the hot paths; paths through edges
    /// the --guide profile calls cold are counted together per function. Cheaper than
    /// exact-paths where the guide prunes many paths.
    Targeted,
    /// Both TPP stages in one command: run the program once under exact-edges (its output
    /// discarded) and use that edge profile as the guide of a targeted run. The program
    /// runs twice: only for programs without side effects you mind repeating.
    Staged,
    /// Ephemeral instrumentation: every function records its branches during a --window
    /// once in each --epoch and runs clean code the rest of the time; branch
    /// counts are the windows' scaled to the run (or, with --persistence, each function's
    /// first executions per epoch, propagated from exact entry counts). An edge profile
    /// for a few percent, without paths.
    Ephemeral,
    /// Calling contexts only: Whaley's sampled partial calling context tree (the guest's
    /// stack sampled every --interval, see --stacks) and exact per-call-site counts.
    Calls,
    /// Every call counted in its full calling context: the complete calling context tree
    /// (ground truth for `calls`; much slower on call-heavy programs).
    ExactCalls,
    /// No instrumentation (baseline).
    None,
}

/// Where sampled calling contexts come from.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StacksArg {
    Shadow,
    Native,
}

/// Whether to collect calling contexts alongside paths or edges.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextsArg {
    /// With `pep` and `calls`; not with the exact and targeted modes, whose overhead
    /// would then include the call-site counters and stack sampling.
    Auto,
    On,
    Off,
}

impl From<ModeArg> for pepper_profile::Mode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Pep => pepper_profile::Mode::Pep,
            ModeArg::ExactPaths => pepper_profile::Mode::ExactPaths,
            ModeArg::ExactEdges => pepper_profile::Mode::ExactEdges,
            ModeArg::Ephemeral => pepper_profile::Mode::Ephemeral,
            ModeArg::Targeted | ModeArg::Staged => pepper_profile::Mode::Targeted,
            ModeArg::None | ModeArg::Calls | ModeArg::ExactCalls => pepper_profile::Mode::None,
        }
    }
}

/// Reads a `.wasm` or `.wat` file and returns the binary module.
pub fn read_module(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let wasm = pepper_wasm::read_module(&bytes)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| {
            format!(
                "{} is neither a wasm binary nor valid WebAssembly text",
                path.display()
            )
        })?;
    Ok(wasm.into_owned())
}

/// Reads a module or component file: the core module pepper works on, and how to put it
/// back (see `pepper_wasm::component`).
pub fn read_unit(path: &Path) -> Result<pepper_wasm::component::Unit> {
    let file = read_module(path)?;
    pepper_wasm::component::Unit::parse(&file)
        .with_context(|| format!("reading {}", path.display()))
}

/// Reads a profile file, with the file name in any error.
pub fn load_profile(path: &Path) -> Result<pepper_profile::Profile> {
    let file =
        std::fs::File::open(path).with_context(|| format!("opening profile {}", path.display()))?;
    pepper_profile::Profile::read(std::io::BufReader::new(file))
        .with_context(|| format!("reading profile {}", path.display()))
}

/// Prints the plan's warnings, at most `max` of them, to stderr.
pub fn print_warnings(warnings: &[String], max: usize) {
    for w in warnings.iter().take(max) {
        eprintln!("pepper: warning: {w}");
    }
    if warnings.len() > max {
        eprintln!(
            "pepper: warning: ... and {} more (all are listed in the profile's \"warnings\")",
            warnings.len() - max
        );
    }
}
