//! `pepper run`: instrument, run in wasmtime, write the profile.

use super::{print_warnings, read_module, ContextsArg, ModeArg, StacksArg};
use anyhow::{bail, Context, Result};
use pepper_profile::{module_hash, ModuleInfo, RunInfo};
use pepper_wasm::module::ModuleFacts;
use std::path::PathBuf;
use std::time::Instant;

/// Run a WASI command module under the profiler and write a profile.
///
/// Arguments after `--` go to the guest. The guest's exit code becomes pepper's. The
/// profile is written even when the guest traps or calls `proc_exit`.
///
/// The default mode, `pep`, is meant to stay on: every completed path goes to a small ring
/// buffer and a host thread samples bursts of consecutive paths from it each `--interval`
/// (PEP(SAMPLES, STRIDE)). `exact-paths` counts every path, `exact-edges` every branch.
/// Alongside PEP, the same thread samples the guest's call stack (its machine stack on
/// x86-64 Linux, else a shadow stack; `--stacks`) into a partial calling context tree
/// (Whaley) every `--stack-interval`, and every call site counts its calls; `pepper
/// export` turns the tree into pprof, folded stacks, a flame graph or a Firefox profile.
///
/// Examples:
///   pepper run prog.wasm -- input.txt              PEP(64,17) and a stack sample every 250 µs
///   pepper run --mode exact-paths prog.wasm        every path counted (ground truth)
///   pepper run --guide prog.pepper.json prog.wasm  smart numbering from an earlier profile
///   pepper run --every 1 prog.wasm                 PEP recording every path end (deterministic)
///   pepper run --mode targeted --guide e.json prog.wasm   exact hot paths, cold ones pruned (TPP)
///   pepper run --mode staged prog.wasm             runs twice: edge profile, then targeted
///   pepper run --mode calls prog.wasm              calling contexts only (sampled tree)
///   pepper run --mode exact-calls prog.wasm        every call counted in its context
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// What to measure.
    #[arg(long, value_enum, default_value = "pep")]
    mode: ModeArg,
    /// PEP: consecutive paths recorded per timer tick (SAMPLES).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65536))]
    samples: u32,
    /// PEP: before a tick's burst, skip up to STRIDE-1 paths (rotating), to avoid
    /// sampling at a fixed phase of a loop.
    #[arg(long, default_value_t = 17, value_parser = clap::value_parser!(u32).range(1..=65536))]
    stride: u32,
    /// Calling contexts (sampled tree + call-site counts) alongside the mode's own data.
    #[arg(long, value_enum, default_value = "auto")]
    contexts: ContextsArg,
    /// Where sampled calling contexts come from: `native` (default on x86-64 Linux), the
    /// guest thread's machine stack, read at each tick through a signal and its frame
    /// pointers (no code in the guest); or `shadow`, a stack the guest keeps in pepper's
    /// memory (a few instructions per call; Whaley's marker tells every new activation
    /// from an old one). Either way each call site also counts its calls exactly.
    #[arg(long, value_enum)]
    stacks: Option<StacksArg>,
    /// Do not count calls per call site (sampled contexts then carry no call estimates).
    #[arg(long)]
    no_call_counts: bool,
    /// Native stacks: the guest also logs every function entry and every return (two
    /// stores each) so that each stack sample carries a window of the last 16,384 call
    /// events, replayed into their exact contexts. Call estimates then split each call
    /// site's count among its contexts by calls seen rather than by sampled time.
    #[arg(long)]
    call_windows: bool,
    /// PEP with native stacks: do not replay the path ends each stack sample copies from
    /// PEP's ring as calls ("path windows", on by default: the same call windows as
    /// --call-windows without any code in the guest: the ring's 4,096 path ends, 32 KB,
    /// are copied with each sample). Call estimates then split each call site's count
    /// among its contexts by sampled time.
    #[arg(long)]
    no_path_windows: bool,
    /// Ephemeral: how many executions (function entries and outermost loop iterations)
    /// each function records per epoch before it turns its instrumentation off
    /// (persistence). 1000 measured most accurate at about the same cost as 10 and 100
    /// (bench/results/ephemeral.md).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    persistence: u32,
    /// Ephemeral: how often every function's instrumentation is switched back on
    /// (periodicity; the paper's epoch is 10 ms).
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    epoch: std::time::Duration,
    /// PEP: period of the sampler's bursts, e.g. `250us`, `1ms`, `10ms`. The guest's cost
    /// does not depend on it (it writes every path end to the ring anyway); more ticks
    /// make the estimate more accurate (see bench/results/analysis.md: 93% against 96%
    /// absolute edge overlap at 1 ms and 250 µs) for a little work on the sampler's core.
    #[arg(long, default_value = "250us", value_parser = parse_duration)]
    interval: std::time::Duration,
    /// Period of calling-context stack samples (each one interrupts the guest for a few
    /// microseconds), e.g. `250us`, `1ms`, `10ms`. Default: every --interval tick with PEP
    /// (each sample also replays PEP's ring as calls, so more samples make call
    /// estimates and hot functions more accurate: bench/results/contexts.md measured
    /// every 250 µs at +3.5% over PEP alone, every 1 ms at +1.8%), else 1 ms. With PEP it
    /// is rounded to a whole number of --interval ticks.
    #[arg(long, value_parser = parse_duration)]
    stack_interval: Option<std::time::Duration>,
    /// PEP: what a burst's samples stand for. `rate` (default): the path ends the guest
    /// completes per second at the tick (measured in the microseconds after it) times the
    /// time since the last burst, so code is weighted by how many paths it completes, not by
    /// how long they take. `ticks`: the path ends since the last tick, split among the
    /// burst's samples (slow code in a tick stands for the fast code around it).
    #[arg(long, value_enum, default_value = "rate")]
    burst_weights: BurstWeightsArg,
    /// PEP: switchable instrumentation. Every function keeps a clean copy next to its
    /// instrumented one; the clean code checks a flag where this says (`entries`: every
    /// function entry; `outer`: outermost loop headers, and entries of functions called
    /// from outside the module or through tables; `loops`: as `outer`, and the headers of
    /// loops that call or hold loops; `all`: every entry and every loop header) and moves
    /// into the instrumented copy while the sampler has it set, for each tick's burst (each burst then takes
    /// every path end of its SAMPLES × STRIDE span). `off`: the instrumented code always
    /// runs. Measured (bench/results/switch.md): `outer` +9.0% against PEP's +21.5%, at
    /// 97.4% path accuracy and 86.8% absolute edge overlap (PEP: 99.6%, 96.9%); `loops`
    /// +18.5% at 99.3% and 91.2%. Calling contexts then come without path windows.
    #[arg(long, value_enum, default_value = "off")]
    switch: SwitchArg,
    /// With --switch: keep the flag set for the whole run (tests: every path end goes
    /// through the instrumented copies, so `--every 1` counts what exact-paths counts).
    #[arg(long, hide = true)]
    switch_always_on: bool,
    /// With --switch, for tests: every check steps a pseudo-random generator in the flag
    /// word and switches on one of its bits (copies change at random checks).
    #[arg(long, hide = true)]
    switch_chaos: bool,
    /// PEP, deterministic: record every K-th path end (counted in the guest, no timer).
    /// `--every 1` records every path, which equals `exact-paths`.
    #[arg(long, value_name = "K")]
    every: Option<u32>,
    #[command(flatten)]
    guided: super::GuideArgs,
    #[command(flatten)]
    intervals: super::intervals::IntervalArgs,
    /// Profile output file [default: PROGRAM's stem + `.pepper.json`].
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Preopen a host directory: `HOST` (same path in the guest) or `HOST::GUEST`.
    #[arg(long = "dir", value_name = "HOST[::GUEST]")]
    dirs: Vec<String>,
    /// Set a guest environment variable.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    envs: Vec<String>,
    /// Pass the whole host environment to the guest.
    #[arg(long)]
    inherit_env: bool,
    /// Do not use wasmtime's compilation cache.
    #[arg(long)]
    no_cache: bool,
    /// Compile with wasmtime's branch hinting on, so the module's branch hint section
    /// (`pepper hints` writes one) lays out the unlikely side of hinted branches out of
    /// the way. Instrumented functions lose their hints (their offsets moved), so measure
    /// a hinted module's speed with `--mode none`.
    #[arg(long)]
    branch_hints: bool,
    /// Paths per function above which counting switches from an array (one increment per
    /// path end) to the in-module hash table (a call per path end).
    #[arg(long, default_value_t = pepper_wasm::DEFAULT_ARRAY_MAX_PATHS)]
    array_max_paths: u64,
    /// Exact edges: count every loop iteration on an edge, instead of reading a loop's
    /// induction variable (a local the loop steps by a constant, once per iteration) at
    /// its exits. Reading it is exact while one entry of the loop runs fewer than
    /// 2^32 / |step| iterations of an i32 variable; this flag is for loops that run longer.
    #[arg(long)]
    no_loop_counts: bool,
    /// log2 of the entries of each hashed function's path cache (tests use 1 to force
    /// evictions; 0 is no cache, a table call at every path end as in classic Ball-Larus).
    #[arg(long, hide = true, default_value_t = pepper_wasm::HASH_CACHE_ENTRIES.trailing_zeros())]
    hash_cache_log2: u32,
    /// The module to run (`.wasm` or `.wat`), a WASI command.
    program: PathBuf,
    /// Arguments for the guest.
    #[arg(last = true)]
    args: Vec<String>,
}

