#!/usr/bin/env bash
# Builds pepper and the bundled real workloads, profiles the Lua interpreter running a
# script with exact path profiling, and prints the report.
set -euo pipefail
cd "$(dirname "$0")/.."
bench/workloads/build.sh
cargo build --release -q -p pepper
./target/release/pepper run -o lua.pepper.json bench/workloads/build/lua.wasm -- 20
./target/release/pepper report lua.pepper.json
