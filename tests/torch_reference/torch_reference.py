#!/usr/bin/python3
"""tunepar-core's single-rank training step checked against PyTorch (issue 18), as llm.c does.

Runs one step of tunepar-core (one rank; fp32, or its fp64 build) with --dump, builds the same
model in PyTorch with the dumped initial weights, and runs it on the dumped batch: the loss and
every gradient must match. The model is the one the result's "model" names (family_of): a GPT
(torch_gpt.GPT from bench/peers/, the CPU speed peer) or a Llama-style model (torch_llama.py,
Meta's Llama 3 transcribed; the core's qkv.w is split into wq, wk, wv and its fc.w into w1, w3 to
load, and their gradients and updates joined back to compare). Then
torch.optim.AdamW (with clip_grad_norm_) is applied to the core's own gradients: its update must
match the core's, and the loss of the next step from there (a second run of the core) too.
Every layout of the core is exact against its single-rank run (tests/core_test.cc); this checks
the single-rank run's own definition against an implementation no one here wrote.

    /usr/bin/python3 tests/torch_reference/torch_reference.py --core build/tunepar-core
    /usr/bin/python3 tests/torch_reference/torch_reference.py --core build/tunepar-core-fp64 --dtype float64
    /usr/bin/python3 tests/torch_reference/torch_reference.py --core build/tunepar-core --family llama \
        --model configs/models/tiny-llama.toml -- --micro-batches 2

Element x of a tensor passes when |x - x_torch| <= rtol |x_torch| + floor:
  gradients: floor = 1e-6 max |g_torch| over the tensor (fp32). Each gradient is a sum over the
    batch's tokens of terms of about the tensor's scale; in fp32 such a sum is off by about
    sqrt(n) 6e-8 of that scale (measured: up to 5e-7), so an element that cancels to near zero is
    only as exact as the tensor's scale, whatever its own size.
  AdamW's update (w_after - w_before): floor = 2 ulps of the tensor's largest weight. The update is
    about lr = 3e-4, so the rounding of a weight of 1 (6e-8) is already 2e-4 of it.

Exit codes: 0 all match; 1 a mismatch (the failing tensors are named); 2 bad input (the core
failed, the dumps do not describe the model); 77 python3-torch is not installed, or --family llama
and the core does not describe its architecture yet (ctest: skipped).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("torch_reference: SKIPPED: python3-torch is not installed (scripts/install-deps.sh installs it)",
          file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "peers"))
import torch_gpt  # noqa: E402  (the model of bench/peers: token + position embeddings, pre-LN blocks)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_llama  # noqa: E402  (Meta's Llama 3 transcribed: GQA, rotary, SwiGLU, RMSNorm, untied)

# (rtol, floor) as above: gradients' floor as a fraction of the tensor's largest gradient, the
# update's in ulps of its largest weight. fp32: the bounds. fp64 (tunepar-core-fp64
# against PyTorch in float64): measured within 4e-13 (gradients) and 5e-14 (updates); 1e-9
# still leaves room while every definitional change tried moved something by more than 1e-6.
TOLERANCES = {
    "float32": {"loss": 1e-5, "gradients": (1e-4, 1e-6), "updates": (1e-4, 2)},
    "float64": {"loss": 1e-12, "gradients": (1e-9, 1e-12), "updates": (1e-9, 2)},
}
# tunepar-core's optimiser (runner/core/README.md): AdamW with decoupled weight decay on matrices.
kBetas, kEps, kWeightDecay, kClip = (0.9, 0.95), 1e-8, 0.1, 1.0


class BadInput(Exception):
    pass


class ReferenceGPT(torch_gpt.GPT):
    """torch_gpt.GPT with tunepar-core's two heads: tied to the token embedding, or its own (V, C)."""

    def __init__(self, model):
        L, C, NH, T, V = (model[k] for k in ("layers", "hidden", "heads", "seq_len", "vocab"))
        if model["ffn_hidden"] != 4 * C:
            raise BadInput(f"the model's MLP width {model['ffn_hidden']} is not 4 x hidden, as torch_gpt's is")
        super().__init__(L, C, NH, T, V)
        self.lm_head = None if model["tied_embeddings"] else nn.Parameter(torch.empty(V, C))

    def forward(self, tokens, targets):
        if self.lm_head is None:
            return super().forward(tokens, targets)
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = self.lnf(x) @ self.lm_head.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def parameters_by_core_name(model):
    """tunepar-core's tensor names (runner/core/parameters.cc) -> the PyTorch parameters, each a
    list whose concatenation along rows is the core's tensor (one parameter for the GPT)."""
    named = {"wte": [model.wte.weight], "wpe": [model.wpe.weight], "lnf.w": [model.lnf.weight],
             "lnf.b": [model.lnf.bias]}
    if model.lm_head is not None:
        named["lm_head"] = [model.lm_head]
    for l, block in enumerate(model.blocks):
        for core, module in (("ln1", block.ln1), ("qkv", block.qkv), ("attproj", block.attproj),
                             ("ln2", block.ln2), ("fc", block.fc), ("fcproj", block.fcproj)):
            named[f"h{l}.{core}.w"] = [module.weight]
            named[f"h{l}.{core}.b"] = [module.bias]
    return named


