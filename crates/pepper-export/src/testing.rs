//! Profiles for the exporters' unit tests.

use pepper_profile::Profile;

/// A `mode` profile of one function, `f` (index 1), with these branches (JSON objects as
/// the profile file has them).
pub(crate) fn one_function(mode: &str, branches: Vec<serde_json::Value>) -> Profile {
    serde_json::from_value(serde_json::json!({
        "format": "pepper-profile", "version": 3, "mode": mode,
        "module": {"path": "m.wasm", "sha256": "00", "size": 10},
        "run": {"args": [], "exit_code": 0, "trap": null,
                "instrument_ms": 0.0, "compile_ms": 0.0, "run_ms": 1.0},
        "functions": [{"index": 1, "name": "f", "instrumented": true, "skipped": null,
                       "num_paths": null, "counting": null, "truncated_nodes": 0}],
        "branches": branches,
        "paths": [], "lost": {"hash_overflow": 0}, "warnings": []
    }))
    .unwrap()
}
