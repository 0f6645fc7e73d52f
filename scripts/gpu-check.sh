#!/usr/bin/env bash
# tunepar-core's GPU checks, for a machine with a GPU (nothing here runs in CI, which has none):
#  1. core_ops_cuda_test: every op of ops.h on the GPU against double-precision loops;
#  2. the tiny model's first step on the GPU against the CPU build: every gradient (fp32: 1e-5
#     relative to each tensor's largest gradient; bf16: see BF16_TOL below) and both steps' losses
#     (the second step's loss checks the AdamW update; the weights themselves are not compared: a
#     gradient that is zero in exact arithmetic, like the key bias's, is rounding noise that
#     AdamW's first step scales up to lr on either side);
#  3. two ranks on one GPU with --comm mpi-staged, TP = 2 and PP = 2 (and PP = 2 in bf16: 16-bit
#     transfers), TP = 2 with sequence parallelism (fp32, and bf16: the stream's rows all-gathered
#     as 16-bit numbers), against the one-rank GPU run
#     (the same tolerance as 2: the CPU tests hold every layout exact against one rank, the GPU
#     sums in another order);
#  4. --comm nccl on one rank (several ranks on one GPU are refused by NCCL: said so, exit 2;
#     also with sequence parallelism);
#  5. the phases from events: none negative, together no more than the step (staged DP = 2, and
#     nccl on one rank);
#  6. with two or more GPUs: --comm nccl with TP = 2, PP = 2 and DP = 2 (the bucket all-reduce on
#     the communication stream) against one rank, one rank per GPU;
#  7. fused attention (fa1) on sequences of 130 tokens (three tiles, the last partial): the GPU
#     against the CPU build's fa1 (fp32: CUDA-core kernels; bf16: tensor cores), as in 2, and the
#     attention kernels' milliseconds with and without fa1 on GPT-2 small's attention shape
#     (bf16, T = 1024, hs 64; TUNEPAR_CORE_PROFILE=1) for the comparison with PyTorch's SDPA.
#  8. tunepar search --backend local end to end at world 1 and 2 on one GPU (budget $E2E_BUDGET, 6),
#     report --shap and calibrate --from on each study (see the step).
#  9. the Llama-style model (GQA, SwiGLU, rotary, RMSNorm, no biases, untied): tiny-llama's first step
#     on the GPU against the CPU build (fp32, bf16; unfused and fused attention), and fused attention
#     on 130 tokens (three tiles; the GQA dK/dV kernels), as in 2 and 7.
#  c. context parallelism (cp 2: the ring attention block kernels, flash_attention_gpu.cc) on
#     200-token sequences (100 rows a rank: two tiles, a chunk boundary inside the first), MHA and
#     GQA, fp32 and bf16, cp 2 and cp 2 with TP = 2 (two and four ranks on one GPU, --comm
#     mpi-staged), against the one-rank GPU fa1 run and against the CPU build's cp 2 (the same
#     ring and tiles), as in 2; with two or more GPUs also --comm nccl (the ring as one NCCL group
#     a step), one rank per GPU.
# Needs tunepar, tunepar-core and tunepar-core-cuda (and core_ops_cuda_test) in BUILD_DIR.
#   bash scripts/gpu-check.sh [BUILD_DIR]      (default /tmp/tunepar-build; writes under ${OUT:-/tmp/gpu-check})
set -uo pipefail
B=${1:-/tmp/tunepar-build}
O=${OUT:-/tmp/gpu-check}
mkdir -p "$O"
MPI="mpirun --oversubscribe $([ "$(id -u)" = 0 ] && echo --allow-run-as-root) -x LD_LIBRARY_PATH"
failed=0
step() { echo; echo "== $*"; }
want() { [[ "${STEPS:-123456789c}" == *$1* ]]; }  # STEPS=8: only the end-to-end search
compare() {  # compare DIR_A DIR_B FILE TOL WHAT
  python3 - "$@" <<'PY'
import json, sys
a_dir, b_dir, name, tol, what = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
a = json.load(open(f"{a_dir}/{name}")); b = json.load(open(f"{b_dir}/{name}"))
worst, bad = 0.0, []
for k in sorted(a):
    x, y = a[k], b[k]
    scale = max(max(abs(v) for v in x), 1e-30)
    err = max(abs(u - v) for u, v in zip(x, y)) / scale
    worst = max(worst, err)
    if err > tol or len(x) != len(y): bad.append(f"{k} {err:.2e}")
print(f"{what}: {name}: {len(a)} tensors, worst max|diff|/max|value| {worst:.2e} (tolerance {tol:g})" + (": FAIL " + ", ".join(bad) if bad else ": ok"))
sys.exit(1 if bad else 0)
PY
}
compare_losses() {  # compare_losses DIR_A DIR_B TOL WHAT
  python3 - "$@" <<'PY'
import json, sys
a, b = (json.load(open(f"{d}/result.json"))["loss"] for d in sys.argv[1:3])
tol, what = float(sys.argv[3]), sys.argv[4]
err = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"{what}: losses {a} vs {b}: worst relative {err:.2e} (tolerance {tol:g}): " + ("ok" if err <= tol and len(a) == len(b) else "FAIL"))
sys.exit(0 if err <= tol and len(a) == len(b) else 1)
PY
}
losses() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('status'), 'loss', r.get('loss'), r.get('error',''))" "$@"; }

