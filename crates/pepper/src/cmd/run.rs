//! `pepper run`: instrument, run in wasmtime, write the profile.

use super::{read_unit, ContextsArg, ModeArg, StacksArg};
use anyhow::{bail, Context, Result};
use pepper_profile::{module_hash, ModuleInfo};
use pepper_runtime::{CommandOptions, SamplingOptions, SwitchDrive, WasiOptions};
use pepper_wasm::module::ModuleFacts;
use pepper_wasm::ContextMode;
use std::path::PathBuf;
use std::time::Duration;

/// Run a WASI command module under the profiler and write a profile.
///
/// pepper's options come before the module; everything after it goes to the guest. The
/// guest's exit code becomes pepper's (134 after a trap); pepper's own failures exit 125.
/// The profile is written even when the guest traps or exits.
///
/// The default mode, `pep`, is meant to stay on: clean code runs between short sampled
/// bursts of instrumented code that record paths, and stack samples give calling
/// contexts. Nothing pepper writes is where the program can read. A `wasi:cli/command`
/// component runs under WASI 0.2, every core module with code profiled (`--modules`).
///
/// Examples:
///   pepper run prog.wasm input.txt                 PEP(64,17) and a stack sample every 1 ms
///   pepper run --mode exact-paths prog.wasm        every path counted (ground truth)
///   pepper run --guide prog.pepper.json prog.wasm  smart numbering from an earlier profile
///   pepper run --every 1 prog.wasm                 PEP recording every path end (deterministic)
///   pepper run --switch off prog.wasm              PEP writing every path to its ring (costs more)
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
    /// guest's machine stack read at each tick; or `shadow`, a stack the guest keeps in
    /// pepper's memory.
    #[arg(long, value_enum)]
    stacks: Option<StacksArg>,
    /// Do not count calls per call site: with PEP, calls are then estimated from the
    /// sampled paths (less accurate for rarely sampled code).
    #[arg(long)]
    no_call_counts: bool,
    /// Native stacks: the guest also logs every call and return, so each stack sample
    /// carries a window of recent calls that split call counts among contexts.
    #[arg(long)]
    call_windows: bool,
    /// PEP with native stacks: do not replay the burst's path ends as calls; call counts
    /// are then split among contexts by sampled time.
    #[arg(long)]
    no_path_windows: bool,
    /// Ephemeral with a budget instead of windows: each function records this many
    /// executions per epoch, then turns itself off (the paper's persistence). Exact entry
    /// counts, at a higher cost than windows.
    #[arg(long, conflicts_with = "window", value_parser = clap::value_parser!(u32).range(1..))]
    persistence: Option<u32>,
    /// Ephemeral: how often every function's instrumentation is switched back on.
    /// Default 1 ms with windows, 10 ms (the paper's epoch) with --persistence.
    #[arg(long, value_parser = parse_duration)]
    epoch: Option<std::time::Duration>,
    /// Ephemeral: how long the instrumented code runs once in each --epoch, at a random
    /// point of it (default 50us). Counts are the windows' scaled to the run, and each
    /// branch gets a margin for its bias.
    #[arg(long, value_parser = parse_duration)]
    window: Option<std::time::Duration>,
    /// PEP: period of the bursts in the guest's CPU time, e.g. `500us`, `10ms`. Fewer
    /// bursts cost less and estimate less well.
    #[arg(long, default_value = "1ms", value_parser = parse_duration)]
    interval: std::time::Duration,
    /// Period of calling-context stack samples, e.g. `250us`, `10ms`. Default: every
    /// --interval tick with PEP (rounded to whole ticks), else 1 ms.
    #[arg(long, value_parser = parse_duration)]
    stack_interval: Option<std::time::Duration>,
    /// Where clean code checks the flag that moves it into the instrumented copy:
    /// `entries`, `outer` (outermost loops), `nests` (and nests behind blocks), `loops`
    /// (and loops that call or nest), `shallow` (as `loops`, leaving sooner), `deep`
    /// (every loop, leaving sooner), `all`, or `off` (instrumented code all along).
    /// Default: `deep` for PEP, `nests` for ephemeral, `off` where every path end must be
    /// recorded.
    #[arg(long, value_enum)]
    switch: Option<SwitchArg>,
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
    /// Preopen a host directory: `HOST` (same path in the guest) or `HOST::GUEST`, and
    /// `::ro` at the end for read-only (`--dir data::/data::ro`).
    #[arg(long = "dir", value_name = "HOST[::GUEST][::ro]", value_parser = pepper_runtime::Preopen::parse)]
    dirs: Vec<pepper_runtime::Preopen>,
    /// Set a guest environment variable; `--env NAME` passes the host's value through.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    envs: Vec<String>,
    /// Pass the whole host environment to the guest.
    #[arg(long)]
    inherit_env: bool,
    /// Stop the run after this long (e.g. `30s`) and write the profile so far; exits 124.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<std::time::Duration>,
    /// While the guest runs, replace the output file with the profile so far this often
    /// (e.g. `10s`).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    snapshot_every: Option<std::time::Duration>,
    /// Do not use wasmtime's compilation cache.
    #[arg(long)]
    no_cache: bool,
    /// Compile with wasmtime's branch hinting on (the hints `pepper hints` writes); use it
    /// with `--mode none`, since instrumented functions lose their hints.
    #[arg(long)]
    branch_hints: bool,
    /// Paths per function above which paths are counted in a hash table, not an array.
    #[arg(long, default_value_t = pepper_wasm::DEFAULT_ARRAY_MAX_PATHS)]
    array_max_paths: u64,
    /// Exact edges: count every loop iteration on an edge instead of reading the loop's
    /// induction variable at its exits (for loops that run more than 2^32 iterations).
    #[arg(long)]
    no_loop_counts: bool,
    /// log2 of the entries of each hashed function's path cache (tests use 1 to force
    /// evictions; 0 is no cache, a table call at every path end as in classic Ball-Larus).
    #[arg(long, hide = true, default_value_t = pepper_wasm::HASH_CACHE_ENTRIES.trailing_zeros())]
    hash_cache_log2: u32,
    /// Call this exported function instead of `_start`: the arguments after the module are
    /// its arguments (integers or floats, by its parameter types), and its results are
    /// printed, as `wasmtime run --invoke` does.
    #[arg(long, value_name = "FUNC")]
    invoke: Option<String>,
    /// Inside a component: which core modules to profile. `all` is every one that has
    /// code (its functions named `module::function`), `program`
    /// the program's module alone, else module names separated by commas (pepper lists
    /// them when it starts). `--switch off`, `--every`, time lines and phases read the
    /// primary module's ring alone.
    #[arg(long, default_value = "all", value_name = "all|program|NAME,...", value_parser = super::parse_modules)]
    modules: pepper_wasm::component::ModuleSelection,
    /// The module to run (`.wasm` or `.wat`), a WASI command. pepper's own options come
    /// before it; everything after it goes to the guest, as with `wasmtime run`.
    program: PathBuf,
    /// Arguments for the guest (a `--` in front of them is accepted and dropped).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

