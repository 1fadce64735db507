//! WebAssembly side of pepper: functions to CFGs, the rewriter that inserts path, edge or
//! context instrumentation, and the decoder that turns what a run counted back into a
//! profile. Knows nothing of the runtime: [`instrument`] gives module bytes plus a [`Plan`],
//! and [`Plan::profile`] decodes the profiler memory of a finished run.
//!
//! Placement: [`module::ModuleFacts`] (pre-pass) → [`analysis::analyze`] per function (CFG and
//! action points) → `plan` (what each function counts, via `pepper_cfg`'s numbering or
//! spanning tree) → [`emit`], [`contexts`] and [`switch`] (code per mode) → `body` (the
//! walk over a body's operators) → `rewrite` (re-encoding, appending pepper's memory,
//! types and functions); `instrument` runs these stages. Decoding: [`decode`] (paths,
//! edges, contexts, ephemeral estimates, path windows) reads the plan, never the emitter.
//! Module dependencies point one way: decoding and emission depend on `plan`, `plan` on
//! `analysis` and `module`.

pub mod analysis;
mod body;
pub mod callgraph;
pub mod component;
pub mod contexts;
pub mod decode;
pub mod dwarf;
pub mod emit;
pub mod entries;
pub mod hints;
pub mod inline;
mod instrument;
mod instrumented;
pub mod module;
pub mod plan;
mod rewrite;
pub mod switch;

pub use decode::{Increments, PathSites, RunOutcome, SampledContexts};
pub use instrument::instrument;
pub use instrumented::Instrumented;
pub use module::FuncIndex;
pub use pepper_layout::{ContextMode, COUNTERS_EXPORT, PATH_WINDOW_RING_LOG2};
pub use plan::{
    CallSiteInfo, Counting, InstrumentError, InstrumentOptions, Plan, DEFAULT_ARRAY_MAX_PATHS,
    HASH_CACHE_ENTRIES, PEP_PLACEMENT,
};

/// Reads a module file's bytes, translating WebAssembly text (`.wat`) when needed.
pub fn read_module(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, wat::Error> {
    wat::parse_bytes(bytes)
}