if want 1; then
step "1. ops on the GPU against loops"
"$B/core_ops_cuda_test" 2>&1 | tail -n 25 | tee "$O/ops.log" || failed=1
fi

run() {  # run DIR RANKS BINARY ARGS...
  local dir=$1 ranks=$2 bin=$3; shift 3
  rm -rf "$dir"; mkdir -p "$dir"
  if [ "$ranks" = 1 ]; then "$bin" "$@" --steps 2 --warmup 0 --dump "$dir" -o "$dir/result.json" -q 2> "$dir/stderr"
  else $MPI -np "$ranks" "$bin" "$@" --steps 2 --warmup 0 --dump "$dir" -o "$dir/result.json" -q 2> "$dir/stderr"; fi
  local rc=$?
  [ $rc = 0 ] || { echo "$dir: exit $rc: $(tail -n 3 "$dir/stderr")"; failed=1; }
  [ -f "$dir/result.json" ] && losses "$dir/result.json" "$dir"
  return $rc
}

BF16_TOL=0.05  # bf16: both sides multiply the same 16-bit values with fp32 accumulation, in another order; a
               # last-bit fp32 difference flips a bf16 rounding (2^-8 relative) now and then, and a step has
               # dozens of roundings in sequence
want 2 && for precision in fp32 bf16; do
  tol=1e-5 ltol=1e-6; [ $precision = bf16 ] && tol=$BF16_TOL ltol=1e-4
  step "2. tiny model, $precision: GPU against CPU"
  run "$O/cpu-$precision" 1 "$B/tunepar-core" --model tiny --precision $precision
  run "$O/gpu-$precision" 1 "$B/tunepar-core-cuda" --model tiny --precision $precision
  compare "$O/cpu-$precision" "$O/gpu-$precision" gradients.json $tol "GPU vs CPU $precision" || failed=1
  compare_losses "$O/cpu-$precision" "$O/gpu-$precision" $ltol "GPU vs CPU $precision" || failed=1
done

