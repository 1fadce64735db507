#!/usr/bin/env bash
# A long differential fuzzing campaign: the random-module test (wasm-smith modules, each run
# original and instrumented in every mode, switch included, results compared) over a range
# of seeds, split among parallel workers, in chunks so that a failing seed is logged and
# the campaign goes on after it.
#
#   scripts/differential-campaign.sh START END [WORKERS]    # e.g. 20000 120000 2
#
# Writes target/campaign/summary.log (one line per chunk) and a log per failing chunk.
set -euo pipefail
cd "$(dirname "$0")/.."
start=${1:?START seed}
end=${2:?END seed}
workers=${3:-2}
chunk=500
out=target/campaign
mkdir -p "$out"
bin=$(cargo test --release -p pepper --test random_modules --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*random_modules[^"]*\)".*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "could not build the random-module test" >&2; exit 1; }

worker() {
  local from=$1 to=$2
  local s=$from
  while [ "$s" -lt "$to" ]; do
    local e=$((s + chunk < to ? s + chunk : to))
    local t0=$SECONDS log="$out/chunk-$s.log"
    if (cd crates/pepper && PEPPER_RANDOM_SEEDS=$s..$e "$bin" random_modules_behave_identically \
      --test-threads 1 --nocapture >"../../$log" 2>&1); then
      echo "ok $s..$e $((SECONDS - t0))s $(grep -o '[0-9]* modules,' "$log" | head -1)" >>"$out/summary.log"
      rm -f "$log"
    else
      local bad
      # `|| true`: a failure that names no seed must not end the worker (pipefail).
      bad=$(grep -o 'seed [0-9]*' "$log" | head -1 | cut -d' ' -f2 || true)
      echo "FAIL $s..$e at seed ${bad:-?}: $( (grep -m1 -A1 'panicked at' "$log" || true) | tail -1 | cut -c1-200)" >>"$out/summary.log"
      # Go on after the failing seed (or after the chunk if no seed was named).
      e=$((${bad:-$((e - 1))} + 1))
    fi
    s=$e
  done
}

span=$(((end - start + workers - 1) / workers))
for w in $(seq 0 $((workers - 1))); do
  from=$((start + w * span))
  to=$((from + span < end ? from + span : end))
  worker "$from" "$to" &
done
wait
ok=$(grep -c '^ok' "$out/summary.log" || true)
fails=$(grep -c '^FAIL' "$out/summary.log" || true)
modules=$(grep -o '[0-9]* modules,' "$out/summary.log" | awk '{s += $1} END {print s + 0}')
echo "seeds $start..$end: $ok chunks passed, $fails failed; $modules modules ran in every mode"