pub fn run(a: Args) -> Result<i32> {
    let wasm = read_module(&a.program)?;
    let mode: pepper_profile::Mode = a.mode.into();
    let t0 = Instant::now();
    if wasm.len() > 8 << 20 {
        eprintln!(
            "pepper: instrumenting {} ({} MB)...",
            a.program.display(),
            wasm.len() >> 20
        );
    }
    let mut dirs = Vec::new();
    for d in &a.dirs {
        let (host, guest) = match d.split_once("::") {
            Some((h, g)) => (h.to_string(), g.to_string()),
            None => (d.clone(), d.clone()),
        };
        dirs.push((PathBuf::from(host), guest));
    }
    let mut env = Vec::new();
    for e in &a.envs {
        let Some((k, v)) = e.split_once('=') else {
            bail!("--env {e:?}: expected NAME=VALUE")
        };
        env.push((k.to_string(), v.to_string()));
    }
    let argv0 = a
        .program
        .file_name()
        .map_or("program".into(), |n| n.to_string_lossy().into_owned());
    let mut args = vec![argv0];
    args.extend(a.args.iter().cloned());
    let module = ModuleInfo {
        path: a.program.display().to_string(),
        sha256: module_hash(&wasm),
        size: wasm.len() as u64,
    };
    let cache_dir = if a.no_cache {
        None
    } else {
        pepper_runtime::default_cache_dir()
    };
    let guide = if a.mode == ModeArg::Staged {
        // Stage one: a cheap exact edge profile of the same run, output discarded.
        eprintln!("pepper: staged: stage 1, exact edge profile (guest output discarded)");
        let stage = pepper_wasm::instrument(
            &wasm,
            &pepper_wasm::InstrumentOptions {
                mode: pepper_profile::Mode::ExactEdges,
                ..Default::default()
            },
        )
        .with_context(|| format!("instrumenting {}", a.program.display()))?;
        let r = pepper_runtime::run(
            &stage.wasm,
            &pepper_runtime::RunConfig {
                args: args.clone(),
                env: env.clone(),
                inherit_env: a.inherit_env,
                dirs: dirs.clone(),
                cache_dir: cache_dir.clone(),
                counters_export: Some(pepper_wasm::COUNTERS_EXPORT.to_string()),
                ..Default::default()
            },
        )?;
        let outcome = pepper_wasm::RunOutcome {
            module: module.clone(),
            run: RunInfo::default(),
            warnings: Vec::new(),
            sampling: None,
            contexts: None,
        };
        let p = stage
            .plan
            .profile(r.counters.as_deref(), outcome, &|_| None);
        eprintln!("pepper: staged: stage 2, targeted paths");
        Some(std::sync::Arc::new(pepper_wasm::plan::Guide::from_profile(
            &p,
            "staged".into(),
        )))
    } else {
        a.guided
            .guide
            .as_ref()
            .and_then(|g| load_guide(g, &wasm))
            .map(std::sync::Arc::new)
    };
    if mode == pepper_profile::Mode::Targeted && guide.is_none() {
        eprintln!(
            "pepper: warning: targeted mode without a usable --guide prunes nothing (same as exact-paths)"
        );
    }
    let contexts = match (a.mode, a.contexts) {
        (ModeArg::ExactCalls, _) => pepper_wasm::ContextMode::Exact,
        (ModeArg::Calls, _) | (_, ContextsArg::On) | (ModeArg::Pep, ContextsArg::Auto) => {
            match a.stacks {
                Some(StacksArg::Shadow) => pepper_wasm::ContextMode::Sampled,
                Some(StacksArg::Native) => pepper_wasm::ContextMode::Native,
                None if pepper_runtime::NATIVE_STACKS => pepper_wasm::ContextMode::Native,
                None => pepper_wasm::ContextMode::Sampled,
            }
        }
        _ => pepper_wasm::ContextMode::Off,
    };
    if a.mode == ModeArg::None && contexts != pepper_wasm::ContextMode::Off {
        bail!("--mode none runs the module unchanged; use --mode calls for contexts only");
    }
    let ia = &a.intervals;
    ia.check(
        mode == pepper_profile::Mode::Pep,
        a.switch != SwitchArg::Off,
        a.every.is_some(),
        contexts == pepper_wasm::ContextMode::Native,
    )?;
    // Interval sampling holds the switch for whole intervals: outermost loop headers by
    // default, as for bursts.
    let switch = match a.switch {
        SwitchArg::Off if ia.samples_intervals() => SwitchArg::Outer,
        s => s,
    };
    let opts = pepper_wasm::InstrumentOptions {
        mode,
        contexts,
        site_counters: !a.no_call_counts,
        call_log_log2: (a.call_windows && contexts == pepper_wasm::ContextMode::Native)
            .then_some(14),
        path_windows: !a.no_path_windows,
        array_max_paths: a.array_max_paths,
        hash_cache_log2: a.hash_cache_log2,
        loop_counts: !a.no_loop_counts,
        pep_every: a.every,
        switch: switch.placement(),
        switch_chaos: a.switch_chaos,
        guide: guide.clone(),
        cold_threshold: a.guided.cold_threshold,
        loop_threshold: a.guided.loop_threshold,
        obvious: a.guided.obvious,
        // The ring holds a whole burst four times over, so the sampler can copy it while
        // the guest keeps writing.
        ring_log2: (4 * (a.samples as u64 + a.stride as u64))
            .next_power_of_two()
            .trailing_zeros()
            .max(12)
            .max(if ia.reads_every_path_end() {
                pepper_runtime::EVERY_PATH_END_RING_LOG2
            } else {
                0
            }),
        ..Default::default()
    };
    let inst = pepper_wasm::instrument(&wasm, &opts)
        .with_context(|| format!("instrumenting {}", a.program.display()))?;
    let instrument_ms = t0.elapsed().as_secs_f64() * 1e3;
    print_warnings(&inst.plan.warnings, 10);

    // Stack samples come with every PEP tick unless asked otherwise (see --stack-interval).
    let pep_ticks = inst.plan.mode == pepper_profile::Mode::Pep && a.every.is_none();
    let asked_stack_interval = a.stack_interval.unwrap_or(if pep_ticks {
        a.interval
    } else {
        std::time::Duration::from_millis(1)
    });
    let cfg = pepper_runtime::RunConfig {
        args: args.clone(),
        env,
        inherit_env: a.inherit_env,
        dirs,
        cache_dir,
        counters_export: inst
            .plan
            .rewritten
            .then(|| pepper_wasm::COUNTERS_EXPORT.to_string()),
        inherit_stdio: true,
        epoch: None,
        branch_hints: a.branch_hints,
        ephemeral: (mode == pepper_profile::Mode::Ephemeral && inst.plan.switch.is_some())
            .then_some(pepper_runtime::EphemeralConfig {
                budgets: inst.plan.layout.switch_flag,
                functions: inst.plan.functions.len() as u32,
                persistence: a.persistence,
                epoch: a.epoch,
            }),
        switch_on: (a.switch_always_on && inst.plan.switch.is_some())
            .then_some(inst.plan.layout.switch_flag),
        sampler: pepper_runtime::SamplerConfig::for_plan(
            &inst.plan,
            &inst.wasm,
            a.every.is_none(),
            pepper_sampling::PepParams {
                samples: a.samples,
                stride: a.stride,
            },
            (a.interval, asked_stack_interval),
        )
        .map(|mut s| {
            s.weights = a.burst_weights.into();
            if a.switch_always_on || a.switch_chaos {
                s.switch = None;
            }
            s.intervals = ia.config();
            s
        }),
    };
    if wasm.len() > 8 << 20 {
        eprintln!("pepper: compiling (cached after the first run)...");
    }
    // The period stack samples actually get (PEP's rounds it to whole ticks).
    let stack_interval = cfg
        .sampler
        .as_ref()
        .map_or(asked_stack_interval, |s| s.stack_interval());
    if cfg.sampler.as_ref().is_some_and(|s| s.stacks.is_some())
        && stack_interval != asked_stack_interval
    {
        eprintln!(
            "pepper: stack samples every {stack_interval:?} (--stack-interval {:?} rounded to \
             whole --interval ticks of {:?})",
            asked_stack_interval, a.interval
        );
    }
    let result = pepper_runtime::run(&inst.wasm, &cfg)?;
    if let Some(t) = &result.trap {
        eprintln!("pepper: guest trapped ({t}); writing the profile of what completed");
    }

    if contexts == pepper_wasm::ContextMode::Native
        && result
            .samples
            .as_ref()
            .and_then(|s| s.pcct.as_ref())
            .is_some_and(|p| p.samples == 0)
    {
        eprintln!("pepper: warning: no native stack samples (x86-64 Linux only)");
    }
    let facts = ModuleFacts::parse(&wasm)?;
    let lines = pepper_wasm::dwarf::LineTable::new(&facts);
    let run = RunInfo {
        args,
        exit_code: Some(result.exit_code),
        trap: result.trap.clone(),
        instrument_ms,
        compile_ms: result.compile.as_secs_f64() * 1e3,
        run_ms: result.run.as_secs_f64() * 1e3,
    };
    let settings = pepper_runtime::decode::Settings {
        params: pepper_sampling::PepParams {
            samples: a.samples,
            stride: a.stride,
        },
        interval: a.interval,
        every: a.every,
        weights: a.burst_weights.into(),
        guide: guide.as_ref().map(|g| g.id.clone()),
        persistence: a.persistence,
        epoch: a.epoch,
        intervals: ia.sampled(),
    };
    let profile = pepper_runtime::decode::profile(
        &inst.plan,
        result.results(),
        module,
        run,
        &settings,
        cfg.sampler.as_ref(),
        &|o| lines.lookup(o),
    );
    let output = a.output.clone().unwrap_or_else(|| {
        let stem = a
            .program
            .file_stem()
            .map_or("program".into(), |s| s.to_string_lossy().into_owned());
        PathBuf::from(format!("{stem}.pepper.json"))
    });
    let file =
        std::fs::File::create(&output).with_context(|| format!("creating {}", output.display()))?;
    profile.write(std::io::BufWriter::new(file))?;
    let contexts_note = profile.contexts.as_ref().map_or(String::new(), |c| {
        format!(", {} calling contexts", c.nodes.len().saturating_sub(1))
    });
    eprintln!(
        "pepper: wrote {} ({} mode: {} paths, {} branches{contexts_note}; compile {:.0} ms, run {:.0} ms)",
        output.display(),
        mode.name(),
        profile.paths.len(),
        profile.branches.len(),
        profile.run.compile_ms,
        profile.run.run_ms
    );
    Ok(result.exit_code)
}

