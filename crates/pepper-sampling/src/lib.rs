//! Sampling for PEP (continuous path profiling): which path ends to record after a timer
//! tick, and where to count them without allocating.
//!
//! Pure logic: the runtime's sampler thread feeds it ticks and path ends read from the
//! guest's ring buffer; tests feed it hand-made schedules.

pub mod calibrate;
mod schedule;
mod table;

pub use schedule::{ArnoldGrove, Decision, PepParams};
pub use table::SampleTable;
