#!/usr/bin/env bash
# The search benchmark end to end: the truths, tunepar's runs (C++: with and without the model
# prior, the early stop, random search) and the peers' runs on the same truth files (Python:
# Optuna TPE and scikit-learn GP + EI, Debian packages) side by side on the two cores, the
# report, and the proposal latency.
#   bash bench/search_benchmark.sh [OUT_DIR] [SEEDS] [STRUCTURE_SEEDS] [BUDGET]
#     defaults: bench/out/search 20 10 50; SEEDS hidden machines for the `model` truth,
#     STRUCTURE_SEEDS for each other truth and noise seeds for the measured one
#     (bench/data/core-w8-small.csv, from bench/measure_core_truth.sh); build directory $BUILD
#     (default build); ONLY, a regular expression: only the cases ("problem truth") it finds,
#     e.g. ONLY='gradshard|actlow|margin' for the truths whose memory is lower than the model's
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/out/search}
seeds=${2:-20}
structure_seeds=${3:-10}
budget=${4:-50}
build=${BUILD:-build}
bash scripts/install-deps.sh --bench
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" --target search_bench >/dev/null
rm -rf "$out"
mkdir -p "$out"
start=$(date +%s)
options=(--seeds "$seeds" --structure-seeds "$structure_seeds" --budget "$budget" --core-truth bench/data/core-w8-small.csv)
if [ -n "${ONLY:-}" ]; then options+=(--only "$ONLY"); fi
"$build/search_bench" truths "$out" "${options[@]}"
"$build/search_bench" run "$out" "${options[@]}" 2>"$out.log" &
tunepar=$!
# One BLAS thread: the two cores are shared with tunepar's run.
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 SEARCH_BENCH_BUDGET=$budget /usr/bin/python3 bench/peers/search_peers.py "$out" \
  2>"$out.peers.log" || { cat "$out.peers.log"; exit 1; }
wait "$tunepar" || { cat "$out.log"; exit 1; }
grep -v ' seed ' "$out.log" || true
echo "truths, tunepar, random and the peers: $(($(date +%s) - start)) s"
"$build/search_bench" report "$out"
echo
"$build/search_bench" latency
