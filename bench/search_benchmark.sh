#!/usr/bin/env bash
# The search benchmark end to end: truths and tunepar's curves (C++), the peers' curves (Python:
# Optuna TPE and scikit-learn GP + EI, Debian packages), the report, and the proposal latency.
#   bash bench/search_benchmark.sh [OUT_DIR] [SEEDS] [BUDGET]     (defaults: bench/out/search 20 50)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/out/search}
seeds=${2:-20}
budget=${3:-50}
bash scripts/install-deps.sh --bench
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" --target search_bench >/dev/null
rm -rf "$out"
mkdir -p "$out"
build/search_bench run "$out" --seeds "$seeds" --budget "$budget" 2>"$out.log" || { cat "$out.log"; exit 1; }
grep -v ' seed ' "$out.log" || true
SEARCH_BENCH_BUDGET=$budget /usr/bin/python3 bench/peers/search_peers.py "$out"
build/search_bench report "$out"
echo
build/search_bench latency
