//! Control-flow graphs and Ball-Larus path profiling, PEP variant.
//!
//! This crate knows nothing about WebAssembly or wasmtime. It owns:
//! - [`Cfg`]: a per-function control-flow graph with typed [`NodeId`]/[`EdgeId`] indices;
//! - [`PathDag`]: the P-DAG of PEP §3.2, where paths end at *split nodes* (loop headers and
//!   truncation points) and at the function exit;
//! - [`PathNumbering`]: Ball-Larus numbering (PEP Fig. 2), optionally "smart" (PEP Fig. 4),
//!   with greedy regeneration of full and partial paths (PEP §3.3);
//! - [`truncate`]: choosing extra split nodes so a function's path count fits a register;
//! - [`eliminate_obvious`]: TPP's obvious paths, counted on a defining edge instead of by
//!   the path register;
//! - [`estimate_edge_frequencies`]: a static guess at edge frequencies (Wu-Larus), for
//!   counter placement and numbering when there is no profile.
//!
//! Numbering and decoding live apart from instrumentation placement (the LLVM PathProfiling
//! split), so a profile can be decoded offline from the same graph that numbered it.

mod cfg;
mod dag;
mod edge_count;
mod freq;
mod ids;
mod numbering;
mod obvious;
pub mod testgen;
mod truncate;

pub use cfg::{Cfg, Dfs};
pub use dag::CycleError;
pub use dag::{DagEdge, DagEdgeKind, PathDag, Vertex};
pub use edge_count::EdgeCounting;
pub use freq::{
    estimate_edge_frequencies, profile_edge_frequencies, profile_edge_frequencies_with_headers,
};
pub use ids::{DagEdgeId, EdgeId, NodeId};
pub use numbering::{NumberingError, PathNumbering, RegenError};
pub use obvious::{eliminate_obvious, ObviousPath, ObviousPaths};
pub use truncate::{number_pruned, number_with_limit, DagError, NumberedDag, REGISTER_PATH_LIMIT};
