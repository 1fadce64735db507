//! A profiling run of a WASI command from start to end: the guide (staged mode's first
//! run), instrumentation, the run with its sampler threads, and decoding into a profile.
//! `pepper run` is this plus flags; the benchmark and the tests build their runs with
//! [`CommandOptions::instrument_options`] and [`CommandOptions::run_config`] so that they
//! measure what users run.

use crate::{
    decode, AttachConfig, EphemeralConfig, FlagWord, IntervalConfig, RunConfig, SamplerConfig,
};
use anyhow::{Context, Result};
use pepper_profile::{CoreModule, Mode, ModuleInfo, Profile, RunInfo};
use pepper_sampling::PepParams;
use pepper_wasm::component::{ComponentFrame, Unit};
use pepper_wasm::plan::Guide;
use pepper_wasm::{InstrumentOptions, Instrumented};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod modules;
use modules::others_supported;
pub use modules::Modules;

/// log2 of PEP's ring with the switch: 2^14 words (128 KiB). The sampler reads a burst's
/// path ends after sending the guest back to clean code, and instrumented frames further up
/// the stack may still finish an iteration meanwhile (bzip2's sorting: thousands of path
/// ends); the ring must hold those too. Clean code writes none, so a larger ring costs the
/// guest no more of its cache than the bursts' path ends themselves.
pub const SWITCH_RING_LOG2: u32 = 14;

/// log2 of PEP's ring, at least `asked`: a whole burst of `params` four times over, so
/// the sampler can copy it while the guest keeps writing; every path end when the sampler
/// reads them all; and with the switch, [`SWITCH_RING_LOG2`].
pub(crate) fn ring_log2(params: PepParams, asked: u32, every_path_end: bool, switch: bool) -> u32 {
    let burst = (4 * (params.samples as u64 + params.stride as u64))
        .next_power_of_two()
        .trailing_zeros();
    let every = match every_path_end {
        true => crate::EVERY_PATH_END_RING_LOG2,
        false => 0,
    };
    let switched = match switch {
        true => SWITCH_RING_LOG2,
        false => 0,
    };
    burst.max(12).max(asked).max(every).max(switched)
}

/// What the guest sees: WASI arguments, environment, preopens and stdio.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct WasiOptions {
    /// `argv`, including `argv[0]` (the program name).
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Pass the host environment through.
    pub inherit_env: bool,
    /// Preopened directories.
    pub dirs: Vec<crate::Preopen>,
    /// Inherit stdin/stdout/stderr (otherwise the guest's output is discarded).
    pub inherit_stdio: bool,
}

/// How the switch flag of switchable instrumentation is driven.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum SwitchDrive {
    /// The sampler sets it around each burst (or each profiled interval).
    #[default]
    Sampler,
    /// Set before the guest starts and never cleared: the instrumented copies run all
    /// along (to measure what the copies themselves cost).
    AlwaysOn,
}

/// How a run samples: PEP's bursts, stack samples, intervals, ephemeral epochs.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct SamplingOptions {
    /// PEP(SAMPLES, STRIDE).
    pub params: PepParams,
    /// The sampler's tick: a burst every `interval`.
    pub interval: Duration,
    /// Stack samples every this long; `None`: at every PEP tick, or every 1 ms without
    /// PEP's ring.
    pub stack_interval: Option<Duration>,
    /// A time line, phase detection, or interval sampling.
    pub intervals: Option<IntervalConfig>,
    /// Who sets the switch flag.
    pub switch: SwitchDrive,
    /// Ephemeral instrumentation: executions recorded per function and epoch.
    pub persistence: u32,
    /// Ephemeral instrumentation: how often budgets are re-armed, or windows opened.
    /// Default [`EPHEMERAL_EPOCH`], for windows; budgets were measured at [`BUDGET_EPOCH`].
    pub epoch: Duration,
    /// Ephemeral in windows (`InstrumentOptions::ephemeral_windows`): how long every
    /// epoch's window is open.
    pub window: Duration,
    /// Ephemeral in windows: where in its epoch each window opens (default: anywhere).
    pub window_phase: crate::WindowPhase,
    /// Counts the sampler keeps up to date while the guest runs (a progress display).
    pub live: Option<Arc<crate::LiveCounts>>,
}

