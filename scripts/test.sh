#!/usr/bin/env bash
# Sets up everything pepper's tests need on a fresh machine and runs them:
# the wasm32-wasi toolchain and real workloads (bench/workloads/build.sh installs them with
# apt and builds them from crates.io sources), formatting, lints, all tests, and a quick
# smoke run of the benchmark harness.
set -euo pipefail
cd "$(dirname "$0")/.."
bench/workloads/build.sh
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings
cargo test --release --workspace
cargo run --release -q -p pepper-bench -- --quick >/dev/null
echo "bench smoke: ok"
