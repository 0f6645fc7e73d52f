#!/usr/bin/env bash
# What the store costs a measured search per trial, in a fresh store and in one that already
# holds 8 dry runs of gpt-1t and gpt-175b (about 60,000 predicted layouts), in one run.
#
# The measured search is a command search whose program takes no time (the fake trainer with
# --sleep 0), so that its wall time per trial is the tuner's own overhead: proposing, claiming,
# writing and publishing the trial, reading the other nodes' shards. Both stores are on the
# same disk; the searches alternate between them, REPEATS times each (a new study each time: its
# own seed), and the median is reported.
#
#   bash bench/store_overhead.sh [BUILD_DIR] [TRIALS] [REPEATS]
set -euo pipefail

BUILD=${1:-build}
TRIALS=${2:-30}
REPEATS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TUNEPAR="$BUILD/tunepar"
FAKE="$BUILD/tunepar_fake_trainer"
for binary in "$TUNEPAR" "$FAKE"; do
  [[ -x $binary ]] || { echo "store_overhead.sh: $binary not built (cmake --build $BUILD)" >&2; exit 2; }
done
WORK=$(mktemp -d /tmp/tunepar-store-overhead.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
FRESH="$WORK/fresh"
FULL="$WORK/full"

echo "== filling $FULL with 8 dry runs"
dry_runs=("gpt-1t 3072" "gpt-1t 2048" "gpt-1t 1536" "gpt-1t 1024" "gpt-175b 3072" "gpt-175b 2048" "gpt-175b 1024" "gpt-175b 512")
fill_start=$(date +%s.%N)
predictions=0
for run in "${dry_runs[@]}"; do
  set -- $run
  n=$("$TUNEPAR" --store "$FULL" --json search --model "$1" --world "$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["evaluated_now"])')
  predictions=$((predictions + n))
  echo "  $1 at world $2: $n predictions"
done
fill_s=$(python3 -c "import time; print(round(time.time() - $fill_start, 1))")
echo "  $predictions predictions in ${fill_s} s; store holds $(du -sh "$FULL" | cut -f1) ($(find "$FULL" -name '*.sqlite' | wc -l) shard files)"

search() {  # STORE REPEAT -> seconds of one measured search
  local store=$1 repeat=$2 start end
  start=$(date +%s.%N)
  "$TUNEPAR" --store "$store" search --world 2 --model tiny --hardware "$ROOT/configs/hardware/local-cpu.toml" \
    --backend command --seed "$repeat" \
    --command "$FAKE --tp {tp} --pp {pp} --mbs {mbs} --precision {precision} --recompute {recompute} --vpp {vpp} --sleep 0" \
    --metric-regex 'step_time: ([0-9.]+)' --confirm 0 --budget "$TRIALS" >"$WORK/search.out" 2>&1 ||
    { echo "store_overhead.sh: the measured search failed:" >&2; cat "$WORK/search.out" >&2; exit 1; }
  end=$(date +%s.%N)
  python3 -c "print($end - $start)"
}

fresh_s=() full_s=()
for ((r = 1; r <= REPEATS; r++)); do
  fresh_s+=("$(search "$FRESH" "$r")")
  full_s+=("$(search "$FULL" "$r")")
done

python3 - "$TRIALS" "${fresh_s[*]}" "${full_s[*]}" <<'EOF'
import statistics, sys
trials = int(sys.argv[1])
fresh = [float(x) for x in sys.argv[2].split()]
full = [float(x) for x in sys.argv[3].split()]
f, g = statistics.median(fresh), statistics.median(full)
print(f"== a command search of {trials} trials (a program that takes no time), median of {len(fresh)}")
print(f"  fresh store:              {f:6.2f} s  {1000 * f / trials:7.1f} ms per trial   runs: " + " ".join(f"{x:.2f}" for x in fresh))
print(f"  store with 8 dry runs:    {g:6.2f} s  {1000 * g / trials:7.1f} ms per trial   runs: " + " ".join(f"{x:.2f}" for x in full))
print(f"  ratio (8 dry runs / fresh): {g / f:.2f}x   (goal: at most 1.5x)")
EOF
