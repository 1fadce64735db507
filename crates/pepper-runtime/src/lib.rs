//! pepper's runtime: profiling a guest in wasmtime, in your host or in pepper's.
//!
//! - In your own host: [`Profiler`] instruments a module, attaches to your `Store` (your
//!   linker, your host functions, WASI or not) and decodes what it collected into a
//!   profile; see its example and `examples/embed.rs`.
//! - As `pepper run` does: [`profile_command`] profiles one run of a WASI command from
//!   start to end (staged guide, instrumentation, sampler, decoding). Underneath, [`run`] /
//!   [`Prepared::run`] run a WASI command with its arguments, environment and preopens,
//!   and hand back exit status, timings, pepper's memory and the sampler's results, which
//!   [`decode::profile`] turns into a profile.
//!
//! The guest gets what a `wasmtime run` user expects: arguments, environment, inherited
//! stdio and `--dir` preopens. A guest that traps or calls `proc_exit` still has its counters
//! read, because the instance (and so its memory) outlives the failed call.
//!
//! `unsafe` is denied except in `memview`, which reads the profiler memory from another
//! thread while the guest runs; `sampler`, which hands that memory to the signal handler;
//! `native`, which interrupts the guest thread with a signal and copies its frame-pointer
//! chain; `hostmem`, which allocates the memories wasmtime runs on; `worker`, which reads
//! a thread's CPU clock; and `interrupt`, which installs the stop signals' handler.

// Every public item is documented (CI denies warnings): embedders read this crate's docs.
#![warn(missing_docs)]

mod attach;
mod command;
pub mod decode;
mod epochs;
mod flag;
mod hostmem;
mod interrupt;
mod intervals;
mod memview;
mod native;
mod pick;
mod profiler;
mod sampler;
mod serve;
mod worker;

pub use attach::{AttachConfig, Collected, EarlyStop, Profiled, StopReason};
pub use command::{
    profile_command, CommandOptions, CommandRun, EarlyStopOptions, Modules, Note, SamplingOptions,
    SwitchDrive, WasiOptions, BUDGET_EPOCH, EPHEMERAL_EPOCH, EPHEMERAL_WINDOW, PEP_INTERVAL,
};
pub use epochs::{EphemeralConfig, WindowPhase, WindowTime};
pub use flag::FlagWord;
pub use hostmem::MemoryTag;
pub use interrupt::{requested as stop_requested, stop_on_signals};
pub use intervals::{
    IntervalConfig, IntervalResult, Strategy, TimelineSource, EVERY_PATH_END_RING_LOG2,
    MAX_INTERVALS, TIMELINE_STRIDE,
};
pub use native::AVAILABLE as NATIVE_STACKS;
pub use profiler::{Profiler, ProfilerOptions};
pub use sampler::{LiveCounts, ModuleRing, SamplerConfig, SamplerResult, StackConfig, SwitchWords};
pub use serve::Server;

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use wasmtime::{Config, Engine, Linker, Module, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// A host directory the guest sees (WASI preopen).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preopen {
    /// The directory on the host.
    pub host: PathBuf,
    /// Where the guest sees it.
    pub guest: String,
    /// The guest may read but not create, change or remove anything in it.
    pub read_only: bool,
}

impl Preopen {
    /// `host` as `guest`, read-write.
    pub fn new(host: impl Into<PathBuf>, guest: impl Into<String>) -> Preopen {
        Preopen {
            host: host.into(),
            guest: guest.into(),
            read_only: false,
        }
    }

