//! `pepper run`'s phase options: the time line, the online phase detector, and interval
//! sampling (phase-aware or periodic) on the switch.

use anyhow::{bail, Result};
use pepper_runtime::{IntervalConfig, Strategy, TimelineSource};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct IntervalArgs {
    /// Record a time line (PEP without --switch): the run cut into intervals of
    /// --timeline-interval path ends (bounds exact), each with the path ends of every
    /// function (its entries and loop iterations), counted as --timeline-source says.
    /// `pepper phases` analyzes it.
    #[arg(long)]
    timeline: bool,
    /// Where the time line's counts come from. `bursts`: PEP's sampled path ends, counted
    /// in the interval they fall in (no cost beyond PEP's; each interval's vector is a
    /// sample of a few hundred path ends, so intervals should span several ticks).
    /// `ring`: every path end (one in 32 read), drained from a 2 MiB ring between ticks:
    /// exact vectors for offline analysis and for the time line `pepper compare` scores
    /// a detector against, at a few percent more for the guest
    /// (bench/results/phases.md).
    #[arg(long, value_enum, default_value_t = Source::Bursts)]
    timeline_source: Source,
    /// Path ends per time-line interval.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1000..))]
    timeline_interval: u64,
    /// Run the online phase detector (Nagpurkar's adaptive trailing window, weighted model,
    /// threshold 0.9, anchored starts: the best of bench/results/phases.md's sweep) over
    /// the time line as the program runs; the profile records the phases it found, and
    /// `pepper compare TIMELINE THIS` scores them against the phases of another run's
    /// time line (same program and input; record that one with `--timeline
    /// --timeline-source ring` for exact vectors). Implies --timeline.
    #[arg(long)]
    phases: bool,
    /// The shortest phase, in time-line intervals, the detector should report (its current
    /// window is half of it; the baseline `pepper compare` uses takes the same length).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(2..))]
    phase_mpl: u32,
    /// Phase-aware profiling (PEP on the switch): the run is cut into --phase-interval
    /// intervals of time, each classified into a phase by the functions on its stack
    /// samples (native stacks; nothing in the guest); the instrumented code runs only in
    /// the --phase-representative interval of each new phase and every
    /// --phase-resample-th interval of a phase (every path end of them is read), and
    /// each phase's profile is scaled by how many intervals it ran. Phases already
    /// profiled run clean code.
    #[arg(long, conflicts_with = "periodic_intervals")]
    phase_aware: bool,
    /// Interval sampling without phases, the baseline for --phase-aware: instrument every
    /// N-th --phase-interval interval and scale by N.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    periodic_intervals: Option<u32>,
    /// Interval length of --phase-aware and --periodic-intervals.
    #[arg(long, default_value = "10ms", value_parser = super::run::parse_duration)]
    phase_interval: Duration,
    /// --phase-aware: the largest Manhattan distance (0 = same mix of functions, 2 =
    /// disjoint) between an interval and a phase for the interval to belong to it. Lower
    /// finds more phases, profiles more intervals and is more accurate.
    #[arg(long, default_value_t = 0.3)]
    phase_threshold: f64,
    /// --phase-aware: which interval of a new phase to profile (Nagpurkar's rule is the
    /// third: the first carries the transition into the phase; 2 measured better on
    /// pepper's phase workloads, bench/results/phases.md).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..))]
    phase_representative: u64,
    /// --phase-aware: profile every N-th interval of a phase again (0: never), so that a
    /// phase whose code drifts within the threshold is not known from one interval only.
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
