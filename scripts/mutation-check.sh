#!/usr/bin/env bash
# The search engine's tests must fail when the engine is broken in the ways that once passed
# them unnoticed (issue 13). Each mutation below is applied in turn to a scratch copy of this
# tree; the proposer's tests (tests/proposer_test.cc) are built and run there and must fail.
# Exits 1 when a mutation survives, or no longer applies (its text is gone from the source:
# update the mutation together with the code it breaks).
#   bash scripts/mutation-check.sh [SCRATCH_DIR]      (default: a new directory under $TMPDIR)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scratch=${1:-$(mktemp -d "${TMPDIR:-/tmp}/tunepar-mutations.XXXXXX")}

# name | file | text | replacement
mutations=(
  "log EI replaced by the greedy posterior mean|search/proposer.cc|? LogExpectedImprovement(mean, sd, s.best) + log_p|? -mean + log_p"
  "the sign of the UCB bonus flipped|search/acquisition.h|return mean - beta * sd;|return mean + beta * sd;"
  "no Kriging-believer update within a batch|search/proposer.cc|if (k + 1 < q) BelievePick(chosen, &s, &mean, &sd);|(void)0;"
  "no conditioning on crashed, hung or invalid layouts|search/proposer.cc|s->gp.AddObservation(x_.row(i), feature_[i], mz[0]);|(void)mz;"
  "no probe past the predicted memory limit|search/proposer.cc|return spent < options_.max_probes && ran_out <= fitted;|return false;"
  "probing goes on after probes ran out of memory|search/proposer.cc|return spent < options_.max_probes && ran_out <= fitted;|return spent < options_.max_probes;"
)

echo "== scratch copy in $scratch"
mkdir -p "$scratch/src"
git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$scratch/src"
cmake -S "$scratch/src" -B "$scratch/build" -DTUNEPAR_BUILD_BENCH=OFF >"$scratch/configure.log"
build_and_test() {
  cmake --build "$scratch/build" --target proposer_test -j"$(nproc)" >"$scratch/build.log" 2>&1 || return 2
  "$scratch/build/proposer_test" >"$scratch/test.log" 2>&1
}
if ! build_and_test; then
  echo "mutation-check: the unmutated proposer tests do not pass; see $scratch/build.log and $scratch/test.log" >&2
  exit 1
fi

failed=0
for m in "${mutations[@]}"; do
  IFS='|' read -r name file text replacement <<<"$m"
  target="$scratch/src/$file"
  content=$(<"$target")
  if [[ "$content" != *"$text"* ]]; then
    echo "NO LONGER APPLIES  $name: '$text' is not in $file"
    failed=1
    continue
  fi
  printf '%s\n' "${content/"$text"/"$replacement"}" >"$target"
  set +e
  build_and_test
  rc=$?
  set -e
  cp "$root/$file" "$target"
  if [ "$rc" -eq 0 ]; then
    echo "SURVIVED           $name ($file): every proposer test still passes"
    failed=1
  elif [ "$rc" -eq 2 ]; then
    echo "DOES NOT BUILD     $name ($file); see $scratch/build.log"
    failed=1
  else
    echo "caught             $name: $(grep -c '^\[  FAILED  \] [A-Za-z]' "$scratch/test.log") failing tests"
  fi
done
cmake --build "$scratch/build" --target proposer_test >/dev/null 2>&1 || true
if [ -z "${1:-}" ]; then rm -rf "$scratch"; fi
exit "$failed"