if want 3; then
step "3. two ranks on one GPU, --comm mpi-staged"
single_rank_args() {  # what a layout's one-rank baseline shares with it
  echo "$1" | grep -oE -- '--(micro-batches|precision) [a-z0-9]+' | tr '\n' ' '
}
# bf16 PP = 2: the activations and their gradients cross stages as 16-bit numbers.
for layout in "--tp 2" "--pp 2 --micro-batches 2" "--dp 2 --zero 1" "--pp 2 --micro-batches 2 --precision bf16" \
              "--tp 2 --sequence-parallel" "--tp 2 --sequence-parallel --precision bf16"; do
  name=$(echo "$layout" | tr -d ' -')
  tol=1e-5 ltol=1e-6; case "$layout" in *bf16*) tol=$BF16_TOL ltol=1e-4 ;; esac
  run "$O/one-$name" 1 "$B/tunepar-core-cuda" --model tiny --comm mpi-staged $(single_rank_args "$layout")
  run "$O/staged-$name" 2 "$B/tunepar-core-cuda" --model tiny --comm mpi-staged $layout
  compare "$O/one-$name" "$O/staged-$name" gradients.json $tol "staged $layout vs one rank" || failed=1
  compare_losses "$O/one-$name" "$O/staged-$name" $ltol "staged $layout vs one rank" || failed=1
done

fi

if want 4; then
step "4. --comm nccl"
run "$O/nccl-1" 1 "$B/tunepar-core-cuda" --model tiny --comm nccl
compare "$O/one-tp2" "$O/nccl-1" gradients.json 1e-6 "nccl one rank vs staged one rank" || failed=1
rm -rf "$O/nccl-2"; mkdir -p "$O/nccl-2"
$MPI -np 2 "$B/tunepar-core-cuda" --model tiny --tp 2 --comm nccl --steps 1 --warmup 0 -o "$O/nccl-2/result.json" -q 2> "$O/nccl-2/stderr"
echo "two ranks, one GPU, --comm nccl: exit $? ($(tail -n 1 "$O/nccl-2/stderr"))"
$MPI -np 2 "$B/tunepar-core-cuda" --model tiny --tp 2 --sequence-parallel --comm nccl --steps 1 --warmup 0 \
  -o "$O/nccl-2/result-sp.json" -q 2> "$O/nccl-2/stderr-sp"
echo "two ranks, one GPU, --comm nccl --sequence-parallel: exit $? ($(tail -n 1 "$O/nccl-2/stderr-sp"))"

fi

want 5 && step "5. phases from events"
check_phases() {  # check_phases RESULT_JSON WHAT
  python3 - "$@" <<'PY'
import json, sys
r, what = json.load(open(sys.argv[1])), sys.argv[2]
phases = {k: v["mean"] for k, v in r["phases"].items()}
# Phases are means over the measured steps (step_time_s is their median: a slow first step would
# put the phases above it), so they are held against the mean step.
total, step = sum(phases.values()), sum(r["step_times_s"]) / len(r["step_times_s"])
ok = r["status"] == "ok" and min(phases.values()) >= 0 and total <= 1.1 * step
print(f"{what}: mean step {step:.4f} s, phases " + ", ".join(f"{k} {v:.4f}" for k, v in phases.items()) + (": ok" if ok else ": FAIL"))
sys.exit(0 if ok else 1)
PY
}
if want 5; then
rm -rf "$O/phases"; mkdir -p "$O/phases"
$MPI -np 2 "$B/tunepar-core-cuda" --model small --dp 2 --comm mpi-staged --steps 3 --warmup 1 -o "$O/phases/staged.json" -q 2> "$O/phases/staged.err"
check_phases "$O/phases/staged.json" "staged DP = 2" || failed=1
"$B/tunepar-core-cuda" --model small --comm nccl --steps 3 --warmup 1 -o "$O/phases/nccl.json" -q 2> "$O/phases/nccl.err"
check_phases "$O/phases/nccl.json" "nccl one rank" || failed=1
fi

