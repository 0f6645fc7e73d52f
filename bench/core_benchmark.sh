#!/usr/bin/env bash
# tunepar-core's speed benchmark (prints figures; nothing here is a test):
#  1. one rank against PyTorch on the CPU (bench/peers/torch_gpt.py, Debian's python3-torch with
#     OpenBLAS) training the same GPT shape (configs/models/small.toml) in fp32, 1 and N threads;
#  2. the core's GEMMs against OpenBLAS sgemm on the same shapes (build/core_gemm_bench);
#  3. TP = 2 on two ranks against one rank, on a compute-bound shape (bench/data/core-tp-bench.toml);
#  4. ZeRO-3 on four ranks (the small model) against ZeRO-3 written from torch.distributed's
#     primitives on gloo (bench/peers/torch_zero3_cpu.py; torch 1.13's FSDP refuses CPU-only).
#     On the 2-core development machine (4 ranks oversubscribed, 10 steps): 0.34 s/step against
#     6.6 s/step (0.05x; PyTorch's own single-rank step of 2 sequences takes 1.5 s there).
#  5. context parallelism on a long sequence (bench/data/core-cp-bench.toml, 1024 tokens, fused
#     attention): cp 2 on two ranks against dp 2 and tp 2 on the same two ranks, same batch.
#     On the idle 2-core development machine (two runs, bf16): cp2 2.43 / 2.12 s/step, dp2
#     3.02 / 2.22, tp2 2.36 / 1.95; activations 11.1 MB (cp2), 22.1 (dp2), 13.7 (tp2) per rank.
#   bash bench/core_benchmark.sh [STEPS]        (default 15 measured steps, after 3 warm-up steps)
# PyTorch's threads: torch.set_num_threads(T) does not bound OpenBLAS's own pool, so each peer
# run is tried with OPENBLAS_NUM_THREADS = 1 and = T and the faster kept, as a user tuning it
# would; its thread count is T either way except where noted.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-15}
bash scripts/install-deps.sh --bench
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" --target tunepar-core core_gemm_bench >/dev/null
out=bench/out/core
mkdir -p "$out"
cores=$(nproc)
mpi="mpirun --oversubscribe $([ "$(id -u)" = 0 ] && echo --allow-run-as-root)"
field() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }

echo "== 1. training step of the small model (L4 h256 a8 s128 V1024, batch 8, fp32): tunepar-core vs PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
printf '%-8s %14s %14s %8s\n' threads core_s/step torch_s/step speedup
for t in $(seq 1 "$cores"); do
  build/tunepar-core --model small --threads "$t" --steps "$steps" --warmup 3 -q -o "$out/core-t$t.json"
  best=""
  for blas in 1 "$t"; do
    OPENBLAS_NUM_THREADS=$blas /usr/bin/python3 bench/peers/torch_gpt.py --threads "$t" --steps "$steps" --warmup 3 \
      > "$out/torch-t$t-blas$blas.json"
    s=$(field "$out/torch-t$t-blas$blas.json" step_time_s)
    if [ -z "$best" ] || /usr/bin/python3 -c "import sys; sys.exit(0 if $s < $best else 1)"; then best=$s; fi
  done
  c=$(field "$out/core-t$t.json" step_time_s)
  /usr/bin/python3 -c "print(f'{$t:<8d} {$c:14.4f} {$best:14.4f} {$best/$c:7.2f}x')"
done

echo
echo "== 2. GEMMs"
build/core_gemm_bench --threads "$cores"

echo
echo "== 3. tensor parallelism on a compute-bound shape (L2 h1024 a16 s256 V4096, batch 4), 1 thread per rank"
build/tunepar-core --model bench/data/core-tp-bench.toml --threads 1 --steps 5 --warmup 2 -q -o "$out/tp1.json"
$mpi --bind-to core -np 2 build/tunepar-core --model bench/data/core-tp-bench.toml --tp 2 --threads 1 --steps 5 \
  --warmup 2 -q -o "$out/tp2.json"
