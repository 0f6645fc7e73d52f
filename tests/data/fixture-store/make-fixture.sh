#!/usr/bin/env bash
# Writes tests/data/fixture-store: a store written by tunepar at cd78308 (main before issue 30
# item 3), one SQL dump per published shard (sqlite3 .dump, with the two pragmas .dump leaves
# out), for tests/study_fixture_test.cc, which rebuilds the store and resumes each study under
# its id. Four studies of node n0: two dry runs (a default name, and a named one of another
# model, hardware and space), a command study (Bayesian, --fix) and a study of the CPU core
# (pinned knobs). Nothing but the published shards is kept: a store whose work shards lived on
# node-local disk (--work-dir) looks so.
# Usage: make-fixture.sh TUNEPAR TUNEPAR_CORE   (run in a scratch folder; writes ./s and the dumps here)
set -euo pipefail
tunepar=$1
core=$2
here=$(cd "$(dirname "$0")" && pwd)
t="$tunepar --store s"
$t search --backend model --world 8 --model tiny --hardware dgx-a100 --fix precision=bf16 --fix recompute=none \
  --fix seq_parallel=false --fix zero=1 --fix micro_batch=1,2 --fix virtual_stages=1 --node-id n0
$t search --backend model --world 16 --model small --hardware dgx-h100 --space megatron --fix precision=bf16 \
  --fix recompute=selective --fix micro_batch=1 --study fixture-small-megatron --node-id n0
$t search --backend command --world 4 --model tiny --hardware local-cpu \
  --command 'echo tps: $(( {mbs} * 100 + {tp} * 10 + {pp} ))' --metric-regex 'tps: ([0-9]+)' --metric higher \
  --budget 4 --confirm 0 --seed 3 --fix precision=fp32 --study fixture-command --node-id n0
$t search --backend local --world 2 --model tiny --hardware local-cpu --budget 2 --steps 1 --warmup 0 --max-ranks 2 \
  --seed 5 --study fixture-core --node-id n0 --core "$core"
dump() {  # FILE OUT
  {
    echo "-- $(basename "$2"): $1 as tunepar $($tunepar --version | cut -d' ' -f3) wrote it (make-fixture.sh)"
    echo "PRAGMA application_id = $(sqlite3 "$1" 'PRAGMA application_id');"
    echo "PRAGMA user_version = $(sqlite3 "$1" 'PRAGMA user_version');"
    sqlite3 "$1" .dump
  } > "$2"
}
mkdir -p "$here/n0"
dump s/shards/store-format.sqlite "$here/store-format.sql"
for shard in s/shards/n0/*.sqlite; do dump "$shard" "$here/n0/$(basename "$shard" .sqlite).sql"; done
