#include "runner/core/block.h"

#include <cmath>
#include <vector>

#include "runner/core/ops.h"

namespace tunepar::core {

// Activations and workspace are written before they are read: not zeroed (on the CPU they start
// as NaN, so a read before the first write would show in every test).
Buffer StageContext::Activation(size_t values) const {
  if (precision == 0) return Buffer(*allocator, MemoryCategory::kActivations, values, 4.0, false);
  return Buffer::SixteenBit(*allocator, MemoryCategory::kActivations, values);
}

Buffer StageContext::Statistics(size_t values) const {
  return Buffer(*allocator, MemoryCategory::kActivations, values, 4.0, false);
}

const real* StageWeights::Vector(int64_t offset, int64_t n, int slot) const {
  if (bits16 == nullptr) return values + offset;
  real* widened = OpScratch(static_cast<size_t>(n), slot);
  From16Bit(widened, bits16 + offset, n, precision);
  return widened;
}

Buffer StageContext::Workspace(size_t values) const {
  return Buffer(*allocator, MemoryCategory::kWorkspace, values, StorageBytes(), false);
}

void StageContext::Store(real* p, int64_t n) const {
  RoundStorage(p, n, precision);
}

void StageContext::TpAllReduce(real* p, int64_t n) const {
  AllReduceSum(p, n, tp_comm, *clock, Phase::kTpComm);
}

BlockActivations AllocateBlockActivations(const StageContext& ctx, bool keep_scores) {
  const size_t N = ctx.N(), C = ctx.dims.C, T = ctx.dims.T;
  const Shard& s = ctx.shard;
  BlockActivations a;
  a.ln1 = ctx.Activation(N * C);
  a.ln1_mean = ctx.Statistics(N);
  a.ln1_rstd = ctx.Statistics(N);
  a.qkv = ctx.Activation(N * 3 * s.Cl);
  if (keep_scores) a.att = ctx.Activation(static_cast<size_t>(ctx.B) * s.NHl * T * T);
  a.atty = ctx.Activation(N * s.Cl);
  a.res2 = ctx.Activation(N * C);
  a.ln2 = ctx.Activation(N * C);
  a.ln2_mean = ctx.Statistics(N);
  a.ln2_rstd = ctx.Statistics(N);
  a.fch = ctx.Activation(N * s.Fl);
  a.fcg = ctx.Activation(N * s.Fl);
  return a;
}

BlockWorkspace AllocateBlockWorkspace(const StageContext& ctx, bool selective) {
  const size_t N = ctx.N(), C = ctx.dims.C, T = ctx.dims.T;
  const Shard& s = ctx.shard;
  BlockWorkspace w;
  w.partial = Buffer(*ctx.allocator, MemoryCategory::kCommBuffers, N * C, ctx.StorageBytes());
  w.dres2 = ctx.Workspace(N * C);
  w.dln = ctx.Workspace(N * C);
  w.datty = ctx.Workspace(N * s.Cl);
  w.dqkv = ctx.Workspace(N * 3 * s.Cl);
  w.dfcg = ctx.Workspace(N * s.Fl);
  w.dfch = ctx.Workspace(N * s.Fl);
  if (selective) w.scores = ctx.Activation(static_cast<size_t>(ctx.B) * s.NHl * T * T);
  return w;
}

namespace {

// Where an op computes an Activation: in place, or (16-bit storage) first in `scratch`, in fp32.
real* ComputeInto(const StageContext& ctx, Buffer& activation, real* scratch) {
  return ctx.precision == 0 ? activation.data() : scratch;
}
real* ComputeInto(const StageContext& ctx, Buffer& activation, Buffer& scratch) {
  return ComputeInto(ctx, activation, scratch.data());
}

// Stores what ComputeInto's buffer holds: as 16-bit numbers (exact: the op rounded it to the
// storage grid) with 16-bit storage; in place already in fp32.
void Keep16(const StageContext& ctx, Buffer& activation, const real* computed, int64_t n) {
  if (ctx.precision != 0) To16Bit(activation.bits16(), computed, n, ctx.precision);
}

// Attention over the saved qkv (ops.h AttentionForward, or AttentionForward16 with 16-bit storage).
void Attention(const StageContext& ctx, real* y, Buffer& att, const Buffer& qkv) {
  const int B = ctx.B, T = ctx.dims.T, Cl = ctx.shard.Cl, NHl = ctx.shard.NHl;
  if (ctx.precision == 0) {
    AttentionForward(y, att.data(), qkv.data(), B, T, Cl, NHl);
  } else {
    AttentionForward16(y, att.bits16(), qkv.bits16(), B, T, Cl, NHl, ctx.precision);
  }
}

void AttentionGradient(const StageContext& ctx, real* dqkv, const real* dy, const Buffer& qkv, const Buffer& att) {
  const int B = ctx.B, T = ctx.dims.T, Cl = ctx.shard.Cl, NHl = ctx.shard.NHl;
  if (ctx.precision == 0) {
    AttentionBackward(dqkv, dy, qkv.data(), att.data(), B, T, Cl, NHl);
  } else {
    AttentionBackward16(dqkv, dy, qkv.bits16(), att.bits16(), B, T, Cl, NHl, ctx.precision);
  }
}

// The residual stream's ops over an Activation (ops.h LayerNormForward/Backward and
// ResidualAdd, or their 16-bit-input forms with 16-bit storage).
void Normalize(const StageContext& ctx, real* out, Buffer& mean, Buffer& rstd, const Buffer& inp, const real* w,
               const real* b) {
  if (ctx.precision == 0) {
    LayerNormForward(out, mean.data(), rstd.data(), inp.data(), w, b, ctx.N(), ctx.dims.C, 0);
  } else {
    LayerNormForward16(out, mean.data(), rstd.data(), inp.bits16(), w, b, ctx.N(), ctx.dims.C, ctx.precision);
  }
}

void NormalizeGradient(const StageContext& ctx, real* dinp, real* dw, real* db, const real* dout, const Buffer& inp,
                       const real* w, const Buffer& mean, const Buffer& rstd) {
  if (ctx.precision == 0) {
    LayerNormBackward(dinp, dw, db, dout, inp.data(), w, mean.data(), rstd.data(), ctx.N(), ctx.dims.C, 0);
  } else {
    LayerNormBackward16(dinp, dw, db, dout, inp.bits16(), w, mean.data(), rstd.data(), ctx.N(), ctx.dims.C,
                        ctx.precision);
  }
}

// out = x + branch (branch rounded first, as ResidualAdd), N C values.
void Residual(const StageContext& ctx, Buffer& out, const Buffer& x, const real* branch) {
  const int64_t NC = int64_t{ctx.N()} * ctx.dims.C;
  if (ctx.precision == 0) {
    ResidualAdd(out.data(), x.data(), branch, NC, 0);
  } else {
    ResidualAdd16(out.bits16(), x.bits16(), branch, NC, ctx.precision);
  }
}

// A linear layer over an Activation (ops.h MatmulForward / MatmulBackward on N rows).
void LinearForward(const StageContext& ctx, real* out, const Buffer& inp, const StageWeights& W, LinearTensors t,
                   int C, int OC, int round_to) {
  const real* bias = t.bias >= 0 ? W.Vector(t.bias, OC, 2) : nullptr;
  if (ctx.precision == 0) {
    MatmulForward(out, inp.data(), W.values + t.w, bias, ctx.N(), C, OC, 0, round_to);
  } else {
    MatmulForward16(out, inp.bits16(), W.bits16 + t.w, bias, ctx.N(), C, OC, ctx.precision, round_to);
  }
}

// dw, dbias at the same offsets in the gradients G.
void LinearBackward(const StageContext& ctx, real* dinp, real* G, const real* dout, const Buffer& inp,
                    const StageWeights& W, LinearTensors t, int C, int OC, int round_dinp_to) {
  real* dbias = t.bias >= 0 ? G + t.bias : nullptr;
  if (ctx.precision == 0) {
    MatmulBackward(dinp, G + t.w, dbias, dout, inp.data(), W.values + t.w, ctx.N(), C, OC, 0, round_dinp_to);
  } else {
    MatmulBackward16(dinp, G + t.w, dbias, dout, inp.bits16(), W.bits16 + t.w, ctx.N(), C, OC, ctx.precision,
                     round_dinp_to);
  }
}

}  // namespace

void BlockForward(const StageContext& ctx, const StageWeights& W, const BlockTensors& t, const Buffer& x,
                  BlockActivations& a, BlockWorkspace& w, Buffer& out) {
  real* partial = w.partial.data();
  Buffer& att = a.att.data() != nullptr ? a.att : w.scores;
  const int C = ctx.dims.C, N = ctx.N();
  const int Cl = ctx.shard.Cl, Fl = ctx.shard.Fl, P = ctx.precision;
  const bool adds_bias = ctx.shard.tp_rank == 0;
  const int64_t NC = int64_t{N} * C, NF = int64_t{N} * Fl;

  // Every stored value is rounded to the storage precision P by the op that writes it; the
  // row-parallel partial sums only after their all-reduce (inside the residual add), so that any
  // TP size rounds the same sums.
  real* ln1 = ComputeInto(ctx, a.ln1, w.dln);
  Normalize(ctx, ln1, a.ln1_mean, a.ln1_rstd, x, W.Vector(t.ln1_w, C, 2), W.Vector(t.ln1_b, C, 3));
  Keep16(ctx, a.ln1, ln1, NC);
  real* qkv = ComputeInto(ctx, a.qkv, w.dqkv);
  LinearForward(ctx, qkv, a.ln1, W, {t.qkv_w, t.qkv_b}, C, 3 * Cl, P);
  Keep16(ctx, a.qkv, qkv, int64_t{N} * 3 * Cl);
  real* atty = ComputeInto(ctx, a.atty, w.datty);
  Attention(ctx, atty, att, a.qkv);  // att rounded by the softmax
  ctx.Store(atty, int64_t{N} * Cl);
  Keep16(ctx, a.atty, atty, int64_t{N} * Cl);
  LinearForward(ctx, partial, a.atty, W, {t.attproj_w, adds_bias ? t.attproj_b : -1}, Cl, C, 0);
  ctx.TpAllReduce(partial, NC);
  Residual(ctx, a.res2, x, partial);

  real* ln2 = ComputeInto(ctx, a.ln2, w.dln);
  Normalize(ctx, ln2, a.ln2_mean, a.ln2_rstd, a.res2, W.Vector(t.ln2_w, C, 2), W.Vector(t.ln2_b, C, 3));
  Keep16(ctx, a.ln2, ln2, NC);
  real* fch = ComputeInto(ctx, a.fch, w.dfch);
  LinearForward(ctx, fch, a.ln2, W, {t.fc_w, t.fc_b}, C, Fl, P);
  Keep16(ctx, a.fch, fch, NF);
  real* fcg = ComputeInto(ctx, a.fcg, w.dfcg);
  GeluForward(fcg, fch, NF, P);
  Keep16(ctx, a.fcg, fcg, NF);
  LinearForward(ctx, partial, a.fcg, W, {t.fcproj_w, adds_bias ? t.fcproj_b : -1}, Fl, C, 0);
  ctx.TpAllReduce(partial, NC);
  Residual(ctx, out, a.res2, partial);
}

void BlockBackward(const StageContext& ctx, const StageWeights& W, real* G, const BlockTensors& t, const Buffer& x,
                   const BlockActivations& a, BlockWorkspace& w, real* dx) {
  const int C = ctx.dims.C, N = ctx.N();
  const int Cl = ctx.shard.Cl, Fl = ctx.shard.Fl, P = ctx.precision;
  const int64_t NC = int64_t{N} * C, NF = int64_t{N} * Fl;

  // MLP: out = res2 + h Wp^T + bp, h = gelu(fch), fch = ln2 Wfc^T + bfc.
  // (As in the forward pass, each op rounds what it stores; the gradients of the column-parallel
  // layers' inputs only after their all-reduce.)
  LinearBackward(ctx, w.dfcg.data(), G, dx, a.fcg, W, {t.fcproj_w, t.fcproj_b}, Fl, C, P);
  if (P == 0) {
    GeluBackward(w.dfch.data(), a.fch.data(), w.dfcg.data(), NF, 0);
  } else {
    GeluBackward16(w.dfch.data(), a.fch.bits16(), w.dfcg.data(), NF, P);
  }
  LinearBackward(ctx, w.dln.data(), G, w.dfch.data(), a.ln2, W, {t.fc_w, t.fc_b}, C, Fl, 0);
  ctx.TpAllReduce(w.dln.data(), NC);
  ctx.Store(w.dln.data(), NC);
  Copy(w.dres2.data(), dx, NC);
  NormalizeGradient(ctx, w.dres2.data(), G + t.ln2_w, G + t.ln2_b, w.dln.data(), a.res2, W.Vector(t.ln2_w, C, 2),
                    a.ln2_mean, a.ln2_rstd);

  // Attention: res2 = x + y Wo^T + bo, y = attention(qkv), qkv = ln1 Wqkv^T + bqkv.
  const Buffer* att = &a.att;
  if (a.att.data() == nullptr) {  // selective recomputation (y is recomputed too, into scratch)
    Attention(ctx, w.datty.data(), w.scores, a.qkv);
    att = &w.scores;
  }
  LinearBackward(ctx, w.datty.data(), G, w.dres2.data(), a.atty, W, {t.attproj_w, t.attproj_b}, Cl, C, P);
  AttentionGradient(ctx, w.dqkv.data(), w.datty.data(), a.qkv, *att);
  ctx.Store(w.dqkv.data(), int64_t{N} * 3 * Cl);
  LinearBackward(ctx, w.dln.data(), G, w.dqkv.data(), a.ln1, W, {t.qkv_w, t.qkv_b}, C, 3 * Cl, 0);
  ctx.TpAllReduce(w.dln.data(), NC);
  ctx.Store(w.dln.data(), NC);
  Copy(dx, w.dres2.data(), NC);
  NormalizeGradient(ctx, dx, G + t.ln1_w, G + t.ln1_b, w.dln.data(), x, W.Vector(t.ln1_w, C, 2), a.ln1_mean,
                    a.ln1_rstd);
}

void EmbeddingForward(const StageContext& ctx, const StageWeights& W, const ParameterLayout& p, const int* tokens,
                      Buffer& x, real* scratch) {
  const Shard& s = ctx.shard;
  const int T = ctx.dims.T, C = ctx.dims.C;
  const int64_t NC = int64_t{ctx.N()} * C;
  const real* wpe = s.tp_rank == 0 ? W.Vector(p.wpe, int64_t{T} * C, 2) : nullptr;
  real* sum = ComputeInto(ctx, x, scratch);
  if (W.bits16 == nullptr) {
    EncoderForward(sum, tokens, W.values + p.wte, wpe, s.v0, s.Vl, ctx.B, T, C);
  } else {
    EncoderForward16(sum, tokens, W.bits16 + p.wte, wpe, s.v0, s.Vl, ctx.B, T, C, W.precision);
  }
  ctx.TpAllReduce(sum, NC);
  ctx.Store(sum, NC);
  Keep16(ctx, x, sum, NC);
}

void EmbeddingBackward(const StageContext& ctx, real* G, const ParameterLayout& p, const int* tokens,
                       const real* dx) {
  EncoderBackward(G + p.wte, G + p.wpe, dx, tokens, ctx.shard.v0, ctx.shard.Vl, ctx.B, ctx.dims.T,
                  ctx.dims.C);
}

double HeadForwardBackward(const StageContext& ctx, const StageWeights& W, real* G, const ParameterLayout& p,
                           const Buffer& x, const int* targets, double grad_scale, real* dx) {
  const int N = ctx.N(), C = ctx.dims.C, Vl = ctx.shard.Vl, v0 = ctx.shard.v0;
  const int64_t NC = int64_t{N} * C;
  Buffer lnf = ctx.Activation(NC), mean = ctx.Statistics(N), rstd = ctx.Statistics(N);
  // Logits in fp32 whatever the storage precision (the loss is computed in fp32).
  Buffer logits(*ctx.allocator, MemoryCategory::kActivations, static_cast<size_t>(N) * Vl, 4.0);
  Buffer stats(*ctx.allocator, MemoryCategory::kWorkspace, 3 * static_cast<size_t>(N), 4.0);
  real* row_max = stats.data();
  real* row_sum = row_max + N;  // row_sum and target_logit are adjacent: one all-reduce
  real* target_logit = row_sum + N;

  real* normed = ComputeInto(ctx, lnf, dx);  // dx is free until the backward below
  Normalize(ctx, normed, mean, rstd, x, W.Vector(p.lnf_w, C, 2), W.Vector(p.lnf_b, C, 3));
  Keep16(ctx, lnf, normed, NC);
  LinearForward(ctx, logits.data(), lnf, W, {p.lm_head, -1}, C, Vl, ctx.precision);

  CrossEntropyStats(row_max, nullptr, nullptr, logits.data(), targets, nullptr, v0, N, Vl);
  AllReduceMax(row_max, N, ctx.tp_comm, *ctx.clock, Phase::kTpComm);
  CrossEntropyStats(nullptr, row_sum, target_logit, logits.data(), targets, row_max, v0, N, Vl);
  AllReduceSum(row_sum, 2 * int64_t{N}, ctx.tp_comm, *ctx.clock, Phase::kTpComm);
  std::vector<real> host(3 * static_cast<size_t>(N));
  Download(host.data(), stats.data(), host.size() * sizeof(real));
  double loss = 0;
  for (int n = 0; n < N; ++n) {
    const real log_sum = Log(host[N + n]) + host[n];
    loss += static_cast<double>(log_sum) - host[2 * N + n];
    host[n] = log_sum;
  }
  Upload(row_max, host.data(), N * sizeof(real));  // now log_sum per row
  // dlogits at storage width, as the LM head's backward reads them.
  CrossEntropyBackward(logits.data(), logits.data(), row_max, targets, v0, static_cast<real>(grad_scale), N,
                       Vl, ctx.precision);

  Buffer dlnf = ctx.Workspace(NC);
  LinearBackward(ctx, dlnf.data(), G, logits.data(), lnf, W, {p.lm_head, -1}, C, Vl, 0);
  ctx.TpAllReduce(dlnf.data(), NC);
  ctx.Store(dlnf.data(), NC);
  Fill(dx, NC, 0);
  NormalizeGradient(ctx, dx, G + p.lnf_w, G + p.lnf_b, dlnf.data(), x, W.Vector(p.lnf_w, C, 2), mean, rstd);
  return loss;
}

}  // namespace tunepar::core
