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
if ! command -v wrk >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
  echo "test: installing wrk and curl (apt) for the pepper serve test's load and requests" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq wrk curl >/dev/null
fi
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
# The binaries the smoke runs below need, linked from what the tests built (`cargo run -p`
# would resolve one package's features alone and build wasmtime a second time).
cargo build --release -q --workspace --bins --examples
# The test executables are done with: a CI machine's disk can be nearly full, and the
# aarch64 check below builds its own copies of the dependencies.
find target/release/deps -maxdepth 1 -type f -perm -u+x ! -name '*.so' -delete
# The embedder example: a host with its own store, linker and host function.
target/release/examples/embed >/dev/null
for smoke in "" --contexts --hints --ephemeral --phases "--guides 2 --only zstd"; do
  # shellcheck disable=SC2086 # each entry is a list of options
  target/release/pepper-bench --quick $smoke >/dev/null
done
echo "bench smoke: ok"
# pepper builds where the native stack walker does not (it falls back to shadow stacks):
# checked for aarch64 Linux when that Rust target is installed (rustup cannot always fetch
# one), with Debian's cross C compiler for the C in wasmtime's dependencies.
if rustup target list --installed 2>/dev/null | grep -q '^aarch64-unknown-linux-gnu$'; then
  if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
    echo "test: installing gcc-aarch64-linux-gnu (apt) for the aarch64 build check" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq gcc-aarch64-linux-gnu >/dev/null
  fi
  CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
    AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar \
    cargo check --release -q --target aarch64-unknown-linux-gnu -p pepper
  echo "aarch64 build check: ok"
else
  echo "aarch64 build check: skipped (rustup target aarch64-unknown-linux-gnu not installed)"
fi