gpus=$(nvidia-smi -L 2> /dev/null | wc -l)
if want 6 && [ "${gpus:-0}" -ge 2 ]; then
  step "6. --comm nccl, one rank per GPU ($gpus GPUs)"
  for layout in "--tp 2" "--pp 2 --micro-batches 2" "--dp 2" "--dp 2 --zero 1" "--pp 2 --micro-batches 2 --precision bf16"; do
    name=$(echo "$layout" | tr -d ' -')
    tol=1e-5 ltol=1e-6; case "$layout" in *bf16*) tol=$BF16_TOL ltol=1e-4 ;; esac
    [ -d "$O/one-$name" ] || run "$O/one-$name" 1 "$B/tunepar-core-cuda" --model tiny --comm nccl $(single_rank_args "$layout")
    run "$O/nccl-$name" 2 "$B/tunepar-core-cuda" --model tiny --comm nccl $layout
    compare "$O/one-$name" "$O/nccl-$name" gradients.json $tol "nccl $layout vs one rank" || failed=1
    compare_losses "$O/one-$name" "$O/nccl-$name" $ltol "nccl $layout vs one rank" || failed=1
  done
  $MPI -np 2 "$B/tunepar-core-cuda" --model small --dp 2 --comm nccl --steps 3 --warmup 1 -o "$O/phases/nccl-dp2.json" -q 2> "$O/phases/nccl-dp2.err"
  check_phases "$O/phases/nccl-dp2.json" "nccl DP = 2 (dp_comm: the exposed part)" || failed=1
elif want 6; then
  step "6. skipped: one GPU (--comm nccl with one rank per GPU needs two)"
fi

if want 7; then
step "7. fused attention (fa1)"
printf 'name = "tiny-130"\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 130\nvocab = 256\nglobal_batch = 8\n' > "$O/tiny-130.toml"
for precision in fp32 bf16; do
  tol=1e-5 ltol=1e-6; [ $precision = bf16 ] && tol=$BF16_TOL ltol=1e-4
  run "$O/cpu-fa1-$precision" 1 "$B/tunepar-core" --model "$O/tiny-130.toml" --precision $precision --flash-attention
  run "$O/gpu-fa1-$precision" 1 "$B/tunepar-core-cuda" --model "$O/tiny-130.toml" --precision $precision --flash-attention
  compare "$O/cpu-fa1-$precision" "$O/gpu-fa1-$precision" gradients.json $tol "fa1 GPU vs CPU $precision" || failed=1
  compare_losses "$O/cpu-fa1-$precision" "$O/gpu-fa1-$precision" $ltol "fa1 GPU vs CPU $precision" || failed=1
done
printf 'name = "gpt2-attention"\nlayers = 2\nhidden = 768\nheads = 12\nseq_len = 1024\nvocab = 1024\nglobal_batch = 8\n' > "$O/gpt2-attention.toml"
for fa in "" "--flash-attention"; do
  TUNEPAR_CORE_PROFILE=1 "$B/tunepar-core-cuda" --model "$O/gpt2-attention.toml" --precision bf16 --micro-batches 1 \
    --steps 5 --warmup 2 $fa -o "$O/attention${fa:+-fa1}.json" -q 2> "$O/attention${fa:+-fa1}.profile"
  echo "GPT-2 small attention, bf16, B 8, T 1024 ${fa:-(fa0)}: exit $?; attention kernels (ms, all steps):"
  grep -iE "attention|softmax|gemm" "$O/attention${fa:+-fa1}.profile" | head -n 8
done
fi

