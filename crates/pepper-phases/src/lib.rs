//! Phase behavior, after Nagpurkar's dissertation ("Analysis, Detection, and Exploitation
//! of Phase Behavior in Java Programs", UCSB 2007).
//!
//! A run is cut into *intervals*; each interval's profile is a sparse count vector over
//! *elements* (pepper uses functions: the path ends each function completed, which are its
//! invocations plus its loop iterations, the dissertation's "hot method" profile). On those:
//!
//! - [`Signature`]: a normalised vector and the Manhattan distance between two (§3.1.2);
//! - [`Matrix`]: the similarity matrix people look at, as a PNG (§3.2.1);
//! - [`cluster`] and [`summarize`]: the phase finder and analyzer (§3.2.2, §3.2.3);
//! - [`Detector`]: the online detector's window, model and analyzer policies (Ch. 4);
//! - [`oracle`] and [`score`]: the baseline phases and the accuracy score (§4.2);
//! - [`Tracker`] and [`sampling`]: phase-aware profiling, one representative interval
//!   per phase (Ch. 6), and periodic sampling to compare it with.
//!
//! Pure logic: the runtime's sampler builds intervals, the CLI and the benchmark read them.

mod detector;
mod finder;
mod matrix;
pub mod sampling;
mod score;
mod signature;
pub mod timeline;
mod tracker;

pub use detector::{detect, Analyzer, Detector, DetectorConfig, Model, Step, Window};
pub use finder::{cluster, oracle, runs, summarize, PhaseSummary, Run};
pub use matrix::Matrix;
pub use score::{score, spans, Score};
pub use signature::Signature;
pub use tracker::Tracker;

/// One interval's counts: (element, count), sorted by element, no zeros.
pub type Counts = [(u32, u64)];

/// What an interval is labelled with: the phase it is in (phases are told apart by their
/// labels, so two phases back to back keep their boundary), or `None` in transition.
pub type Label = Option<u32>;
