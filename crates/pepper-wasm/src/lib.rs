//! WebAssembly side of pepper: functions to CFGs, and the rewriter that inserts path or edge
//! instrumentation. Knows nothing of the runtime: it produces module bytes plus a [`Plan`],
//! and [`Plan::collect`] turns the profiler memory of a finished run back into a profile.
//!
//! Pipeline: [`module::ModuleFacts`] (pre-pass) → [`analysis::analyze`] per function (CFG +
//! action points) → `pepper_cfg` numbering → [`emit`] (code per mode) → [`rewrite`]
//! (re-encoding, appending pepper's memory/types/hash function).

pub mod analysis;
mod collect;
pub mod contexts;
pub mod dwarf;
pub mod emit;
pub mod entries;
mod ephemeral;
pub mod hints;
pub mod module;
pub mod path_calls;
pub mod plan;
mod rewrite;
pub mod switch;

pub use collect::{Increments, RunOutcome};
pub use contexts::{CallSiteInfo, ContextMode, SampledContexts};
pub use module::FuncIndex;
pub use path_calls::PathSites;
pub use plan::{
    instrument, Counting, InstrumentError, InstrumentOptions, Instrumented, Plan, COUNTERS_EXPORT,
    DEFAULT_ARRAY_MAX_PATHS, HASH_CACHE_ENTRIES, PATH_WINDOW_RING_LOG2,
};

/// Reads a module file's bytes, translating WebAssembly text (`.wat`) when needed.
pub fn read_module(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, wat::Error> {
    wat::parse_bytes(bytes)
}