# 8. The product's own path: tunepar search --backend local measuring tunepar-core-cuda trials, at
# world 1 and at world 2 on this one GPU (two ranks staged through the host), then report --shap and
# calibrate --from on the study. Every trial must end ok, or oom only where the performance model
# predicts the layout not to fit; none may be recorded by the runner's safety net (a core that
# wrote its result and did not exit 10 s later); a calibration that refuses its fit (exit 10) is
# reported, not a failure.
e2e_trials() {  # e2e_trials STORE STUDY WORLD: check the study's trials; print each with its costs
  "$B/tunepar" --store "$1" --json show "$2" --all > "$O/e2e/show-w$3.json" || { echo "show failed"; return 1; }
  python3 - "$O/e2e/show-w$3.json" "$3" <<'PY'
import json, sys
j, world, bad = json.load(open(sys.argv[1])), sys.argv[2], 0
for t in j["trials"]:
    d = t.get("details") or {}
    # The cap the trial ran under (a staged rank's share of the GPU, core/memory.h ShareOfDevice).
    fits = (t.get("predicted_memory_bytes") or 0) <= (d.get("memory", {}).get("cap_bytes") or float("inf"))
    ok = t["status"] == "ok" or (t["status"] == "oom" and not fits)
    netted = "ended_after_result" in d
    print(f"world {world} trial {t['number']}: {t['status']} {t['layout']} step {t.get('step_time_s')} s, "
          f"start-up {d.get('startup', {}).get('total_s')} s, comm {d.get('comm')}" +
          ("" if ok else f": FAIL ({t.get('message')})") + (": FAIL (recorded by the safety net)" if netted else ""))
    bad += (not ok) + netted
print(f"world {world}: {len(j['trials'])} trials, {bad} failing the check")
sys.exit(1 if bad or not j["trials"] else 0)
PY
}
E2E_HARDWARE=${E2E_HARDWARE:-dgx-h100}  # (local-cpu with E2E_CORE=$B/tunepar-core: the same check on a CPU)
want 8 && step "8. tunepar search --backend local end to end (one GPU)"
want 8 && rm -rf "$O/e2e" && mkdir -p "$O/e2e"
want 8 && for world in 1 2; do
  start=$(date +%s)
  "$B/tunepar" --store "$O/e2e/store" search --backend local --world $world --model ${E2E_MODEL:-small} \
    --hardware "$E2E_HARDWARE" ${E2E_CORE:+--core "$E2E_CORE"} --budget ${E2E_BUDGET:-6} --steps 3 --warmup 1 \
    --timeout 120 --node-id gpu > "$O/e2e/search-w$world.out" 2>&1
  rc=$?
  echo "search world $world: exit $rc in $(( $(date +%s) - start )) s; $(tail -n 2 "$O/e2e/search-w$world.out" | head -n 1)"
  [ $rc = 0 ] || { tail -n 5 "$O/e2e/search-w$world.out"; failed=1; }
  study=$("$B/tunepar" --store "$O/e2e/store" --json list | python3 -c "import json,sys; print([s['study'] for s in json.load(sys.stdin) if s['world'] == $world][0])")
  e2e_trials "$O/e2e/store" "$study" $world || failed=1
  "$B/tunepar" --store "$O/e2e/store" report "$study" --shap > "$O/e2e/report-w$world.txt" 2>&1 \
    || { echo "report --shap world $world failed: $(tail -n 1 "$O/e2e/report-w$world.txt")"; failed=1; }
  grep -E "^(start-up|communication)" "$O/e2e/report-w$world.txt"
  "$B/tunepar" --store "$O/e2e/store" calibrate --from "$study" --hardware "$E2E_HARDWARE" -o "$O/e2e/fitted-w$world.toml" \
    > "$O/e2e/calibrate-w$world.out" 2>&1
  rc=$?
  case $rc in
    0) echo "calibrate world $world: fitted ($(grep -m1 'predicted vs measured step time' "$O/e2e/calibrate-w$world.out"))" ;;
    10) echo "calibrate world $world: fit refused (exit 10, reported): $(tail -n 1 "$O/e2e/calibrate-w$world.out")" ;;
    *) echo "calibrate world $world: exit $rc: $(tail -n 2 "$O/e2e/calibrate-w$world.out")"; failed=1 ;;
  esac
done

