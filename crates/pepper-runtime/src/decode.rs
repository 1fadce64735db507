//! From what a run collected to a profile: the one place that says how a run sampled
//! (the settings the collected data does not carry) and hands everything to the plan's
//! decoder. `pepper run`, the benchmark and embedders (`examples/embed.rs`) all go through
//! [`profile`].

use crate::{Collected, RunResult, SamplerConfig, SamplerResult};
use pepper_profile::{ModuleInfo, Profile, RunInfo, Sampling};
use pepper_sampling::PepParams;
use std::time::Duration;

/// How a run sampled, as its profile records it.
#[derive(Clone, Debug)]
pub struct Settings {
    /// PEP(SAMPLES, STRIDE).
    pub params: PepParams,
    /// The burst period.
    pub interval: Duration,
    /// The in-guest every-K design instead of the ring.
    pub every: Option<u32>,
    /// SHA-256 of the guide profile, when smart numbering used one.
    pub guide: Option<String>,
    /// Ephemeral instrumentation: executions recorded per function and epoch.
    pub persistence: u32,
    /// Ephemeral instrumentation: how often budgets are re-armed.
    pub epoch: Duration,
    /// Interval sampling: which intervals, and their length.
    pub intervals: Option<(crate::Strategy, Duration)>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            params: PepParams {
                samples: 64,
                stride: 17,
            },
            interval: crate::PEP_INTERVAL,
            every: None,
            guide: None,
            persistence: 1000,
            epoch: crate::EPHEMERAL_EPOCH,
            intervals: None,
        }
    }
}

/// What a run collected, borrowed from a [`Collected`] or a [`RunResult`].
#[derive(Clone, Copy, Debug)]
pub struct Results<'a> {
    /// pepper's memory after the run.
    pub counters: Option<&'a [u8]>,
    /// What the sampler thread collected.
    pub samples: Option<&'a SamplerResult>,
    /// Ephemeral instrumentation: the epochs armed.
    pub epochs: u64,
    /// Ephemeral in windows: how long they were open.
    pub windows: crate::WindowTime,
    /// Ephemeral in windows: the windows' counts in random groups (see
    /// [`Collected::window_groups`](crate::Collected::window_groups)).
    pub window_groups: &'a [Vec<u8>],
}

impl Collected {
    /// Borrows what was collected, for [`profile`].
    pub fn results(&self) -> Results<'_> {
        Results {
            counters: self.counters.as_deref(),
            samples: self.samples.as_ref(),
            epochs: self.epochs,
            windows: self.windows,
            window_groups: &self.window_groups,
        }
    }
}

impl RunResult {
    /// Borrows what the run collected, for [`profile`].
    pub fn results(&self) -> Results<'_> {
        Results {
            counters: self.counters.as_deref(),
            samples: self.samples.as_ref(),
            epochs: self.epochs,
            windows: self.windows,
            window_groups: &self.window_groups,
        }
    }
}

/// Where a module-wide switch flag was (`Sampling::switch_flag`); empty without one.
fn flag_place(guest: &pepper_layout::Guest) -> &'static str {
    match guest.switch {
        None => "",
        Some(_) => "pepper",
    }
}

