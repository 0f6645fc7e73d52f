#!/usr/bin/python3
"""Meta's Llama 3 model in PyTorch: the reference that tunepar-core's Llama-style step is checked against.

Transcribed from meta-llama/llama-models models/llama3/model.py at a9c89c4 (the file last changed
in 5fdf8311, 2025-04-05); each class and function names the lines it comes from. Only the changes
below, each marked "change N" where it is made (issue 33, plan section 6):
  1. fairscale's ColumnParallelLinear / RowParallelLinear / VocabParallelEmbedding (one rank) ->
     nn.Linear(bias=False) / nn.Embedding: the same maths on one rank.
  2. No KV cache and no torch.inference_mode: training from position 0 (start_pos = 0), so the
     keys and values are this sequence's xk, xv.
  3. FeedForward takes hidden_dim = the model's ffn_hidden as given (Meta derives it from 4 dim,
     multiple_of and ffn_dim_multiplier: meta_ffn_hidden below keeps that rule; the self-test
     checks configs/models/llama3-*.toml against it).
  4. Arithmetic in the model's dtype: Meta's .float() casts (RMSNorm, rotary, softmax, logits) and
     its float32 rotary table follow the dtype, so float64 runs complex128 (against
     tunepar-core-fp64); in float32 they are what Meta computes.
  5. forward returns the loss: mean cross-entropy of output(norm(h)) over every token, as
     bench/peers/torch_gpt.py's GPT.
  6. use_scaled_rope = False and theta = 10000 (precompute_freqs_cis's default argument; Llama 3's
     rope_theta = 500000, args.py:48, changes no cost and no code path).
RMSNorm's eps is args.norm_eps = 1e-5 (args.py:47), which Meta's blocks pass (model.py:242-243, 270).

    /usr/bin/python3 tests/torch_reference/torch_llama.py --self-test

--self-test (no tunepar-core needed; ctest torch_llama_self_test) checks the transcription itself
in float64 on configs/models/tiny-llama.toml: autograd's gradient of every tensor against central
finite differences; Meta's complex rotary against the pair rotation written out with cos and sin
(and its transpose as the backward); repeat_kv's order (query head q reads KV head q // n_rep);
RMSNorm and SwiGLU, forward and the backward formulas tunepar-core implements (plan section 5.2),
against autograd; Meta's FFN rule against the llama3 presets. Exit 0 pass, 1 fail, 77 no torch.
"""
import argparse
import math
import os
import sys
import tomllib
from typing import Optional, Tuple

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("torch_llama: SKIPPED: python3-torch is not installed (scripts/install-deps.sh installs it)", file=sys.stderr)
    sys.exit(77)

NORM_EPS = 1e-5  # ModelArgs.norm_eps (args.py:47); RMSNorm's own default (model.py:32) is 1e-6
ROPE_THETA = 10000.0  # change 6: precompute_freqs_cis's default (model.py:65)


class RMSNorm(torch.nn.Module):
    """model.py:31-42."""

    def __init__(self, dim: int, eps: float = NORM_EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x)  # change 4: Meta's self._norm(x.float()).type_as(x)
        return output * self.weight


def precompute_freqs_cis(dim: int, end: int, theta: float = ROPE_THETA, dtype=torch.float32):
    """model.py:65-72 (use_scaled = False: change 6, so apply_scaling, 45-62, is not needed)."""
    # change 4: Meta's .float() and dtype=torch.float32 -> dtype (float64 gives complex128)
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].to(dtype) / dim))
    t = torch.arange(end, device=freqs.device, dtype=dtype)
    freqs = torch.outer(t, freqs)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64 (complex128 in float64)
    return freqs_cis


