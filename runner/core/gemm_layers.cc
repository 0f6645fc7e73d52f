// The layers that are GEMMs — linear layers and attention — written once over ops.h's Gemm in
// BLAS (column-major) terms, so every backend runs the same calls: the CPU tests pin each
// transpose, leading dimension and batch stride that the GPU build hands cuBLAS/hipBLAS.
//
// Reading a row-major (r, c) array as column-major gives its transpose, (c, r) with ld c; so a
// row-major product Z = X Y is computed as the column-major Z^T = Y^T X^T.
#include <cmath>
#include <cstdint>

#include "runner/core/ops.h"

namespace tunepar::core {

namespace {

uint16_t* SixteenBitCopy(Scratch16 slot, const real* values, int64_t n, int precision);

void AddBiasAndRound(real* out, const real* bias, int N, int OC, int round_to) {
  if (bias != nullptr) {
    AddBias(out, bias, N, OC, round_to);
  } else {
    RoundStorage(out, int64_t{N} * OC, round_to);
  }
}

// The two products of the backward pass on 16-bit operands (dout converted once).
void MatmulBackwardProducts16(real* dinp, real* dw, const real* dout, const uint16_t* inp16, const uint16_t* w16,
                              int N, int C, int OC, int precision) {
  const uint16_t* dout16 = SixteenBitCopy(Scratch16::kOutputGrad, dout, int64_t{N} * OC, precision);
  if (dinp != nullptr) Gemm16(Op::kN, Op::kN, C, N, OC, real(1), w16, C, dout16, OC, real(0), dinp, C, {}, precision);
  Gemm16(Op::kN, Op::kT, C, OC, N, real(1), inp16, C, dout16, OC, real(1), dw, C, {}, precision);
}

void FinishMatmulBackward(real* dinp, real* dbias, const real* dout, int N, int C, int OC, int round_dinp_to) {
  if (dinp != nullptr) RoundStorage(dinp, int64_t{N} * C, round_dinp_to);
  if (dbias != nullptr) BiasBackward(dbias, dout, N, OC);
}

}  // namespace

void MatmulForward(real* out, const real* inp, const real* w, const real* bias, int N, int C, int OC,
                   int precision, int round_to) {
  // out^T (OC, N) = w (OC, C) inp^T (C, N); the stored w reads as w^T (C, OC), hence Op::kT.
  Gemm(Op::kT, Op::kN, OC, N, C, real(1), w, C, inp, C, real(0), out, OC, {}, precision);
  AddBiasAndRound(out, bias, N, OC, round_to);
}

void MatmulForward16(real* out, const uint16_t* inp, const uint16_t* w, const real* bias, int N, int C, int OC,
                     int precision, int round_to) {
  Gemm16(Op::kT, Op::kN, OC, N, C, real(1), w, C, inp, C, real(0), out, OC, {}, precision);
  AddBiasAndRound(out, bias, N, OC, round_to);
}

void MatmulBackward(real* dinp, real* dw, real* dbias, const real* dout, const real* inp, const real* w,
                    int N, int C, int OC, int precision, int round_dinp_to) {
  if (precision != 0) {
    const uint16_t* inp16 = SixteenBitCopy(Scratch16::kInput, inp, int64_t{N} * C, precision);
    const uint16_t* w16 = SixteenBitCopy(Scratch16::kMatrix, w, int64_t{OC} * C, precision);
    MatmulBackwardProducts16(dinp, dw, dout, inp16, w16, N, C, OC, precision);
  } else {
    // dinp^T (C, N) = w^T (C, OC) dout^T (OC, N).
    if (dinp != nullptr) Gemm(Op::kN, Op::kN, C, N, OC, real(1), w, C, dout, OC, real(0), dinp, C);
    // dw^T (C, OC) += inp^T (C, N) dout (N, OC).
    Gemm(Op::kN, Op::kT, C, OC, N, real(1), inp, C, dout, OC, real(1), dw, C);
  }
  FinishMatmulBackward(dinp, dbias, dout, N, C, OC, round_dinp_to);
}

void MatmulForward16(uint16_t* out, const uint16_t* inp, const uint16_t* w, const real* bias, int N, int C, int OC,
                     int precision) {
  Gemm16Bias(Op::kT, Op::kN, OC, N, C, w, C, inp, C, bias, out, precision);
}

namespace {
// dw^T (C, OC) += inp^T (C, N) dout (N, OC); dbias += column sums of dout.
void WeightGradients16(real* dw, real* dbias, const uint16_t* dout, const uint16_t* inp, int N, int C, int OC,
                       int precision) {
  Gemm16(Op::kN, Op::kT, C, OC, N, real(1), inp, C, dout, OC, real(1), dw, C, {}, precision);
  if (dbias != nullptr) BiasBackward16(dbias, dout, N, OC, precision);
}
}  // namespace

void MatmulBackward16(uint16_t* dinp, real* dw, real* dbias, const uint16_t* dout, const uint16_t* inp,
                      const uint16_t* w, int N, int C, int OC, int precision) {
  Gemm16(Op::kN, Op::kN, C, N, OC, real(1), w, C, dout, OC, real(0), dinp, C, {}, precision);
  WeightGradients16(dw, dbias, dout, inp, N, C, OC, precision);
}

void MatmulBackward16(real* dinp, real* dw, real* dbias, const uint16_t* dout, const uint16_t* inp,
                      const uint16_t* w, int N, int C, int OC, int precision) {
  Gemm16(Op::kN, Op::kN, C, N, OC, real(1), w, C, dout, OC, real(0), dinp, C, {}, precision);
  WeightGradients16(dw, dbias, dout, inp, N, C, OC, precision);
}

namespace {

// Sequence b's heads in qkv (B, T, (NHl + 2 KVl) hs): query head h's rows start at q + h hs, K/V
// head j's at k + j hs and v + j hs, every row ld apart. As column-major arrays they are Q^T, K^T,
// V^T (hs, T) with that ld. Query head h = j rep + r reads K/V head j (rep = NHl / KVl query
// heads share one: Meta's repeat_kv), so for each r one strided-batched GEMM over the KVl groups
// covers the heads r, rep + r, ...: Q and the probabilities stride rep heads, K and V one.
template <typename Value>
struct SequenceHeads {
  const Value* q;
  const Value* k;
  const Value* v;
  int ld;
};

struct HeadGroups {
  int NHl, KVl, hs, rep;
  int Ld() const { return (NHl + 2 * KVl) * hs; }
  int64_t QkvValues(int B, int T) const { return int64_t{B} * T * Ld(); }
};
HeadGroups GroupsOf(int Cl, int NHl, int KVl) {
  const int kv = KVl > 0 ? KVl : NHl;
  return {NHl, kv, Cl / NHl, NHl / kv};
}

template <typename Value>
SequenceHeads<Value> HeadsOf(const Value* qkv, int b, int T, const HeadGroups& g) {
  const Value* base = qkv + int64_t{b} * T * g.Ld();
  return {base, base + int64_t{g.NHl} * g.hs, base + int64_t{g.NHl + g.KVl} * g.hs, g.Ld()};
}

// The batch over the KVl groups for query-head offset r: (K/V head stride, query-side stride).
GemmBatch GroupBatch(const HeadGroups& g, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  return {g.KVl, stride_a, stride_b, stride_c};
}

// With 16-bit storage the GEMMs read and write 16-bit operands (tensor cores): qkv, y, dy, dqkv
// and the probabilities as they are stored; the probabilities and score gradients come out of the
// softmax kernels in 16 bits.
uint16_t* SixteenBitCopy(Scratch16 slot, const real* values, int64_t n, int precision) {
  uint16_t* out = OpScratch16(slot, static_cast<size_t>(n));
  To16Bit(out, values, n, precision);
  return out;
}

// One GEMM of the attention on either storage: fp32 operands (Gemm), or 16-bit ones (Gemm16:
// fp32 sums, C in fp32 or rounded once to 16 bits).
void GemmOf(Op op_a, Op op_b, int m, int n, int k, real alpha, const real* A, int lda, const real* B, int ldb,
            real beta, real* C, int ldc, const GemmBatch& batch, int precision) {
  Gemm(op_a, op_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, batch, precision);
}
void GemmOf(Op op_a, Op op_b, int m, int n, int k, real alpha, const uint16_t* A, int lda, const uint16_t* B,
            int ldb, real beta, real* C, int ldc, const GemmBatch& batch, int precision) {
  Gemm16(op_a, op_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, batch, precision);
}
void GemmOf(Op op_a, Op op_b, int m, int n, int k, real alpha, const uint16_t* A, int lda, const uint16_t* B,
            int ldb, real beta, uint16_t* C, int ldc, const GemmBatch& batch, int precision) {
  Gemm16(op_a, op_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, batch, precision);
}

// The products of one sequence's attention, per query-head offset r (one strided-batched GEMM
// over the K/V groups each), on Value storage (real or 16-bit). Per head the T x T arrays
// (scores, probabilities, their gradients) are T^2 apart.

// S^T (T, T) = K Q^T scale, into fp32 `scores`.
template <typename Value>
void HeadScores(const HeadGroups& g, const SequenceHeads<Value>& s, int T, real scale, real* scores, int precision) {
  const int64_t TT = int64_t{T} * T;
  for (int r = 0; r < g.rep; ++r) {
    GemmOf(Op::kT, Op::kN, T, T, g.hs, scale, s.k, s.ld, s.q + r * g.hs, s.ld, real(0), scores + r * TT, T,
           GroupBatch(g, g.hs, int64_t{g.rep} * g.hs, g.rep * TT), precision);
  }
}

// y^T (hs, T) = V^T (hs, T) P^T (T, T); y's rows (the sequence's) are Cl apart.
template <typename Value>
void HeadOutputs(const HeadGroups& g, const SequenceHeads<Value>& s, int T, const Value* p, Value* y, int Cl,
                 int precision) {
  const int64_t TT = int64_t{T} * T;
  for (int r = 0; r < g.rep; ++r) {
    GemmOf(Op::kN, Op::kN, g.hs, T, T, real(1), s.v, s.ld, p + r * TT, T, real(0), y + r * g.hs, Cl,
           GroupBatch(g, g.hs, g.rep * TT, int64_t{g.rep} * g.hs), precision);
  }
}

// dP^T (T, T) = V (T, hs) dy^T (hs, T), into fp32 `dp`; dy's rows are Cl apart.
template <typename Value>
void HeadProbabilityGradients(const HeadGroups& g, const SequenceHeads<Value>& s, int T, const Value* dy, int Cl,
                              real* dp, int precision) {
  const int64_t TT = int64_t{T} * T;
  for (int r = 0; r < g.rep; ++r) {
    GemmOf(Op::kT, Op::kN, T, T, g.hs, real(1), s.v, s.ld, dy + r * g.hs, Cl, real(0), dp + r * TT, T,
           GroupBatch(g, g.hs, int64_t{g.rep} * g.hs, g.rep * TT), precision);
  }
}

// From the probabilities p and the score gradients ds: dV^T (hs, T) += dy^T P, dQ^T (hs, T) =
// K^T dS^T, dK^T (hs, T) += Q^T dS. dK and dV of a K/V head sum over its group's query heads: the
// first product writes (beta 0), the others add (beta 1), in ascending order.
template <typename Value>
void HeadInputGradients(const HeadGroups& g, const SequenceHeads<Value>& s, int T, const Value* dy, int Cl,
                        const Value* p, const Value* ds, Value* dq, Value* dk, Value* dv, int precision) {
  const int hs = g.hs, rep = g.rep;
  const int64_t TT = int64_t{T} * T;
  for (int r = 0; r < rep; ++r) {
    const real beta = r == 0 ? real(0) : real(1);
    GemmOf(Op::kN, Op::kT, hs, T, T, real(1), dy + r * hs, Cl, p + r * TT, T, beta, dv, s.ld,
           GroupBatch(g, int64_t{rep} * hs, rep * TT, hs), precision);
    GemmOf(Op::kN, Op::kN, hs, T, T, real(1), s.k, s.ld, ds + r * TT, T, real(0), dq + r * hs, s.ld,
           GroupBatch(g, hs, rep * TT, int64_t{rep} * hs), precision);
    GemmOf(Op::kN, Op::kT, hs, T, T, real(1), s.q + r * hs, s.ld, ds + r * TT, T, beta, dk, s.ld,
           GroupBatch(g, int64_t{rep} * hs, rep * TT, hs), precision);
  }
}

// Sequence b's query, key and value gradients in dqkv (the layout of qkv).
template <typename Value>
struct SequenceGradients {
  Value* dq;
  Value* dk;
  Value* dv;
};
template <typename Value>
SequenceGradients<Value> GradientsOf(Value* dqkv, int b, int T, const HeadGroups& g) {
  Value* dq = dqkv + int64_t{b} * T * g.Ld();
  return {dq, dq + int64_t{g.NHl} * g.hs, dq + int64_t{g.NHl + g.KVl} * g.hs};
}

}  // namespace

void AttentionForward16(uint16_t* y, uint16_t* att, const uint16_t* qkv, int B, int T, int Cl, int NHl,
                        int precision, int KVl) {
  const HeadGroups g = GroupsOf(Cl, NHl, KVl);
  const real scale = real(1) / Sqrt(static_cast<real>(g.hs));
  const int64_t TT = int64_t{T} * T;
  real* scores = OpScratch(static_cast<size_t>(NHl * TT));  // one sequence's, in fp32
  for (int b = 0; b < B; ++b) {
    const SequenceHeads<uint16_t> s = HeadsOf(qkv, b, T, g);
    uint16_t* p16 = att + int64_t{b} * NHl * TT;
    HeadScores(g, s, T, scale, scores, precision);
    CausalSoftmaxForward(scores, int64_t{NHl} * T, T, precision, p16);
    HeadOutputs(g, s, T, static_cast<const uint16_t*>(p16), y + int64_t{b} * T * Cl, Cl, precision);
  }
}

void AttentionBackward16(uint16_t* dqkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* att, int B, int T,
                         int Cl, int NHl, int precision, int KVl) {
  const HeadGroups g = GroupsOf(Cl, NHl, KVl);
  const real scale = real(1) / Sqrt(static_cast<real>(g.hs));
  const int64_t TT = int64_t{T} * T;
  real* dp = OpScratch(static_cast<size_t>(NHl * TT));
  real* p = OpScratch(static_cast<size_t>(NHl * TT), 1);  // one sequence's probabilities, in fp32
  uint16_t* ds16 = OpScratch16(Scratch16::kScoreGrads, static_cast<size_t>(NHl * TT));
  for (int b = 0; b < B; ++b) {
    const SequenceHeads<uint16_t> s = HeadsOf(qkv, b, T, g);
    const SequenceGradients<uint16_t> d = GradientsOf(dqkv, b, T, g);
    const uint16_t* dyb = dy + int64_t{b} * T * Cl;
    const uint16_t* p16 = att + int64_t{b} * NHl * TT;
    From16Bit(p, p16, NHl * TT, precision);
    HeadProbabilityGradients(g, s, T, dyb, Cl, dp, precision);
    CausalSoftmaxBackward(dp, p, int64_t{NHl} * T, T, scale, precision, ds16);
    HeadInputGradients(g, s, T, dyb, Cl, p16, static_cast<const uint16_t*>(ds16), d.dq, d.dk, d.dv, precision);
  }
}

void AttentionForward(real* y, real* att, const real* qkv, int B, int T, int Cl, int NHl, int precision, int KVl) {
  const HeadGroups g = GroupsOf(Cl, NHl, KVl);
  const int64_t TT = int64_t{T} * T;
  if (precision != 0) {  // through 16-bit storage, y and the probabilities handed back as reals
    const uint16_t* qkv16 = SixteenBitCopy(Scratch16::kInput, qkv, g.QkvValues(B, T), precision);
    uint16_t* att16 = OpScratch16(Scratch16::kMatrix, static_cast<size_t>(B * NHl * TT));
    uint16_t* y16 = OpScratch16(Scratch16::kOutput, static_cast<size_t>(B) * T * Cl);
    AttentionForward16(y16, att16, qkv16, B, T, Cl, NHl, precision, KVl);
    From16Bit(att, att16, B * NHl * TT, precision);
    From16Bit(y, y16, int64_t{B} * T * Cl, precision);
    return;
  }
  const real scale = real(1) / Sqrt(static_cast<real>(g.hs));
  for (int b = 0; b < B; ++b) {
    const SequenceHeads<real> s = HeadsOf(qkv, b, T, g);
    real* p = att + int64_t{b} * NHl * TT;
    HeadScores(g, s, T, scale, p, precision);
    CausalSoftmaxForward(p, int64_t{NHl} * T, T, precision);
    HeadOutputs(g, s, T, static_cast<const real*>(p), y + int64_t{b} * T * Cl, Cl, precision);
  }
}

void AttentionBackward(real* dqkv, const real* dy, const real* qkv, const real* att, int B, int T, int Cl,
                       int NHl, int precision, int KVl) {
  const HeadGroups g = GroupsOf(Cl, NHl, KVl);
  const int64_t TT = int64_t{T} * T;
  if (precision != 0) {  // through 16-bit storage, dqkv handed back as reals
    const int64_t NQKV = g.QkvValues(B, T);
    uint16_t* dqkv16 = OpScratch16(Scratch16::kOutput, static_cast<size_t>(NQKV));
    AttentionBackward16(dqkv16, SixteenBitCopy(Scratch16::kOutputGrad, dy, int64_t{B} * T * Cl, precision),
                        SixteenBitCopy(Scratch16::kInput, qkv, NQKV, precision),
                        SixteenBitCopy(Scratch16::kMatrix, att, B * NHl * TT, precision), B, T, Cl, NHl, precision,
                        KVl);
    From16Bit(dqkv, dqkv16, NQKV, precision);
    return;
  }
  real* scratch = OpScratch(static_cast<size_t>(NHl) * T * T);
  const real scale = real(1) / Sqrt(static_cast<real>(g.hs));
  for (int b = 0; b < B; ++b) {
    const SequenceHeads<real> s = HeadsOf(qkv, b, T, g);
    const SequenceGradients<real> d = GradientsOf(dqkv, b, T, g);
    const real* dyb = dy + int64_t{b} * T * Cl;
    const real* p = att + int64_t{b} * NHl * TT;
    HeadProbabilityGradients(g, s, T, dyb, Cl, scratch, precision);
    CausalSoftmaxBackward(scratch, p, int64_t{NHl} * T, T, scale, precision);  // dS (scaled), in place
    HeadInputGradients(g, s, T, dyb, Cl, p, static_cast<const real*>(scratch), d.dq, d.dk, d.dv, precision);
  }
}

}  // namespace tunepar::core
