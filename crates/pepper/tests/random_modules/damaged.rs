//! Damaged input: the random modules with bytes flipped, inserted or removed, through the
//! rewriter.

use super::modules::{bytes, random_module};
use super::seeds;
use pepper_profile::Mode;
use pepper_wasm::InstrumentOptions;

/// Damaged input: random modules with bytes flipped, inserted or removed. The rewriter
/// must never panic; it must accept exactly the inputs that validate (functions it cannot
/// handle are skipped, not refused), and what it returns must validate.
#[test]
fn damaged_modules_are_refused_or_instrumented_never_panic() {
    let (mut valid, mut refused) = (0, 0);
    for seed in seeds() {
        let Some(wasm) = random_module(seed) else {
            continue;
        };
        let noise = bytes(!seed, 64);
        for k in 0..8 {
            let mut w = wasm.clone();
            let at = |i: usize| {
                u64::from_le_bytes(noise[8 * (i % 8)..][..8].try_into().unwrap()) as usize % w.len()
            };
            match k % 3 {
                0 => {
                    let i = at(k);
                    w[i] ^= noise[k] | 1;
                }
                1 => {
                    let i = at(k);
                    w.insert(i, noise[k]);
                }
                _ => {
                    let i = at(k);
                    w.remove(i);
                }
            }
            let validates =
                wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
                    .validate_all(&w)
                    .is_ok();
            for mode in [Mode::ExactPaths, Mode::ExactEdges, Mode::Pep] {
                let opts = {
                    let mut instrument = InstrumentOptions::default();
                    instrument.mode = mode;
                    instrument
                };
                let result = std::panic::catch_unwind(|| pepper_wasm::instrument(&w, &opts));
                let result = result.unwrap_or_else(|_| {
                    panic!("seed {seed}, damage {k}, {mode:?}: the rewriter panicked")
                });
                match result {
                    Ok(inst) => {
                        assert!(validates, "seed {seed}, damage {k}: invalid input accepted");
                        wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
                            .validate_all(&inst.wasm)
                            .unwrap_or_else(|e| panic!("seed {seed}, damage {k}: output {e}"));
                    }
                    Err(e) => {
                        assert!(
                            !validates,
                            "seed {seed}, damage {k}: valid input refused: {e}"
                        );
                        assert!(!e.to_string().is_empty());
                    }
                }
            }
            if validates {
                valid += 1;
            } else {
                refused += 1;
            }
        }
    }
    eprintln!("damaged modules: {valid} still valid and instrumented, {refused} refused");
    assert!(refused > 0 && valid > 0);
}