if want 9; then
step "9. the Llama-style model: GPU against CPU"
cat > "$O/llama-130.toml" <<'TOML'
name = "llama-130"
layers = 2
hidden = 128
heads = 4
kv_heads = 2
seq_len = 130
vocab = 256
global_batch = 2
mlp = "swiglu"
ffn_hidden = 256
positions = "rotary"
norm = "rmsnorm"
tied_embeddings = false
linear_biases = false
TOML
for model in tiny-llama "$O/llama-130.toml"; do
  for precision in fp32 bf16; do
    for fa in "" --flash-attention; do
      [ "$model" != tiny-llama ] && [ -z "$fa" ] && continue
      tol=1e-5 ltol=1e-6; [ $precision = bf16 ] && tol=$BF16_TOL ltol=1e-4
      name="llama-$(basename "$model" .toml)-$precision${fa:+-fa1}"
      run "$O/cpu-$name" 1 "$B/tunepar-core" --model "$model" --precision $precision $fa
      run "$O/gpu-$name" 1 "$B/tunepar-core-cuda" --model "$model" --precision $precision $fa
      compare "$O/cpu-$name" "$O/gpu-$name" gradients.json $tol "GPU vs CPU $name" || failed=1
      compare_losses "$O/cpu-$name" "$O/gpu-$name" $ltol "GPU vs CPU $name" || failed=1
    done
  done
done
fi

if want c; then
step "c. context parallelism (cp 2): GPU against its one-rank run and the CPU build's cp 2"
printf 'name = "long"\nlayers = 2\nhidden = 64\nheads = 4\nseq_len = 200\nvocab = 256\nglobal_batch = 4\n' > "$O/long.toml"
printf 'name = "long-llama"\nlayers = 2\nhidden = 64\nheads = 4\nkv_heads = 2\nseq_len = 200\nvocab = 256\nglobal_batch = 4\nmlp = "swiglu"\nffn_hidden = 128\npositions = "rotary"\nnorm = "rmsnorm"\ntied_embeddings = false\nlinear_biases = false\n' > "$O/long-llama.toml"
for model in long long-llama; do
  for precision in fp32 bf16; do
    tol=1e-5 ltol=1e-6; [ $precision = bf16 ] && tol=$BF16_TOL ltol=1e-4
    args="--model $O/$model.toml --precision $precision --flash-attention --micro-batches 2"
    run "$O/cp-one-$model-$precision" 1 "$B/tunepar-core-cuda" $args --comm mpi-staged
    for layout in "--cp 2" "--cp 2 --tp 2"; do
      name="cp-$model-$precision-$(echo "$layout" | tr -d ' -')"
      ranks=2; [[ "$layout" == *tp* ]] && ranks=4
      run "$O/$name" $ranks "$B/tunepar-core-cuda" $args --comm mpi-staged $layout
      compare "$O/cp-one-$model-$precision" "$O/$name" gradients.json $tol "staged $model $precision $layout vs one rank" || failed=1
      compare_losses "$O/cp-one-$model-$precision" "$O/$name" $ltol "staged $model $precision $layout vs one rank" || failed=1
    done
    run "$O/cpu-cp-$model-$precision" 2 "$B/tunepar-core" $args --comm mpi --cp 2
    compare "$O/cpu-cp-$model-$precision" "$O/cp-$model-$precision-cp2" gradients.json $tol "cp 2 $model $precision GPU vs CPU" || failed=1
    compare_losses "$O/cpu-cp-$model-$precision" "$O/cp-$model-$precision-cp2" $ltol "cp 2 $model $precision GPU vs CPU" || failed=1
    if [ "${gpus:-0}" -ge 2 ]; then
      run "$O/cp-nccl-$model-$precision" 2 "$B/tunepar-core-cuda" $args --comm nccl --cp 2
      compare "$O/cp-one-$model-$precision" "$O/cp-nccl-$model-$precision" gradients.json $tol "nccl $model $precision --cp 2 vs one rank" || failed=1
      compare_losses "$O/cp-one-$model-$precision" "$O/cp-nccl-$model-$precision" $ltol "nccl $model $precision --cp 2 vs one rank" || failed=1
    fi
  done
done
[ "${gpus:-0}" -ge 2 ] || echo "(--comm nccl with cp 2 skipped: one GPU; NCCL refuses two ranks on one device)"
fi

echo
[ $failed = 0 ] && echo "gpu-check: all passed" || echo "gpu-check: FAILED (see above)"
exit $failed
