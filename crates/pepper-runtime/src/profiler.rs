//! The embedder's entry point: one value that instruments a module, attaches to the
//! store that runs it and decodes what was collected.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use pepper_runtime::{Profiler, ProfilerOptions};
//! let original = std::fs::read("guest.wasm")?;
//! let profiler = Profiler::new(&original, &ProfilerOptions::default())?;
//! let mut config = wasmtime::Config::new();
//! config.wasm_multi_memory(true); // pepper's counters are a memory of their own
//! config.wasm_branch_hinting(true); // the switch's checks are hinted unlikely
//! let engine = wasmtime::Engine::new(&config)?;
//! let module = wasmtime::Module::new(&engine, profiler.wasm())?;
//! let linker = wasmtime::Linker::new(&engine); // yours: host functions, WASI or not
//! let mut store = wasmtime::Store::new(&engine, ());
//! let instance = linker.instantiate(&mut store, &module)?;
//! let mut profiled = profiler.attach(store, &instance, &module)?;
//! let run = instance.get_typed_func::<(), ()>(&mut profiled, "run")?;
//! run.call(&mut profiled, ())?;
//! let (_store, collected) = profiled.finish();
//! let profile = profiler.profile(&collected);
//! println!("{} paths", profile.paths.len());
//! # Ok(())
//! # }
//! ```

use crate::{decode, AttachConfig, Collected, Profiled, SamplerConfig};
use anyhow::Result;
use pepper_profile::{Mode, ModuleInfo, Profile, RunInfo};
use pepper_sampling::PepParams;
use std::time::Duration;
use wasmtime::{Instance, Module, Store};

/// What to measure: `default()`, then the `with_*` setters (a new option is then no
/// breaking change for embedders).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProfilerOptions {
    /// `Mode::Pep` (default: paths sampled in bursts by a host thread), or an exact mode
    /// (`ExactPaths`, `ExactEdges`: counted in the guest, no thread).
    pub mode: Mode,
    /// PEP(SAMPLES, STRIDE).
    pub params: PepParams,
    /// PEP's burst period (and the stack-sample period with contexts).
    pub interval: Duration,
    /// Calling contexts from native stack samples (x86-64 Linux; one guest thread per
    /// process at a time). Off by default.
    pub contexts: bool,
    /// PEP: switchable instrumentation (on by default, as in `pepper run`): every function
    /// runs a clean copy that checks a flag at its entries and at every loop nest
    /// (`pepper_wasm::PEP_PLACEMENT`), and the instrumented copies run only for the
    /// sampler's bursts: far cheaper than instrumented code all along, for a longer
    /// compile. The checks are hinted unlikely: turn on `Config::wasm_branch_hinting` to
    /// lay them out of the way. `false`: the instrumented code always runs and writes
    /// PEP's ring.
    pub switch: bool,
}

impl Default for ProfilerOptions {
    fn default() -> ProfilerOptions {
        let d = decode::Settings::default();
        ProfilerOptions {
            mode: Mode::Pep,
            params: d.params,
            interval: d.interval,
            contexts: false,
            switch: true,
        }
    }
}

impl ProfilerOptions {
    /// What to measure: PEP, or an exact mode.
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }
    /// PEP(SAMPLES, STRIDE).
    pub fn with_params(mut self, params: PepParams) -> Self {
        self.params = params;
        self
    }
    /// PEP's burst period.
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }
    /// Calling contexts from native stack samples.
    pub fn with_contexts(mut self, on: bool) -> Self {
        self.contexts = on;
        self
    }
    /// PEP's switchable instrumentation on (the default) or off.
    pub fn with_switch(mut self, on: bool) -> Self {
        self.switch = on;
        self
    }
}

/// An instrumented module and everything needed to profile its instances.
pub struct Profiler {
    instrumented: pepper_wasm::Instrumented,
    attach: AttachConfig,
    settings: decode::Settings,
    module: ModuleInfo,
}

impl Profiler {
    /// Instruments `wasm` (a core module) for `opts.mode`.
    pub fn new(wasm: &[u8], opts: &ProfilerOptions) -> Result<Profiler> {
        let contexts = match (opts.contexts, crate::NATIVE_STACKS) {
            (true, true) => pepper_layout::ContextMode::Native,
            (true, false) => pepper_layout::ContextMode::Sampled,
            (false, _) => pepper_layout::ContextMode::Off,
        };
        let switch = opts.switch && opts.mode.samples_paths();
        let instrumented = pepper_wasm::instrument(wasm, &{
            let mut instrument = pepper_wasm::InstrumentOptions::default();
            instrument.mode = opts.mode;
            instrument.contexts = contexts;
            instrument.switch = switch.then_some(pepper_wasm::PEP_PLACEMENT);
            instrument.ring_log2 = crate::command::ring_log2(
                opts.params,
                pepper_wasm::InstrumentOptions::default().ring_log2,
                false,
                switch,
            );
            instrument
        })?;
        let sampler = SamplerConfig::for_module(
            &instrumented,
            true,
            opts.params,
            (opts.interval, opts.interval),
        );
        Ok(Profiler {
            attach: AttachConfig {
                counters_export: instrumented.counters_export(),
                sampler,
                ..Default::default()
            },
            settings: decode::Settings {
                params: opts.params,
                interval: opts.interval,
                ..Default::default()
            },
            module: ModuleInfo {
                path: String::new(),
                sha256: pepper_profile::module_hash(wasm),
                size: wasm.len() as u64,
            },
            instrumented,
        })
    }

    /// The instrumented module: compile this in your engine (with multi-memory on).
    pub fn wasm(&self) -> &[u8] {
        &self.instrumented.wasm
    }

    /// Starts profiling `instance` of the compiled [`Profiler::wasm`] in `store`; call it
    /// on the thread that calls the guest, and make the calls through the result.
    pub fn attach<T: 'static>(
        &self,
        store: Store<T>,
        instance: &Instance,
        module: &Module,
    ) -> Result<Profiled<T>> {
        Profiled::new(store, instance, module, &self.attach)
    }

    /// The profile of what one attachment collected.
    pub fn profile(&self, collected: &Collected) -> Profile {
        decode::profile(
            &self.instrumented,
            collected.results(),
            self.module.clone(),
            RunInfo::default(),
            &self.settings,
            self.attach.sampler.as_ref(),
            &|_| None,
        )
    }
}
