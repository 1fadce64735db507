//! `pepper run`'s phase options: the time line, the online phase detector, and interval
//! sampling (phase-aware or periodic) on the switch.

use anyhow::{bail, Result};
use pepper_runtime::{IntervalConfig, Strategy, TimelineSource};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct IntervalArgs {
    /// Record a time line: the run cut into intervals of --timeline-interval path ends,
    /// each with every function's path ends. `pepper phases` analyzes it.
    #[arg(long)]
    timeline: bool,
    /// Where the time line's counts come from: `bursts`, PEP's sampled path ends (no extra
    /// cost); `ring`, every path end (exact, for offline analysis, at a small extra cost).
    #[arg(long, value_enum, default_value_t = Source::Bursts)]
    timeline_source: Source,
    /// Path ends per time-line interval.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1000..))]
    timeline_interval: u64,
    /// Run the online phase detector over the time line as the program runs; the profile
    /// records its phases, and `pepper compare` scores them against another run's time
    /// line. Implies --timeline.
    #[arg(long)]
    phases: bool,
    /// The shortest phase, in time-line intervals, the detector should report.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(2..))]
    phase_mpl: u32,
    /// Phase-aware profiling: each --phase-interval is classified into a phase by its
    /// stack samples, only a representative interval of each phase is profiled, and
    /// each phase's profile is scaled by how long it ran.
    #[arg(long, conflicts_with = "periodic_intervals")]
    phase_aware: bool,
    /// Interval sampling without phases, the baseline for --phase-aware: instrument every
    /// N-th --phase-interval interval and scale by N.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    periodic_intervals: Option<u32>,
    /// Interval length of --phase-aware and --periodic-intervals.
    #[arg(long, default_value = "10ms", value_parser = super::run::parse_duration)]
    phase_interval: Duration,
    /// --phase-aware: how far (0 = the same mix of functions, 2 = disjoint) an interval
    /// may be from a phase to belong to it. Lower profiles more and is more accurate.
    #[arg(long, default_value_t = 0.3)]
    phase_threshold: f64,
    /// --phase-aware: which interval of a new phase to profile (the first one carries
    /// the transition into it).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..))]
    phase_representative: u64,
    /// --phase-aware: profile every N-th interval of a phase again (0: never).
    #[arg(long, value_name = "N", default_value_t = 20)]
    phase_resample: u64,
}

/// `--timeline-source`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Bursts,
    Ring,
}

impl IntervalArgs {
    /// Interval sampling needs the switch (clean code outside profiled intervals).
    pub fn samples_intervals(&self) -> bool {
        self.phase_aware || self.periodic_intervals.is_some()
    }

    /// Whether the run records a time line or runs the detector over one.
    pub fn records_timeline(&self) -> bool {
        self.timeline || self.phases
    }

    /// Refuses combinations that cannot work.
    pub fn check(&self, pep: bool, switch: bool, every: bool, native_stacks: bool) -> Result<()> {
        if !self.records_timeline() && !self.samples_intervals() {
            return Ok(());
        }
        if !pep || every {
            bail!("--timeline, --phases, --phase-aware and --periodic-intervals need PEP's ring (--mode pep, without --every)");
        }
        if (self.timeline || self.phases) && switch {
            bail!("--timeline and --phases need PEP's ring written all along, which clean code does not do; drop --switch");
        }
        if self.samples_intervals() && (self.timeline || self.phases) {
            bail!("--phase-aware and --periodic-intervals record their own time line; drop --timeline and --phases");
        }
        if self.phase_aware && !native_stacks {
            bail!(
                "--phase-aware tells phases apart by native stack samples (x86-64 Linux; \
                 not with --contexts off or --stacks shadow)"
            );
        }
        if self.samples_intervals() && !switch {
            bail!(
                "--phase-aware and --periodic-intervals run clean code between intervals, \
                 which needs the switch (not with --stacks shadow or --call-windows); \
                 drop --switch off"
            );
        }
        if !(0.0..=2.0).contains(&self.phase_threshold) {
            bail!("--phase-threshold must be within [0, 2]");
        }
        Ok(())
    }

    /// The sampler's interval work.
    pub fn config(&self) -> Option<IntervalConfig> {
        if self.samples_intervals() {
            let strategy = match self.periodic_intervals {
                Some(n) => Strategy::Periodic(n),
                None => Strategy::PhaseAware {
                    threshold: self.phase_threshold,
                    nth: self.phase_representative,
                    every: self.phase_resample,
                },
            };
            Some(IntervalConfig::Sampled {
                length: self.phase_interval,
                strategy,
            })
        } else if self.timeline || self.phases {
            Some(IntervalConfig::Timeline {
                length: self.timeline_interval,
                detector: self
                    .phases
                    .then(|| pepper_phases::DetectorConfig::recommended(self.phase_mpl as usize)),
                source: match self.timeline_source {
                    Source::Bursts => TimelineSource::Bursts,
                    Source::Ring => TimelineSource::Ring,
                },
            })
        } else {
            None
        }
    }
}
