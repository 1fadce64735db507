#!/usr/bin/env bash
# Python: CPython as a wasi:cli/command component, built with PyPI's componentize-py
# (pinned), which carries CPython and its standard library compiled to wasm32-wasi and
# links them with the program's modules into a component. The program is
# ../python/pybench.py; its WIT world (../python/wit) exports wasi:cli/run.
#
#   OUT=bench/workloads/build bash bench/workloads/families/python.sh
#
# Output: $OUT/pybench.component.wasm. componentize-py is installed into a venv under
# $OUT/python/ (pip, from PyPI); on Debian, python3-venv comes from apt if missing.
set -euo pipefail
# shellcheck source=lib/venv.sh
. "$(dirname "$0")/lib/venv.sh"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$HERE/build}"
CPY_VERSION=0.25.1
WORK="$OUT/python"
VENV="$WORK/venv"
TARGET="$OUT/pybench.component.wasm"
mkdir -p "$WORK"

if ! [ -x "$VENV/bin/componentize-py" ] || [ "$(cat "$WORK/.componentize-py" 2>/dev/null)" != "$CPY_VERSION" ]; then
  pip_venv python "$VENV" "componentize-py==$CPY_VERSION"
  echo "$CPY_VERSION" > "$WORK/.componentize-py"
  rm -f "$TARGET"
fi

# Rebuilt when the program, its WIT or the pinned version changes. componentize-py
# writes __pycache__ beside the modules, so it builds from a copy under $OUT.
stamp="$(cat "$HERE/python/pybench.py" "$HERE"/python/wit/*.wit "$HERE"/python/wit/deps/cli/*.wit \
  | sha256sum | cut -d' ' -f1) $CPY_VERSION"
if [ -f "$TARGET" ] && [ "$(cat "$WORK/.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
echo "python: building pybench.component.wasm with componentize-py $CPY_VERSION" >&2
rm -rf "$WORK/src"
mkdir -p "$WORK/src"
cp "$HERE/python/pybench.py" "$WORK/src/"
cp -r "$HERE/python/wit" "$WORK/src/wit"
(cd "$WORK/src" && "$VENV/bin/componentize-py" --quiet -d wit -w app componentize pybench -p . -o "$TARGET.tmp")
mv "$TARGET.tmp" "$TARGET"
echo "$stamp" > "$WORK/.stamp"