/// Parses `1ms`, `250us`, `2s` or a bare number of milliseconds.
pub(super) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s, "ms"),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: expected a duration such as 1ms, 500us or 2s"))?;
    let secs = match unit {
        "s" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use s, ms or us)")),
    };
    if !(secs > 0.0 && secs < 3600.0) {
        return Err(format!("{s:?}: must be positive and under an hour"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Loads a guide profile (smart numbering, TPP's pruning, exact-edges' counter placement).
/// A guide is advice: anything wrong with it is reported and the run goes on with pepper's
/// static estimate instead.
pub(super) fn load_guide(path: &std::path::Path, wasm: &[u8]) -> Option<pepper_wasm::plan::Guide> {
    let ignore = |why: String| {
        eprintln!(
            "pepper: warning: guide {}: {why}; ignored, using the static estimate instead",
            path.display()
        );
        None
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return ignore(e.to_string()),
    };
    let profile = match pepper_profile::Profile::read(&bytes[..]) {
        Ok(p) => p,
        Err(e) => return ignore(e.to_string()),
    };
    if let Err(e) = profile.check_module(wasm) {
        return ignore(format!("{e} (stale guide?)"));
    }
    if profile.branches.iter().all(|b| b.total() == 0) {
        return ignore(format!(
            "it has no branch counts ({} mode)",
            profile.mode.name()
        ));
    }
    Some(pepper_wasm::plan::Guide::from_profile(
        &profile,
        module_hash(&bytes),
    ))
}

/// `--burst-weights`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BurstWeightsArg {
    Rate,
    Ticks,
}

impl From<BurstWeightsArg> for pepper_runtime::BurstWeights {
    fn from(w: BurstWeightsArg) -> Self {
        match w {
            BurstWeightsArg::Rate => pepper_runtime::BurstWeights::Rate,
            BurstWeightsArg::Ticks => pepper_runtime::BurstWeights::Ticks,
        }
    }
}

/// `--switch`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SwitchArg {
    Off,
    Entries,
    Outer,
    Loops,
    All,
}

impl SwitchArg {
    pub(crate) fn placement(self) -> Option<pepper_wasm::switch::SwitchPlacement> {
        use pepper_wasm::switch::SwitchPlacement as P;
        match self {
            SwitchArg::Off => None,
            SwitchArg::Entries => Some(P::Entries),
            SwitchArg::Outer => Some(P::Outer),
            SwitchArg::Loops => Some(P::Loops),
            SwitchArg::All => Some(P::All),
        }
    }
}