    /// Parses `wasmtime run`'s form `HOST[::GUEST]`, with a `::ro` suffix for read-only
    /// (the guest path defaults to the host path). Any other option word is refused: a
    /// typo such as `::RO` must not quietly grant write access under an odd guest path.
    pub fn parse(s: &str) -> Result<Preopen, String> {
        let parts: Vec<&str> = s.split("::").collect();
        let (host, guest, option) = match parts[..] {
            [host] => (host, host, None),
            [host, "ro"] => (host, host, Some("ro")),
            [host, guest] => (host, guest, None),
            [host, guest, option] => (host, guest, Some(option)),
            _ => {
                return Err(format!(
                    "`{s}`: expected HOST, HOST::GUEST or HOST::GUEST::ro"
                ))
            }
        };
        let read_only = match option {
            None => false,
            Some("ro") => true,
            Some(word) => {
                return Err(format!(
                    "`{s}`: unknown option `{word}` (the one option is `ro`, read-only)"
                ))
            }
        };
        if host.is_empty() || guest.is_empty() {
            return Err(format!("`{s}`: an empty directory name"));
        }
        Ok(Preopen {
            host: host.into(),
            guest: guest.into(),
            read_only,
        })
    }
}

/// How to run the guest.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RunConfig {
    /// What the guest sees: arguments, environment, preopens, stdio.
    pub wasi: WasiOptions,
    /// How the engine compiles: its cache and branch hinting (epoch interruption follows
    /// from `epoch`).
    pub engine: EngineOptions,
    /// What to start next to the guest: pepper's memory, the sampler, ephemeral
    /// windows, the switch, an early stop.
    pub attach: AttachConfig,
    /// Inside a component, where exports of core instances cannot be looked up: how to
    /// find pepper's memory (the one `attach.counters_export` names in a core module).
    pub counters_tag: Option<MemoryTag>,
    /// Inside a component: pepper's memories of the other instrumented core modules,
    /// copied out after the run into [`RunResult::module_counters`], in this order.
    pub module_tags: Vec<MemoryTag>,
    /// Tick wasmtime's epoch every period (the engine must have been prepared with epoch
    /// interruption); with `guest_profiler`, take a wasmtime `GuestProfiler` sample at
    /// each tick. Benchmarks use both as references: the epoch-enabled baseline and the
    /// sampling profiler wasmtime users have today.
    pub epoch: Option<EpochConfig>,
    /// Call this export with these arguments (parsed by its parameter types) instead of
    /// `_start`, and print its results, as `wasmtime run --invoke` does.
    pub invoke: Option<(String, Vec<String>)>,
}

/// How the engine is built (what `Prepared` needs before it compiles). Built from
/// `default()` and the `with_*` setters, so that a new option is not a breaking change.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct EngineOptions {
    /// wasmtime's compilation cache directory; `None` disables caching.
    pub cache_dir: Option<PathBuf>,
    /// Epoch interruption (an embedder's timeouts and preemption, wasmtime's guest
    /// profiler).
    pub epoch_interruption: bool,
    /// Branch hinting (`Config::wasm_branch_hinting`): the module's
    /// `metadata.code.branch_hint` section marks the unlikely side of hinted branches cold
    /// in Cranelift.
    pub branch_hints: bool,
}

impl EngineOptions {
    /// wasmtime's compilation cache directory; `None` disables caching.
    pub fn with_cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }
    /// Epoch interruption on or off.
    pub fn with_epoch_interruption(mut self, on: bool) -> Self {
        self.epoch_interruption = on;
        self
    }
    /// Branch hinting on or off.
    pub fn with_branch_hints(mut self, on: bool) -> Self {
        self.branch_hints = on;
        self
    }
}

impl RunConfig {
    /// What the engine needs for this run (epochs, branch hints, cache).
    pub fn engine_options(&self) -> EngineOptions {
        EngineOptions {
            epoch_interruption: self.engine.epoch_interruption || self.epoch.is_some(),
            ..self.engine.clone()
        }
    }
}

/// Epoch ticking for a run.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct EpochConfig {
    /// How often the epoch is incremented.
    pub interval: Duration,
    /// Take a wasmtime `GuestProfiler` sample at each tick.
    pub guest_profiler: bool,
}

impl Default for EpochConfig {
    /// Every millisecond (wasmtime's guest profiler's own period), without samples.
    fn default() -> Self {
        EpochConfig {
            interval: Duration::from_millis(1),
            guest_profiler: false,
        }
    }
}

