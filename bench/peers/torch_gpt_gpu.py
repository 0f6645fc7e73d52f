#!/usr/bin/env python3
"""The GPU peer of tunepar-core: bench/peers/torch_gpt.py (the project's PyTorch CPU peer) run on
CUDA, in fp32 or bf16, on the same GPT shape.

Copied unchanged in its semantics from ../shared/tools/gpu-kit/torch_gpt_gpu.py (the kit that
measured PyTorch's figures in issue 18); bench/gpu_benchmark.sh runs it against tunepar-core-cuda
with the shape of bench/data/gpt2-small.toml.

The model is the project's, unchanged in its maths: token + position embeddings, pre-LN blocks
(causal multi-head attention written out as q k^T / sqrt(hs), mask, softmax, att v -- not
PyTorch's fused scaled_dot_product_attention unless --attn sdpa is given), MLP with tanh-GeLU,
final layer norm, LM head tied to the token embedding, mean cross-entropy, AdamW (betas 0.9/0.95,
eps 1e-8, weight decay 0.1 on matrices, PyTorch's default foreach implementation) with gradient
clipping at 1.0. The only changes: the position ids and the causal mask are made on the model's
device, and the device/precision flags below.

  --device cuda|cpu      (cpu: the same program as torch_gpt.py, with --threads)
  --dtype fp32|bf16
  --bf16-mode autocast   (default) fp32 weights, gradients and AdamW state; forward in
                         torch.autocast(bfloat16): matmuls in bf16 on the tensor cores, layer norm,
                         softmax and cross-entropy in fp32 (autocast's own lists). The closest
                         match to tunepar-core's bf16 (16-bit storage, fp32 master weights).
  --bf16-mode native     the whole model in bfloat16 (weights, gradients, AdamW state), no
                         master weights: the fastest, not the same training semantics.
  --tf32                 let fp32 matmuls use TF32 tensor cores (off by default: plain fp32,
                         PyTorch's default for matmuls, the same arithmetic as tunepar-core).

Timing: torch.cuda.synchronize() before and after each step (zero_grad, forward, backward,
clip, AdamW step); the median over the measured steps after --warmup steps.
Prints one JSON line: {"step_time_s": median, "step_times_s": [...], "loss": [...], ...}.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ATTN = "naive"


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.attproj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.NH = NH

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        if ATTN == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.NH)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attproj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, T, V):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)

    def forward(self, tokens, targets):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


class RMSNorm(nn.Module):
    """Meta's llama3 RMSNorm (models/llama3/model.py): x rsqrt(mean x^2 + eps) w, in fp32."""

    def __init__(self, C, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(C))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotary_tables(T, hs, device, theta=10000.0):
    """Meta's precompute_freqs_cis as (cos, sin) of shape (T, hs / 2)."""
    freqs = 1.0 / (theta ** (torch.arange(0, hs, 2, device=device)[: hs // 2].float() / hs))
    angles = torch.outer(torch.arange(T, device=device).float(), freqs)
    return angles.cos(), angles.sin()


def apply_rotary(x, cos, sin):
    """Meta's apply_rotary_emb (interleaved pairs (2i, 2i + 1)) on x (B, T, H, hs), without complex tensors."""
    x0, x1 = x.float().unflatten(-1, (-1, 2)).unbind(-1)
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2).type_as(x)


class LlamaBlock(nn.Module):
    """The Llama-style block of tunepar-core (and Meta's llama3 model.py): RMSNorm, grouped-query attention
    with rotary positions (the same explicit attention as Block unless --attn sdpa), SwiGLU MLP, no biases."""

    def __init__(self, C, NH, KV, F_):
        super().__init__()
        self.ln1, self.ln2 = RMSNorm(C), RMSNorm(C)
        self.NH, self.KV, self.hs = NH, KV, C // NH
        self.qkv = nn.Linear(C, (NH + 2 * KV) * self.hs, bias=False)
        self.attproj = nn.Linear(C, C, bias=False)
        self.w1, self.w3 = nn.Linear(C, F_, bias=False), nn.Linear(C, F_, bias=False)
        self.w2 = nn.Linear(F_, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split([C, self.KV * self.hs, self.KV * self.hs], dim=2)
        q = apply_rotary(q.view(B, T, self.NH, self.hs), cos, sin)
        k = apply_rotary(k.view(B, T, self.KV, self.hs), cos, sin)
        v = v.view(B, T, self.KV, self.hs)
        rep = self.NH // self.KV  # Meta's repeat_kv: query head h reads K/V head h // rep
        k, v = (t.repeat_interleave(rep, dim=2) for t in (k, v))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if ATTN == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hs)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        x = x + self.attproj(y.transpose(1, 2).contiguous().view(B, T, C))
        h = self.ln2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, L, C, NH, KV, F_, T, V):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.blocks = nn.ModuleList(LlamaBlock(C, NH, KV, F_) for _ in range(L))
        self.lnf, self.head = RMSNorm(C), nn.Linear(C, V, bias=False)
        self.hs, self.T = C // NH, T

    def forward(self, tokens, targets):
        cos, sin = rotary_tables(tokens.shape[1], self.hs, tokens.device)
        x = self.wte(tokens)
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.reshape(-1))


