#!/usr/bin/env bash
# A stand-in for tunepar-core that writes $TUNEPAR_TEST_RESULT (JSON text, as given) as its
# result.json and exits 0: what the runner makes of a result that lacks or mistypes a field
# (another build of the core, a damaged file). Issue 30 item 4: a trial status with a message,
# never an exception.
set -euo pipefail
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [ "${args[$i]}" = "-o" ]; then printf '%s\n' "$TUNEPAR_TEST_RESULT" > "${args[$((i + 1))]}"; fi
done
echo "tunepar-core: stand-in wrote its result"
