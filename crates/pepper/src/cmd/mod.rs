pub mod compare;
pub mod export;
pub mod hints;
mod http;
pub mod instrument;
pub mod intervals;
pub mod merge;
pub mod phases;
mod progress;
pub mod report;
pub mod run;
pub mod serve;
pub mod view;

use anyhow::{Context, Result};
use std::path::Path;

/// How an earlier profile steers the rewriter (`run` and `instrument`).
#[derive(clap::Args, Debug)]
pub struct GuideArgs {
    /// An earlier profile of the same module with branch counts. Path modes number the
    /// hottest outcomes with no code, targeted mode prunes the cold ones, exact-edges
    /// keeps counters off hot edges. Another module's guide is ignored, with a warning.
    #[arg(long, value_name = "PROFILE")]
    pub guide: Option<std::path::PathBuf>,
    /// Targeted mode: a branch outcome taken less than this fraction of its branch's
    /// executions in the guide is cold.
    #[arg(long, default_value_t = 0.05)]
    pub cold_threshold: f64,
    /// Targeted mode: an innermost loop without calls, entered less often than this
    /// fraction of its iterations, counts its hottest path in a local (0: never; a trap
    /// in the loop loses its count). Not combined with --obvious.
    #[arg(long, default_value_t = 0.15)]
    pub loop_threshold: f64,
    /// Targeted mode: also TPP's obvious path elimination: a path that owns an edge no
    /// other hot path takes is counted on that edge. Counts stay exact.
    #[arg(long)]
    pub obvious: bool,
}

/// Profiling modes a user can pick on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeArg {
    /// Continuous path profiling (PEP): paths recorded in sampled bursts, edges derived
    /// from them, and calling contexts. For always-on use.
    Pep,
    /// Count every Ball-Larus path (PEP's header-split variant); edges derived from paths.
    ExactPaths,
    /// Count every branch outcome: counters on the edges outside a spanning tree, the rest
    /// derived by flow.
    ExactEdges,
    /// Targeted path profiling (TPP): exact counts of the hot paths, with the paths
    /// through edges the --guide calls cold counted together.
    Targeted,
    /// Both TPP stages in one command: an exact-edges run (output discarded) guides a
    /// targeted run. The program runs twice.
    Staged,
    /// Ephemeral instrumentation: every function records its branches during a --window
    /// once in each --epoch and runs clean code otherwise. An edge profile, no paths.
    Ephemeral,
    /// Calling contexts only: a sampled calling context tree and exact call-site counts.
    Calls,
    /// Every call counted in its full calling context (the ground truth for `calls`).
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
    /// With `pep` and `calls`; not with the exact and targeted modes.
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

/// Reads a module or component file: the core modules pepper works on (inside a
/// component, the ones `modules` selects), and how to put them back (see
/// `pepper_wasm::component`).
pub fn read_unit(
    path: &Path,
    modules: &pepper_wasm::component::ModuleSelection,
) -> Result<pepper_wasm::component::Unit> {
    let file = read_module(path)?;
    pepper_wasm::component::Unit::parse_with(&file, modules)
        .with_context(|| format!("reading {}", path.display()))
}

/// `--modules`: `all`, `program`, or core module names separated by commas.
pub fn parse_modules(s: &str) -> Result<pepper_wasm::component::ModuleSelection, String> {
    use pepper_wasm::component::ModuleSelection;
    Ok(match s {
        "all" => ModuleSelection::All,
        "program" => ModuleSelection::Program,
        _ => {
            let names: Vec<String> = s.split(',').map(str::to_string).collect();
            if names.iter().any(String::is_empty) {
                return Err(format!("`{s}`: an empty module name"));
            }
            ModuleSelection::Named(names)
        }
    })
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