def median(values):
    s = sorted(values)
    n = len(s)
    if n == 0:
        return 0.0
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def main():
    global ATTN
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 8), ("seq", 128), ("vocab", 1024),
                          ("batch", 8), ("threads", 2), ("steps", 10), ("warmup", 3)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--arch", choices=["gpt", "llama"], default="gpt",
                   help="llama: GQA (--kv-heads), SwiGLU (--ffn), rotary, RMSNorm, untied head, no biases")
    p.add_argument("--kv-heads", type=int, default=0, help="llama: K/V heads (default: --heads)")
    p.add_argument("--ffn", type=int, default=0, help="llama: SwiGLU width (default: 4 hidden)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--bf16-mode", choices=["autocast", "native"], default="autocast")
    p.add_argument("--tf32", action="store_true", help="allow TF32 for fp32 matmuls")
    p.add_argument("--attn", choices=["naive", "sdpa"], default="naive",
                   help="naive: the project's attention (default); sdpa: F.scaled_dot_product_attention")
    a = p.parse_args()
    ATTN = a.attn

    info = {"device": a.device, "dtype": a.dtype, "bf16_mode": a.bf16_mode if a.dtype == "bf16" else None,
            "tf32": a.tf32, "attn": a.attn, "torch": torch.__version__,
            "arch": a.arch,
            "shape": {"layers": a.layers, "hidden": a.hidden, "heads": a.heads, "seq": a.seq,
                      "vocab": a.vocab, "batch": a.batch, "kv_heads": a.kv_heads or a.heads,
                      "ffn": a.ffn or 4 * a.hidden}}
    if a.device == "cuda":
        if not torch.cuda.is_available():
            print(json.dumps({"status": "no_device", **info}))
            return 4
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    dev = torch.device(a.device)
    if a.arch == "llama":
        model = Llama(a.layers, a.hidden, a.heads, a.kv_heads or a.heads, a.ffn or 4 * a.hidden, a.seq, a.vocab).to(dev)
    else:
        model = GPT(a.layers, a.hidden, a.heads, a.seq, a.vocab).to(dev)
    native_bf16 = a.dtype == "bf16" and a.bf16_mode == "native"
    autocast_bf16 = a.dtype == "bf16" and a.bf16_mode == "autocast"
    if native_bf16:
        model = model.to(torch.bfloat16)
    decay = [q for q in model.parameters() if q.dim() >= 2]
    no_decay = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    n_params = sum(q.numel() for q in model.parameters())
    data = torch.randint(0, a.vocab, (a.warmup + a.steps, a.batch, a.seq + 1), device=dev)

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    times, losses = [], []
    status = "ok"
    try:
        for step in range(a.warmup + a.steps):
            sync()
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=a.device, dtype=torch.bfloat16, enabled=autocast_bf16):
                loss = model(data[step, :, :-1], data[step, :, 1:])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sync()
            elapsed = time.perf_counter() - start
            losses.append(loss.item())
            if step >= a.warmup:
                times.append(elapsed)
    except torch.cuda.OutOfMemoryError as e:  # noqa: F841 (reported, not raised)
        status = "oom"
    out = {"status": status, "step_time_s": median(times), "step_times_s": times, "loss": losses,
           "threads": torch.get_num_threads(), "parameters": n_params,
           "tokens_per_s": a.batch * a.seq / median(times) if times else 0.0, **info}
    if a.device == "cuda":
        out["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 1e9
    print(json.dumps(out))
    return 0 if status == "ok" else 3


if __name__ == "__main__":
    sys.exit(main())