/usr/bin/python3 - "$out/tp1.json" "$out/tp2.json" <<'PY'
import json, sys
one, two = (json.load(open(f)) for f in sys.argv[1:3])
print(f"1 rank: {one['step_time_s']:.3f} s/step; TP=2 on 2 ranks: {two['step_time_s']:.3f} s/step "
      f"(TP all-reduces {two['phases']['tp_comm']['max']:.3f} s): speedup {one['step_time_s'] / two['step_time_s']:.2f}x")
PY

echo
echo "== 4. ZeRO-3 (FSDP) on 4 ranks, 1 thread each: the small model, global batch 8 (2 sequences a rank), fp32"
echo "   tunepar-core --zero 3 vs bench/peers/torch_zero3_cpu.py (FSDP by hand on gloo: torch 1.13's FSDP refuses CPU)"
$mpi --bind-to none -np 4 build/tunepar-core --model small --dp 4 --zero 3 --threads 1 --steps "$steps" --warmup 3 \
  -q -o "$out/zero3.json"
OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/peers/torch_zero3_cpu.py --ranks 4 --threads 1 --steps "$steps" --warmup 3 \
  > "$out/torch-zero3.json"
/usr/bin/python3 - "$out/zero3.json" "$out/torch-zero3.json" <<'PY'
import json, sys
core, torch = (json.load(open(f)) for f in sys.argv[1:3])
c, t = core["step_time_s"], torch["step_time_s"]
gathered = core["memory"]["peak_by_category"]["gathered_weights"] / 1e6
print(f"core: {c:.3f} s/step (dp_comm {core['phases']['dp_comm']['max']:.3f} s, gathered weights {gathered:.2f} MB); "
      f"torch: {t:.3f} s/step; core/torch {c / t:.2f}x (goal <= 1.0x)")
PY

echo
echo "== 5. context parallelism on a long sequence (L2 h256 a8 s1024 V1024, batch 2, bf16, fa1), 2 ranks x 1 thread"
# bf16: the tuner's rules pair fused attention with 16-bit storage (flash_needs_16bit), so the
# model's prediction is of the layouts measured here. One sequence a micro-batch everywhere.
for layout in "--cp 2" "--dp 2" "--tp 2"; do
  name=$(echo "$layout" | tr -d ' -')
  $mpi --bind-to none -np 2 build/tunepar-core --model bench/data/core-cp-bench.toml $layout --flash-attention \
    --precision bf16 --micro-batch 1 --threads 1 --steps 3 --warmup 1 -q -o "$out/$name.json"
  build/tunepar --json predict --world 2 --model bench/data/core-cp-bench.toml --hardware local-cpu \
    --space long-context $(echo "$layout" | sed "s/--dp 2//") --mbs 1 --precision bf16 --flash > "$out/$name.predicted.json"
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
measured = {n: json.load(open(f"{out}/{n}.json")) for n in ("cp2", "dp2", "tp2")}
predicted = {n: json.load(open(f"{out}/{n}.predicted.json")) for n in ("cp2", "dp2", "tp2")}
step = {n: r["step_time_s"] for n, r in measured.items()}
model = {n: r["step_time_s"] for n, r in predicted.items()}
act = lambda r: r["memory"]["peak_by_category"]["activations"] / 1e6
print("  ".join(f"{n}: {step[n]:.3f} s/step ({act(measured[n]):.1f} MB activations), model {model[n]:.3f} s" for n in step))
print(f"cp2/dp2 measured {step['cp2'] / step['dp2']:.2f}x, predicted {model['cp2'] / model['dp2']:.2f}x; "
      f"cp2/tp2 measured {step['cp2'] / step['tp2']:.2f}x, predicted {model['cp2'] / model['tp2']:.2f}x "
      f"(predicted K/V exchange exposed: {predicted['cp2']['breakdown']['cp_comm_s'] * 1e3:.2f} ms)")
PY