pub fn run(a: Args) -> Result<i32> {
    let output = a.output_path();
    anyhow::ensure!(
        !same_file(&output, &a.program),
        "the profile would overwrite the module: -o {} names {} itself",
        output.display(),
        a.program.display()
    );
    // In a component, the primary core module (the program's) gives the options and the
    // source lines; the other profiled modules are counted with the same options.
    let unit = read_unit(&a.program, &a.modules)?;
    let wasm = &unit.core;
    let opts = a.options(wasm)?;
    // A profile that cannot be written is found out before the guest runs, not after.
    pepper_profile::check_writable(&output)
        .with_context(|| format!("cannot write the profile to {}", output.display()))?;
    if wasm.len() > 8 << 20 {
        eprintln!(
            "pepper: instrumenting {} ({} MB)...",
            a.program.display(),
            wasm.len() >> 20
        );
    }
    let module = ModuleInfo {
        path: a.program.display().to_string(),
        sha256: module_hash(wasm),
        size: wasm.len() as u64,
    };
    let facts = ModuleFacts::parse(wasm)
        .with_context(|| format!("instrumenting {}", a.program.display()))?;
    let lines = pepper_wasm::dwarf::LineTable::new(&facts);
    let large = wasm.len() > 8 << 20;
    let mut opts = opts;
    opts.early_stop = Some(early_stop(&output, a.duration, a.snapshot_every));
    pepper_runtime::stop_on_signals();
    let live = std::sync::Arc::new(pepper_runtime::LiveCounts::default());
    opts.sampling.live = Some(live.clone());
    let progress = super::progress::Progress::start(live);
    let done = pepper_runtime::profile_command(
        &unit,
        module,
        &opts,
        std::sync::Arc::new(move |o| lines.lookup(o)),
        &mut |n| super::progress::say(n, large, a.interval),
    )
    .with_context(|| format!("profiling {}", a.program.display()));
    drop(progress);
    let done = done?;
    let mut profile = done.profile;
    // Inlined calls around each branch of the primary module (DWARF's inlined
    // subroutines).
    let primary = |b: &pepper_profile::Branch| pepper_profile::module_of(b.func).is_none();
    let offsets: Vec<u64> = (profile.branches.iter().filter(|b| primary(b)))
        .map(|b| b.offset)
        .collect();
    let inlined = pepper_wasm::dwarf::inlined_frames(&facts, &offsets);
    for b in profile.branches.iter_mut().filter(|b| primary(b)) {
        b.inlined = inlined.get(&b.offset).cloned().unwrap_or_default();
    }
    profile.write_file(&output).with_context(|| {
        format!(
            "writing the profile to {} (the guest exited with code {})",
            output.display(),
            done.exit_code
        )
    })?;
    let contexts_note = profile.contexts.as_ref().map_or(String::new(), |c| {
        format!(", {} calling contexts", c.nodes.len().saturating_sub(1))
    });
    eprintln!(
        "pepper: wrote {} ({} mode: {} paths, {} branches{contexts_note}; compile {:.0} ms, run {:.0} ms)",
        output.display(),
        profile.mode.name(),
        profile.paths.len(),
        profile.branches.len(),
        profile.run.compile_ms,
        profile.run.run_ms
    );
    // Where the profile is blind, said last, where a user looks.
    let blind: Vec<String> = (profile.warnings.iter())
        .filter(|w| w.starts_with("under-sampled") || w.contains("off its CPU"))
        .cloned()
        .collect();
    super::print_warnings(&blind, 10);
    Ok(done.exit_code)
}