def reshape_for_broadcast(freqs_cis: torch.Tensor, x: torch.Tensor):
    """model.py:75-80."""
    ndim = x.ndim
    assert 0 <= 1 < ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(
    xq: torch.Tensor,
    xk: torch.Tensor,
    freqs_cis: torch.Tensor,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """model.py:83-93: consecutive pairs (x[2i], x[2i+1]) as one complex number, rotated by
    freqs_cis (Meta's interleaved pairs, not Hugging Face's rotate_half halves)."""
    # change 4: Meta's xq.float() / xk.float() -> the dtype as it is
    xq_ = torch.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """model.py:96-105: torch.repeat_interleave(x, dim=2, repeats=n_rep)"""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        x[:, :, :, None, :]
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
    )


class Attention(nn.Module):
    """model.py:108-202. Meta's ModelArgs -> (dim, n_heads, n_kv_heads)."""

    def __init__(self, dim: int, n_heads: int, n_kv_heads: Optional[int]):
        super().__init__()
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        world_size = 1  # change 1: fs_init.get_model_parallel_world_size() on one rank
        self.n_local_heads = n_heads // world_size
        self.n_local_kv_heads = self.n_kv_heads // world_size
        self.n_rep = self.n_local_heads // self.n_local_kv_heads
        self.head_dim = dim // n_heads

        # change 1: ColumnParallelLinear / RowParallelLinear (bias=False) -> nn.Linear(bias=False)
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        # change 2: no cache_k / cache_v (model.py:147-162)

    def forward(
        self,
        x: torch.Tensor,
        freqs_cis: torch.Tensor,
        mask: Optional[torch.Tensor],
    ):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)

        xq = xq.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)

        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)

        # change 2: Meta writes xk, xv into the cache at start_pos and reads the cache back
        # (model.py:180-187); from position 0 that is xk, xv themselves.
        keys = xk
        values = xv

        # repeat k/v heads if n_kv_heads < n_heads
        keys = repeat_kv(keys, self.n_rep)  # (bs, seqlen, n_local_heads, head_dim)
        values = repeat_kv(values, self.n_rep)  # (bs, seqlen, n_local_heads, head_dim)

        xq = xq.transpose(1, 2)  # (bs, n_local_heads, seqlen, head_dim)
        keys = keys.transpose(1, 2)  # (bs, n_local_heads, seqlen, head_dim)
        values = values.transpose(1, 2)  # (bs, n_local_heads, seqlen, head_dim)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + mask  # (bs, n_local_heads, seqlen, seqlen)
        scores = F.softmax(scores, dim=-1).type_as(xq)  # change 4: Meta's scores.float()
        output = torch.matmul(scores, values)  # (bs, n_local_heads, seqlen, head_dim)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)


def meta_ffn_hidden(dim: int, multiple_of: int, ffn_dim_multiplier: Optional[float]) -> int:
    """FeedForward's width rule (model.py:214-218) from TransformerBlock's hidden_dim = 4 dim (model.py:237)."""
    hidden_dim = 4 * dim
    hidden_dim = int(2 * hidden_dim / 3)
    # custom dim factor multiplier
    if ffn_dim_multiplier is not None:
        hidden_dim = int(ffn_dim_multiplier * hidden_dim)
    hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
    return hidden_dim


class FeedForward(nn.Module):
    """model.py:205-225: SwiGLU, w2(silu(w1 x) * w3 x); w1 the gate, w3 the up projection."""

    def __init__(self, dim: int, hidden_dim: int):
        super().__init__()
        # change 3: hidden_dim is the model's ffn_hidden as given (Meta's rule: meta_ffn_hidden)
        # change 1: ColumnParallelLinear / RowParallelLinear -> nn.Linear(bias=False)
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """model.py:228-254."""

    def __init__(self, layer_id: int, dim: int, n_heads: int, n_kv_heads: int, ffn_hidden: int):
        super().__init__()
        self.n_heads = n_heads
        self.dim = dim
        self.head_dim = dim // n_heads
        self.attention = Attention(dim, n_heads, n_kv_heads)
        self.feed_forward = FeedForward(dim=dim, hidden_dim=ffn_hidden)  # change 3
        self.layer_id = layer_id
        self.attention_norm = RMSNorm(dim, eps=NORM_EPS)
        self.ffn_norm = RMSNorm(dim, eps=NORM_EPS)

    def forward(
        self,
        x: torch.Tensor,
        freqs_cis: torch.Tensor,
        mask: Optional[torch.Tensor],
    ):
        h = x + self.attention(self.attention_norm(x), freqs_cis, mask)
        out = h + self.feed_forward(self.ffn_norm(h))
        return out