/// What happened.
#[derive(Debug)]
pub struct RunResult {
    /// 0 when `_start` returned, the `proc_exit` code, or 134 (like `wasmtime run`) on a trap.
    pub exit_code: i32,
    /// The trap's message, when the guest trapped.
    pub trap: Option<String>,
    /// Compilation, or the cache lookup.
    pub compile: Duration,
    /// Instantiation and the guest's `_start`: what the guest experienced, profiler
    /// overhead included, but not `profiler_setup`/`profiler_finish`.
    pub run: Duration,
    /// Starting the sampler before the guest runs (its thread, its buffers, the code map
    /// on a module's first run). Per run, not per sample: reported apart so that overheads
    /// are those of profiling the guest, and so that they are not hidden either.
    pub profiler_setup: Duration,
    /// Stopping the sampler after the guest returned (its final pass, joining the thread).
    pub profiler_finish: Duration,
    /// The counters memory, if it was requested and exists.
    pub counters: Option<Vec<u8>>,
    /// Inside a component: the memories of [`RunConfig::module_tags`], in that order
    /// (`None` for a module the component never instantiated).
    pub module_counters: Vec<Option<Vec<u8>>>,
    /// PEP: what the sampler thread collected.
    pub samples: Option<SamplerResult>,
    /// Ephemeral instrumentation: how many epochs armed the budgets.
    pub epochs: u64,
    /// Ephemeral in windows: how long they were open.
    pub windows: WindowTime,
    /// Ephemeral in windows: the windows' counts in random groups (see
    /// [`Collected::window_groups`](crate::Collected::window_groups)).
    pub window_groups: Vec<Vec<u8>>,
}

impl RunResult {
    /// Starting plus stopping the sampler: the profiler's cost per run, outside `run`.
    pub fn sampler_start_stop(&self) -> Duration {
        self.profiler_setup + self.profiler_finish
    }
}

/// What a store carries: WASI, and wasmtime's guest profiler when it is the reference.
struct Host {
    wasi: WasiP1Ctx,
    profiler: Option<wasmtime::GuestProfiler>,
    last_tick: Instant,
}

/// The default compilation cache: `$XDG_CACHE_HOME/pepper/wasmtime` or
/// `~/.cache/pepper/wasmtime`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("pepper").join("wasmtime"))
}

/// A wasmtime engine with the proposals real toolchains emit (multi-memory is what pepper's
/// counters memory needs; exceptions are what yosys needs), optionally with epoch
/// interruption and branch hinting. Memories keep wasmtime's default reservation, in
/// which a 32-bit memory never moves: pepper's threads read and write pepper's own
/// memory while the guest runs.
pub fn engine(opts: &EngineOptions) -> Result<Engine> {
    engine_with(opts, None)
}

/// [`engine`], creating every linear memory through `memories` when given (components).
fn engine_with(
    opts: &EngineOptions,
    memories: Option<&std::sync::Arc<hostmem::HostMemories>>,
) -> Result<Engine> {
    let mut config = Config::new();
    if let Some(m) = memories {
        config.with_host_memory(std::sync::Arc::new(hostmem::Creator(m.clone())));
        // Copy-on-write images of data segments need wasmtime's own mappings.
        config.memory_init_cow(false);
    }
    config.epoch_interruption(opts.epoch_interruption);
    config.wasm_branch_hinting(opts.branch_hints);
    config.wasm_multi_memory(true);
    config.wasm_exceptions(true);
    config.wasm_tail_call(true);
    // `perf` users: PEPPER_PERF=perfmap (function names in /tmp/perf-PID.map) or jitdump
    // (`perf record -k 1`, then `perf inject --jit`, for annotated machine code).
    match std::env::var("PEPPER_PERF").as_deref() {
        Ok("perfmap") => {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        Ok("jitdump") => {
            config.profiler(wasmtime::ProfilingStrategy::JitDump);
        }
        _ => {}
    }
    if let Some(dir) = &opts.cache_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating cache directory {}", dir.display()))?;
        let dir = std::fs::canonicalize(dir)?;
        let mut cc = wasmtime::CacheConfig::new();
        cc.with_directory(dir);
        config.cache(Some(wasmtime::Cache::new(cc)?));
    }
    Ok(Engine::new(&config)?)
}

