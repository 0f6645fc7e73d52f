#include "runner/core/block.h"

#include "runner/core/comm.h"
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
  if (offset < 0) return nullptr;  // a tensor the model does not have (RMSNorm's bias, ...)
  if (bits16 == nullptr) return values + offset;
  real* widened = OpScratch(static_cast<size_t>(n), slot);
  From16Bit(widened, bits16 + offset, n, precision);
  return widened;
}

Buffer StageContext::ActivationGradient(size_t values) const {
  if (precision == 0) return Buffer(*allocator, MemoryCategory::kWorkspace, values, 4.0, false);
  return Buffer::SixteenBit(*allocator, MemoryCategory::kWorkspace, values);
}

Buffer StageContext::PartialSum(size_t values) const {
  return Buffer(*allocator, MemoryCategory::kCommBuffers, values, StorageBytes(), false);
}

RingContext StageContext::Ring() const {
  return {B, dims.T, shard.Cl, shard.NHl, shard.KVl, dims.HeadSize(), precision, cp, cp_rank, cp_comm, allocator};
}

void StageContext::Store(real* p, int64_t n) const {
  RoundStorage(p, n, precision);
}

void StageContext::TpAllReduce(real* p, int64_t n) const {
  AllReduceSum(p, n, tp_comm, *clock, Phase::kTpComm);
}

BlockActivations AllocateBlockActivations(const StageContext& ctx, bool keep_scores) {
  const size_t N = ctx.N(), R = ctx.StreamRows(), C = ctx.dims.C, T = ctx.dims.T;
  const Shard& s = ctx.shard;
  BlockActivations a;
  const bool centered = !ctx.dims.rmsnorm;  // RMSNorm keeps no mean
  a.ln1 = ctx.Activation(R * C);
  if (centered) a.ln1_mean = ctx.Statistics(R);
  a.ln1_rstd = ctx.Statistics(R);
  a.qkv = ctx.Activation(N * ctx.QkvCols());
  if (ctx.flash_attention) {
    a.lse = ctx.Statistics(static_cast<size_t>(ctx.B) * s.NHl * T);
  } else if (keep_scores) {
    a.att = ctx.Activation(static_cast<size_t>(ctx.B) * s.NHl * T * T);
  }
  a.atty = ctx.Activation(N * s.Cl);
  a.res2 = ctx.Activation(R * C);
  a.ln2 = ctx.Activation(R * C);
  if (centered) a.ln2_mean = ctx.Statistics(R);
  a.ln2_rstd = ctx.Statistics(R);
  a.fch = ctx.Activation(N * ctx.MlpInCols());
  a.fcg = ctx.Activation(N * s.Fl);
  return a;
}

BlockWorkspace AllocateBlockWorkspace(const StageContext& ctx, bool selective) {
  const size_t N = ctx.N(), R = ctx.StreamRows(), C = ctx.dims.C, T = ctx.dims.T;
  const Shard& s = ctx.shard;
  BlockWorkspace w;
  w.partial = ctx.PartialSum(N * C);
  w.dres2 = ctx.ActivationGradient(R * C);
  w.datty = ctx.ActivationGradient(N * s.Cl);
  w.dqkv = ctx.ActivationGradient(N * ctx.QkvCols());
  w.dfcg = ctx.ActivationGradient(N * s.Fl);
  w.dfch = ctx.ActivationGradient(N * ctx.MlpInCols());
  if (selective && !ctx.flash_attention) w.scores = ctx.Activation(static_cast<size_t>(ctx.B) * s.NHl * T * T);
  if (ctx.sequence_parallel) {
    w.all_rows = ctx.ActivationGradient(N * C);
    w.row_sum = ctx.PartialSum(R * C);
  }
  if (ctx.cp > 1) w.ring = AllocateRingBuffers(ctx.Ring());
  return w;
}