/// PEP's default burst period (and stack-sample period), in the guest thread's CPU time:
/// each tick costs the guest its instrumented copies and a signal and costs pepper's
/// thread its processing, and on a busy machine every wake-up of that thread takes a core
/// from someone; halving the ticks from every 500 µs cost well under a point of accuracy.
pub const PEP_INTERVAL: Duration = Duration::from_millis(1);

/// Default for [`SamplingOptions::window`]: 50 µs every [`EPHEMERAL_EPOCH`]. What windows
/// cost is mostly the clean code's checks, which run whether a window is open or not; the
/// instrumented copies cost far more than clean code, but only for the small part of the
/// run a window covers, and every window is one more independent look at where the run
/// is. So more, shorter windows estimate biases better for about the same cost.
pub const EPHEMERAL_WINDOW: Duration = Duration::from_micros(50);

/// Default for [`SamplingOptions::epoch`] with windows: see [`EPHEMERAL_WINDOW`].
pub const EPHEMERAL_EPOCH: Duration = Duration::from_millis(1);

/// The epoch of ephemeral budgets (`persistence`): the paper's 10 ms.
pub const BUDGET_EPOCH: Duration = Duration::from_millis(10);

impl Default for SamplingOptions {
    fn default() -> Self {
        let d = decode::Settings::default();
        SamplingOptions {
            params: d.params,
            interval: d.interval,
            stack_interval: None,
            intervals: None,
            switch: SwitchDrive::Sampler,
            persistence: d.persistence,
            epoch: d.epoch,
            window: EPHEMERAL_WINDOW,
            window_phase: Default::default(),
            live: None,
        }
    }
}

/// Everything a profiling run of a WASI command needs.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct CommandOptions {
    /// What to instrument for. `ring_log2` is raised to what the sampling needs, and
    /// with [`CommandOptions::staged`] the guide comes from the first run.
    pub instrument: InstrumentOptions,
    /// Staged mode: run the program once with exact edge profiling (its output discarded)
    /// and use that profile as the guide.
    pub staged: bool,
    /// What the guest sees.
    pub wasi: WasiOptions,
    /// How the engine compiles: its cache, and branch hinting (always on for a module
    /// whose switch checks are hinted: `Instrumented::wants_branch_hinting`).
    pub engine: crate::EngineOptions,
    /// How the run samples.
    pub sampling: SamplingOptions,
    /// Call this export instead of `_start`, with `wasi.args` after `argv[0]` as its
    /// arguments, and print its results (`wasmtime run --invoke`).
    pub invoke: Option<String>,
    /// Ending the run before the guest returns: on a signal ([`crate::stop_on_signals`])
    /// or after a time, the profile of what ran so far goes to `deliver` while the guest
    /// keeps running (the caller ends the process).
    pub early_stop: Option<EarlyStopOptions>,
}

/// When a profiled command stops early, and who gets its profile then.
#[derive(Clone)]
#[non_exhaustive]
pub struct EarlyStopOptions {
    /// Stop on SIGINT or SIGTERM.
    pub signals: bool,
    /// Stop after this long.
    pub after: Option<Duration>,
    /// Receives the profile of what ran so far.
    pub deliver: Arc<dyn Fn(Profile, crate::StopReason) + Send + Sync>,
    /// Every this long, the profile so far goes to `snapshot` while the guest runs on.
    pub snapshot_every: Option<Duration>,
    /// Receives the snapshots.
    pub snapshot: Option<Arc<dyn Fn(Profile) + Send + Sync>>,
}