/// Whether `a` and `b` name one existing file (through links, `..` or hard links too).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        #[cfg(unix)]
        (Ok(x), Ok(y)) => {
            use std::os::unix::fs::MetadataExt;
            (x.dev(), x.ino()) == (y.dev(), y.ino())
        }
        #[cfg(not(unix))]
        (Ok(_), Ok(_)) => std::fs::canonicalize(a).ok() == std::fs::canonicalize(b).ok(),
        _ => false,
    }
}

/// Ctrl-C, SIGTERM or `--duration` end the run early: the profile of what ran so far is
/// written and pepper exits 130 / 143 (128 + the signal, as a shell reports it) or 124
/// (`--duration`, as `timeout` does) while the guest is still running.
fn early_stop(
    output: &std::path::Path,
    duration: Option<Duration>,
    snapshot_every: Option<Duration>,
) -> pepper_runtime::EarlyStopOptions {
    let output = output.to_path_buf();
    let snapshot_to = output.clone();
    let mut stop =
        pepper_runtime::EarlyStopOptions::new(std::sync::Arc::new(move |profile, reason| {
            let (why, code) = match reason {
                pepper_runtime::StopReason::Signal(s) => (format!("signal {s}"), 128 + s),
                pepper_runtime::StopReason::Duration => ("--duration".to_string(), 124),
            };
            // Over the progress line, if there is one.
            if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                eprint!("\r\x1b[K");
            }
            match profile.write_file(&output) {
                Ok(()) => eprintln!(
                    "pepper: stopped by {why}; wrote {} (what ran so far: {} paths, {} branches)",
                    output.display(),
                    profile.paths.len(),
                    profile.branches.len()
                ),
                Err(e) => {
                    eprintln!(
                        "pepper: stopped by {why}; writing {}: {e}",
                        output.display()
                    );
                    std::process::exit(125);
                }
            }
            std::process::exit(code);
        }));
    stop.signals = true;
    stop.after = duration;
    stop.snapshot_every = snapshot_every;
    // Each snapshot replaces the profile file whole (a reader never sees half of one).
    stop.snapshot = Some(std::sync::Arc::new(
        move |profile: pepper_profile::Profile| {
            if let Err(e) = profile.write_file(&snapshot_to) {
                eprintln!(
                    "pepper: warning: snapshot to {}: {e}",
                    snapshot_to.display()
                );
            }
        },
    ));
    stop
}

impl Args {
    /// The profile file: `-o`, or the program's stem + `.pepper.json`.
    fn output_path(&self) -> PathBuf {
        self.output.clone().unwrap_or_else(|| {
            let stem = self
                .program
                .file_stem()
                .map_or("program".into(), |s| s.to_string_lossy().into_owned());
            PathBuf::from(format!("{stem}.pepper.json"))
        })
    }

