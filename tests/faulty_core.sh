#!/usr/bin/env bash
# tunepar-core failing on purpose, for the runner tests: what happens depends on the trial's
# number, read from its result path (.../<node>-<number>/result.json):
#   1: rank 1 crashes (SIGABRT) at step 0;  2: rank 0 runs out of memory at step 0;
#   3: rank 1 hangs at step 0 (the trial's timeout ends it);  4: a device call fails on rank 0
#   (status crash in result.json, exit 7);  5: rank 1 dies of SIGSEGV before it joins MPI on the
#   trial's first launch (as Open MPI's start-up sometimes does), and runs on the second;
#   6: rank 1 dies so on every launch;  later trials: the real core.
# $TUNEPAR_TEST_CORE is the real tunepar-core.
set -euo pipefail
result=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [ "${args[$i]}" = "-o" ]; then result=${args[$((i + 1))]}; fi
done
trial_dir=$(dirname "$result")
trial=$(basename "$trial_dir")
rank=${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-0}}
# Dies as a rank that MPI's start-up killed: nothing said, no core run.
die_before_joining() { kill -SEGV $$; sleep 5; }
case "${trial##*-}" in
  1) exec "$TUNEPAR_TEST_CORE" "$@" --fault crash --fault-rank 1 --fault-step 0 ;;
  2) exec "$TUNEPAR_TEST_CORE" "$@" --fault oom --fault-rank 0 --fault-step 0 ;;
  3) exec "$TUNEPAR_TEST_CORE" "$@" --fault hang --fault-rank 1 --fault-step 0 ;;
  4) exec "$TUNEPAR_TEST_CORE" "$@" --fault device --fault-rank 0 --fault-step 0 ;;
  5) if [ "$rank" = 1 ] && mkdir "$trial_dir/launch-fault" 2>/dev/null; then die_before_joining; fi
     exec "$TUNEPAR_TEST_CORE" "$@" ;;
  6) if [ "$rank" = 1 ]; then die_before_joining; fi
     exec "$TUNEPAR_TEST_CORE" "$@" ;;
  *) exec "$TUNEPAR_TEST_CORE" "$@" ;;
esac