namespace {

// The block's ops on Buffers as StageContext allocates them: the real op (fp32 storage) or its
// 16-bit form (16-bit storage: ops.h, reading and writing the 16-bit numbers as they are). Every
// stored output is rounded to the storage grid by the op that writes it.

// out = layernorm(inp), its mean and rstd saved.
void Normalize(const StageContext& ctx, Buffer& out, Buffer& mean, Buffer& rstd, const Buffer& inp, const real* w,
               const real* b) {
  if (ctx.precision == 0) {
    LayerNormForward(out.data(), mean.data(), rstd.data(), inp.data(), w, b, ctx.StreamRows(), ctx.dims.C, 0);
  } else {
    LayerNormForward16(out.bits16(), mean.data(), rstd.data(), inp.bits16(), w, b, ctx.StreamRows(), ctx.dims.C,
                       ctx.precision);
  }
}

// dinp += the layer norm's input gradient, from dout: reals on the storage grid (an all-reduced
// partial sum).
void NormalizeGradient(const StageContext& ctx, Buffer& dinp, real* dw, real* db, const real* dout, const Buffer& inp,
                       const real* w, const Buffer& mean, const Buffer& rstd) {
  if (ctx.precision == 0) {
    LayerNormBackward(dinp.data(), dw, db, dout, inp.data(), w, mean.data(), rstd.data(), ctx.StreamRows(),
                      ctx.dims.C, 0);
  } else {
    LayerNormBackward16(dinp.bits16(), dw, db, dout, inp.bits16(), w, mean.data(), rstd.data(), ctx.StreamRows(),
                        ctx.dims.C, ctx.precision);
  }
}

// out = x + branch (branch rounded first, as ResidualAdd), the stream's values.
void Residual(const StageContext& ctx, Buffer& out, const Buffer& x, const real* branch) {
  const int64_t n = ctx.StreamValues();
  if (ctx.precision == 0) {
    ResidualAdd(out.data(), x.data(), branch, n, 0);
  } else {
    ResidualAdd16(out.bits16(), x.bits16(), branch, n, ctx.precision);
  }
}

// The stream's rows (R, C) at storage width as all N rows: themselves, or with sequence
// parallelism all-gathered over TP into `all` (this rank's rows copied to their place first).
const Buffer& AllRows(const StageContext& ctx, const Buffer& rows, Buffer& all) {
  if (!ctx.sequence_parallel) return rows;
  const int64_t n = ctx.StreamValues(), at = n * ctx.shard.tp_rank;
  if (ctx.precision == 0) {
    Copy(all.data() + at, rows.data(), n);
  } else {
    Copy16(all.bits16() + at, rows.bits16(), n);
  }
  TimedScope timed(*ctx.clock, Phase::kTpComm);
  if (ctx.precision == 0) {
    DeviceAllGather(all.data(), n, ctx.tp_comm);
  } else {
    DeviceAllGather16(all.bits16(), n, ctx.tp_comm);
  }
  return all;
}

// A partial sum over all N rows (fp32), summed over TP: in place (all-reduce), or with sequence
// parallelism reduce-scattered into `rows` (this rank's stream rows). Returns where the sum is.
real* SumOverTp(const StageContext& ctx, real* partial, real* rows) {
  if (!ctx.sequence_parallel) {
    ctx.TpAllReduce(partial, int64_t{ctx.N()} * ctx.dims.C);
    return partial;
  }
  TimedScope timed(*ctx.clock, Phase::kTpComm);
  DeviceReduceScatter(partial, rows, ctx.StreamValues(), ctx.tp_comm);
  return rows;
}

void CopyValues(const StageContext& ctx, Buffer& to, const Buffer& from, int64_t n) {
  if (ctx.precision == 0) {
    Copy(to.data(), from.data(), n);
  } else {
    Copy16(to.bits16(), from.bits16(), n);
  }
}

// Attention over the saved qkv: y and the probabilities att.
void Attention(const StageContext& ctx, Buffer& y, Buffer& att, const Buffer& qkv) {
  const int B = ctx.B, T = ctx.dims.T, Cl = ctx.shard.Cl, NHl = ctx.shard.NHl, KVl = ctx.shard.KVl;
  if (ctx.precision == 0) {
    AttentionForward(y.data(), att.data(), qkv.data(), B, T, Cl, NHl, 0, KVl);
  } else {
    AttentionForward16(y.bits16(), att.bits16(), qkv.bits16(), B, T, Cl, NHl, ctx.precision, KVl);
  }
}

void AttentionGradient(const StageContext& ctx, Buffer& dqkv, const Buffer& dy, const Buffer& qkv, const Buffer& att) {
  const int B = ctx.B, T = ctx.dims.T, Cl = ctx.shard.Cl, NHl = ctx.shard.NHl, KVl = ctx.shard.KVl;
  if (ctx.precision == 0) {
    AttentionBackward(dqkv.data(), dy.data(), qkv.data(), att.data(), B, T, Cl, NHl, 0, KVl);
  } else {
    AttentionBackward16(dqkv.bits16(), dy.bits16(), qkv.bits16(), att.bits16(), B, T, Cl, NHl, ctx.precision, KVl);
  }
}

// Fused attention over the saved qkv: y and each row's log-sum-exp.
void FlashAttention(const StageContext& ctx, Buffer& y, Buffer& lse, const Buffer& qkv) {
  const int B = ctx.B, T = ctx.dims.T, Cl = ctx.shard.Cl, NHl = ctx.shard.NHl, KVl = ctx.shard.KVl;
  if (ctx.precision == 0) {
    FlashAttentionForward(y.data(), lse.data(), qkv.data(), B, T, Cl, NHl, 0, KVl);
  } else {
    FlashAttentionForward16(y.bits16(), lse.data(), qkv.bits16(), B, T, Cl, NHl, ctx.precision, KVl);
  }
}

void FlashAttentionGradient(const StageContext& ctx, Buffer& dqkv, const Buffer& dy, const Buffer& qkv,
                            const Buffer& y, const Buffer& lse) {
  const int B = ctx.B, T = ctx.dims.T, Cl = ctx.shard.Cl, NHl = ctx.shard.NHl, KVl = ctx.shard.KVl;
  if (ctx.precision == 0) {
    FlashAttentionBackward(dqkv.data(), dy.data(), qkv.data(), y.data(), lse.data(), B, T, Cl, NHl, 0, KVl);
  } else {
    FlashAttentionBackward16(dqkv.bits16(), dy.bits16(), qkv.bits16(), y.bits16(), lse.data(), B, T, Cl, NHl,
                             ctx.precision, KVl);
  }
}

// The MLP's activation: GeLU of fch (N, Fl), or SwiGLU of fch (N, 2 Fl) = [gate | up].
void Activate(const StageContext& ctx, Buffer& out, const Buffer& inp) {
  const int N = ctx.N(), Fl = ctx.shard.Fl;
  const int64_t n = int64_t{N} * Fl;
  if (ctx.dims.swiglu) {
    if (ctx.precision == 0) {
      SwigluForward(out.data(), inp.data(), N, Fl, 0);
    } else {
      SwigluForward16(out.bits16(), inp.bits16(), N, Fl, ctx.precision);
    }
  } else if (ctx.precision == 0) {
    GeluForward(out.data(), inp.data(), n, 0);
  } else {
    GeluForward16(out.bits16(), inp.bits16(), n, ctx.precision);
  }
}

void ActivationGradientOf(const StageContext& ctx, Buffer& dinp, const Buffer& inp, const Buffer& dout) {
  const int N = ctx.N(), Fl = ctx.shard.Fl;
  const int64_t n = int64_t{N} * Fl;
  if (ctx.dims.swiglu) {
    if (ctx.precision == 0) {
      SwigluBackward(dinp.data(), inp.data(), dout.data(), N, Fl, 0);
    } else {
      SwigluBackward16(dinp.bits16(), inp.bits16(), dout.bits16(), N, Fl, ctx.precision);
    }
  } else if (ctx.precision == 0) {
    GeluBackward(dinp.data(), inp.data(), dout.data(), n, 0);
  } else {
    GeluBackward16(dinp.bits16(), inp.bits16(), dout.bits16(), n, ctx.precision);
  }
}

// Rotary positions on the Q and K heads of qkv (N, QkvCols), in place: turned forward after the
// QKV layer, or back on their gradients before its backward. Nothing without rotary positions.
void RotateQueriesAndKeys(const StageContext& ctx, Buffer& qkv, bool inverse) {
  if (!ctx.dims.rotary) return;
  const int hs = ctx.dims.HeadSize(), rotated = (ctx.shard.NHl + ctx.shard.KVl) * hs;
  if (ctx.cp > 1) {  // each chunk at its place in the sequence
    const int rows = ctx.dims.T / 2, ld = ctx.QkvCols();
    for (int b = 0; b < ctx.B; ++b) {
      for (int half = 0; half < 2; ++half) {
        const int64_t at = (int64_t{b} * ctx.dims.T + int64_t{half} * rows) * ld;
        if (ctx.precision == 0) {
          Rotary(qkv.data() + at, rows, rows, rotated, ld, hs, inverse, 0, ctx.ChunkStart(half));
        } else {
          Rotary16(qkv.bits16() + at, rows, rows, rotated, ld, hs, inverse, ctx.precision, ctx.ChunkStart(half));
        }
      }
    }
    return;
  }
  if (ctx.precision == 0) {
    Rotary(qkv.data(), ctx.N(), ctx.dims.T, rotated, ctx.QkvCols(), hs, inverse, 0);
  } else {
    Rotary16(qkv.bits16(), ctx.N(), ctx.dims.T, rotated, ctx.QkvCols(), hs, inverse, ctx.precision);
  }
}

// A gradient's place in the flat gradients (null for a tensor the model does not have).
real* GradientAt(real* G, int64_t offset) {
  return offset >= 0 ? G + offset : nullptr;
}

const real* BiasOf(const StageWeights& W, LinearTensors t, int OC) {
  return t.bias >= 0 ? W.Vector(t.bias, OC, 2) : nullptr;
}

// A linear layer over N rows (ops.h MatmulForward / MatmulBackward): out (N, OC) = inp (N, C)
// W^T + bias, stored.
void Linear(const StageContext& ctx, Buffer& out, const Buffer& inp, const StageWeights& W, LinearTensors t, int C,
            int OC) {
  if (ctx.precision == 0) {
    MatmulForward(out.data(), inp.data(), W.values + t.w, BiasOf(W, t, OC), ctx.N(), C, OC, 0, 0);
  } else {
    MatmulForward16(out.bits16(), inp.bits16(), W.bits16 + t.w, BiasOf(W, t, OC), ctx.N(), C, OC, ctx.precision);
  }
}

// The same into reals rounded to `round_to` (0: a row-parallel layer's partial sum, left in fp32).
void LinearInto(const StageContext& ctx, real* out, const Buffer& inp, const StageWeights& W, LinearTensors t, int C,
                int OC, int round_to) {
  if (ctx.precision == 0) {
    MatmulForward(out, inp.data(), W.values + t.w, BiasOf(W, t, OC), ctx.N(), C, OC, 0, round_to);
  } else {
    MatmulForward16(out, inp.bits16(), W.bits16 + t.w, BiasOf(W, t, OC), ctx.N(), C, OC, ctx.precision, round_to);
  }
}

// dinp = dout W, stored; dw and dbias accumulate at the layer's offsets in the gradients G.
void LinearGradient(const StageContext& ctx, Buffer& dinp, real* G, const Buffer& dout, const Buffer& inp,
                    const StageWeights& W, LinearTensors t, int C, int OC) {
  real* dbias = t.bias >= 0 ? G + t.bias : nullptr;
  if (ctx.precision == 0) {
    MatmulBackward(dinp.data(), G + t.w, dbias, dout.data(), inp.data(), W.values + t.w, ctx.N(), C, OC, 0, 0);
  } else {
    MatmulBackward16(dinp.bits16(), G + t.w, dbias, dout.bits16(), inp.bits16(), W.bits16 + t.w, ctx.N(), C, OC,
                     ctx.precision);
  }
}

// The same with dinp a column-parallel layer's partial sum (fp32, all-reduced before rounding).
void LinearGradientPartial(const StageContext& ctx, real* partial, real* G, const Buffer& dout, const Buffer& inp,
                           const StageWeights& W, LinearTensors t, int C, int OC) {
  real* dbias = t.bias >= 0 ? G + t.bias : nullptr;
  if (ctx.precision == 0) {
    MatmulBackward(partial, G + t.w, dbias, dout.data(), inp.data(), W.values + t.w, ctx.N(), C, OC, 0, 0);
  } else {
    MatmulBackward16(partial, G + t.w, dbias, dout.bits16(), inp.bits16(), W.bits16 + t.w, ctx.N(), C, OC,
                     ctx.precision);
  }
}

// The attention half of a block: res2 = x + attention(ln1(x)) Wo^T + bo. The row-parallel
// partial sum is rounded only after its sum over TP (inside the residual add), so that any TP
// size rounds the same sums.
void AttentionHalfForward(const StageContext& ctx, const StageWeights& W, const BlockTensors& t, const Buffer& x,
                          BlockActivations& a, BlockWorkspace& w) {
  const int C = ctx.dims.C;
  Buffer& att = a.att.data() != nullptr ? a.att : w.scores;
  const bool adds_bias = ctx.shard.tp_rank == 0;
  Normalize(ctx, a.ln1, a.ln1_mean, a.ln1_rstd, x, W.Vector(t.ln1_w, C, 2), W.Vector(t.ln1_b, C, 3));
  Linear(ctx, a.qkv, AllRows(ctx, a.ln1, w.all_rows), W, {t.qkv_w, t.qkv_b}, C, ctx.QkvCols());
  RotateQueriesAndKeys(ctx, a.qkv, false);
  if (ctx.cp > 1) {
    RingAttentionForward(ctx.Ring(), a.atty, a.lse, a.qkv, w.ring);
  } else if (ctx.flash_attention) {
    FlashAttention(ctx, a.atty, a.lse, a.qkv);
  } else {
    Attention(ctx, a.atty, att, a.qkv);
  }
  LinearInto(ctx, w.partial.data(), a.atty, W, {t.attproj_w, adds_bias ? t.attproj_b : -1}, ctx.shard.Cl, C, 0);
  Residual(ctx, a.res2, x, SumOverTp(ctx, w.partial.data(), w.row_sum.data()));
}

// The MLP half: out = res2 + act(ln2(res2) Wfc^T + bfc) Wp^T + bp.
void MlpHalfForward(const StageContext& ctx, const StageWeights& W, const BlockTensors& t, BlockActivations& a,
                    BlockWorkspace& w, Buffer& out) {
  const int C = ctx.dims.C;
  const bool adds_bias = ctx.shard.tp_rank == 0;
  Normalize(ctx, a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, W.Vector(t.ln2_w, C, 2), W.Vector(t.ln2_b, C, 3));
  Linear(ctx, a.fch, AllRows(ctx, a.ln2, w.all_rows), W, {t.fc_w, t.fc_b}, C, ctx.MlpInCols());
  Activate(ctx, a.fcg, a.fch);
  LinearInto(ctx, w.partial.data(), a.fcg, W, {t.fcproj_w, adds_bias ? t.fcproj_b : -1}, ctx.shard.Fl, C, 0);
  Residual(ctx, out, a.res2, SumOverTp(ctx, w.partial.data(), w.row_sum.data()));
}

// The input gradient of a column-parallel layer, summed over TP and rounded to the storage
// grid, then through the norm before it: dinp = dskip + the norm's input gradient (`dskip`, the
// residual path's gradient, is copied into dinp first).
void ThroughNormGradient(const StageContext& ctx, Buffer& dinp, const Buffer& dskip, real* G, int64_t norm_w,
                         int64_t norm_b, const StageWeights& W, const Buffer& inp, const Buffer& mean,
                         const Buffer& rstd, BlockWorkspace& w) {
  real* sum = SumOverTp(ctx, w.partial.data(), w.row_sum.data());
  ctx.Store(sum, ctx.StreamValues());
  CopyValues(ctx, dinp, dskip, ctx.StreamValues());
  NormalizeGradient(ctx, dinp, G + norm_w, GradientAt(G, norm_b), sum, inp, W.Vector(norm_w, ctx.dims.C, 2), mean,
                    rstd);
}

// The MLP half's backward: from dx (the block output's gradient) to dres2. (As in the forward
// pass, each op rounds what it stores; the column-parallel layer's input gradient only after its
// sum over TP.) The stream's rows are all-gathered for the GEMMs (dx, then ln2 again).
void MlpHalfBackward(const StageContext& ctx, const StageWeights& W, real* G, const BlockTensors& t,
                     const BlockActivations& a, BlockWorkspace& w, const Buffer& dx) {
  const int C = ctx.dims.C;
  LinearGradient(ctx, w.dfcg, G, AllRows(ctx, dx, w.all_rows), a.fcg, W, {t.fcproj_w, t.fcproj_b}, ctx.shard.Fl, C);
  ActivationGradientOf(ctx, w.dfch, a.fch, w.dfcg);
  LinearGradientPartial(ctx, w.partial.data(), G, w.dfch, AllRows(ctx, a.ln2, w.all_rows), W, {t.fc_w, t.fc_b}, C,
                        ctx.MlpInCols());
  ThroughNormGradient(ctx, w.dres2, dx, G, t.ln2_w, t.ln2_b, W, a.res2, a.ln2_mean, a.ln2_rstd, w);
}

// The attention half's backward: from dres2 to dx (the block input's gradient).
void AttentionHalfBackward(const StageContext& ctx, const StageWeights& W, real* G, const BlockTensors& t,
                           const Buffer& x, const BlockActivations& a, BlockWorkspace& w, Buffer& dx) {
  const int C = ctx.dims.C;
  const Buffer* att = &a.att;
  if (!ctx.flash_attention && a.att.data() == nullptr) {  // selective recomputation (y too, into datty)
    Attention(ctx, w.datty, w.scores, a.qkv);
    att = &w.scores;
  }
  LinearGradient(ctx, w.datty, G, AllRows(ctx, w.dres2, w.all_rows), a.atty, W, {t.attproj_w, t.attproj_b},
                 ctx.shard.Cl, C);
  if (ctx.cp > 1) {
    RingAttentionBackward(ctx.Ring(), w.dqkv, w.datty, a.qkv, a.atty, a.lse, w.ring);
  } else if (ctx.flash_attention) {
    FlashAttentionGradient(ctx, w.dqkv, w.datty, a.qkv, a.atty, a.lse);
  } else {
    AttentionGradient(ctx, w.dqkv, w.datty, a.qkv, *att);
  }
  RotateQueriesAndKeys(ctx, w.dqkv, true);
  LinearGradientPartial(ctx, w.partial.data(), G, w.dqkv, AllRows(ctx, a.ln1, w.all_rows), W, {t.qkv_w, t.qkv_b}, C,
                        ctx.QkvCols());
  ThroughNormGradient(ctx, dx, w.dres2, G, t.ln1_w, t.ln1_b, W, x, a.ln1_mean, a.ln1_rstd, w);
}

// Calls chunk(first row, rows, position of the first, sequences) over the micro-batch's token
// rows: all B sequences of T rows at position 0 at once, or with context parallelism each
// sequence's two chunks of T / 2 rows at their places in the whole sequence.
template <typename Chunk>
void ForEachChunk(const StageContext& ctx, const Chunk& chunk) {
  if (ctx.cp == 1) {
    chunk(0, ctx.dims.T, 0, ctx.B);
    return;
  }
  const int rows = ctx.dims.T / 2;
  for (int b = 0; b < ctx.B; ++b) {
    for (int half = 0; half < 2; ++half) chunk(int64_t{b} * ctx.dims.T + int64_t{half} * rows, rows, ctx.ChunkStart(half), 1);
  }
}

// All-reduces a replicated vector's gradient over TP (nothing for a tensor the model lacks).
void SumGradientOverTp(const StageContext& ctx, real* G, int64_t offset) {
  if (offset >= 0) ctx.TpAllReduce(G + offset, ctx.dims.C);
}

}  // namespace