impl EarlyStopOptions {
    /// Early stops whose profile goes to `deliver`, with no trigger set yet: set
    /// `signals`, `after` or `snapshot_every` (and `snapshot`) to choose them.
    pub fn new(deliver: Arc<dyn Fn(Profile, crate::StopReason) + Send + Sync>) -> Self {
        EarlyStopOptions {
            signals: false,
            after: None,
            deliver,
            snapshot_every: None,
            snapshot: None,
        }
    }
}

impl std::fmt::Debug for EarlyStopOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarlyStopOptions")
            .field("signals", &self.signals)
            .field("after", &self.after)
            .finish_non_exhaustive()
    }
}

/// Something a caller may want to tell its user while a run goes on.
#[derive(Debug)]
pub enum Note<'a> {
    /// Staged mode: stage 1 (the exact edge profile) or 2 (targeted paths) begins.
    Stage(u8),
    /// The module is instrumented; functions left alone are in the warnings.
    Instrumented {
        /// Why functions were left uninstrumented.
        warnings: &'a [String],
    },
    /// Stack samples come at a period other than the one asked for (rounded to ticks).
    StackInterval {
        /// What was asked for.
        asked: Duration,
        /// What the sampler does.
        actual: Duration,
    },
    /// The guest is about to be compiled (or found in the cache).
    Compiling,
    /// The guest trapped; the profile covers what completed.
    Trapped(&'a str),
    /// Native stack sampling took no sample (not on this platform, or too short a run).
    NoNativeSamples,
    /// The file is a component: the core modules profiled (their names, and how many core
    /// modules the component holds).
    Component {
        /// The profiled core modules' names, the primary first.
        profiled: Vec<&'a str>,
        /// Core modules in the component.
        modules: usize,
    },
    /// A component's other core modules run uninstrumented: this mode profiles one core
    /// module per run.
    OneModule {
        /// The profiled core module's name.
        module: &'a str,
        /// Why.
        why: &'static str,
    },
}

/// A finished run: its profile and how the guest ended.
#[derive(Debug)]
pub struct CommandRun {
    /// The decoded profile.
    pub profile: Profile,
    /// The guest's exit code (134 after a trap, like `wasmtime run`).
    pub exit_code: i32,
}

impl CommandOptions {
    /// The rewriter's options for `guide`: the ring holds a whole burst four times over,
    /// so the sampler can copy it while the guest keeps writing, and every path end when
    /// the sampler reads them all (with the switch, see [`SWITCH_RING_LOG2`]).
    pub fn instrument_options(&self, guide: Option<Arc<Guide>>) -> InstrumentOptions {
        let p = &self.sampling.params;
        let every_path_end = self
            .sampling
            .intervals
            .as_ref()
            .is_some_and(crate::IntervalConfig::reads_every_path_end);
        {
            let mut instrument_ = self.instrument.clone();
            instrument_.guide = guide.or_else(|| self.instrument.guide.clone());
            instrument_.ring_log2 = ring_log2(
                *p,
                self.instrument.ring_log2,
                every_path_end,
                self.instrument.switch.is_some(),
            );
            instrument_
        }
    }

    /// The stack sampling period asked for (see [`SamplingOptions::stack_interval`]).
    fn asked_stack_interval(&self, guest: &pepper_layout::Guest) -> Duration {
        let pep_ticks = guest.mode.samples_paths() && self.instrument.pep_every.is_none();
        self.sampling.stack_interval.unwrap_or(if pep_ticks {
            self.sampling.interval
        } else {
            Duration::from_millis(1)
        })
    }