/// Compiles and runs `wasm` (already instrumented, or not) as a WASI command.
pub fn run(wasm: &[u8], cfg: &RunConfig) -> Result<RunResult> {
    Prepared::new(wasm, &cfg.engine_options())?.run(cfg)
}

/// A compiled module or component, ready to run any number of times (benchmarks time
/// runs apart from compilation).
pub struct Prepared {
    engine: Engine,
    code: Code,
    /// How long compilation (or the cache lookup) took.
    pub compile: Duration,
    /// Where compiled functions and call sites are: built on the first run that samples
    /// native stacks.
    code_map: std::sync::OnceLock<native::CodeMap>,
}

/// What was compiled.
enum Code {
    Module(Module),
    /// A component, with the registry of the memories its instances create (see
    /// [`hostmem`]), the index of its program's core module, and where each core module
    /// starts.
    Component(
        wasmtime::component::Component,
        std::sync::Arc<hostmem::HostMemories>,
        (usize, Vec<u64>),
    ),
}

/// How a run ended: its exit code, the trap's message.
type Exit = (i32, Option<String>);

impl Prepared {
    /// Compiles `wasm` (a core module or a component) in an engine built with `opts`.
    pub fn new(wasm: &[u8], opts: &EngineOptions) -> Result<Prepared> {
        let component = pepper_wasm::component::is_component(wasm);
        let memories = component.then(std::sync::Arc::<hostmem::HostMemories>::default);
        let engine = engine_with(opts, memories.as_ref())?;
        let t0 = Instant::now();
        let code = match memories {
            Some(m) => Code::Component(
                wasmtime::component::Component::new(&engine, wasm)
                    .map_err(anyhow::Error::from)
                    .context("compiling the component")?,
                m,
                // (A component pepper would not instrument still runs, its code foreign.)
                (
                    pepper_wasm::component::profiled_module(wasm).map_or(usize::MAX, |(k, _)| k),
                    (pepper_wasm::component::module_starts(wasm).unwrap_or_default())
                        .into_iter()
                        .map(|at| at as u64)
                        .collect(),
                ),
            ),
            None => Code::Module(
                Module::new(&engine, wasm)
                    .map_err(anyhow::Error::from)
                    .context("compiling the module")?,
            ),
        };
        Ok(Prepared {
            engine,
            code,
            compile: t0.elapsed(),
            code_map: Default::default(),
        })
    }

    /// Instantiates in a fresh store and runs `_start` (a component: `wasi:cli/run`).
    pub fn run(&self, cfg: &RunConfig) -> Result<RunResult> {
        let builder = wasi_builder(&cfg.wasi)?;
        let t1 = Instant::now();
        let mut collected = attach::Collected::default();
        let mut timing = (Duration::ZERO, Duration::ZERO);
        let (exit_code, trap) = match &self.code {
            Code::Module(module) => {
                self.run_module(module, builder, cfg, &mut collected, &mut timing)?
            }
            Code::Component(component, memories, modules) => self.run_component(
                (component, modules),
                memories,
                builder,
                cfg,
                &mut collected,
                &mut timing,
            )?,
        };
        let (profiler_setup, profiler_finish) = timing;
        let run = t1.elapsed() - profiler_setup - profiler_finish;
        // A trap or `proc_exit` leaves the instance, and so pepper's memory, intact:
        // `finish` copied it after the call whatever the outcome.
        Ok(RunResult {
            exit_code,
            trap,
            compile: self.compile,
            run,
            profiler_setup,
            profiler_finish,
            counters: collected.counters,
            module_counters: collected.module_counters,
            samples: collected.samples,
            epochs: collected.epochs,
            windows: collected.windows,
            window_groups: collected.window_groups,
        })
    }

