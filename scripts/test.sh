#!/usr/bin/env bash
# Sets up everything pepper's tests need on a fresh machine and runs them:
# the wasm32-wasi toolchain and real workloads (bench/workloads/build.sh installs them with
# apt and builds them from crates.io sources), Go's pprof reader for the export tests (apt),
# Chromium for the HTML report test (apt), formatting, lints, all tests, and a quick smoke
# run of the benchmark harness.
set -euo pipefail
cd "$(dirname "$0")/.."
bench/workloads/build.sh
# A real pprof reader for the export tests (`go tool pprof`).
if ! command -v go >/dev/null 2>&1; then
  echo "test: installing golang-go (apt) for go tool pprof" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq golang-go >/dev/null
fi
# A real browser for the HTML report (headless Chromium loads the page in a test).
if ! command -v chromium >/dev/null 2>&1; then
  echo "test: installing chromium (apt) for the HTML report test" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi
export PEPPER_REQUIRE_READERS=1
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings
cargo test --release --workspace
# The embedder example: a host with its own store, linker and host function.
cargo run --release -q -p pepper-runtime --example embed >/dev/null
cargo run --release -q -p pepper-bench -- --quick >/dev/null
cargo run --release -q -p pepper-bench -- --quick --contexts >/dev/null
cargo run --release -q -p pepper-bench -- --quick --hints >/dev/null
cargo run --release -q -p pepper-bench -- --quick --ephemeral >/dev/null
cargo run --release -q -p pepper-bench -- --quick --phases >/dev/null
cargo run --release -q -p pepper-bench -- --quick --guides 2 --only zstd >/dev/null
echo "bench smoke: ok"