    /// How to run `module`, instrumented with these options.
    pub fn run_config(&self, module: &Instrumented) -> RunConfig {
        let (s, guest) = (&self.sampling, &module.guest);
        let switched = guest.switch.is_some();
        let flag = FlagWord::of(guest);
        let sampler = SamplerConfig::for_module(
            module,
            self.instrument.pep_every.is_none(),
            s.params,
            (s.interval, self.asked_stack_interval(guest)),
        )
        .map(|mut c| {
            // A module that switches itself at random (`InstrumentOptions::switch_chaos`,
            // for pepper's differential tests) keeps the flag to itself.
            if s.switch != SwitchDrive::Sampler || self.instrument.switch_chaos {
                c.switch = None;
            }
            c.intervals = s.intervals.clone();
            c.live = s.live.clone();
            c
        });
        let attach = AttachConfig {
            counters_export: module.counters_export(),
            ephemeral: (guest.mode.samples_edges() && switched).then(|| EphemeralConfig {
                budgets: flag.at,
                functions: (guest.num_funcs - guest.num_imports) as u32,
                persistence: s.persistence,
                epoch: s.epoch,
                window: guest.ephemeral_windows.then_some(s.window),
                phase: s.window_phase,
                counter_bytes: guest.layout.size,
                modules: Vec::new(),
            }),
            switch_on: (s.switch == SwitchDrive::AlwaysOn && switched).then_some(flag),
            sampler,
            early_stop: None,
        };
        RunConfig {
            wasi: self.wasi.clone(),
            engine: self
                .engine
                .clone()
                .with_branch_hints(self.engine.branch_hints || module.wants_branch_hinting()),
            attach,
            counters_tag: Some(crate::MemoryTag::of(guest)),
            module_tags: Vec::new(),
            epoch: None,
            invoke: self
                .invoke
                .clone()
                .map(|f| (f, self.wasi.args.iter().skip(1).cloned().collect())),
        }
    }

    /// How the run sampled, as its profile records it.
    fn settings(&self, guide: Option<&Guide>) -> decode::Settings {
        let s = &self.sampling;
        decode::Settings {
            params: s.params,
            interval: s.interval,
            every: self.instrument.pep_every,
            guide: guide.map(|g| g.id.clone()),
            persistence: s.persistence,
            epoch: s.epoch,
            intervals: match &s.intervals {
                Some(IntervalConfig::Sampled { length, strategy }) => Some((*strategy, *length)),
                _ => None,
            },
        }
    }
}

/// Staged mode's first stage: the exact edge profile of the same run, as a guide for each
/// profiled module (the primary's at `None`, the others' by core module index).
fn staged_guides(
    unit: &Unit,
    module: &ModuleInfo,
    opts: &CommandOptions,
) -> Result<Vec<(Option<usize>, Arc<Guide>)>> {
    let mut exact = InstrumentOptions::default();
    exact.mode = Mode::ExactEdges;
    let stage = Modules::instrument(unit, (&exact, true), &|_| None)?;
    // The same run as stage two's, its output discarded and nothing sampled (exact edges
    // need no sampler).
    let mut cfg = opts.run_config(&stage.primary);
    cfg.engine.branch_hints = false;
    cfg.wasi.inherit_stdio = false;
    stage.configure(&mut cfg);
    let r = crate::run(&stage.wasm(unit), &cfg)?;
    let p = stage.decode(
        unit.component.as_ref(),
        (r.results(), &r.module_counters),
        (module.clone(), RunInfo::default()),
        &opts.settings(None),
        None,
        &|_| None,
    );
    let mut guides = vec![(None, p.module_profile(None))];
    for (m, _) in &stage.others {
        guides.push((
            Some(m.index as usize),
            p.module_profile(Some(m.index as usize)),
        ));
    }
    Ok(guides
        .into_iter()
        .map(|(k, p)| (k, Arc::new(Guide::from_profile(&p, "staged".into()))))
        .collect())
}