    /// A core module: WASI preview 1, `_start` or `--invoke`.
    fn run_module(
        &self,
        module: &Module,
        mut builder: WasiCtxBuilder,
        cfg: &RunConfig,
        collected: &mut attach::Collected,
        (setup_time, finish_time): &mut (Duration, Duration),
    ) -> Result<Exit> {
        let engine = &self.engine;
        let wasi: WasiP1Ctx = builder.build_p1();
        let profiler = match &cfg.epoch {
            Some(e) if e.guest_profiler => Some(
                wasmtime::GuestProfiler::new(
                    engine,
                    "guest",
                    e.interval,
                    [("guest".to_string(), module.clone())],
                )
                .map_err(anyhow::Error::from)?,
            ),
            _ => None,
        };
        let mut store = Store::new(
            engine,
            Host {
                wasi,
                profiler,
                last_tick: Instant::now(),
            },
        );
        if cfg.epoch.is_some() {
            store.set_epoch_deadline(1);
            store.epoch_deadline_callback(|mut cx| {
                let now = Instant::now();
                let host = cx.data_mut();
                let delta = now - host.last_tick;
                host.last_tick = now;
                if let Some(mut p) = cx.data_mut().profiler.take() {
                    p.sample(&cx, delta);
                    cx.data_mut().profiler = Some(p);
                }
                Ok(wasmtime::UpdateDeadline::Continue(1))
            });
        }
        let mut linker: Linker<Host> = Linker::new(engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |t| &mut t.wasi)?;
        let outcome = match linker.instantiate(&mut store, module) {
            Ok(instance) => {
                let entry = Entry::find(&instance, &mut store, cfg.invoke.as_ref())?;
                let setup = Instant::now();
                let attach = &cfg.attach;
                let memory = attach::counters_view(&mut store, &instance, attach);
                let attached = attach::Attached::start_with(
                    &mut store,
                    (memory, Vec::new()),
                    native::CodeSource::Module(module),
                    attach,
                    &self.code_map,
                )?;
                *setup_time = setup.elapsed();
                let ticker = cfg
                    .epoch
                    .as_ref()
                    .map(|e| Ticker::start(engine, e.interval));
                let outcome = entry.call(&mut store);
                drop(ticker);
                let finish = Instant::now();
                *collected = attached.finish();
                *finish_time = finish.elapsed();
                outcome
            }
            Err(e) => return instantiation_failed(e),
        };
        Ok(exit_of(outcome))
    }