    /// What the guest sees.
    fn wasi(&self) -> Result<WasiOptions> {
        let dirs = self.dirs.clone();
        let mut env = Vec::new();
        for e in &self.envs {
            match e.split_once('=') {
                Some((k, v)) => env.push((k.to_string(), v.to_string())),
                // Like `wasmtime run --env NAME`: the host's value, if it has one.
                None => match std::env::var(e) {
                    Ok(v) => env.push((e.clone(), v)),
                    Err(_) => {
                        eprintln!("pepper: warning: --env {e}: not set on the host; not passed")
                    }
                },
            }
        }
        let argv0 = self
            .program
            .file_name()
            .map_or("program".into(), |n| n.to_string_lossy().into_owned());
        let mut args = vec![argv0];
        let guest = match self.args.first().map(String::as_str) {
            Some("--") => &self.args[1..],
            _ => &self.args[..],
        };
        args.extend(guest.iter().cloned());
        Ok({
            let mut wasi = WasiOptions::default();
            wasi.args = args;
            wasi.env = env;
            wasi.inherit_env = self.inherit_env;
            wasi.dirs = dirs;
            wasi.inherit_stdio = true;
            wasi
        })
    }

    /// Where calling contexts come from, by mode, `--contexts` and `--stacks`.
    fn contexts(&self) -> ContextMode {
        match (self.mode, self.contexts) {
            (ModeArg::ExactCalls, _) => ContextMode::Exact,
            (ModeArg::Calls, _) | (_, ContextsArg::On) | (ModeArg::Pep, ContextsArg::Auto) => {
                match self.stacks {
                    Some(StacksArg::Shadow) => ContextMode::Sampled,
                    Some(StacksArg::Native) => ContextMode::Native,
                    None if pepper_runtime::NATIVE_STACKS => ContextMode::Native,
                    None => ContextMode::Sampled,
                }
            }
            _ => ContextMode::Off,
        }
    }

    /// `--switch` when not given: `pepper_wasm::PEP_PLACEMENT` wherever PEP samples
    /// bursts, and the ring where a mode needs every path end
    /// written (`--every`, `--timeline`, `--phases`) or the copies cannot be made (shadow
    /// stacks, call logs). Interval sampling holds the switch for whole intervals, at the
    /// same checks.
    fn default_switch(&self, contexts: ContextMode) -> SwitchArg {
        let ring_needed = self.every.is_some()
            || self.intervals.records_timeline()
            || contexts.shadow()
            || (self.call_windows && contexts == ContextMode::Native);
        match self.mode == ModeArg::Pep && !ring_needed {
            true => SwitchArg::from(pepper_wasm::PEP_PLACEMENT),
            false => SwitchArg::Off,
        }
    }

