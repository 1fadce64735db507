#!/usr/bin/env bash
# Requests per second and p99 latency of `pepper serve` profiling in the default mode
# against `--mode none`, on the http-hash component (bench/workloads/rust-http), driven
# by wrk: ROUNDS rounds, each running both modes in an order that alternates, the table
# giving each mode's median and the ratio of medians.
#
#   bench/serve.sh [ROUNDS] [SECONDS] [PATH_AND_QUERY]   # defaults: 5 10 /hash?n=20000
#   LOAD=1 bench/serve.sh                                  # beside one busy process
#
# Needs wrk (apt-get install wrk) and the built workloads (bench/workloads/build.sh).
# Writes bench/results/serve.md (serve-load-N.md with LOAD=N).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECONDS_EACH=${2:-10}
TARGET=${3:-/hash?n=20000}
COMPONENT=bench/workloads/build/http-hash.component.wasm
LOAD=${LOAD:-0}
OUT=bench/results/serve.md
[ "$LOAD" -gt 0 ] && OUT=bench/results/serve-load-$LOAD.md
command -v wrk >/dev/null || { echo "serve bench: needs wrk (apt-get install wrk)" >&2; exit 1; }
[ -f "$COMPONENT" ] || { echo "serve bench: $COMPONENT not built (bench/workloads/build.sh)" >&2; exit 1; }
cargo build --release -q -p pepper
PEPPER=target/release/pepper
TMP=$(mktemp -d)
BUSY=()
trap 'rm -rf "$TMP"; [ ${#BUSY[@]} -eq 0 ] || kill "${BUSY[@]}" 2>/dev/null' EXIT
# Busy processes competing for the cores with the server and wrk, as other work on a
# shared server does.
for _ in $(seq "$LOAD"); do
  sh -c 'while :; do :; done' &
  BUSY+=($!)
done

# One measurement: MODE served, wrk for SECONDS_EACH; prints "req_per_s p99_ms".
measure() {
  local mode=$1
  "$PEPPER" serve --mode "$mode" --addr 127.0.0.1:0 -o "$TMP/$mode.json" "$COMPONENT" \
    >"$TMP/addr" 2>"$TMP/serve.err" &
  local pid=$!
  for _ in $(seq 200); do [ -s "$TMP/addr" ] && break; sleep 0.1; done
  local url
  url="$(head -1 "$TMP/addr" | sed 's#/$##')$TARGET"
  # Warm-up (the first instances, the caches), then the measured run.
  wrk -t1 -c2 -d2s "$url" >/dev/null
  wrk -t1 -c2 -d"${SECONDS_EACH}s" --latency "$url" >"$TMP/wrk.out"
  kill -TERM "$pid"
  wait "$pid" || true
  local rps p99
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$TMP/wrk.out")
  p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; print v}' "$TMP/wrk.out")
  echo "$rps $p99"
}

: >"$TMP/none"
: >"$TMP/pep"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then order="none pep"; else order="pep none"; fi
  for mode in $order; do
    m=$(measure "$mode")
    echo "round $r $mode: $m" >&2
    echo "$m" >>"$TMP/$mode"
  done
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
rps_none=$(cut -d' ' -f1 "$TMP/none" | median)
rps_pep=$(cut -d' ' -f1 "$TMP/pep" | median)
p99_none=$(cut -d' ' -f2 "$TMP/none" | median)
p99_pep=$(cut -d' ' -f2 "$TMP/pep" | median)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
{
  echo "# pepper serve: throughput and tail latency, profiling against none"
  echo
  echo "$(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo))."
  echo "Component: \`$COMPONENT\` (bench/workloads/rust-http), \`GET $TARGET\`."
  echo "Load: \`wrk -t1 -c2 -d${SECONDS_EACH}s --latency\` after a 2 s warm-up, on the same"
  echo "machine; $ROUNDS rounds, the two modes in alternating order; medians."
  echo "Busy processes beside every run: $LOAD."
  echo "Reproduce: \`LOAD=$LOAD bench/serve.sh $ROUNDS $SECONDS_EACH '$TARGET'\`."
  echo
  echo "| mode | requests/s | p99 latency (ms) |"
  echo "|---|---|---|"
  echo "| none | $rps_none | $p99_none |"
  echo "| pep (default, with contexts) | $rps_pep | $p99_pep |"
  echo "| pep / none | $(ratio "$rps_pep" "$rps_none") | $(ratio "$p99_pep" "$p99_none") |"
  echo
  echo "Every round:"
  echo
  echo "| round | none req/s | none p99 | pep req/s | pep p99 |"
  echo "|---|---|---|---|---|"
  paste -d' ' "$TMP/none" "$TMP/pep" | awk '{printf "| %d | %s | %s | %s | %s |\n", NR, $1, $2, $3, $4}'
} >"$OUT"
cat "$OUT"