/// The profile of a run of `instrumented`: `collected` (pepper's memory and the sampler's
/// results), `sampler` (the configuration the run used, for its stack samples), `lines`
/// (source lines of original code offsets, when known).
pub fn profile(
    instrumented: &pepper_wasm::Instrumented,
    collected: Results<'_>,
    module: ModuleInfo,
    run: RunInfo,
    settings: &Settings,
    sampler: Option<&SamplerConfig>,
    lines: &dyn Fn(u64) -> Option<String>,
) -> Profile {
    let samples = collected.samples;
    let guest = &instrumented.guest;
    let mut sampling = guest.mode.samples_paths().then(|| {
        let s = samples.cloned().unwrap_or_default();
        let ring = settings.every.is_none();
        let info = Sampling {
            design: if ring { "ring" } else { "every" }.into(),
            samples: settings.params.samples,
            stride: settings.params.stride,
            interval_us: settings.interval.as_micros() as u64,
            every: settings.every.unwrap_or(0) as u64,
            ticks: s.ticks,
            taken: s.taken,
            path_ends: s.path_ends,
            lost: s.lost,
            idle_ticks: s.idle_ticks,
            off_cpu_ticks: s.off_cpu_ticks,
            guest_bursts: s.guest_bursts,
            switch: guest.switch.unwrap_or_default().into(),
            switch_flag: flag_place(guest).into(),
            switched_on_us: s.switched_on.as_micros() as u64,
            instrumented_path_ends: s.instrumented_ends,
            guide: settings.guide.clone(),
            // Each burst stands for the guest's path-end rate times its CPU time since
            // the last burst (`sampler::bursts::watch_rate`).
            weights: if ring { "rate".into() } else { String::new() },
            ..Default::default()
        };
        (info, s.words)
    });
    if guest.mode.samples_edges() {
        // Ephemeral epochs in the sampling record: `samples` is the persistence,
        // `interval_us` the epoch and `ticks` the epochs armed.
        // In windows: `samples` 0, `switched_on_us` the time they were open.
        let windows = instrumented.guest.ephemeral_windows;
        let info = Sampling {
            design: if windows {
                "ephemeral-windows"
            } else {
                "ephemeral"
            }
            .into(),
            samples: if windows { 0 } else { settings.persistence },
            interval_us: settings.epoch.as_micros() as u64,
            ticks: collected.epochs,
            switched_on_us: collected.windows.wall.as_micros() as u64,
            switched_on_cpu_us: collected.windows.cpu.as_micros() as u64,
            guest_cpu_us: collected.windows.guest_cpu.as_micros() as u64,
            switch_flag: if windows { flag_place(guest) } else { "" }.into(),
            ..Default::default()
        };
        sampling = Some((info, Vec::new()));
    }
    let intervals = samples.and_then(|s| s.intervals.clone());
    if let (Some((strategy, length)), Some((info, _))) = (settings.intervals, sampling.as_mut()) {
        // Interval sampling: `samples` is N for periodic intervals and the representative
        // interval for phase-aware ones, `stride` how often a phase is profiled again,
        // `interval_us` the interval, `ticks` the intervals and `taken` the path ends read
        // in profiled ones.
        let (design, samples, stride) = match strategy {
            crate::Strategy::Periodic(n) => ("periodic-intervals", n, 0),
            crate::Strategy::PhaseAware { nth, every, .. } => {
                ("phase-aware", nth as u32, every as u32)
            }
        };
        info.design = design.into();
        info.samples = samples;
        info.stride = stride;
        info.interval_us = length.as_micros() as u64;
        info.ticks = intervals
            .as_ref()
            .map_or(0, |i| i.timeline.intervals.len() as u64);
        info.weights = String::new();
    }
    let stacks = sampler.and_then(|s| s.stacks.as_ref().map(|st| (st, s.stack_interval())));
    let mut warnings = Vec::new();
    if let Some(s) = samples.filter(|s| s.off_cpu_ticks * 2 > s.ticks) {
        warnings.push(format!(
            "the guest was off its CPU at {} of the sampler's {} ticks (a busy machine, or \
             a guest asleep in host calls): the estimates rest on the other ticks' bursts",
            s.off_cpu_ticks, s.ticks
        ));
    }
    let outcome = pepper_wasm::RunOutcome {
        module,
        run,
        warnings,
        sampling,
        contexts: stacks.and_then(|(sc, every)| samples.and_then(|r| sc.collected(r, every))),
        window_groups: collected.window_groups.to_vec(),
    };
    let mut profile = instrumented.decode(collected.counters, outcome, lines);
    if let Some(ir) = intervals {
        if ir.timeline.lost > 0 {
            profile.warnings.push(format!(
                "the sampler could not read {} path ends before the guest overwrote them; {}",
                ir.timeline.lost,
                if ir.words.is_some() {
                    "the ones it read in each profiled interval stand for them"
                } else {
                    "their intervals' vectors miss them (positions stay exact)"
                }
            ));
        }
        if ir.words.as_ref().is_some_and(|w| w.is_empty()) {
            profile.warnings.push(
                "no interval was profiled: the run was too short for any phase to reach its \
                 representative interval (try a shorter --phase-interval)"
                    .into(),
            );
        }
        profile.timeline = Some(ir.timeline);
        profile.phases = ir.phases;
    }
    if let Some(why) = samples.and_then(|s| s.failure.as_ref()) {
        profile
            .warnings
            .push(format!("{why}: the profile has none of its samples"));
    }
    if let Some(s) = profile.sampling.as_mut().filter(|s| s.design == "every") {
        // The in-guest design counted its samples in the hash table (counts are scaled to
        // executions, `every` per sample).
        s.taken = profile.paths.iter().map(|p| p.count).sum::<u64>() / s.every.max(1);
    }
    pepper_profile::blind::mark_blind_spots(&mut profile);
    profile
}
