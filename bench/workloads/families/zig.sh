#!/usr/bin/env bash
# Zig programs of the corpus (corpus/zig.toml): ../zig/*.zig, built with the Zig compiler
# that PyPI's `ziglang` package ships (pinned), `-target wasm32-wasi -O ReleaseFast`. They
# use Zig's standard library only: std.compress (xz, gzip, zlib, deflate) and std.crypto.
#
#   OUT=bench/workloads/build bash bench/workloads/families/zig.sh    (build.sh runs it)
#
# Output: $OUT/{zig-compress,zig-crypto}.wasm, and $OUT/input-{small,bench}.txt.{xz,gz}
# (made by Python's lzma and gzip modules from build.sh's generated texts). Zig is installed
# into a venv under $OUT/zig (pip); on Debian, python3-venv comes from apt if missing.
set -euo pipefail
# shellcheck source=lib/venv.sh
. "$(dirname "$0")/lib/venv.sh"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$HERE/build}"
ZIG_VERSION=0.14.1
WORK="$OUT/zig"
VENV="$WORK/venv"
mkdir -p "$WORK"

if ! [ -x "$VENV/bin/python3" ] || [ "$("$VENV/bin/python3" -m ziglang version 2>/dev/null)" != "$ZIG_VERSION" ]; then
  pip_venv zig "$VENV" "ziglang==$ZIG_VERSION"
fi
ZIG=("$VENV/bin/python3" -m ziglang)

# build NAME SOURCE: rebuilt when the source, this script or the Zig version changes.
build() {
  local name="$1" src="$2"
  local target="$OUT/$name.wasm"
  local stamp
  stamp="$( (cat "$src" "$0"; echo "$ZIG_VERSION") | sha256sum | cut -d' ' -f1)"
  if [ -f "$target" ] && [ "$(cat "$WORK/$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  echo "zig: building $name.wasm (zig $ZIG_VERSION build-exe -O ReleaseFast)" >&2
  "${ZIG[@]}" build-exe -target wasm32-wasi -O ReleaseFast "$src" --name "$name" \
    --cache-dir "$WORK/cache" --global-cache-dir "$WORK/global-cache" -femit-bin="$WORK/$name.wasm"
  cp "$WORK/$name.wasm" "$target.tmp"
  mv "$target.tmp" "$target"
  echo "$stamp" > "$WORK/$name.stamp"
}

build zig-compress "$HERE/zig/compress.zig"
build zig-crypto "$HERE/zig/crypto.zig"

# zig-compress's inputs: the generated texts (build.sh makes them before the family scripts;
# made here too when the script runs alone), packed by Python's xz and gzip. Only the
# unpacked text enters the program's checksum, so other zlib or liblzma versions give the
# same output.
for size in small:300000 bench:3000000; do
  txt="$OUT/input-${size%%:*}.txt"
  [ -f "$txt" ] || python3 "$HERE/gen_input.py" "$txt" "${size#*:}"
  for ext in xz gz; do
    [ "$txt.$ext" -nt "$txt" ] && continue
    python3 - "$txt" "$ext" <<'EOF'
import gzip, lzma, os, sys
path, ext = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
packed = lzma.compress(data, preset=6) if ext == "xz" else gzip.compress(data, 9, mtime=0)
open(path + "." + ext + ".tmp", "wb").write(packed)
os.replace(path + "." + ext + ".tmp", path + "." + ext)
EOF
  done
done