    /// A `wasi:cli/command` component: WASI 0.2, `wasi:cli/run`.
    fn run_component(
        &self,
        (component, (program, starts)): (&wasmtime::component::Component, &(usize, Vec<u64>)),
        memories: &hostmem::HostMemories,
        mut builder: WasiCtxBuilder,
        cfg: &RunConfig,
        collected: &mut attach::Collected,
        (setup_time, finish_time): &mut (Duration, Duration),
    ) -> Result<Exit> {
        anyhow::ensure!(
            cfg.epoch.is_none() && cfg.invoke.is_none(),
            "components run their `wasi:cli/run` export, without epochs or --invoke"
        );
        let engine = &self.engine;
        let mut store = Store::new(
            engine,
            ComponentHost {
                ctx: builder.build(),
                table: wasmtime::component::ResourceTable::new(),
            },
        );
        let mut linker = wasmtime::component::Linker::<ComponentHost>::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        let command = match wasmtime_wasi::p2::bindings::sync::Command::instantiate(
            &mut store, component, &linker,
        ) {
            Ok(c) => c,
            Err(e) => return instantiation_failed(e),
        };
        let setup = Instant::now();
        // The primary module (whose functions keep their indices in native stacks) is
        // the one pepper's memory names, else the program's.
        let primary = cfg.counters_tag.map_or(*program, |t| t.slot() as usize);
        let at = starts.get(primary).copied().unwrap_or(0);
        let view = match (&cfg.attach.counters_export, cfg.counters_tag) {
            (Some(_), Some(t)) => {
                let found = memories.find_tagged(t.bytes, t.at, &t.tag);
                let [one] = found[..] else {
                    anyhow::bail!(
                        "the component instantiates its profiled core module {} times: \
                         pepper profiles a module instantiated once",
                        found.len()
                    );
                };
                Some(one)
            }
            _ => None,
        };
        let others = cfg
            .module_tags
            .iter()
            .map(|t| match memories.find_tagged(t.bytes, t.at, &t.tag)[..] {
                [] => Ok(None),
                [one] => Ok(Some(one)),
                ref several => anyhow::bail!(
                    "the component instantiates one of its profiled core modules {} times: \
                     pepper profiles modules instantiated once (leave it out with --modules)",
                    several.len()
                ),
            })
            .collect::<Result<Vec<_>>>()?;
        let attached = attach::Attached::start_with(
            &mut store,
            (view, others),
            native::CodeSource::Component(component, primary, at),
            &cfg.attach,
            &self.code_map,
        )?;
        *setup_time = setup.elapsed();
        let outcome = command.wasi_cli_run().call_run(&mut store);
        let finish = Instant::now();
        *collected = attached.finish();
        *finish_time = finish.elapsed();
        Ok(exit_of(match outcome {
            Ok(Ok(())) => Ok(()),
            Ok(Err(())) => Err(wasmtime_wasi::I32Exit(1).into()),
            Err(e) => Err(e),
        }))
    }
}

/// The guest's WASI context as `cfg` asks for it (either WASI version builds from it).
fn wasi_builder(cfg: &WasiOptions) -> Result<WasiCtxBuilder> {
    let mut builder = WasiCtxBuilder::new();
    builder.args(&cfg.args);
    if cfg.inherit_env {
        builder.inherit_env();
    }
    for (k, v) in &cfg.env {
        builder.env(k, v);
    }
    if cfg.inherit_stdio {
        builder.inherit_stdio();
    }
    for d in &cfg.dirs {
        let perms = match d.read_only {
            true => FsPerms::ReadOnly,
            false => FsPerms::ReadWrite,
        };
        builder
            .preopened_dir(&d.host, &d.guest, perms)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("preopening directory {}", d.host.display()))?;
    }
    Ok(builder)
}

/// Instantiation failed: the guest's own outcome if its start function trapped or exited;
/// otherwise pepper's failure, not the guest's (an import it does not provide, a feature
/// its engine lacks), which must not pass for a guest that trapped.
fn instantiation_failed(e: wasmtime::Error) -> Result<Exit> {
    let guest_ran = e.downcast_ref::<wasmtime::Trap>().is_some()
        || e.downcast_ref::<wasmtime_wasi::I32Exit>().is_some();
    match guest_ran {
        true => Ok(exit_of(Err(e))),
        false => Err(anyhow::Error::from(e).context(
            "cannot instantiate the module (pepper provides WASI preview 1 to modules and \
             WASI 0.2 to components, and runs single-threaded guests)",
        )),
    }
}

/// The exit code and trap of a guest call's outcome: 0, the `proc_exit` code, or 134 with
/// the trap (like `wasmtime run`: the whole error with its wasm backtrace on stderr, the
/// root cause in the profile).
fn exit_of(outcome: wasmtime::Result<()>) -> Exit {
    match outcome {
        Ok(()) => (0, None),
        Err(e) => match e.downcast_ref::<wasmtime_wasi::I32Exit>() {
            Some(exit) => (exit.0, None),
            None => {
                eprintln!("{e:?}");
                let e = anyhow::Error::from(e);
                (134, Some(e.root_cause().to_string()))
            }
        },
    }
}