/// Profiles one run of the WASI command `unit` (a core module, or a component around its
/// profiled core modules): instruments it (after a first, exact edge run when staged),
/// runs it with pepper's sampler, and decodes what it collected. `lines` gives the source
/// line of an original code offset of the primary module when known; `note` hears about
/// progress and events worth telling a user.
pub fn profile_command(
    unit: &Unit,
    module: ModuleInfo,
    opts: &CommandOptions,
    lines: Arc<dyn Fn(u64) -> Option<String> + Send + Sync>,
    note: &mut dyn FnMut(Note<'_>),
) -> Result<CommandRun> {
    let Planned {
        modules,
        mut cfg,
        settings,
        instrument_ms,
    } = plan(unit, &module, opts, note)?;
    let inst = &modules.primary;
    if let Some(e) = &opts.early_stop {
        let named = (&module, unit.component.as_ref());
        cfg.attach.early_stop = Some(early_stop(
            e, &modules, named, &settings, &cfg, &lines, opts,
        ));
    }
    note(Note::Compiling);
    let result = crate::run(&modules.wasm(unit), &cfg)?;
    if let Some(t) = &result.trap {
        note(Note::Trapped(t));
    }
    if inst.guest.contexts == pepper_layout::ContextMode::Native
        && result
            .samples
            .as_ref()
            .and_then(|s| s.pcct.as_ref())
            .is_some_and(|p| p.samples == 0)
    {
        note(Note::NoNativeSamples);
    }
    let run = RunInfo {
        args: opts.wasi.args.clone(),
        exit_code: Some(result.exit_code),
        trap: result.trap.clone(),
        instrument_ms,
        compile_ms: result.compile.as_secs_f64() * 1e3,
        run_ms: result.run.as_secs_f64() * 1e3,
    };
    let profile = modules.decode(
        unit.component.as_ref(),
        (result.results(), &result.module_counters),
        (module, run),
        &settings,
        cfg.attach.sampler.as_ref(),
        &*lines,
    );
    Ok(CommandRun {
        profile,
        exit_code: result.exit_code,
    })
}

/// A profiling run planned: `unit`'s modules instrumented, how to run them, and how the
/// profile records the run's sampling.
pub(crate) struct Planned {
    pub(crate) modules: Arc<Modules>,
    pub(crate) cfg: RunConfig,
    pub(crate) settings: decode::Settings,
    pub(crate) instrument_ms: f64,
}

/// Instruments `unit` for `opts` (after a first, exact edge run when staged) and says how
/// to run it, telling `note` what a user may want to know.
pub(crate) fn plan(
    unit: &Unit,
    module: &ModuleInfo,
    opts: &CommandOptions,
    note: &mut dyn FnMut(Note<'_>),
) -> Result<Planned> {
    let t0 = Instant::now();
    if let Some(c) = &unit.component {
        let mut profiled = vec![c.modules[c.profiled_module].as_str()];
        if others_supported(opts, &opts.instrument) {
            profiled.extend(unit.others.iter().map(|o| o.name.as_str()));
        } else if !unit.others.is_empty() {
            note(Note::OneModule {
                module: profiled[0],
                why: "this mode's sampling reads one core module of a component",
            });
        }
        note(Note::Component {
            profiled,
            modules: c.modules.len(),
        });
    }
    let guides = if opts.staged {
        note(Note::Stage(1));
        let g = staged_guides(unit, module, opts).context("staged mode, stage 1")?;
        note(Note::Stage(2));
        g
    } else {
        Vec::new()
    };
    let guide = |k: Option<usize>| {
        (guides.iter())
            .find(|(m, _)| *m == k)
            .map(|(_, g)| g.clone())
    };
    let iopts = opts.instrument_options(guide(None));
    let multi = others_supported(opts, &iopts);
    let modules = Arc::new(Modules::instrument(unit, (&iopts, multi), &guide)?);
    let inst = &modules.primary;
    let instrument_ms = t0.elapsed().as_secs_f64() * 1e3;
    let warnings: Vec<String> = (inst.plan.warnings.iter().cloned())
        .chain(modules.others.iter().flat_map(|(m, i)| {
            (i.plan.warnings.iter()).map(move |w| format!("module {}: {w}", m.name))
        }))
        .collect();
    note(Note::Instrumented {
        warnings: &warnings,
    });
    let settings = opts.settings(iopts.guide.as_deref());
    let mut cfg = opts.run_config(inst);
    modules.configure(&mut cfg);
    let asked = opts.asked_stack_interval(&inst.guest);
    if let Some(actual) = cfg
        .attach
        .sampler
        .as_ref()
        .filter(|s| s.stacks.is_some())
        .map(|s| s.stack_interval())
        .filter(|&actual| actual != asked)
    {
        note(Note::StackInterval { asked, actual });
    }
    Ok(Planned {
        modules,
        cfg,
        settings,
        instrument_ms,
    })
}

/// The watcher's side of an early stop and of snapshots: decodes what was collected so
/// far into a profile as the end of the run would, and hands it over.
fn early_stop(
    e: &EarlyStopOptions,
    modules: &Arc<Modules>,
    // The module, and the component around it.
    (module, component): (&ModuleInfo, Option<&ComponentFrame>),
    settings: &decode::Settings,
    cfg: &RunConfig,
    lines: &Arc<dyn Fn(u64) -> Option<String> + Send + Sync>,
    opts: &CommandOptions,
) -> crate::EarlyStop {
    let (modules, module, settings) = (modules.clone(), module.clone(), settings.clone());
    let component = component.cloned().map(Arc::new);
    let (sampler, lines) = (cfg.attach.sampler.clone(), lines.clone());
    let args = opts.wasi.args.clone();
    let start = Instant::now();
    let to_profile = Arc::new(move |collected: crate::Collected, how: Option<String>| {
        let run = RunInfo {
            args: args.clone(),
            exit_code: None,
            trap: how,
            run_ms: start.elapsed().as_secs_f64() * 1e3,
            ..Default::default()
        };
        modules.decode(
            component.as_deref(),
            (collected.results(), &collected.module_counters),
            (module.clone(), run),
            &settings,
            sampler.as_ref(),
            &*lines,
        )
    });
    let (stop_profile, deliver) = (to_profile.clone(), e.deliver.clone());
    crate::EarlyStop {
        signals: e.signals,
        after: e.after,
        on_stop: Arc::new(move |collected, reason| {
            let why = match reason {
                crate::StopReason::Signal(s) => format!("stopped early by signal {s}"),
                crate::StopReason::Duration => "stopped early: --duration reached".into(),
            };
            deliver(stop_profile(collected, Some(why)), reason);
        }),
        snapshot_every: e.snapshot_every,
        on_snapshot: e.snapshot.clone().map(|take| {
            Arc::new(move |collected| {
                let how = "a snapshot: the guest was still running".to_string();
                take(to_profile(collected, Some(how)));
            }) as Arc<dyn Fn(crate::Collected) + Send + Sync>
        }),
    }
}

/// Inside a component, a function is named by its core module: `main::luaV_execute`
/// (`func[N]` when it has no name). Imports keep their `module::name`.
fn name_by_module(profile: &mut Profile, module: &str, inst: &Instrumented) {
    for f in &mut profile.functions {
        if (f.index as usize) >= inst.guest.num_imports {
            let own = f
                .name
                .take()
                .unwrap_or_else(|| format!("func[{}]", f.index));
            f.name = Some(format!("{module}::{own}"));
        }
    }
}

/// Names for the frames of the component's core modules that calling contexts hold and
/// the profile's functions do not (`wit-component:adapter:wasi_snapshot_preview1::fd_write`).
fn name_foreign_frames(profile: &mut Profile, frame: &ComponentFrame) {
    let listed: std::collections::HashSet<u32> =
        profile.functions.iter().map(|f| f.index).collect();
    if let Some(ctx) = &mut profile.contexts {
        let ids: Vec<u32> = (ctx.nodes.iter().map(|n| n.func))
            .chain(ctx.hot_functions.iter().map(|h| h.func))
            .filter(|id| !listed.contains(id))
            .collect();
        ctx.imports.extend(frame.foreign_names(&ids));
        ctx.imports.sort();
        ctx.imports.dedup();
    }
}