def llama_parameters_by_core_name(model):
    """tunepar-core's tensor names of a Llama-style model -> Meta's parameters (plan 33 section 6):
    the core's qkv.w is [wq (a d rows) | wk (g d) | wv (g d)] and its fc.w [w1, the gate (F rows) |
    w3, the up projection (F)]; no biases, no position table, RMSNorm weights only."""
    named = {"wte": [model.tok_embeddings.weight], "lnf.w": [model.norm.weight], "lm_head": [model.output.weight]}
    for l, block in enumerate(model.layers):
        attention, mlp = block.attention, block.feed_forward
        named[f"h{l}.ln1.w"] = [block.attention_norm.weight]
        named[f"h{l}.qkv.w"] = [attention.wq.weight, attention.wk.weight, attention.wv.weight]
        named[f"h{l}.attproj.w"] = [attention.wo.weight]
        named[f"h{l}.ln2.w"] = [block.ffn_norm.weight]
        named[f"h{l}.fc.w"] = [mlp.w1.weight, mlp.w3.weight]
        named[f"h{l}.fcproj.w"] = [mlp.w2.weight]
    return named


def joined(parts, of=lambda p: p):
    """The core's tensor from its PyTorch parts (row blocks of row-major matrices: flat concatenation)."""
    return torch.cat([of(p).detach().reshape(-1) for p in parts])


def split_into(parts, values):
    """Copies the core's flat values into its PyTorch parts, in row order."""
    if values.numel() != sum(p.numel() for p in parts):
        raise BadInput(f"{values.numel()} values in the dump, {sum(p.numel() for p in parts)} in the model")
    offset = 0
    for p in parts:
        p.copy_(values[offset:offset + p.numel()].view(p.shape))
        offset += p.numel()


def load_weights(params, tensors, dtype):
    """Our matrices are (out, in) row-major, as nn.Linear's and nn.Embedding's weights are."""
    if set(params) != set(tensors):
        raise BadInput(f"the dump's tensors differ from the model's: {sorted(set(params) ^ set(tensors))}")
    with torch.no_grad():
        for name, parts in params.items():
            try:
                split_into(parts, torch.tensor(tensors[name], dtype=dtype))
            except BadInput as e:
                raise BadInput(f"{name}: {e}")


def compare(label, ours, theirs_by_name, rtol, floors):
    """ours: {name: values} from tunepar-core; theirs_by_name: {name: tensor} from PyTorch; floors:
    {name: absolute error allowed}. Prints one line per tensor; returns the names that fail."""
    print(f"{label}: |ours - torch| <= {rtol:g} |torch| + floor (rel err: where the relative bound is the larger)")
    print(f"  {'tensor':<14} {'values':>8} {'max |torch|':>12} {'floor':>10} {'max abs err':>12} {'max rel err':>12} "
          f"{'err / bound':>12}")
    failing = []
    worst = [0.0, 0.0, 0.0]
    for name, tensor in theirs_by_name.items():
        theirs = tensor.detach().reshape(-1).double()
        mine = torch.tensor(ours[name], dtype=torch.float64)
        err, floor = (mine - theirs).abs(), floors[name]
        large = rtol * theirs.abs() >= floor
        rel = (err[large] / theirs.abs()[large]).max().item() if large.any() else 0.0
        ratio = (err / (rtol * theirs.abs() + floor)).max().item() if floor > 0 else err.max().item()
        row = [err.max().item(), rel, ratio]
        worst = [max(w, r) for w, r in zip(worst, row)]
        bad = not ratio <= 1  # NaN fails
        if bad:
            failing.append(f"{label.split(' ')[0]} {name}")
        print(f"  {name:<14} {theirs.numel():>8} {theirs.abs().max().item():>12.4e} {floor:>10.2e} {row[0]:>12.3e} "
              f"{row[1]:>12.3e} {row[2]:>12.3e}{'  FAIL' if bad else ''}")
    print(f"  {'all':<14} {'':>8} {'':>12} {'':>10} {worst[0]:>12.3e} {worst[1]:>12.3e} {worst[2]:>12.3e}")
    return failing