class Transformer(nn.Module):
    """model.py:257-309. Built with the dtype it will run in (the rotary table is complex, which
    Module.to(float64) would not widen but cast to real); call .to(dtype) for the parameters."""

    def __init__(self, n_layers: int, dim: int, n_heads: int, n_kv_heads: int, seq_len: int, vocab_size: int,
                 ffn_hidden: int, dtype=torch.float32):
        super().__init__()
        self.vocab_size = vocab_size
        self.n_layers = n_layers

        self.tok_embeddings = nn.Embedding(vocab_size, dim)  # change 1: VocabParallelEmbedding

        self.layers = torch.nn.ModuleList()
        for layer_id in range(n_layers):
            self.layers.append(TransformerBlock(layer_id, dim, n_heads, n_kv_heads, ffn_hidden))

        self.norm = RMSNorm(dim, eps=NORM_EPS)
        self.output = nn.Linear(dim, vocab_size, bias=False)  # change 1: ColumnParallelLinear; untied

        # Meta's table runs to max_seq_len * 2 for generation; training reads rows [0, seq_len).
        self.freqs_cis = precompute_freqs_cis(dim // n_heads, seq_len, ROPE_THETA, dtype=dtype)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor):
        _bsz, seqlen = tokens.shape
        h = self.tok_embeddings(tokens)
        freqs_cis = self.freqs_cis[0:seqlen]  # change 2: start_pos = 0

        mask = None
        if seqlen > 1:
            mask = torch.full((seqlen, seqlen), float("-inf"), device=tokens.device)
            mask = torch.triu(mask, diagonal=1)
            # change 2: Meta's hstack of zeros for the cached positions (model.py:303) has none to add
            mask = mask.type_as(h)

        for layer in self.layers:
            h = layer(h, freqs_cis, mask)
        h = self.norm(h)
        output = self.output(h)  # change 4: Meta's .float()
        # change 5: the mean cross-entropy over every token (Meta returns the logits)
        return F.cross_entropy(output.view(-1, output.shape[-1]), targets.reshape(-1))


# ---- --self-test: the transcription checked on its own, in float64 ----

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


class Checks:
    """Collects named pass/fail lines."""

    def __init__(self):
        self.failing = []

    def expect(self, name, ok, detail):
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}")
        if not ok:
            self.failing.append(name)


def read_model(name):
    with open(os.path.join(REPO, "configs", "models", name + ".toml"), "rb") as f:
        return tomllib.load(f)


def tiny_llama(dtype):
    m = read_model("tiny-llama")
    assert (m["mlp"], m["positions"], m["norm"], m["tied_embeddings"], m["linear_biases"]) == \
        ("swiglu", "rotary", "rmsnorm", False, False), "tiny-llama.toml is no longer Meta's architecture"
    model = Transformer(m["layers"], m["hidden"], m["heads"], m["kv_heads"], m["seq_len"], m["vocab"],
                        m["ffn_hidden"], dtype=dtype).to(dtype)
    return m, model