void BlockForward(const StageContext& ctx, const StageWeights& W, const BlockTensors& t, const Buffer& x,
                  BlockActivations& a, BlockWorkspace& w, Buffer& out) {
  AttentionHalfForward(ctx, W, t, x, a, w);
  MlpHalfForward(ctx, W, t, a, w, out);
}

void BlockBackward(const StageContext& ctx, const StageWeights& W, real* G, const BlockTensors& t, const Buffer& x,
                   const BlockActivations& a, BlockWorkspace& w, Buffer& dx) {
  MlpHalfBackward(ctx, W, G, t, a, w, dx);
  AttentionHalfBackward(ctx, W, G, t, x, a, w, dx);
}

void SumRowGradientsOverTp(const StageContext& ctx, real* G, const BlockTensors& t) {
  if (!ctx.sequence_parallel) return;
  for (int64_t offset : {t.ln1_w, t.ln1_b, t.ln2_w, t.ln2_b}) SumGradientOverTp(ctx, G, offset);
}

void SumRowGradientsOverTp(const StageContext& ctx, real* G, const ParameterLayout& p) {
  if (!ctx.sequence_parallel) return;
  for (int64_t offset : {p.lnf_w, p.lnf_b}) SumGradientOverTp(ctx, G, offset);
}

void EmbeddingForward(const StageContext& ctx, const StageWeights& W, const ParameterLayout& p, const int* tokens,
                      Buffer& x, BlockWorkspace& w) {
  const Shard& s = ctx.shard;
  const int C = ctx.dims.C;
  // null without a table; the whole sequence's positions
  const real* wpe = s.tp_rank == 0 ? W.Vector(p.wpe, int64_t{ctx.SequenceLength()} * C, 2) : nullptr;
  const bool in_place = ctx.precision == 0 && !ctx.sequence_parallel;
  real* lookup = in_place ? x.data() : w.partial.data();
  // (sequences of T rows, or with context parallelism each chunk of T / 2 rows at its position)
  ForEachChunk(ctx, [&](int64_t row, int rows, int position, int sequences) {
    const real* positions = wpe == nullptr ? nullptr : wpe + int64_t{position} * C;
    if (W.bits16 == nullptr) {
      EncoderForward(lookup + row * C, tokens + row, W.values + p.wte, positions, s.v0, s.Vl, sequences, rows, C);
    } else {
      EncoderForward16(lookup + row * C, tokens + row, W.bits16 + p.wte, positions, s.v0, s.Vl, sequences, rows, C,
                       W.precision);
    }
  });
  real* sum = SumOverTp(ctx, lookup, ctx.precision == 0 ? x.data() : w.row_sum.data());  // (R, C)
  ctx.Store(sum, ctx.StreamValues());
  if (ctx.precision != 0) To16Bit(x.bits16(), sum, ctx.StreamValues(), ctx.precision);  // exact: rounded above
}

