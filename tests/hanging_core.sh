#!/usr/bin/env bash
# tunepar-core whose teardown hangs (issue 29: a GPU build wrote result.json and did not exit):
# the real core ($TUNEPAR_TEST_CORE) runs the trial and writes its result, then this rank does not
# exit. The runner's safety net must record the trial from its result and stop the ranks.
set -uo pipefail
"$TUNEPAR_TEST_CORE" "$@"
code=$?
[ "$code" -ne 0 ] && exit "$code"
exec sleep 600
