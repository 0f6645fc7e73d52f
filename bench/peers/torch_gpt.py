#!/usr/bin/python3
"""The peer of tunepar-core's speed benchmark: the same GPT training step in PyTorch on the CPU.

Same shape and maths as tunepar-core: token + position embeddings, pre-LN blocks (causal
multi-head attention, MLP with tanh-GeLU), final layer norm, LM head tied to the token
embedding, mean cross-entropy, AdamW (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices)
with gradient clipping at 1.0, fp32. Set up as PyTorch's users would on a CPU: Debian's
python3-torch (OpenBLAS through libblas.so.3, oneDNN), torch.set_num_threads(T), eager mode.
Prints one JSON line: {"step_time_s": median, "step_times_s": [...], "loss": [...]}.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.NH)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attproj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, T, V):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)

    def forward(self, tokens, targets):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser()
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 8), ("seq", 128), ("vocab", 1024),
                          ("batch", 8), ("threads", 2), ("steps", 10), ("warmup", 3)]:
        p.add_argument("--" + name, type=int, default=default)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(a.layers, a.hidden, a.heads, a.seq, a.vocab)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    data = torch.randint(0, a.vocab, (a.warmup + a.steps, a.batch, a.seq + 1))
    times, losses = [], []
    for step in range(a.warmup + a.steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(data[step, :, :-1], data[step, :, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        elapsed = time.perf_counter() - start
        losses.append(loss.item())
        if step >= a.warmup:
            times.append(elapsed)
    times_sorted = sorted(times)
    n = len(times_sorted)
    median = times_sorted[n // 2] if n % 2 else 0.5 * (times_sorted[n // 2 - 1] + times_sorted[n // 2])
    print(json.dumps({"step_time_s": median, "step_times_s": times, "loss": losses, "torch": torch.__version__,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
