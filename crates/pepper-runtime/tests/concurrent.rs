//! Eight runs of one module on eight threads at once, as a multi-threaded embedder would:
//! each has its own store, pepper memory and sampler, so PEP's samples are per run; native
//! stack sampling serves one thread per process, so a run that finds it busy records no
//! calling contexts (and says so) instead of reading a shadow stack its module lacks.

use std::sync::{Arc, Barrier};
use std::time::Duration;

const WAT: &str = r#"(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func $step (param i32) (result i32)
    (if (result i32) (i32.and (local.get 0) (i32.const 3))
      (then (i32.add (local.get 0) (i32.const 1)))
      (else (i32.add (local.get 0) (i32.const 3)))))
  (func (export "_start") (local i32 i32)
    (loop $l
      (local.set 0 (call $step (local.get 0)))
      (local.set 1 (i32.add (local.get 1) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get 1) (i32.const 60000000))))))"#;

#[test]
fn concurrent_runs_each_sample_their_own_paths() {
    let wasm = wat::parse_str(WAT).unwrap();
    let inst = pepper_wasm::instrument(&wasm, &{
        let mut instrument = pepper_wasm::InstrumentOptions::default();
        instrument.mode = pepper_profile::Mode::Pep;
        instrument.contexts = pepper_wasm::ContextMode::Native;
        instrument
    })
    .unwrap();
    let prepared =
        Arc::new(pepper_runtime::Prepared::new(&inst.wasm, &Default::default()).unwrap());
    let sampler = pepper_runtime::SamplerConfig::for_module(
        &inst,
        true,
        Default::default(),
        (Duration::from_millis(1), Duration::from_millis(1)),
    )
    .expect("PEP with native contexts has a sampler");
    let mut config = pepper_runtime::RunConfig::default();
    config.wasi.args = vec!["t".into()];
    config.attach.counters_export = Some(pepper_wasm::COUNTERS_EXPORT.into());
    config.attach.sampler = Some(sampler);
    const RUNS: usize = 8;
    let start = Arc::new(Barrier::new(RUNS));
    let runs: Vec<_> = (0..RUNS)
        .map(|_| {
            let (p, c, b) = (prepared.clone(), config.clone(), start.clone());
            std::thread::spawn(move || {
                b.wait();
                p.run(&c).unwrap()
            })
        })
        .collect();
    let results: Vec<_> = runs.into_iter().map(|t| t.join().unwrap()).collect();
    let mut with_stacks = 0;
    let mut path_ends = Vec::new();
    for r in &results {
        assert_eq!(r.exit_code, 0, "{:?}", r.trap);
        let s = r.samples.as_ref().expect("every run has its own sampler");
        assert!(s.taken > 0, "every run samples its own paths");
        path_ends.push(s.path_ends);
        if let Some(pcct) = &s.pcct {
            assert!(pcct.samples > 0);
            with_stacks += 1;
        }
    }
    // Each run counted exactly its own path ends (two per iteration: the loop header and
    // `$step`'s exit, plus the entry paths): a shared ring would count others'.
    assert!(
        path_ends
            .iter()
            .all(|&n| n == path_ends[0] && n >= 120_000_000),
        "{path_ends:?}"
    );
    // The one signal handler slot served at least one run; which ones depends on timing.
    assert!(with_stacks >= 1, "no run sampled native stacks");
}