def compare_loss(label, ours, theirs, rtol):
    rel = abs(ours - theirs) / abs(theirs)
    ok = rel <= rtol
    print(f"{label}: tunepar-core {ours:.12f}, PyTorch {theirs:.12f}, rel err {rel:.3e} (rtol {rtol:g})"
          f"{'' if ok else '  FAIL'}")
    return [] if ok else [label]


def run_core(a, out_dir, steps):
    result_path, dump = os.path.join(out_dir, f"result{steps}.json"), os.path.join(out_dir, f"dump{steps}")
    command = [a.core, "--model", a.model, "--threads", "1", "-q", "--steps", str(steps), "--warmup", "0",
               "--lr", repr(a.lr), "--seed", str(a.seed), "-o", result_path, "--dump", dump] + a.core_args
    print("running:", " ".join(command))
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except OSError as e:
        raise BadInput(f"cannot run tunepar-core {a.core}: {e.strerror}")
    if done.returncode != 0:
        raise BadInput(f"tunepar-core exited {done.returncode}: {done.stderr.strip()}")

    def read(path):
        with open(path) as f:
            return json.load(f)

    files = {k: read(os.path.join(dump, k + ".json")) for k in ("initial_weights", "gradients", "weights", "batches")}
    return read(result_path), files


# The shape fields of tunepar-core's result ("model", runner/core/core_main.cc Describe) that say
# which architecture it trained, and the two that have a PyTorch reference. A core from before
# issue 33 writes none of them: it trains GPTs only.
ARCHITECTURE_FIELDS = ("kv_heads", "mlp", "positions", "norm", "linear_biases")
FAMILIES = {
    "gpt": {"mlp": "gelu", "positions": "learned", "norm": "layernorm", "linear_biases": True},
    "llama": {"mlp": "swiglu", "positions": "rotary", "norm": "rmsnorm", "linear_biases": False,
              "tied_embeddings": False},
}


class Skipped(Exception):
    pass


def family_of(model, expected):
    """The architecture of the result's model, "gpt" or "llama" (shape fields as the model files
    write them: choices by name, switches as booleans). expected: the family the test asked for; a
    core that does not describe its architecture yet (before issue 33) is skipped when asked for llama."""
    if not any(k in model for k in ARCHITECTURE_FIELDS):
        if expected == "llama":
            raise Skipped(f"this tunepar-core does not describe its model's architecture ({', '.join(ARCHITECTURE_FIELDS)}"
                          " in the result's model): it trains GPTs only")
        return "gpt"
    missing = [k for k in ARCHITECTURE_FIELDS if k not in model]
    if missing:
        raise BadInput(f"the result's model lacks {', '.join(missing)}")
    for family, fields in FAMILIES.items():
        if all(model.get(k) == v for k, v in fields.items()) and (family != "gpt" or model["kv_heads"] == model["heads"]):
            if expected not in (None, family):
                raise BadInput(f"tunepar-core trained a {family} model, the test expects {expected}")
            return family
    shape = {k: model.get(k) for k in ARCHITECTURE_FIELDS + ("tied_embeddings",)}
    raise BadInput(f"no PyTorch reference for {shape}: GPT (gelu, learned, layernorm, biases, kv_heads = heads) "
                   "or Meta's Llama (swiglu, rotary, rmsnorm, no biases, untied)")


def reference_model(model, family, dtype):
    """The PyTorch model of the result's model and its parameters by the core's names."""
    if family == "gpt":
        reference = ReferenceGPT(model).to(dtype)
        return reference, parameters_by_core_name(reference)
    reference = torch_llama.Transformer(model["layers"], model["hidden"], model["heads"], model["kv_heads"],
                                        model["seq_len"], model["vocab"], model["ffn_hidden"], dtype=dtype).to(dtype)
    return reference, llama_parameters_by_core_name(reference)


