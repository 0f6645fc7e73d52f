#!/usr/bin/env bash
# The README's first command sets up only what `tunepar search` needs (issue 28 item 13): the
# minimal package set of scripts/install-deps.sh holds none of the tests' heavy packages
# (PyTorch, Slurm, HIP/ROCm, GoogleTest), the full set still holds them, and README.md's two
# commands use the sets and the CMake options they should.
# Usage: install_deps_test.sh SOURCE_DIR. Exit 0 pass, 1 fail.
set -uo pipefail
src=${1:?usage: install_deps_test.sh SOURCE_DIR}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

minimal=$(bash "$src/scripts/install-deps.sh" --minimal --list) || fail "install-deps.sh --minimal --list exited $?"
full=$(bash "$src/scripts/install-deps.sh" --list) || fail "install-deps.sh --list exited $?"
# (A --list that printed nothing would pass every check below.)
grep -qx cmake <<<"$minimal" || fail "the minimal set lacks cmake: is --list printing it? got: $minimal"

heavy='^(python3-torch|slurm.*|munge|hipcc|hip.*|libhip.*|libamdhip.*|rocm.*|librocm.*|libgtest-dev|libgmock-dev|libbenchmark-dev)$'
for p in $(grep -E "$heavy" <<<"$minimal"); do
  fail "the minimal set holds $p, which only the tests need"
done
for p in $minimal; do
  grep -qx "$p" <<<"$full" || fail "the full set lacks $p of the minimal set"
done
for p in python3-torch slurm-wlm hipcc libgtest-dev; do
  grep -qx "$p" <<<"$full" || fail "the full set (the test command's) lacks $p"
done

first=$(grep -m1 -E '^    bash scripts/install-deps.sh .*tunepar search --world 3072' "$src/README.md")
# The same pattern as .ci/run's, which runs this line.
second=$(grep -m1 -E '^    bash scripts/install-deps.sh .*ctest ' "$src/README.md")
[ -n "$first" ] || fail "README.md has no first command (install-deps.sh ... tunepar search --world 3072)"
[ -n "$second" ] || fail "README.md has no test command (install-deps.sh ... ctest)"
for want in 'install-deps.sh --minimal ' '-DTUNEPAR_BUILD_TESTS=OFF' '--target tunepar tunepar-core '; do
  [[ -z $first || $first == *"$want"* ]] || fail "the first command lacks '$want': $first"
done
for want in '-DTUNEPAR_BUILD_TESTS=ON' '--no-tests=error'; do
  [[ -z $second || $second == *"$want"* ]] || fail "the test command lacks '$want': $second"
done
[[ $second != *--minimal* ]] || fail "the test command installs only the minimal set: $second"

[ "$failures" -eq 0 ] && echo "install_deps_test: passed" || exit 1