/// A component's store: WASI 0.2.
struct ComponentHost {
    ctx: wasmtime_wasi::WasiCtx,
    table: wasmtime::component::ResourceTable,
}

impl wasmtime_wasi::WasiView for ComponentHost {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        wasmtime_wasi::WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// A thread that increments the engine's epoch every period until dropped.
struct Ticker {
    _thread: worker::Worker<()>,
}

impl Ticker {
    fn start(engine: &Engine, interval: Duration) -> Ticker {
        let engine = engine.clone();
        Ticker {
            _thread: worker::Worker::spawn("pepper-epoch", move |stop| {
                while !stop.sleep(interval) {
                    engine.increment_epoch();
                }
            }),
        }
    }
}

/// What a run calls: a command's `_start`, or an export with arguments (`--invoke`).
enum Entry {
    Start(wasmtime::TypedFunc<(), ()>),
    Invoke(wasmtime::Func, Vec<wasmtime::Val>),
}

impl Entry {
    fn find(
        instance: &wasmtime::Instance,
        store: &mut Store<Host>,
        invoke: Option<&(String, Vec<String>)>,
    ) -> Result<Entry> {
        let Some((name, args)) = invoke else {
            let start = instance
                .get_typed_func::<(), ()>(&mut *store, "_start")
                .map_err(anyhow::Error::from)
                .context(
                    "the module has no `_start` export: pepper runs WASI commands \
                     (--invoke FUNC calls another export)",
                )?;
            return Ok(Entry::Start(start));
        };
        let f = instance
            .get_func(&mut *store, name)
            .with_context(|| format!("the module exports no function `{name}`"))?;
        let ty = f.ty(&*store);
        let params: Vec<wasmtime::ValType> = ty.params().collect();
        anyhow::ensure!(
            params.len() == args.len(),
            "`{name}` takes {} arguments, {} given",
            params.len(),
            args.len()
        );
        let vals = params
            .iter()
            .zip(args)
            .map(|(t, a)| parse_val(t, a).with_context(|| format!("argument {a:?} of `{name}`")))
            .collect::<Result<_>>()?;
        Ok(Entry::Invoke(f, vals))
    }

    fn call(&self, store: &mut Store<Host>) -> wasmtime::Result<()> {
        match self {
            Entry::Start(f) => f.call(store, ()),
            Entry::Invoke(f, args) => {
                let n = f.ty(&*store).results().len();
                let mut results = vec![wasmtime::Val::I32(0); n];
                f.call(&mut *store, args, &mut results)?;
                // Printed as `wasmtime run --invoke` does; a closed stdout loses them
                // but not the run's profile (`println!` would panic).
                use std::io::Write as _;
                let mut out = std::io::stdout().lock();
                for r in &results {
                    let _ = match r {
                        wasmtime::Val::I32(x) => writeln!(out, "{x}"),
                        wasmtime::Val::I64(x) => writeln!(out, "{x}"),
                        wasmtime::Val::F32(x) => writeln!(out, "{}", f32::from_bits(*x)),
                        wasmtime::Val::F64(x) => writeln!(out, "{}", f64::from_bits(*x)),
                        other => writeln!(out, "{other:?}"),
                    };
                }
                Ok(())
            }
        }
    }
}

/// An `--invoke` argument as a value of type `t`.
fn parse_val(t: &wasmtime::ValType, a: &str) -> Result<wasmtime::Val> {
    use wasmtime::{Val, ValType as T};
    Ok(match t {
        T::I32 => Val::I32(
            a.parse::<i32>()
                .or_else(|_| a.parse::<u32>().map(|u| u as i32))?,
        ),
        T::I64 => Val::I64(
            a.parse::<i64>()
                .or_else(|_| a.parse::<u64>().map(|u| u as i64))?,
        ),
        T::F32 => Val::F32(a.parse::<f32>()?.to_bits()),
        T::F64 => Val::F64(a.parse::<f64>()?.to_bits()),
        other => anyhow::bail!("cannot pass a {other} on the command line"),
    })
}
