#!/usr/bin/env bash
# Calibration from tunepar-core measurements on this machine (prints figures; not a test):
#  1. `tunepar calibrate --backend local` measures a sweep of the small model at world W (default
#     4) in four shapes (as given, twice the batch, half the hidden size, twice the sequence), fits
#     the local-cpu profile and prints predicted against measured step time: Spearman rank
#     correlation and median |error|, in sample and 2-fold out of sample, over all runs and within
#     each shape. Goal at world 4: Spearman >= 0.9 and median |error| <= 15%.
#  2. The same runs refit by a model without device sharing (every rank a device of its own, as
#     before the model knew that ranks can outnumber cores): what that part of the model buys.
#   bash bench/calibration_benchmark.sh [WORLD] [LAYOUTS]     (defaults 4 and 32)
set -euo pipefail
cd "$(dirname "$0")/.."
world=${1:-4}
layouts=${2:-32}
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" --target tunepar tunepar-core >/dev/null
out=bench/out/calibration
rm -rf "$out"
mkdir -p "$out"

echo "== 1. sweep of small at world $world on $(nproc) cores, fitted"
build/tunepar --store "$out/store" calibrate --backend local --hardware local-cpu --model small \
  --world "$world" --layouts "$layouts" --steps 10 --warmup 2 --runs-csv "$out/runs.csv" --name local-cpu --force \
  -o "$out/local-cpu-fitted.toml"

echo
echo "== 2. the same runs, model without device sharing (ranks_per_node left out)"
/usr/bin/python3 - "$out/runs.csv" "$out/runs-dedicated.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if not l.startswith("#"))]
col = rows[0].index("ranks_per_node")
with open(sys.argv[2], "w", newline="") as f:
    w = csv.writer(f)
    for r in rows:
        w.writerow(r[:col] + r[col + 1:])
PY
build/tunepar calibrate --from "$out/runs-dedicated.csv" --hardware local-cpu --force 2>&1 | grep -E "Spearman|mean \|error\||fitting"
