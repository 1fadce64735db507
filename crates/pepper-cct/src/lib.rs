//! Calling context trees, independent of wasm and of the runtime.
//!
//! - [`tree`]: an arena tree of contexts (function + call site per node), with a node budget
//!   so memory stays bounded on long runs.
//! - [`pcct`]: Whaley's partial calling context tree ("A Portable Sampling-Based Profiler for
//!   Java Virtual Machines", §5): each sample walks the stack from the top, stops at the first
//!   frame an earlier sample already saw (the *marker*), and adds weight only below it.
//! - [`window`]: call windows, the calls logged just before a sample replayed backwards from
//!   its stack, so each lands in its exact context (bursts of calls, counted by number).
//! - [`paths`]: call windows read off PEP's ring of path ends (the path says which call
//!   sites it passed), so a PEP run gets them without a call log.
//! - [`complete`]: call estimates for every context from a sampled tree plus exact
//!   per-call-site counts.

pub mod complete;
pub mod paths;
pub mod pcct;
pub mod tree;
pub mod window;

pub use complete::{complete, CompleteOptions, EntryCount, SiteCount};
pub use paths::{path_events, CallGraph, PathCalls, PathDecoder, PathEnd, Pos, Resolution, Start};
pub use pcct::{EdgeMode, Frame, Pcct, Stack, VecStack};
pub use tree::{ContextTree, NodeIdx, DETACHED_SITE, NO_SITE, ROOT};
pub use window::{Replay, SiteInfo};