def randomize(model, generator):
    """Weights of about unit output scale and norm weights away from 1, so every term of the
    gradient matters (the core's init, std 0.02 and ones, would leave the nonlinearities linear)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
            else:
                p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) / math.sqrt(p.shape[-1]))


def check_finite_differences(checks, per_tensor=3, step=1e-5, rtol=1e-7):
    """Autograd (through view_as_complex, polar and repeat_kv's expand) against central
    differences: the largest-gradient element of each tensor and per_tensor - 1 random ones. The
    bound is rtol of the tensor's largest |gradient|: the O(step^2) truncation is about 1e-10 of
    it and the rounding 1e-16 / step = 1e-11."""
    dtype = torch.float64
    m, model = tiny_llama(dtype)
    g = torch.Generator().manual_seed(33)
    randomize(model, g)
    samples = torch.randint(0, m["vocab"], (2, m["seq_len"] + 1), generator=g)
    tokens, targets = samples[:, :-1], samples[:, 1:]
    model(tokens, targets).backward()
    worst = 0.0
    for name, p in model.named_parameters():
        grad = (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)  # None: autograd lost it
        scale = grad.abs().max().item() or 1.0
        picks = [int(grad.abs().argmax())] + torch.randint(0, p.numel(), (per_tensor - 1,), generator=g).tolist()
        flat = p.data.view(-1)
        for i in picks:
            with torch.no_grad():
                keep = flat[i].item()
                flat[i] = keep + step
                up = model(tokens, targets).item()
                flat[i] = keep - step
                down = model(tokens, targets).item()
                flat[i] = keep
            fd = (up - down) / (2 * step)
            err = abs(fd - grad[i].item()) / scale
            worst = max(worst, err)
            if not err <= rtol:
                checks.expect(f"finite differences {name}[{i}]", False,
                              f"autograd {grad[i].item():.12e}, central difference {fd:.12e}")
    tensors = len(list(model.parameters()))
    checks.expect("finite differences", worst <= rtol,
                  f"{tensors} tensors x {per_tensor} elements, max |fd - autograd| / max |grad| = {worst:.2e} "
                  f"(bound {rtol:g})")


def rotate_pairs(x, positions, theta=ROPE_THETA, transpose=False):
    """The pair rotation written out (plan 5.2): phi = p theta^(-2i/d); (x[2i], x[2i+1]) ->
    (x[2i] cos - x[2i+1] sin, x[2i] sin + x[2i+1] cos); transpose: the backward, rotation by -phi.
    x: (B, T, H, d)."""
    d = x.shape[-1]
    out = torch.empty_like(x)
    for p in range(x.shape[1]):
        for i in range(d // 2):
            phi = positions[p] * theta ** (-2.0 * i / d)
            c, s = math.cos(phi), math.sin(phi) * (-1 if transpose else 1)
            a, b = x[:, p, :, 2 * i], x[:, p, :, 2 * i + 1]
            out[:, p, :, 2 * i] = a * c - b * s
            out[:, p, :, 2 * i + 1] = a * s + b * c
    return out


def check_rotary(checks):
    """Meta's complex rotary against rotate_pairs, forward and backward, in float64."""
    dtype = torch.float64
    m = read_model("tiny-llama")
    T, d = m["seq_len"], m["hidden"] // m["heads"]
    g = torch.Generator().manual_seed(5)
    xq = torch.randn(2, T, m["heads"], d, generator=g, dtype=dtype, requires_grad=True)
    xk = torch.randn(2, T, m["kv_heads"], d, generator=g, dtype=dtype, requires_grad=True)
    rq, rk = apply_rotary_emb(xq, xk, precompute_freqs_cis(d, T, dtype=dtype))
    positions = list(range(T))
    err = max((rq - rotate_pairs(xq.detach(), positions)).abs().max().item(),
              (rk - rotate_pairs(xk.detach(), positions)).abs().max().item())
    checks.expect("rotary = interleaved pair rotation", err <= 1e-12, f"max |meta - pairs| = {err:.2e} (bound 1e-12)")
    dq = torch.randn(rq.shape, generator=g, dtype=dtype)
    dk = torch.randn(rk.shape, generator=g, dtype=dtype)
    (rq * dq).sum().add((rk * dk).sum()).backward()
    err = max((xq.grad - rotate_pairs(dq, positions, transpose=True)).abs().max().item(),
              (xk.grad - rotate_pairs(dk, positions, transpose=True)).abs().max().item())
    checks.expect("rotary backward = the transposed rotation", err <= 1e-12,
                  f"max |autograd - pairs(-phi)| = {err:.2e} (bound 1e-12)")
    # Position 0 is not rotated; the first pair turns by exactly p radians.
    checks.expect("rotary at position 0 is the identity", torch.equal(rq[:, 0], xq[:, 0].detach()), "exact")


def check_repeat_kv(checks):
    """Query head q reads KV head q // n_rep (repeat_interleave order), not q % g."""
    m = read_model("tiny-llama")
    a, kv = m["heads"], m["kv_heads"]
    n_rep = a // kv
    x = torch.arange(kv, dtype=torch.float64).view(1, 1, kv, 1).expand(2, 3, kv, 4).contiguous()
    heads = repeat_kv(x, n_rep)[0, 0, :, 0].tolist()
    want = [float(q // n_rep) for q in range(a)]
    checks.expect("repeat_kv: query head q reads KV head q // n_rep", heads == want,
                  f"KV head of query heads 0..{a - 1}: {[int(h) for h in heads]} (want {[int(w) for w in want]})")
    # And in the model: K of KV head j moves exactly the scores of query heads j n_rep .. j n_rep + n_rep - 1.
    dtype = torch.float64
    d = m["hidden"] // a
    att = Attention(m["hidden"], a, kv).to(dtype)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(1, 4, m["hidden"], generator=g, dtype=dtype)
    freqs = precompute_freqs_cis(d, 4, dtype=dtype)
    per_head = []
    for j in range(kv):
        with torch.no_grad():
            before = attention_probabilities(att, x, freqs)
            att.wk.weight[j * d:(j + 1) * d] *= 2
            after = attention_probabilities(att, x, freqs)
            att.wk.weight[j * d:(j + 1) * d] /= 2
        per_head.append([q for q in range(a) if not torch.allclose(before[:, q], after[:, q], rtol=0, atol=1e-15)])
    want = [list(range(j * n_rep, (j + 1) * n_rep)) for j in range(kv)]
    checks.expect("attention: KV head j serves query heads [j n_rep, (j + 1) n_rep)", per_head == want,
                  f"query heads each KV head moves: {per_head} (want {want})")


def attention_probabilities(att, x, freqs):
    """The softmax of Attention.forward, for check_repeat_kv (the same steps, stopped early)."""
    bsz, seqlen, _ = x.shape
    xq = att.wq(x).view(bsz, seqlen, att.n_local_heads, att.head_dim)
    xk = att.wk(x).view(bsz, seqlen, att.n_local_kv_heads, att.head_dim)
    xq, xk = apply_rotary_emb(xq, xk, freqs)
    keys = repeat_kv(xk, att.n_rep).transpose(1, 2)
    scores = torch.matmul(xq.transpose(1, 2), keys.transpose(2, 3)) / math.sqrt(att.head_dim)
    return F.softmax(scores, dim=-1)


def check_rms_norm(checks):
    """RMSNorm forward with eps 1e-5 and the backward tunepar-core implements (plan 5.2):
    r = (mean x^2 + eps)^-1/2, xh = x r, G = w dy; dw = sum dy xh; dx = r (G - xh mean(G xh))."""
    dtype = torch.float64
    g = torch.Generator().manual_seed(11)
    C = read_model("tiny-llama")["hidden"]
    # Small inputs, where eps matters: mean x^2 about 1e-4, so eps 1e-6 instead moves y by 0.4%.
    x = (1e-2 * torch.randn(6, C, generator=g, dtype=dtype)).requires_grad_()
    norm = RMSNorm(C).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.3 * torch.randn(C, generator=g, dtype=dtype))
    y = norm(x)
    r = (x.detach().pow(2).mean(-1, keepdim=True) + 1e-5) ** -0.5
    xh = x.detach() * r
    err = (y - norm.weight.detach() * xh).abs().max().item()
    checks.expect("RMSNorm = w x (mean x^2 + 1e-5)^-1/2", err <= 1e-14, f"max err {err:.2e} (bound 1e-14)")
    dy = torch.randn(y.shape, generator=g, dtype=dtype)
    (y * dy).sum().backward()
    G = norm.weight.detach() * dy
    dx = r * (G - xh * (G * xh).mean(-1, keepdim=True))
    dw = (dy * xh).sum(0)
    err = max((x.grad - dx).abs().max().item() / dx.abs().max().item(),
              (norm.weight.grad - dw).abs().max().item() / dw.abs().max().item())
    checks.expect("RMSNorm backward = plan 5.2's dx, dw", err <= 1e-13, f"max rel err {err:.2e} (bound 1e-13)")


def check_swiglu(checks):
    """FeedForward = w2(silu(w1 x) * w3 x), and plan 5.2's backward of z = silu(a) u:
    du = dz silu(a); da = dz u sigma(a) (1 + a (1 - sigma(a)))."""
    dtype = torch.float64
    g = torch.Generator().manual_seed(13)
    m = read_model("tiny-llama")
    ff = FeedForward(m["hidden"], m["ffn_hidden"]).to(dtype)
    x = torch.randn(5, m["hidden"], generator=g, dtype=dtype)
    with torch.no_grad():
        gate, up = x @ ff.w1.weight.t(), x @ ff.w3.weight.t()
        want = (gate * torch.sigmoid(gate) * up) @ ff.w2.weight.t()
        err = (ff(x) - want).abs().max().item() / want.abs().max().item()
    checks.expect("SwiGLU = w2(silu(w1 x) * w3 x)", err <= 1e-14, f"max rel err {err:.2e} (bound 1e-14)")
    a = (3 * torch.randn(7, m["ffn_hidden"], generator=g, dtype=dtype)).requires_grad_()
    u = torch.randn(a.shape, generator=g, dtype=dtype, requires_grad=True)
    dz = torch.randn(a.shape, generator=g, dtype=dtype)
    (F.silu(a) * u * dz).sum().backward()
    s = torch.sigmoid(a.detach())
    da = dz * u.detach() * s * (1 + a.detach() * (1 - s))
    du = dz * a.detach() * s
    err = max((a.grad - da).abs().max().item(), (u.grad - du).abs().max().item())
    checks.expect("SwiGLU backward = plan 5.2's da, du", err <= 1e-13, f"max err {err:.2e} (bound 1e-13)")


def check_ffn_rule(checks):
    """Meta's FFN rule (model.py:214-218) with sku_list.py's multipliers gives the presets' ffn_hidden."""
    # meta-llama/llama-models models/llama3_1/api/sku_list.py @ 1768925a9d: (ffn_dim_multiplier, multiple_of)
    for name, mult, multiple_of in (("llama3-8b", 1.3, 1024), ("llama3-70b", 1.3, 4096), ("llama3-405b", 1.2, 4096)):
        m = read_model(name)
        got = meta_ffn_hidden(m["hidden"], multiple_of, mult)
        checks.expect(f"{name}.toml ffn_hidden by Meta's rule", got == m["ffn_hidden"],
                      f"{got} (file {m['ffn_hidden']})")


def self_test():
    torch.set_num_threads(1)
    checks = Checks()
    print(f"torch_llama self-test (PyTorch {torch.__version__}, float64, configs/models/tiny-llama.toml):")
    for check in (check_rotary, check_repeat_kv, check_rms_norm, check_swiglu, check_ffn_rule,
                  check_finite_differences):
        try:
            check(checks)
        except Exception as e:  # a broken transcription may fail by raising: each check still runs
            checks.expect(check.__name__, False, f"raised {type(e).__name__}: {e}")
    if checks.failing:
        print(f"torch_llama: FAILED: {', '.join(checks.failing)}", file=sys.stderr)
        return 1
    print("torch_llama: the transcription of Meta's Llama 3 passes its self-test")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--self-test", action="store_true", help="check the transcription (float64, tiny-llama)")
    a = p.parse_args()
    if not a.self_test:
        p.error("the model is used by torch_reference.py; run this file with --self-test")
    return self_test()


if __name__ == "__main__":
    sys.exit(main())