def check(a, result, dumps, second):
    """The first step in PyTorch from the core's initial weights: the loss and the gradients; then
    torch.optim.AdamW applied to the core's own gradients (so that gradient rounding, which
    AdamW's first step amplifies where |g| is near eps, stays out of it) against the core's update;
    then the loss of the second step (the first that sees the biases, which start at 0)."""
    dtype = getattr(torch, a.dtype)
    tol = TOLERANCES[a.dtype]
    if result["world"] != 1 or len(result["loss"]) != 1:
        raise BadInput("the reference check runs one step on one rank")
    torch.manual_seed(0)
    model, params = reference_model(result["model"], family_of(result["model"], a.family), dtype)
    if {id(p) for parts in params.values() for p in parts} != {id(p) for p in model.parameters()}:
        raise BadInput("the PyTorch model has parameters the core's names do not cover")
    load_weights(params, dumps["initial_weights"], dtype)
    samples = torch.tensor(dumps["batches"]["samples"][0], dtype=torch.long)  # (B, T + 1)
    loss = model(samples[:, :-1], samples[:, 1:])
    loss.backward()
    failing = compare_loss("loss", result["loss"][0], loss.item(), tol["loss"])
    rtol, floor = tol["gradients"]
    grads = {name: joined(parts, lambda p: p.grad) for name, parts in params.items()}
    failing += compare("gradients of the first step", dumps["gradients"], grads, rtol,
                       {name: floor * g.abs().max().item() for name, g in grads.items()})
    failing += check_update(a, model, params, dumps, dtype)
    with torch.no_grad():
        samples = torch.tensor(second[1]["batches"]["samples"][1], dtype=torch.long)
        loss = model(samples[:, :-1], samples[:, 1:])
    failing += compare_loss("second step's loss", second[0]["loss"][1], loss.item(), tol["loss"])
    return failing


def check_update(a, model, params, dumps, dtype):
    """AdamW (with clip_grad_norm_) from the core's gradients against the core's update; leaves
    the model at the updated weights."""
    all_parts = [p for parts in params.values() for p in parts]
    decay = [p for p in all_parts if p.dim() >= 2]
    no_decay = [p for p in all_parts if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": kWeightDecay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=kBetas, eps=kEps)
    with torch.no_grad():
        for name, parts in params.items():
            for p in parts:
                p.grad = torch.zeros_like(p)
            split_into([p.grad for p in parts], torch.tensor(dumps["gradients"][name], dtype=dtype))
    initial = {name: joined(parts).clone() for name, parts in params.items()}
    torch.nn.utils.clip_grad_norm_(model.parameters(), kClip)
    optimizer.step()
    # The update, not the weights: AdamW moves a weight by about lr, a thousandth of its size.
    updates = {name: (torch.tensor(dumps["weights"][name], dtype=torch.float64)
                      - torch.tensor(dumps["initial_weights"][name], dtype=torch.float64)).tolist()
               for name in params}
    after = {name: joined(parts) for name, parts in params.items()}
    rtol, ulps = TOLERANCES[a.dtype]["updates"]
    eps = torch.finfo(dtype).eps
    return compare("AdamW's update", updates, {name: w - initial[name] for name, w in after.items()}, rtol,
                   {name: ulps * eps * w.abs().max().item() for name, w in after.items()})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--core", required=True, help="tunepar-core (fp32) or tunepar-core-fp64")
    p.add_argument("--dtype", choices=sorted(TOLERANCES), default="float32",
                   help="PyTorch's arithmetic: float32 for tunepar-core, float64 for tunepar-core-fp64")
    p.add_argument("--model", default="tiny", help="preset or TOML, as tunepar-core --model")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--family", choices=sorted(FAMILIES),
                   help="the architecture the core must have trained (llama: skipped, exit 77, by a core that "
                        "does not describe its architecture yet); default: whichever the result names")
    p.add_argument("core_args", nargs="*", help="after --: more tunepar-core flags (one rank), e.g. --micro-batches 4")
    a = p.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as out_dir:
            result, dumps = run_core(a, out_dir, 1)
            failing = check(a, result, dumps, run_core(a, out_dir, 2))
    except Skipped as e:
        print(f"torch_reference: SKIPPED: {e}", file=sys.stderr)
        return 77
    except (BadInput, OSError, KeyError, IndexError, ValueError) as e:
        print(f"torch_reference: {e}", file=sys.stderr)
        return 2
    if failing:
        print(f"torch_reference: FAILED: {', '.join(failing)} differ from PyTorch", file=sys.stderr)
        return 1
    print(f"torch_reference: tunepar-core ({result['layout']}, {a.dtype}) matches PyTorch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
