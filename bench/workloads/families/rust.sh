#!/usr/bin/env bash
# Rust programs of the corpus (corpus/rust.toml): small drivers around crates.io libraries
# (regex, serde_json, pulldown-cmark, sha2 + chacha20poly1305, rhai), pinned in
# ../rust-programs/*/Cargo.toml and its Cargo.lock, built as wasm32-wasip1 core modules.
#
#   OUT=bench/workloads/build bash bench/workloads/families/rust.sh    (build.sh runs it)
#
# Output: $OUT/{regex-scan,json-roundtrip,cmark-html,sha-chacha,rhai-script}.wasm; cargo's
# work in $OUT/rust-programs (a second run only checks that it is up to date).
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
: "${OUT:?OUT (the build directory) must be set}"
PROGRAMS=(regex-scan json-roundtrip cmark-html sha-chacha rhai-script)

if ! command -v rustup >/dev/null || ! command -v cargo >/dev/null; then
  echo "workloads/rust: no rustup and cargo: the Rust programs are not built" >&2
  exit 0
fi
if ! rustup target list --installed | grep -qx wasm32-wasip1; then
  echo "workloads/rust: adding the wasm32-wasip1 target (rustup)" >&2
  rustup target add wasm32-wasip1 >/dev/null
fi

echo "workloads/rust: building ${PROGRAMS[*]} (cargo, wasm32-wasip1; minutes the first time)" >&2
cargo build --quiet --locked --release --target wasm32-wasip1 \
  --manifest-path "$HERE/rust-programs/Cargo.toml" --target-dir "$OUT/rust-programs"
for p in "${PROGRAMS[@]}"; do
  src="$OUT/rust-programs/wasm32-wasip1/release/$p.wasm"
  cmp -s "$src" "$OUT/$p.wasm" || cp "$src" "$OUT/$p.wasm"
done
