//! An embedder's own host profiling its guest with pepper: its own `Store` data, its own
//! `Linker` with a host function of its own (no WASI), its own calls into an export.
//!
//! ```sh
//! cargo run --release -p pepper-runtime --example embed
//! ```
//!
//! `Profiler::new` instruments the module; you compile the result in your engine
//! (multi-memory on: pepper's counters are a memory of their own) and instantiate it as
//! usual; `attach` wraps your store on the thread that calls the guest; your calls go
//! through the wrapper; `finish` gives the store back with what pepper collected, which
//! `profile` decodes.

use anyhow::{ensure, Result};
use pepper_runtime::{Profiler, ProfilerOptions};
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
    // PEP, pepper's default: clean code until a host thread sets the switch for a burst,
    // in which instrumented copies write paths to a ring for the thread to sample.
    let profiler = Profiler::new(&original, &ProfilerOptions::default())?;
    let mut config = Config::new();
    config.wasm_multi_memory(true);
    config.wasm_branch_hinting(true); // the switch's checks are hinted unlikely
    let engine = Engine::new(&config)?;
    let module = Module::new(&engine, profiler.wasm())?;
    // Your linker, your host function, your store, your instance.
    let mut linker: Linker<MyHost> = Linker::new(&engine);
    linker.func_wrap(
        "host",
        "report",
        |mut c: wasmtime::Caller<'_, MyHost>, _i: i32| {
            c.data_mut().reports += 1;
        },
    )?;
    let mut store = Store::new(&engine, MyHost::default());
    let instance = linker.instantiate(&mut store, &module)?;
    // Attach, call the guest through the result as often as you like, finish.
    let mut profiled = profiler.attach(store, &instance, &module)?;
    let run = instance.get_typed_func::<i32, i32>(&mut profiled, "run")?;
    let mut acc = 0i64;
    for _ in 0..20 {
        acc += run.call(&mut profiled, 3_000_000)? as i64;
    }
    let (store, collected) = profiled.finish();
    let profile = profiler.profile(&collected);
    let opts = {
        let mut report_ = pepper_profile::report::ReportOptions::default();
        report_.top_functions = 3;
        report_.top_paths = 3;
        report_.top_branches = 3;
        report_
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
