#!/usr/bin/env bash
# tunepar-core ($TUNEPAR_TEST_CORE) whose rank 1 never ends its teardown after the result is
# written (--fault teardown-hang): the core's watchdog names the stage in the log, and the
# runner's safety net records the trial from its result.
exec "$TUNEPAR_TEST_CORE" "$@" --fault teardown-hang --fault-rank 1
