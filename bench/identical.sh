#!/usr/bin/env bash
# Checks that every program of the corpus computes the same under every mode of pepper as
# uninstrumented (the test `corpus` of crates/pepper, on all programs rather than CI's few).
# Builds the corpus first.
set -euo pipefail
cd "$(dirname "$0")/.."
bench/workloads/build.sh
PEPPER_CORPUS=all exec cargo test --release -p pepper --test corpus -- --nocapture
