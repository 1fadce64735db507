//! pepper's profile: the data model, its versioned file format, and reports.
//!
//! A profile is self-contained: every path carries its regenerated branch sequence and every
//! branch its original code offset, so `pepper report` needs no module. The module's SHA-256
//! is recorded so that anything that does read the module (DWARF lookup, re-instrumentation
//! with a guide) can refuse a mismatch. A component's core modules, profiled one by one,
//! merge into one profile that records each module's hash ([`CoreModule`]). See
//! `docs/profile-format.md` for the schema.

pub mod blind;
pub mod compare;
pub mod context_accuracy;
mod contexts;
mod file;
mod merge;
mod mode;
mod model;
mod modules;
pub mod report;
mod since;
#[cfg(test)]
mod testing;

pub use contexts::*;
pub use file::{check_writable, module_hash, ProfileError, FORMAT, VERSION};
pub use merge::MergeError;
pub use model::*;
pub use modules::{
    foreign_function, foreign_parts, module_of, CoreModule, FOREIGN, FOREIGN_FUNC_BITS,
    FOREIGN_MODULES,
};
