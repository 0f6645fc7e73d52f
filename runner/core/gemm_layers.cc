// The layers that are GEMMs — linear layers and attention — written once over ops.h's Gemm in
// BLAS (column-major) terms, so every backend runs the same calls: the CPU tests pin each
// transpose, leading dimension and batch stride that the GPU build hands cuBLAS/hipBLAS.
//
// Reading a row-major (r, c) array as column-major gives its transpose, (c, r) with ld c; so a
// row-major product Z = X Y is computed as the column-major Z^T = Y^T X^T.
#include <cmath>

#include "runner/core/ops.h"

namespace tunepar::core {

void MatmulForward(real* out, const real* inp, const real* w, const real* bias, int N, int C, int OC,
                   int precision) {
  // out^T (OC, N) = w (OC, C) inp^T (C, N); the stored w reads as w^T (C, OC), hence Op::kT.
  Gemm(Op::kT, Op::kN, OC, N, C, real(1), w, C, inp, C, real(0), out, OC, {}, precision);
  if (bias != nullptr) AddBias(out, bias, N, OC);
}

void MatmulBackward(real* dinp, real* dw, real* dbias, const real* dout, const real* inp, const real* w,
                    int N, int C, int OC, int precision) {
  // dinp^T (C, N) = w^T (C, OC) dout^T (OC, N).
  if (dinp != nullptr) Gemm(Op::kN, Op::kN, C, N, OC, real(1), w, C, dout, OC, real(0), dinp, C, {}, precision);
  // dw^T (C, OC) += inp^T (C, N) dout (N, OC).
  Gemm(Op::kN, Op::kT, C, OC, N, real(1), inp, C, dout, OC, real(1), dw, C, {}, precision);
  if (dbias != nullptr) BiasBackward(dbias, dout, N, OC);
}

namespace {

// Sequence b's heads in qkv (B, T, 3 Cl): head h's Q rows start at q + h hs, K at + Cl, V at
// + 2 Cl, every row 3 Cl apart. As column-major arrays they are Q^T, K^T, V^T (hs, T), ld 3 Cl.
struct SequenceHeads {
  const real* q;
  const real* k;
  const real* v;
  int ld;
};

SequenceHeads HeadsOf(const real* qkv, int b, int T, int Cl) {
  const real* base = qkv + int64_t{b} * T * 3 * Cl;
  return {base, base + Cl, base + 2 * Cl, 3 * Cl};
}

}  // namespace

void AttentionForward(real* y, real* att, const real* qkv, int B, int T, int Cl, int NHl, int precision) {
  const int hs = Cl / NHl;
  const real scale = real(1) / Sqrt(static_cast<real>(hs));
  const int64_t TT = int64_t{T} * T;
  for (int b = 0; b < B; ++b) {
    const SequenceHeads s = HeadsOf(qkv, b, T, Cl);
    real* p = att + int64_t{b} * NHl * TT;
    // S^T (T, T) = K Q^T scale, for each head (batch stride hs in qkv, T^2 in att).
    Gemm(Op::kT, Op::kN, T, T, hs, scale, s.k, s.ld, s.q, s.ld, real(0), p, T, {NHl, hs, hs, TT}, precision);
    CausalSoftmaxForward(p, int64_t{NHl} * T, T, precision);
    // y^T (hs, T) = V^T (hs, T) P^T (T, T); y rows are Cl apart.
    Gemm(Op::kN, Op::kN, hs, T, T, real(1), s.v, s.ld, p, T, real(0), y + int64_t{b} * T * Cl, Cl,
         {NHl, hs, TT, hs}, precision);
  }
}

void AttentionBackward(real* dqkv, const real* dy, const real* qkv, const real* att, int B, int T, int Cl,
                       int NHl, int precision) {
  const int hs = Cl / NHl;
  real* scratch = OpScratch(static_cast<size_t>(NHl) * T * T);
  const real scale = real(1) / Sqrt(static_cast<real>(hs));
  const int64_t TT = int64_t{T} * T;
  for (int b = 0; b < B; ++b) {
    const SequenceHeads s = HeadsOf(qkv, b, T, Cl);
    real* dq = dqkv + int64_t{b} * T * 3 * Cl;
    real* dk = dq + Cl;
    real* dv = dq + 2 * Cl;
    const real* dyb = dy + int64_t{b} * T * Cl;
    const real* p = att + int64_t{b} * NHl * TT;
    // dP^T (T, T) = V (T, hs) dy^T (hs, T).
    Gemm(Op::kT, Op::kN, T, T, hs, real(1), s.v, s.ld, dyb, Cl, real(0), scratch, T, {NHl, hs, hs, TT},
         precision);
    CausalSoftmaxBackward(scratch, p, int64_t{NHl} * T, T, scale, precision);  // dS (scaled)
    // dV^T (hs, T) = dy^T (hs, T) P (T, T).
    Gemm(Op::kN, Op::kT, hs, T, T, real(1), dyb, Cl, p, T, real(0), dv, s.ld, {NHl, hs, TT, hs}, precision);
    // dQ^T (hs, T) = K^T (hs, T) dS^T (T, T).
    Gemm(Op::kN, Op::kN, hs, T, T, real(1), s.k, s.ld, scratch, T, real(0), dq, s.ld, {NHl, hs, TT, hs},
         precision);
    // dK^T (hs, T) = Q^T (hs, T) dS (T, T).
    Gemm(Op::kN, Op::kT, hs, T, T, real(1), s.q, s.ld, scratch, T, real(0), dk, s.ld, {NHl, hs, TT, hs},
         precision);
  }
}

}  // namespace tunepar::core