void EmbeddingBackward(const StageContext& ctx, real* G, const ParameterLayout& p, const int* tokens,
                       const Buffer& dx, BlockWorkspace& w) {
  const Shard& s = ctx.shard;
  const Buffer& all = AllRows(ctx, dx, w.all_rows);
  const int C = ctx.dims.C;
  real* dwpe = GradientAt(G, p.wpe);
  ForEachChunk(ctx, [&](int64_t row, int rows, int position, int sequences) {
    real* positions = dwpe == nullptr ? nullptr : dwpe + int64_t{position} * C;
    if (ctx.precision == 0) {
      EncoderBackward(G + p.wte, positions, all.data() + row * C, tokens + row, s.v0, s.Vl, sequences, rows, C);
    } else {
      EncoderBackward16(G + p.wte, positions, all.bits16() + row * C, tokens + row, s.v0, s.Vl, sequences, rows, C,
                        ctx.precision);
    }
  });
}

void HeadForwardBackward(const StageContext& ctx, const StageWeights& W, real* G, const ParameterLayout& p,
                         const Buffer& x, const int* targets, double grad_scale, BlockWorkspace& w, Buffer& dx,
                         double* loss) {
  const int N = ctx.N(), C = ctx.dims.C, Vl = ctx.shard.Vl, v0 = ctx.shard.v0, R = ctx.StreamRows();
  const int64_t NC = int64_t{N} * C;
  Buffer lnf = ctx.Activation(ctx.StreamValues()), rstd = ctx.Statistics(R);
  Buffer mean = ctx.dims.rmsnorm ? Buffer() : ctx.Statistics(R);
  // Logits in fp32 whatever the storage precision (the loss is computed in fp32): the LM head's
  // GEMM sums as they come (one GEMM call); with 16-bit storage the cross-entropy rounds each
  // to the grid as it reads it: the same numbers as a rounding pass over the N x Vl values,
  // without that pass's traffic.
  Buffer logits(*ctx.allocator, MemoryCategory::kActivations, static_cast<size_t>(N) * Vl, 4.0);
  Buffer stats(*ctx.allocator, MemoryCategory::kWorkspace, 3 * static_cast<size_t>(N), 4.0);
  real* row_max = stats.data();
  real* row_sum = row_max + N;  // row_sum and target_logit are adjacent: one all-reduce
  real* target_logit = row_sum + N;

  Normalize(ctx, lnf, mean, rstd, x, W.Vector(p.lnf_w, C, 2), W.Vector(p.lnf_b, C, 3));
  const Buffer& lnf_all = AllRows(ctx, lnf, w.all_rows);  // unchanged until the LM head's backward
  LinearInto(ctx, logits.data(), lnf_all, W, {p.lm_head, -1}, C, Vl, 0);

  CrossEntropyStats(row_max, nullptr, nullptr, logits.data(), targets, nullptr, v0, N, Vl, ctx.precision);
  AllReduceMax(row_max, N, ctx.tp_comm, *ctx.clock, Phase::kTpComm);
  CrossEntropyStats(nullptr, row_sum, target_logit, logits.data(), targets, row_max, v0, N, Vl, ctx.precision);
  AllReduceSum(row_sum, 2 * int64_t{N}, ctx.tp_comm, *ctx.clock, Phase::kTpComm);
  CrossEntropyLoss(row_max, row_sum, target_logit, N, loss);  // row_max is log_sum per row now
  // dlogits at storage width, as the LM head's backward reads them: in place in fp32, or with
  // 16-bit storage straight into 16 bits in op scratch (where its GEMMs' 16-bit output gradient
  // always lay; the fp32 logits are the buffer that is counted). The gradient of lnf: the LM
  // head is column-parallel (vocabulary rows), so a partial sum.
  const real scale = static_cast<real>(grad_scale);
  Buffer dlnf = ctx.PartialSum(NC);
  if (ctx.precision == 0) {
    CrossEntropyBackward(logits.data(), logits.data(), row_max, targets, v0, scale, N, Vl, 0);
    MatmulBackward(dlnf.data(), G + p.lm_head, nullptr, logits.data(), lnf_all.data(), W.values + p.lm_head, N, C,
                   Vl, 0, 0);
  } else {
    uint16_t* dlogits = OpScratch16(Scratch16::kOutputGrad, static_cast<size_t>(N) * Vl);
    CrossEntropyBackward16(dlogits, logits.data(), row_max, targets, v0, scale, N, Vl, ctx.precision);
    MatmulBackward16(dlnf.data(), G + p.lm_head, nullptr, dlogits, lnf_all.bits16(), W.bits16 + p.lm_head, N, C, Vl,
                     ctx.precision);
  }
  real* dsum = SumOverTp(ctx, dlnf.data(), w.row_sum.data());
  ctx.Store(dsum, ctx.StreamValues());
  if (ctx.precision == 0) {
    Fill(dx.data(), ctx.StreamValues(), 0);
  } else {
    Zero16(dx.bits16(), ctx.StreamValues());
  }
  NormalizeGradient(ctx, dx, G + p.lnf_w, GradientAt(G, p.lnf_b), dsum, x, W.Vector(p.lnf_w, C, 2), mean, rstd);
}

}  // namespace tunepar::core
