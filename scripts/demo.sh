#!/usr/bin/env bash
# Builds pepper and the bundled real workloads, profiles the Lua interpreter running a
# script with pepper's default continuous mode (PEP(64,17) path sampling in bursts of
# instrumented code, and sampled calling contexts), prints the report, records exact path and calling-context profiles of the same
# run and scores the sampled one against them, and exports pprof and a flame graph.
set -euo pipefail
cd "$(dirname "$0")/.."
bench/workloads/build.sh
cargo build --release -q -p pepper
./target/release/pepper run -o lua.pepper.json bench/workloads/build/lua.wasm -- 50
./target/release/pepper report lua.pepper.json
./target/release/pepper run --mode exact-paths -o lua.exact.pepper.json bench/workloads/build/lua.wasm -- 50 >/dev/null
./target/release/pepper compare lua.exact.pepper.json lua.pepper.json
./target/release/pepper run --mode exact-calls -o lua.calls.pepper.json bench/workloads/build/lua.wasm -- 50 >/dev/null
./target/release/pepper compare lua.calls.pepper.json lua.pepper.json | sed -n '/calling contexts/,$p'
./target/release/pepper export lua.pepper.json
./target/release/pepper export --format flamegraph lua.pepper.json
