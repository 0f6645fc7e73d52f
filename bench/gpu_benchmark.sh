#!/usr/bin/env bash
# tunepar-core against PyTorch on one GPU (prints figures; nothing here is a test), on GPT-2
# small's shape (bench/data/gpt2-small.toml: L12 h768 a12 s1024 V50304, 8 sequences per step), or
# MODEL=bench/data/llama-1b.toml (a ~1B Llama-style shape: GQA, SwiGLU, rotary, RMSNorm; PyTorch
# runs torch_gpt_gpu.py --arch llama, the same maths):
#  1. tunepar-core-cuda, one rank, fp32 and bf16 (and bf16 with the fused attention, fa1: the
#     CUDA build's flash_attention_gpu.cc): step_time_s and the per-phase breakdown from its result.json;
#  2. PyTorch (bench/peers/torch_gpt_gpu.py): fp32 without TF32, bf16 autocast with the same
#     explicit attention, bf16 autocast with its fused attention (--attn sdpa); median s/step;
#  3. core_gemm_gpu_bench: the core's GEMMs against cublasGemmEx alone, per layer and overall;
#  then the table: each core run against PyTorch in the same math mode, with issue 18's goals.
#   bash bench/gpu_benchmark.sh [BUILD_DIR] [STEPS]
#     BUILD_DIR: where tunepar-core-cuda and core_gemm_gpu_bench were built (default
#       /tmp/tunepar-build, as ../shared/tools/gpu-kit/build-on-device.sh builds); the GEMM
#       benchmark is built there first when missing. STEPS: the core's measured steps (default 5).
#   env: OUT (where the files go; default bench/out/gpu), PYTHON (a python3 with CUDA PyTorch;
#     default python3, else /usr/bin/python3), TORCH_STEPS (default 10), BUDGET_S (the whole
#     script's time, default 420: each run is cut to what is left, later runs are skipped),
#     CORE_TIMEOUT, GEMM_TIMEOUT, TORCH_TIMEOUT (seconds per run: 100, 90, 60; on an H100 each
#     run takes 5-30 s, so together they stay well under the budget).
# Every run is independent: one that fails (no device, timeout, crash) is reported in the table
# as failed, with its error line, and the others go on. Files in OUT: NAME.out/.err/.rc for each
# run, core-*.json (the core's result.json), gemm.csv, machine.txt, summary.json, summary.csv.
# Exit codes: 0 every run ok, 1 some run failed or was skipped (the table says which), 2 bad usage.
set -uo pipefail
build=$(realpath -m "${1:-/tmp/tunepar-build}")
out=$(realpath -m "${OUT:-$(dirname "$0")/out/gpu}")
cd "$(dirname "$0")/.." || exit 2
steps=${2:-5}
model=${MODEL:-bench/data/gpt2-small.toml}
torch_steps=${TORCH_STEPS:-10}
budget=${BUDGET_S:-420}
for n in "$steps" "$torch_steps" "$budget"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "gpu_benchmark: '$n' is not a positive integer (STEPS, TORCH_STEPS, BUDGET_S)" >&2; exit 2; }
done
mkdir -p "$out" || { echo "gpu_benchmark: cannot create $out" >&2; exit 2; }
rm -f "$out"/*.rc "$out"/*.out "$out"/*.err "$out"/core-*.json "$out"/gemm.csv
# The gpu-kit's libraries (fmt, toml++, ...) for binaries built by build-on-device.sh.
kit_lib=/tmp/prefix/usr/lib/x86_64-linux-gnu
[ -d "$kit_lib" ] && export LD_LIBRARY_PATH=$kit_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
py=${PYTHON:-python3}
if [ -z "${PYTHON:-}" ] && ! python3 -c 'import torch' 2>/dev/null && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  py=/usr/bin/python3
fi
begin=$SECONDS

# run NAME LIMIT_S COMMAND...: stdout, stderr and exit status in $out/NAME.{out,err,rc}; the
# limit is cut to what is left of BUDGET_S ("skipped" when under 15 s are left).
run() {
  local name=$1 limit=$2 left=$((budget - (SECONDS - begin)))
  shift 2
  ((left < limit)) && limit=$left
  if ((limit < 15)); then
    echo skipped >"$out/$name.rc"
    echo "  $name: skipped (the benchmark's BUDGET_S=$budget s are spent)"
    return
  fi
  if ! command -v "$1" >/dev/null; then
    echo "not found: $1" >"$out/$name.err"
    echo 127 >"$out/$name.rc"
    echo "  $name: not found: $1"
    return
  fi
  local t0=$SECONDS rc
  timeout -k 10 "$limit" "$@" >"$out/$name.out" 2>"$out/$name.err"
  rc=$?
  echo "$rc" >"$out/$name.rc"
  if ((rc == 124 || rc == 137)); then echo "timed out after $limit s" >>"$out/$name.err"; fi
  echo "  $name: exit $rc after $((SECONDS - t0)) s"
  ((rc == 0)) || tail -n 2 "$out/$name.err" | sed 's/^/    /'
}

# The shape's value of KEY in the model file (one home for the shape: the TOML).
shape() { awk -F' *= *' -v k="$1" '$1 == k { sub(/ *#.*/, "", $2); gsub(/"/, "", $2); print $2 }' "$model"; }
batch=$(shape global_batch)

echo "== machine"
{
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  else
    echo "no nvidia-smi on this machine"
  fi
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -n 1
  if git rev-parse --git-dir >/dev/null 2>&1; then
    echo "checkout $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)'), build $build"
  else
    echo "checkout without git metadata, build $build"
  fi
} | tee "$out/machine.txt"

echo "== 1. tunepar-core-cuda, one rank, $steps measured steps after 2"
core=$build/tunepar-core-cuda
timeout_core=${CORE_TIMEOUT:-100}
for p in fp32 bf16; do
  run "core-$p" "$timeout_core" "$core" --model "$model" --precision "$p" --micro-batch "$batch" --micro-batches 1 \
    --steps "$steps" --warmup 2 -q -o "$out/core-$p.json"
done
run core-bf16-fused "$timeout_core" "$core" --model "$model" \
  --layout "tp1-pp1-dp1-mbs$batch-nmb1-bf16-zero0-rcnone-sp0-vpp1-fa1" --steps "$steps" --warmup 2 -q \
  -o "$out/core-bf16-fused.json"

echo "== 2. GEMMs: the core's against cublasGemmEx alone"
if [ ! -x "$build/core_gemm_gpu_bench" ] && [ -f "$build/CMakeCache.txt" ]; then
  run gemm-build 300 cmake --build "$build" -j"$(nproc)" --target core_gemm_gpu_bench
fi
run gemm "${GEMM_TIMEOUT:-90}" "$build/core_gemm_gpu_bench" --csv "$out/gemm.csv"
[ -s "$out/gemm.out" ] && sed 's/^/  /' "$out/gemm.out"

echo "== 3. PyTorch ($py), $torch_steps measured steps after 3"
peer=(bench/peers/torch_gpt_gpu.py --layers "$(shape layers)" --hidden "$(shape hidden)" --heads "$(shape heads)"
  --seq "$(shape seq_len)" --vocab "$(shape vocab)" --batch "$batch" --steps "$torch_steps" --warmup 3)
if [ "$(shape mlp)" = swiglu ]; then  # the Llama-style model: the same GQA, SwiGLU, rotary, RMSNorm, no biases
  peer+=(--arch llama --kv-heads "$(shape kv_heads)" --ffn "$(shape ffn_hidden)")
fi
timeout_torch=${TORCH_TIMEOUT:-60}
run torch-fp32 "$timeout_torch" "$py" "${peer[@]}" --dtype fp32
run torch-bf16 "$timeout_torch" "$py" "${peer[@]}" --dtype bf16
run torch-bf16-sdpa "$timeout_torch" "$py" "${peer[@]}" --dtype bf16 --attn sdpa

echo "== tunepar-core against PyTorch (total $((SECONDS - begin)) s)"
python3 - "$out" <<'PY'
import csv, json, os, sys

out = sys.argv[1]
def text(name, ext):
    path = os.path.join(out, f"{name}.{ext}")
    return open(path).read().strip() if os.path.exists(path) else ""

def result(name):
    """(data, note): data when the run ended ok, else None and why not."""
    rc = text(name, "rc") or "not run"
    raw = text(name, "json") if name.startswith("core") else (text(name, "out").splitlines() or [""])[-1]
    try:
        data = json.loads(raw)
    except ValueError:
        data = {}
    if rc == "0" and "step_time_s" in data:
        return data, ""
    if rc in ("skipped", "not run"):
        return None, rc
    lines = text(name, "err").splitlines() or text(name, "out").splitlines() or [""]
    why = data.get("error") or (data.get("status") if data.get("status") != "ok" else "") or lines[-1]
    return None, f"failed (exit {rc}): {why}"[:160]

runs = {n: result(n) for n in ["core-fp32", "core-bf16", "core-bf16-fused", "torch-fp32", "torch-bf16", "torch-bf16-sdpa"]}
rows = [  # what, run, the PyTorch run in the same math mode, goal (max ratio), goal's words
    ("tunepar-core fp32", "core-fp32", "torch-fp32", 1.0, "<= 1.0x PyTorch fp32 (no TF32)"),
    ("tunepar-core bf16, batched-GEMM attention", "core-bf16", "torch-bf16", 1.0, "<= 1.0x PyTorch bf16 explicit attention"),
    ("tunepar-core bf16, fused attention (fa1)", "core-bf16-fused", "torch-bf16-sdpa", 1.2, "<= 1.2x PyTorch fused (SDPA), issue 29"),
    ("PyTorch fp32 (no TF32), explicit attention", "torch-fp32", None, None, ""),
    ("PyTorch bf16 autocast, explicit attention", "torch-bf16", None, None, ""),
    ("PyTorch bf16 autocast, fused SDPA attention", "torch-bf16-sdpa", None, None, ""),
]
table = []
print(f"| what | s/step | ratio to PyTorch, same math mode | goal |\n|---|---|---|---|")
for what, run, peer, goal, goal_text in rows:
    data, note = runs[run]
    row = {"what": what, "run": run, "s_per_step": data["step_time_s"] if data else None, "note": note,
           "peer": peer, "ratio": None, "goal": goal_text, "goal_met": None}
    if data and peer and runs[peer][0]:
        row["ratio"] = data["step_time_s"] / runs[peer][0]["step_time_s"]
        row["goal_met"] = row["ratio"] <= goal
    seconds = f"{row['s_per_step']:.4f}" if data else note
    ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else ("" if not peer else "n/a")
    verdict = "" if row["goal_met"] is None else (" (met)" if row["goal_met"] else " (not met)")
    print(f"| {what} | {seconds} | {ratio} | {goal_text}{verdict} |")
    table.append(row)

print("\ntunepar-core per phase (s/step, mean over ranks), peak memory, TFLOP/s:")
for run in ["core-fp32", "core-bf16", "core-bf16-fused"]:
    data, note = runs[run]
    if not data:
        print(f"  {run}: {note}")
        continue
    phases = ", ".join(f"{k} {v['mean']:.4f}" for k, v in data.get("phases", {}).items())
    peak = data.get("memory", {}).get("peak_bytes") or 0
    print(f"  {run}: step {data['step_time_s']:.4f}: {phases}; peak {peak / 1e9:.2f} GB; "
          f"{data.get('tflops_per_gpu', 0):.1f} TFLOP/s; loss {data.get('loss', ['?'])[0]} -> {data.get('loss', ['?'])[-1]}")
for run in ["torch-fp32", "torch-bf16", "torch-bf16-sdpa"]:
    data, note = runs[run]
    if data:
        print(f"  {run}: {data['step_time_s']:.4f} s/step, peak {data.get('peak_memory_gb', 0):.2f} GB, "
              f"loss {data['loss'][0]:.4f} -> {data['loss'][-1]:.4f}")
gemm = [l for l in text("gemm", "out").splitlines() if l.startswith("summary")]
gemm_note = "" if gemm else result("gemm")[1] if text("gemm", "rc") != "0" else "no summary printed"
print("\nGEMMs (core_gemm_gpu_bench):", *(gemm or [gemm_note or text("gemm", "out")]), sep="\n  ")
summary = {"machine": text("machine", "txt").splitlines(), "table": table, "gemm_summary": gemm or [gemm_note],
           "runs": {n: {"ok": d is not None, "note": note, "result": d} for n, (d, note) in runs.items()}}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(table[0].keys()))
    w.writeheader()
    w.writerows(table)
PY
echo "files in $out"
for f in "$out"/*.rc; do [ "$(cat "$f")" = 0 ] || exit 1; done
exit 0