    /// The flags as the library's options; refuses combinations that cannot work.
    fn options(&self, wasm: &[u8]) -> Result<CommandOptions> {
        let mode: pepper_profile::Mode = self.mode.into();
        let staged = self.mode == ModeArg::Staged;
        let guide = match staged {
            true => None,
            false => self
                .guided
                .guide
                .as_ref()
                .and_then(|g| load_guide(g, wasm))
                .map(std::sync::Arc::new),
        };
        if mode == pepper_profile::Mode::Targeted && guide.is_none() && !staged {
            eprintln!(
                "pepper: warning: targeted mode without a usable --guide prunes nothing (same as exact-paths)"
            );
        }
        let contexts = self.contexts();
        if self.mode == ModeArg::None && contexts != ContextMode::Off {
            bail!("--mode none runs the module unchanged; use --mode calls for contexts only");
        }
        if (self.window.is_some() || self.persistence.is_some()) && self.mode != ModeArg::Ephemeral
        {
            bail!("--window and --persistence are for --mode ephemeral");
        }
        if self.mode == ModeArg::Ephemeral && self.switch == Some(SwitchArg::Off) {
            bail!("--mode ephemeral switches between copies; --switch off is not available");
        }
        if self.mode == ModeArg::Ephemeral && self.switch.is_some() && self.persistence.is_some() {
            bail!("--persistence counts at outermost loops; --switch is for windows");
        }
        let ia = &self.intervals;
        let switch = self.switch.unwrap_or_else(|| self.default_switch(contexts));
        ia.check(
            mode == pepper_profile::Mode::Pep,
            switch != SwitchArg::Off,
            self.every.is_some(),
            contexts == ContextMode::Native,
        )?;
        let instrument = {
            let mut instrument = pepper_wasm::InstrumentOptions::default();
            instrument.mode = mode;
            instrument.contexts = contexts;
            instrument.site_counters = !self.no_call_counts;
            instrument.call_log_log2 =
                (self.call_windows && contexts == ContextMode::Native).then_some(14);
            instrument.path_windows = !self.no_path_windows;
            instrument.array_max_paths = self.array_max_paths;
            instrument.hash_cache_log2 = self.hash_cache_log2;
            instrument.loop_counts = !self.no_loop_counts;
            instrument.pep_every = self.every;
            instrument.switch = switch.placement();
            instrument.switch_chaos = self.switch_chaos;
            instrument.guide = guide;
            instrument.cold_threshold = self.guided.cold_threshold;
            instrument.loop_threshold = self.guided.loop_threshold;
            instrument.obvious = self.guided.obvious;
            instrument.ephemeral_windows = self.persistence.is_none();
            instrument
        };
        let sampling = {
            let mut sampling = SamplingOptions::default();
            sampling.params = pepper_sampling::PepParams {
                samples: self.samples,
                stride: self.stride,
            };
            sampling.interval = self.interval;
            sampling.stack_interval = self.stack_interval;
            sampling.intervals = ia.config();
            sampling.switch = match self.switch_always_on {
                true => SwitchDrive::AlwaysOn,
                false => SwitchDrive::Sampler,
            };
            sampling.persistence = self.persistence.unwrap_or(1000);
            sampling.epoch = self.epoch.unwrap_or(match self.persistence {
                Some(_) => pepper_runtime::BUDGET_EPOCH,
                None => pepper_runtime::EPHEMERAL_EPOCH,
            });
            sampling.window = self.window.unwrap_or(pepper_runtime::EPHEMERAL_WINDOW);
            sampling.window_phase = Default::default();
            sampling.live = None;
            sampling
        };
        Ok({
            let mut command = CommandOptions::default();
            command.instrument = instrument;
            command.staged = staged;
            command.wasi = self.wasi()?;
            command.engine.cache_dir = match self.no_cache {
                true => None,
                false => pepper_runtime::default_cache_dir(),
            };
            command.engine.branch_hints = self.branch_hints;
            command.sampling = sampling;
            command.invoke = self.invoke.clone();
            command.early_stop = None;
            command
        })
    }
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
        // A component's profile guides its primary module with that module's part.
        Ok(p) if !p.modules.is_empty() => p.module_profile(None),
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

/// `--switch`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SwitchArg {
    Off,
    Entries,
    Outer,
    Nests,
    Loops,
    Shallow,
    Deep,
    All,
}

impl SwitchArg {
    pub(crate) fn placement(self) -> Option<pepper_wasm::switch::SwitchPlacement> {
        use pepper_wasm::switch::SwitchPlacement as P;
        match self {
            SwitchArg::Off => None,
            SwitchArg::Entries => Some(P::Entries),
            SwitchArg::Outer => Some(P::Outer),
            SwitchArg::Nests => Some(P::Nests),
            SwitchArg::Loops => Some(P::Loops),
            SwitchArg::Shallow => Some(P::Shallow),
            SwitchArg::Deep => Some(P::Deep),
            SwitchArg::All => Some(P::All),
        }
    }
}

impl From<pepper_wasm::switch::SwitchPlacement> for SwitchArg {
    fn from(p: pepper_wasm::switch::SwitchPlacement) -> SwitchArg {
        use pepper_wasm::switch::SwitchPlacement as P;
        match p {
            P::Entries => SwitchArg::Entries,
            P::Outer => SwitchArg::Outer,
            P::Nests => SwitchArg::Nests,
            P::Loops => SwitchArg::Loops,
            P::Shallow => SwitchArg::Shallow,
            P::Deep => SwitchArg::Deep,
            P::All => SwitchArg::All,
        }
    }
}

#[cfg(test)]
mod tests {
    /// clap's default is a string; the runtime's constant is the one the library uses.
    #[test]
    fn the_cli_interval_default_is_the_runtimes() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            run: super::Args,
        }
        let cli = Cli::try_parse_from(["pepper", "prog.wasm"]).unwrap();
        assert_eq!(cli.run.interval, pepper_runtime::PEP_INTERVAL);
    }
}
