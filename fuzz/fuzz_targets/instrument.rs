//! Any bytes as a module: the rewriter refuses what it cannot handle with an error, and
//! what it instruments validates.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    use pepper_profile::Mode;
    let mode = match data.first().map(|b| b % 4) {
        Some(0) => Mode::ExactPaths,
        Some(1) => Mode::ExactEdges,
        Some(2) => Mode::Pep,
        _ => Mode::Targeted,
    };
    let mut opts = pepper_wasm::InstrumentOptions::default();
    opts.mode = mode;
    if let Ok(out) = pepper_wasm::instrument(data, &opts) {
        wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
            .validate_all(&out.wasm)
            .expect("an instrumented module validates");
    }
});
