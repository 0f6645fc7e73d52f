#!/usr/bin/env bash
# The measured truth of the search benchmark: every legal layout of MODEL at world 8 with sp0,
# vpp1 and fa0 (the core runs sp1 and fa1 too since; the sweep keeps the set of before), once on
# this machine with tunepar-core under mpirun (8 ranks, oversubscribed, as `tunepar search --backend
# local` launches them), with a memory cap per rank that makes part of the space run out of
# memory. Every EVERY-th layout is measured twice more during the sweep (EVERY/2 and EVERY
# layouts later), so that the replay knows this machine's run-to-run noise. Writes bench/data/core-w8-MODEL.csv: one row per run
# (layout key, repeat, status, median step time in s, peak bytes per rank: for an OOM, as far as
# it got), after a header of comments naming the command, date, machine and cap.
#
#   bash bench/measure_core_truth.sh [MODEL] [CAP_BYTES] [STEPS] [WARMUP] [EVERY]
#     defaults: small 30000000 3 1 10; the binaries from $BUILD (default build-bench); the
#     revision they were built from in $TUNEPAR_REVISION (default: git's HEAD)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-small}
cap=${2:-30000000}
steps=${3:-3}
warmup=${4:-1}
every=${5:-10}
build=${BUILD:-build-bench}
out=bench/data/core-w8-$model.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$build/tunepar" space --world 8 --model "$model" --hardware local-cpu --list |
  grep -E -- '^tp[0-9]+-.*-sp0-vpp1-fa0$' >"$tmp/layouts"
total=$(wc -l <"$tmp/layouts")
[ "$total" -gt 0 ] || { echo "measure_core_truth: no layouts listed" >&2; exit 1; }
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)

# One run of KEY: "status,step_time_s,peak_bytes" (status crash when no result was written
# twice: a run that wrote none is tried once more, as the local backend retries an MPI start-up
# failure).
run_one() {
  for attempt in 1 2; do
    rm -f "$tmp/result.json"
    mpirun "${root[@]}" --oversubscribe --bind-to none -np 8 "$build/tunepar-core" --model "$model" \
      --layout "$1" --steps "$steps" --warmup "$warmup" --memory-cap "$cap" --threads 1 \
      -o "$tmp/result.json" </dev/null >"$tmp/log" 2>&1 || true
    if [ -s "$tmp/result.json" ]; then
      jq -r '[.status, (.step_time_s // ""), (.memory.peak_bytes // "")] | @csv' "$tmp/result.json" | tr -d '"'
      return
    fi
  done
  echo "crash,,"
}

start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
: >"$tmp/rows"
n=0
# Every EVERY-th layout is run again EVERY/2 and EVERY layouts later (the last ones after the
# sweep): its repeats run among the sweep's runs, under the same conditions, so the noise they
# show is the sweep's own (repeats after it once met other jobs and showed 49%).
mapfile -t layouts <"$tmp/layouts"
declare -A due  # position in the sweep -> "key repeat" lines to run after it
schedule() { due[$1]+="$2 $3"$'\n'; }
run_due() {
  local key repeat
  while read -r key repeat; do
    [ -n "$key" ] && echo "$key,$repeat,$(run_one "$key")" >>"$tmp/rows"
  done <<<"${due[$1]:-}"
  unset "due[$1]"
}
for key in "${layouts[@]}"; do
  n=$((n + 1))
  echo "$key,1,$(run_one "$key")" >>"$tmp/rows"
  if [ $(((n - 1) % every)) = 0 ]; then
    schedule $((n + every / 2)) "$key" 2
    schedule $((n + every)) "$key" 3
  fi
  run_due "$n"
  printf '\r%d/%d %s' "$n" "$total" "$key" >&2
done
for position in $(printf '%s\n' "${!due[@]}" | sort -n); do run_due "$position"; done
echo >&2
seconds=$(($(date +%s) - t0))
{
  echo "# Measured truth of bench/search_bench.cc: tunepar-core, model $model, world 8 (all ranks on this machine)."
  echo "# command: bash bench/measure_core_truth.sh $model $cap $steps $warmup $every"
  echo "# each run: mpirun ${root[*]} --oversubscribe --bind-to none -np 8 $build/tunepar-core --model $model --layout KEY --steps $steps --warmup $warmup --memory-cap $cap --threads 1"
  echo "# date: $start; $seconds s in all; load average at the start: $load_start, at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# machine: $(uname -n), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), $(free -g | awk '/^Mem:/ {print $2}') GiB, $(mpirun --version 2>/dev/null | head -1)"
  echo "# tunepar-core built from: ${TUNEPAR_REVISION:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "# memory_cap_bytes: $cap"
  echo "# layouts: $total legal (sp0 vpp1 fa0), every ${every}th measured three times; step_time_s is tunepar-core's median over $steps steps after $warmup warm-up; peak_bytes the largest rank's peak (an OOM: when it ran out)"
  echo "layout,repeat,status,step_time_s,peak_bytes"
  cat "$tmp/rows"
} >"$out"
awk -F, '!/^#/ && NR > 1 && $2 == 1 {c[$3]++} END {for (s in c) printf "%s %d  ", s, c[s]; print ""}' "$out" >&2
echo "wrote $out ($seconds s)" >&2
