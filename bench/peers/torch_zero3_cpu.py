#!/usr/bin/python3
"""The ZeRO-3 peer of tunepar-core's CPU benchmark: FSDP written from torch.distributed primitives on gloo.

torch 1.13's FullyShardedDataParallel refuses CPU-only training, so this is ZeRO-3 as FSDP does it,
by hand, on bench/peers/torch_gpt.py's model (the same shape and maths as tunepar-core):
- units: the root (token and position embeddings, final norm; the head is tied to the embedding)
  and each block; each unit's parameters are one flat fp32 buffer padded to a multiple of the
  world, of which a rank keeps its 1/W shard (and AdamW's moments on it);
- forward: a block's flat buffer is all-gathered (gloo all_gather into views of the buffer) before
  it runs, the next block's gather started asynchronously meanwhile, and the buffer's storage
  freed after it (resize to 0, as FSDP reshards); the root stays gathered all step (FSDP keeps the
  root unsharded too);
- backward: block by block from the last (each block's input kept as a leaf, as a manual pipeline
  does), its weights gathered again before, the previous block's prefetched; its gradients
  reduce-scattered (gloo has no reduce_scatter: one asynchronous reduce of each rank's chunk to
  that rank, the same volume) and freed;
- AdamW (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices) on the shards with global
  gradient-norm clipping at 1.0.
Run: python3 torch_zero3_cpu.py --ranks 4 --threads 1 (spawns the ranks itself). Rank 0 prints
one JSON line: {"step_time_s": median, "step_times_s": [...], "loss": [...]}.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT  # noqa: E402


class Unit:
    """One FSDP unit: its parameters as views of one flat buffer, sharded over the world."""

    def __init__(self, params, world, rank):
        self.params = list(params)
        self.world, self.rank = world, rank
        numel = sum(p.numel() for p in self.params)
        self.padded = (numel + world - 1) // world * world
        self.per_rank = self.padded // world
        full = torch.zeros(self.padded)
        at = 0
        for p in self.params:
            full[at:at + p.numel()] = p.data.reshape(-1)
            at += p.numel()
        self.full = full
        self.shard = full[rank * self.per_rank:(rank + 1) * self.per_rank].clone()
        self.decay = torch.zeros(self.padded)
        at = 0
        for p in self.params:
            if p.dim() >= 2:
                self.decay[at:at + p.numel()] = 1.0
            at += p.numel()
        self.decay = self.decay[rank * self.per_rank:(rank + 1) * self.per_rank].clone()
        self.m, self.v = torch.zeros_like(self.shard), torch.zeros_like(self.shard)
        self.grad = torch.zeros_like(self.shard)
        self._point_params()
        self.free()

    def _point_params(self):
        at = 0
        for p in self.params:
            p.data = self.full[at:at + p.numel()].view_as(p)
            at += p.numel()

    def gather(self):
        """Starts the all-gather of the whole buffer; returns the work to wait for."""
        self.full.storage().resize_(self.padded)
        return dist.all_gather(list(self.full.chunk(self.world)), self.shard, async_op=True)

    def free(self):
        self.full.storage().resize_(0)

    def reduce_scatter_grads(self):
        """Sums the unit's gradients over the world into this rank's shard (asynchronous)."""
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.params])
        flat = F.pad(flat, (0, self.padded - flat.numel()))
        works = [dist.reduce(chunk, dst=r, async_op=True) for r, chunk in enumerate(flat.chunk(self.world))]
        for p in self.params:
            p.grad = None
        return works, flat

    def take_grad(self, flat):
        self.grad += flat[self.rank * self.per_rank:(self.rank + 1) * self.per_rank]


class Zero3Step:
    def __init__(self, model, world, rank):
        self.model = model
        self.root = Unit([model.wte.weight, model.wpe.weight, model.lnf.weight, model.lnf.bias], world, rank)
        self.blocks = [Unit(b.parameters(), world, rank) for b in model.blocks]
        self.units = [self.root] + self.blocks
        self.steps = 0

    def _reduce(self, unit):
        works, flat = unit.reduce_scatter_grads()
        for w in works:
            w.wait()
        unit.take_grad(flat)

    def forward_backward(self, tokens, targets):
        m = self.model
        self.root.gather().wait()
        x = m.wte(tokens) + m.wpe(torch.arange(tokens.shape[1]))
        saved = []
        pending = self.blocks[0].gather()
        for i, (block, unit) in enumerate(zip(m.blocks, self.blocks)):
            pending.wait()
            if i + 1 < len(self.blocks):
                pending = self.blocks[i + 1].gather()
            xin = x.detach().requires_grad_()
            out = block(xin)
            unit.free()
            saved.append((xin, out))
            x = out
        xl = x.detach().requires_grad_()
        logits = m.lnf(xl) @ m.wte.weight.t()
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
        (loss / self.root.world).backward()  # the global batch's mean, summed over ranks
        grad = xl.grad
        pending = self.blocks[-1].gather()
        for i in reversed(range(len(self.blocks))):
            pending.wait()
            if i > 0:
                pending = self.blocks[i - 1].gather()
            xin, out = saved[i]
            out.backward(grad)
            grad = xin.grad
            self.blocks[i].free()
            self._reduce(self.blocks[i])
        x0 = m.wte(tokens) + m.wpe(torch.arange(tokens.shape[1]))
        x0.backward(grad)
        self._reduce(self.root)
        self.root.free()
        return loss.detach()

    def optimize(self, lr=3e-4, b1=0.9, b2=0.95, eps=1e-8, wd=0.1, clip=1.0):
        sq = torch.stack([(u.grad * u.grad).sum() for u in self.units]).sum()
        dist.all_reduce(sq)
        norm = sq.sqrt().item()
        scale = clip / (norm + 1e-6) if norm > clip else 1.0
        self.steps += 1
        c1, c2 = 1 - b1 ** self.steps, 1 - b2 ** self.steps
        for u in self.units:
            g = u.grad * scale
            u.m.mul_(b1).add_(g, alpha=1 - b1)
            u.v.mul_(b2).addcmul_(g, g, value=1 - b2)
            u.shard.mul_(1 - lr * wd * u.decay)
            u.shard.addcdiv_(u.m / c1, (u.v / c2).sqrt_().add_(eps), value=-lr)
            u.grad.zero_()


def run(rank, a, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    step = Zero3Step(GPT(a.layers, a.hidden, a.heads, a.seq, a.vocab), a.ranks, rank)
    per_rank = a.batch // a.ranks
    data = torch.randint(0, a.vocab, (a.warmup + a.steps, a.batch, a.seq + 1))
    times, losses = [], []
    for s in range(a.warmup + a.steps):
        dist.barrier()
        start = time.perf_counter()
        mine = data[s, rank * per_rank:(rank + 1) * per_rank]
        loss = step.forward_backward(mine[:, :-1], mine[:, 1:])
        step.optimize()
        dist.all_reduce(loss)
        elapsed = torch.tensor(time.perf_counter() - start)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's, as the core reports
        losses.append(loss.item() / a.ranks)
        if s >= a.warmup:
            times.append(elapsed.item())
    if rank == 0:
        print(json.dumps({"step_time_s": sorted(times)[len(times) // 2], "step_times_s": times, "loss": losses}))
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 8), ("seq", 128), ("vocab", 1024),
                          ("batch", 8), ("ranks", 4), ("threads", 1), ("steps", 10), ("warmup", 3),
                          ("port", 29541)]:
        p.add_argument("--" + name, type=int, default=default)
    a = p.parse_args()
    mp.spawn(run, args=(a, a.port), nprocs=a.ranks)


if __name__ == "__main__":
    main()
