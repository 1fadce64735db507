//! What each mode measures, in one place: the rewriter, the decoder, the runtime and the
//! reports ask these properties instead of naming modes, and every property lists every
//! mode, so a new mode is a new variant here and the compiler names each decision it
//! needs (see ARCHITECTURE.md, "Adding a mode").

use serde::{Deserialize, Serialize};

/// What a run measured.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Every Ball-Larus path counted; the edge profile is derived from the paths.
    ExactPaths,
    /// Every branch outcome counted directly; no paths.
    ExactEdges,
    /// No instrumentation: a baseline run.
    None,
    /// PEP: paths are recorded only in sampled bursts (by default the guest runs clean
    /// copies of its functions between bursts, `Sampling::switch` says where it checks);
    /// the edge profile is derived from the sampled paths.
    Pep,
    /// TPP: exact counts of the hot paths a guide edge profile predicts; paths through edges
    /// the guide calls cold are counted together, per function, as cold executions.
    Targeted,
    /// Ephemeral instrumentation: instrumented copies record branches only part of the
    /// time (by default in a short window of every epoch, or within a per-function budget
    /// with `--persistence`); the branch counts are estimates scaled from what the copies
    /// recorded (`Branch::recorded` says what they rest on).
    Ephemeral,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 6] = [
        Mode::ExactPaths,
        Mode::ExactEdges,
        Mode::None,
        Mode::Pep,
        Mode::Targeted,
        Mode::Ephemeral,
    ];

    /// The name in profiles and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::ExactPaths => "exact-paths",
            Mode::ExactEdges => "exact-edges",
            Mode::None => "none",
            Mode::Pep => "pep",
            Mode::Targeted => "targeted",
            Mode::Ephemeral => "ephemeral",
        }
    }

    /// Instruments branches at all (`none` only counts calls, when contexts are asked for).
    pub fn instruments(self) -> bool {
        match self {
            Mode::None => false,
            Mode::ExactPaths | Mode::ExactEdges | Mode::Pep | Mode::Targeted | Mode::Ephemeral => {
                true
            }
        }
    }

    /// Keeps a Ball-Larus path register: a path profile, with edges derived from it.
    pub fn paths(self) -> bool {
        match self {
            Mode::ExactPaths | Mode::Pep | Mode::Targeted => true,
            Mode::ExactEdges | Mode::Ephemeral | Mode::None => false,
        }
    }

    /// Counts branch outcomes on the chords of a spanning tree, the rest derived by flow
    /// conservation (no paths).
    pub fn edges(self) -> bool {
        match self {
            Mode::ExactEdges | Mode::Ephemeral => true,
            Mode::ExactPaths | Mode::Pep | Mode::Targeted | Mode::None => false,
        }
    }

    /// Records part of the run: its counts are estimates, and it can miss code it never
    /// looked at (`crate::blind`).
    pub fn sampled(self) -> bool {
        self.samples_paths() || self.samples_edges()
    }

    /// Records sampled path ends: PEP's bursts into a ring the sampler thread reads, or
    /// every k-th path end counted in the guest. Path ends carry the function's index in
    /// a tag, and bursts run on the switch.
    pub fn samples_paths(self) -> bool {
        match self {
            Mode::Pep => true,
            Mode::ExactPaths | Mode::ExactEdges | Mode::Targeted | Mode::Ephemeral | Mode::None => {
                false
            }
        }
    }

    /// Records branch outcomes part of the time: in windows the runtime opens, or within
    /// budgets it re-arms; counts are scaled to the run.
    pub fn samples_edges(self) -> bool {
        match self {
            Mode::Ephemeral => true,
            Mode::ExactPaths | Mode::ExactEdges | Mode::Pep | Mode::Targeted | Mode::None => false,
        }
    }

    /// Callers give their callees' entry counts (an exact count at every call), which
    /// needs every body analyzed before any is placed.
    pub fn given_entries(self) -> bool {
        match self {
            Mode::ExactEdges => true,
            Mode::ExactPaths | Mode::Pep | Mode::Targeted | Mode::Ephemeral | Mode::None => false,
        }
    }

    /// Prunes the paths through edges a guide's edge profile calls cold, counting them
    /// per function, and counts hot loops' paths in locals (TPP).
    pub fn prunes_cold(self) -> bool {
        match self {
            Mode::Targeted => true,
            Mode::ExactPaths | Mode::ExactEdges | Mode::Pep | Mode::Ephemeral | Mode::None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_is_named_and_counts_one_way_at_most() {
        for m in Mode::ALL {
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.name()));
            assert!(!(m.paths() && m.edges()), "{m:?}");
            assert_eq!(m.instruments(), m.paths() || m.edges(), "{m:?}");
            assert!(!m.samples_paths() || m.paths(), "{m:?}");
            assert!(!m.samples_edges() || m.edges(), "{m:?}");
        }
    }
}
