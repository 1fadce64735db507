#!/usr/bin/env bash
# What a function of thousands of nested blocks costs to instrument and compile in each
# mode, against `--mode none`: a `switch` (a `br_table` into N nested blocks, each case
# returning, what a big C switch compiles to) and a chain (N nested blocks left by
# `br_if`s, an if-else-if ladder). Whole `pepper run` wall time, pepper's rewrite and
# Cranelift's compilation (no cache), and peak memory; the best of ROUNDS runs.
#
#   bench/nesting.sh [N] [ROUNDS]      # defaults: 20000 3
#
# Writes bench/results/nesting.md.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
ROUNDS=${2:-3}
OUT=bench/results/nesting.md
cargo build --release -q -p pepper
PEPPER=$PWD/target/release/pepper
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

python3 - "$N" "$TMP" <<'EOF'
import sys
n, out = int(sys.argv[1]), sys.argv[2]
runner = ('(func (export "_start") (local i32 i32)\nloop\n'
          f'local.get 1 local.get 0 i32.const {n} i32.rem_u call $sw i32.add local.set 1\n'
          'local.get 0 i32.const 1 i32.add local.tee 0 i32.const 100000 i32.lt_u br_if 0\nend))\n')
sw = ['(module (memory (export "memory") 1)', '(func $sw (param i32) (result i32)']
sw += ['block'] * n
sw.append('local.get 0 br_table ' + ' '.join(map(str, range(n))) + f' {n-1}')
sw += [f'end local.get 0 i32.const {i*7+3} i32.mul return' for i in range(n)]
sw.append('unreachable)')
open(f'{out}/switch.wat', 'w').write('\n'.join(sw) + '\n' + runner)
ch = ['(module (memory (export "memory") 1)', '(func $sw (param i32) (result i32) (local i32)', 'block']
ch += ['block'] * n
ch += [f'end local.get 0 i32.const {i} i32.eq br_if {n-1-i} local.get 1 i32.const {i} i32.add local.set 1' for i in range(n)]
ch.append('end local.get 1)')
open(f'{out}/chain.wat', 'w').write('\n'.join(ch) + '\n' + runner)
EOF

# One run: prints "wall_s instrument_ms compile_ms maxrss_mb".
measure() {
  local shape=$1 mode=$2 extra=()
  [ "$mode" = targeted ] && extra=(--guide "$TMP/$shape.guide.json")
  /usr/bin/time -f "%e %M" -o "$TMP/time" "$PEPPER" run --no-cache --mode "$mode" \
    "${extra[@]}" -o "$TMP/p.json" "$TMP/$shape.wat" >/dev/null 2>"$TMP/err" ||
    { cat "$TMP/err" >&2; exit 1; }
  python3 - "$TMP/p.json" "$(cat "$TMP/time")" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["run"]
wall, rss = sys.argv[2].split()
print(f'{float(wall):.2f} {r.get("instrument_ms") or 0:.0f} {r["compile_ms"]:.0f} {int(rss) / 1024:.0f}')
EOF
}

{
  echo "# Thousands of nested blocks: instrumenting and compiling in every mode"
  echo
  echo "$(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo))."
  echo "One function of $N cases, called 100,000 times; \`pepper run --no-cache\`, best of"
  echo "$ROUNDS runs by wall time. Reproduce: \`bench/nesting.sh $N $ROUNDS\`."
  echo
  echo "| shape | mode | wall s | vs none | rewrite ms | compile ms | peak MB |"
  echo "|---|---|---|---|---|---|---|"
} >"$OUT"
for shape in switch chain; do
  "$PEPPER" run --no-cache --mode exact-edges -o "$TMP/$shape.guide.json" "$TMP/$shape.wat" \
    >/dev/null 2>&1
  none=""
  for mode in none pep exact-paths exact-edges targeted ephemeral calls; do
    best=""
    for _ in $(seq "$ROUNDS"); do
      m=$(measure "$shape" "$mode")
      if [ -z "$best" ] || awk -v a="${m%% *}" -v b="${best%% *}" 'BEGIN {exit !(a < b)}'; then
        best=$m
      fi
    done
    read -r wall rewrite compile rss <<<"$best"
    [ "$mode" = none ] && none=$wall
    ratio=$(awk -v a="$wall" -v b="$none" 'BEGIN {printf "%.1fx", a / b}')
    echo "$shape $mode: $best" >&2
    echo "| $shape | $mode | $wall | $ratio | $rewrite | $compile | $rss |" >>"$OUT"
  done
done
cat "$OUT"
