//! An embedder's own host profiling its guest with pepper: its own `Store` data, its own
//! `Linker` with a host function of its own (no WASI), its own calls into an export.
//!
//! ```sh
//! cargo run --release -p pepper-runtime --example embed
//! ```
//!
//! The steps: instrument the module (`pepper_wasm::instrument`), compile the result in
//! your engine (multi-memory on: pepper's counters are a memory of their own), instantiate
//! it as usual, attach pepper to the store on the thread that calls the guest, call the
//! guest, finish, and decode the profile.

use anyhow::{ensure, Result};
use pepper_profile::{Mode, ModuleInfo, RunInfo};
use pepper_runtime::{AttachConfig, Profiled, SamplerConfig};
use std::time::Duration;
use wasmtime::{Config, Engine, Linker, Module, Store};

/// The guest: `run(n)` loops `n` times and reports every third iteration to the host.
const GUEST: &str = r#"
(module
  (import "host" "report" (func $report (param i32)))
  (func (export "run") (param $n i32) (result i32) (local $i i32) (local $acc i32)
    (loop $l
      (if (i32.eqz (i32.rem_u (local.get $i) (i32.const 3)))
        (then (call $report (local.get $i)))
        (else (local.set $acc (i32.add (local.get $acc) (local.get $i)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (local.get $n))))
    (local.get $acc)))
"#;

/// The embedder's store data.
#[derive(Default)]
struct MyHost {
    reports: u64,
}

fn main() -> Result<()> {
    let original = wat::parse_str(GUEST)?;
    // 1. Instrument: PEP, pepper's default (paths sampled from a ring by a host thread).
    let inst = pepper_wasm::instrument(
        &original,
        &pepper_wasm::InstrumentOptions {
            mode: Mode::Pep,
            ..Default::default()
        },
    )?;
    // 2. Compile in your own engine.
    let mut config = Config::new();
    config.wasm_multi_memory(true);
    let engine = Engine::new(&config)?;
    let module = Module::new(&engine, &inst.wasm)?;
    // 3. Your linker, your host function, your store.
    let mut linker: Linker<MyHost> = Linker::new(&engine);
    linker.func_wrap(
        "host",
        "report",
        |mut c: wasmtime::Caller<'_, MyHost>, _i: i32| {
            c.data_mut().reports += 1;
        },
    )?;
    let mut store = Store::new(&engine, MyHost::default());
    // Your instance, as usual.
    let instance = linker.instantiate(&mut store, &module)?;
    // 4. Attach on the thread that calls the guest.
    let (params, tick) = (
        pepper_sampling::PepParams {
            samples: 64,
            stride: 17,
        },
        Duration::from_micros(250),
    );
    let cfg = AttachConfig {
        counters_export: Some(pepper_wasm::COUNTERS_EXPORT.into()),
        sampler: SamplerConfig::for_plan(&inst.plan, &inst.wasm, true, params, (tick, tick)),
        ..Default::default()
    };
    // The store goes into `Profiled`, which gives it back at the end.
    let mut profiled = Profiled::new(store, &instance, &module, &cfg)?;
    // 5. Call the guest as often as you like, through `profiled`.
    let run = instance.get_typed_func::<i32, i32>(&mut profiled, "run")?;
    let mut acc = 0i64;
    for _ in 0..20 {
        acc += run.call(&mut profiled, 3_000_000)? as i64;
    }
    // 6. Finish and decode.
    let (store, collected) = profiled.finish();
    let module_info = ModuleInfo {
        path: "embedded guest".into(),
        sha256: pepper_profile::module_hash(&original),
        size: original.len() as u64,
    };
    let settings = pepper_runtime::decode::Settings {
        params,
        interval: tick,
        ..Default::default()
    };
    let profile = pepper_runtime::decode::profile(
        &inst.plan,
        collected.results(),
        module_info,
        RunInfo::default(),
        &settings,
        cfg.sampler.as_ref(),
        &|_| None,
    );
    let opts = pepper_profile::report::ReportOptions {
        top_functions: 3,
        top_paths: 3,
        top_branches: 3,
    };
    print!("{}", pepper_profile::report::text(&profile, &opts));
    println!("host: {} reports, guest result {acc}", store.data().reports);
    // CI runs this example: the host function ran, and the loop's two paths (report,
    // accumulate) were estimated one to two, as they ran.
    ensure!(store.data().reports == 20_000_000, "the host function ran");
    let total: u64 = profile.paths.iter().map(|p| p.count).sum();
    let reporting = profile
        .paths
        .iter()
        .find(|p| p.steps.first().is_some_and(|s| s.outcome == 0))
        .map_or(0, |p| p.count);
    let share = reporting as f64 / total.max(1) as f64;
    ensure!(
        (0.28..0.38).contains(&share),
        "reporting path share {share}"
    );
    Ok(())
}
