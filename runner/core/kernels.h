// The transformer's math, written once: every function here computes one row (or one element)
// and is compiled for the CPU (loops over rows in ops_cpu.cc) and, in the GPU builds, for the
// GPU by nvcc or hipcc (a warp or a block per row in the *_gpu.cc kernel files), through the
// alias in device_alias.h. Shapes in comments use B (micro-batch), T (sequence), C (hidden), NH (heads),
// hs = C / NH, V (vocabulary).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "runner/core/real.h"

namespace tunepar::core {

// ---- Storage precision: values kept in 16 bits are rounded to the 16-bit grid (round to
// nearest even); arithmetic stays fp32, as on a GPU with fp32 accumulation.
TP_HOST_DEVICE inline float RoundBf16(float x) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // inf, nan
  const uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7fffu + lsb;
  bits &= 0xffff0000u;
  memcpy(&x, &bits, 4);
  return x;
}

// IEEE binary16: 10 mantissa bits, exponent range [-14, 15]; overflow to inf, subnormals kept.
// Every case is computed and one selected, without branches or library calls, so loops over it
// vectorise (the rounding runs after every operation of a 16-bit step).
TP_HOST_DEVICE inline float RoundFp16(float x) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  const uint32_t magnitude = bits & 0x7fffffffu;
  uint32_t rounded = (bits + 0xfffu + ((bits >> 13) & 1u)) & 0xffffe000u;  // nearest even, 10 bits
  float normal;
  memcpy(&normal, &rounded, 4);
  const float quantum = 5.9604644775390625e-8f;  // 2^-24: the subnormal grid below 2^-14
  const float subnormal = rintf(x / quantum) * quantum;
  const float overflow = x > 0 ? INFINITY : -INFINITY;
  float r = magnitude < 0x38800000u ? subnormal : normal;
  r = magnitude >= 0x477ff000u ? overflow : r;  // rounds past 65504
  return magnitude >= 0x7f800000u ? x : r;      // inf, nan
}

// The IEEE binary16 bits of x, a value on the fp16 grid (RoundFp16's output): the GPU's 16-bit
// GEMM operands. Exact for such values; inf and nan stay inf and nan.
TP_HOST_DEVICE inline uint16_t Fp16Bits(float x) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;                 // nan
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;                // inf (and past 65504)
  if (magnitude >= 0x38800000u)                                        // normal: exponent 127 -> 15
    return sign | static_cast<uint16_t>((magnitude - 0x38000000u) >> 13);
  return sign | static_cast<uint16_t>(fabsf(x) * 16777216.0f);        // subnormal: multiples of 2^-24
}

// The float a 16-bit number stands for (the inverse of the above and of bf16's top 16 bits).
TP_HOST_DEVICE inline float FromFp16Bits(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1fu) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, nan
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else {  // zero and subnormals: multiples of 2^-24
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign != 0 ? -magnitude : magnitude;
  }
  float x;
  memcpy(&x, &bits, 4);
  return x;
}
TP_HOST_DEVICE inline uint16_t To16BitValue(float x, int precision) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  return precision == 2 ? static_cast<uint16_t>(bits >> 16) : Fp16Bits(x);
}
TP_HOST_DEVICE inline float From16BitValue(uint16_t h, int precision) {
  if (precision == 1) return FromFp16Bits(h);
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  memcpy(&x, &bits, 4);
  return x;
}

// precision: 0 = fp32 (no rounding), 1 = fp16, 2 = bf16
TP_HOST_DEVICE inline real RoundTo(real x, int precision) {
  const float f = static_cast<float>(x);
  return precision == 2 ? RoundBf16(f) : precision == 1 ? RoundFp16(f) : x;
}

// ---- GeLU, tanh approximation (GPT-2).
constexpr real kGeluScale = real(0.7978845608028654);  // sqrt(2 / pi)

TP_HOST_DEVICE inline real Gelu(real x) {
  const real cube = real(0.044715) * x * x * x;
  return real(0.5) * x * (real(1.0) + Tanh(kGeluScale * (x + cube)));
}

TP_HOST_DEVICE inline real GeluGrad(real x) {
  const real cube = real(0.044715) * x * x * x;
  const real t = Tanh(kGeluScale * (x + cube));
  const real sech2 = real(1.0) - t * t;
  return real(0.5) * (real(1.0) + t) +
         real(0.5) * x * sech2 * kGeluScale * (real(1.0) + real(3.0) * real(0.044715) * x * x);
}

// ---- A stored activation as the row kernels read it: reals (a `const real*`, as they are) or,
// with 16-bit storage, 16-bit numbers widened exactly. Both index and offset alike, so a row
// kernel written over `Values` reads either.
struct SixteenBitValues {
  const uint16_t* bits;
  int precision;
  TP_HOST_DEVICE real operator[](int64_t i) const { return From16BitValue(bits[i], precision); }
  TP_HOST_DEVICE SixteenBitValues operator+(int64_t offset) const { return {bits + offset, precision}; }
};

// ---- fp32 values read rounded to `precision` (0: as they are): the logits, which the LM head
// leaves as its GEMM's fp32 sums and the cross-entropy reads on the 16-bit grid, so no pass
// over N x V values rounds them first (the same numbers as rounding them in place).
struct RoundedValues {
  const real* p;
  int precision;
  TP_HOST_DEVICE real operator[](int64_t i) const { return RoundTo(p[i], precision); }
  TP_HOST_DEVICE RoundedValues operator+(int64_t offset) const { return {p + offset, precision}; }
};

// ---- Where a row kernel writes its outputs: reals, or 16-bit numbers (16-bit storage), each
// rounded to `precision` as it is written (fp32 arithmetic, one rounding). Read back as stored,
// so an output that accumulates (a layer norm's input gradient) reads and writes one place.
struct RealOutputs {
  real* p;
  int precision;
  TP_HOST_DEVICE real operator[](int64_t i) const { return p[i]; }
  TP_HOST_DEVICE void Set(int64_t i, real value) const { p[i] = RoundTo(value, precision); }
};
struct SixteenBitOutputs {
  uint16_t* bits;
  int precision;
  TP_HOST_DEVICE real operator[](int64_t i) const { return From16BitValue(bits[i], precision); }
  TP_HOST_DEVICE void Set(int64_t i, real value) const {
    bits[i] = To16BitValue(static_cast<float>(RoundTo(value, precision)), precision);
  }
};

// ---- Layer norm of one row of C: out = (x - mean) rstd w + b. RMSNorm (Zhang and Sennrich 2019;
// Llama) when mean_out is null: no centring (mean 0, rstd = 1 / sqrt(mean x^2 + eps)), and no
// bias (b null).
template <typename Values>
TP_HOST_DEVICE inline void LayerNormRow(Values x, const real* w, const real* b, real* out, real* mean_out,
                                        real* rstd_out, int C) {
  real mean = real(0.0);
  if (mean_out != nullptr) {
    for (int i = 0; i < C; ++i) mean += x[i];
    mean /= C;
  }
  real var = real(0.0);
  for (int i = 0; i < C; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= C;
  const real rstd = real(1.0) / Sqrt(var + real(1e-5));
  for (int i = 0; i < C; ++i) out[i] = (x[i] - mean) * rstd * w[i] + (b != nullptr ? b[i] : real(0.0));
  if (mean_out != nullptr) *mean_out = mean;
  *rstd_out = rstd;
}

// Backward of LayerNormRow: dx += ..., and the row's contributions to dw, db (accumulated by
// the caller to keep the row function free of races). `centered` false: RMSNorm (mean 0, no
// mean term in dx: d rstd / dx_j = -rstd^3 x_j / C only).
template <typename Values>
TP_HOST_DEVICE inline void LayerNormRowBackward(Values x, const real* w, real mean, real rstd, const real* dout,
                                                real* dx, real* dw, real* db, int C, bool centered = true) {
  real dnorm_mean = real(0.0), dnorm_norm_mean = real(0.0);
  for (int i = 0; i < C; ++i) {
    const real norm = (x[i] - mean) * rstd;
    const real dnorm = w[i] * dout[i];
    dnorm_mean += dnorm;
    dnorm_norm_mean += dnorm * norm;
  }
  dnorm_mean = centered ? dnorm_mean / C : real(0.0);
  dnorm_norm_mean /= C;
  for (int i = 0; i < C; ++i) {
    const real norm = (x[i] - mean) * rstd;
    const real dnorm = w[i] * dout[i];
    db[i] += dout[i];
    dw[i] += norm * dout[i];
    dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd;
  }
}

// ---- SwiGLU (Shazeer 2020; Llama's FeedForward w2(silu(w1 x) * w3 x)): a row of the MLP-in
// layer's output holds the gate a (Fl values) then the up projection u (Fl); out = silu(a) u,
// silu(a) = a sigmoid(a).
TP_HOST_DEVICE inline real Sigmoid(real x) {
  return real(1.0) / (real(1.0) + Exp(-x));
}
TP_HOST_DEVICE inline real Swiglu(real a, real u) {
  return a * Sigmoid(a) * u;
}
// d out / d a = u sigmoid(a) (1 + a (1 - sigmoid(a))); d out / d u = silu(a).
TP_HOST_DEVICE inline real SwigluGateGrad(real a, real u) {
  const real sig = Sigmoid(a);
  return u * sig * (real(1.0) + a * (real(1.0) - sig));
}
TP_HOST_DEVICE inline real SwigluUpGrad(real a) {
  return a * Sigmoid(a);
}
// Element i of the (N, Fl) output: where its gate and up values lie in the (N, 2 Fl) input.
TP_HOST_DEVICE inline int64_t SwigluGateIndex(int64_t i, int Fl) {
  return (i / Fl) * 2 * Fl + i % Fl;
}

// ---- Rotary position embedding (Su et al. 2021), as Meta's Llama (apply_rotary_emb): within
// each head, the pair of values (2i, 2i + 1) of a query or key at position p turns by the angle
// p theta_i, theta_i = base^(-2i / hs). The angle in double (the table Meta precomputes).
inline constexpr double kRotaryBase = 10000.0;
TP_HOST_DEVICE inline void RotaryCosSin(int position, int pair_in_head, int hs, real* cos_out, real* sin_out) {
  const double angle = position * pow(kRotaryBase, -2.0 * pair_in_head / hs);
  *cos_out = static_cast<real>(cos(angle));
  *sin_out = static_cast<real>(sin(angle));
}
// Pair `pair` of row n of a (N, ld) array whose first `rotated` columns are the Q and K heads:
// turned forward (the forward pass) or back (inverse: the backward pass, the transpose), in
// place through an Outputs accessor (reads as stored, writes rounded to the storage grid). Row n
// is at position position0 + n % T (position0: where a context-parallel chunk starts).
template <typename Outputs>
TP_HOST_DEVICE inline void RotatePair(Outputs x, int64_t pair, int rotated, int ld, int T, int hs, bool inverse,
                                      int position0 = 0) {
  const int64_t pairs_per_row = rotated / 2;
  const int64_t n = pair / pairs_per_row;
  const int c = static_cast<int>(pair % pairs_per_row) * 2;
  real cs, sn;
  RotaryCosSin(position0 + static_cast<int>(n % T), (c % hs) / 2, hs, &cs, &sn);
  if (inverse) sn = -sn;
  const int64_t at = n * ld + c;
  const real x0 = x[at], x1 = x[at + 1];
  x.Set(at, x0 * cs - x1 * sn);
  x.Set(at + 1, x0 * sn + x1 * cs);
}

// ---- Causal attention. Per (b, head): S = Q K^T / sqrt(hs), P = softmax over t2 <= t of each
// row, y = P V; qkv rows are [Q | K | V] of width 3 Cl (Cl = local channels), the head's slice
// starts at h hs. The softmax rows are shared by both backends; the CPU runs the products as
// small GEMMs (ops_cpu.cc), the GPU row by row (AttentionRow below).

// Row t of scores (already scaled) -> probabilities, in place; zeros past t.
TP_HOST_DEVICE inline void CausalSoftmaxRow(real* row, int t, int T) {
  real max = -INFINITY;
  for (int t2 = 0; t2 <= t; ++t2) max = row[t2] > max ? row[t2] : max;
  real sum = real(0.0);
  for (int t2 = 0; t2 <= t; ++t2) {
    row[t2] = Exp(row[t2] - max);
    sum += row[t2];
  }
  const real inv = real(1.0) / sum;
  for (int t2 = 0; t2 <= t; ++t2) row[t2] *= inv;
  for (int t2 = t + 1; t2 < T; ++t2) row[t2] = real(0.0);
}

// Softmax backward of row t: d holds dP (= dy . v[t2]) and becomes the gradient of the scaled
// scores' input, dS = P (dP - sum_j P_j dP_j) scale; zeros past t.
TP_HOST_DEVICE inline void CausalSoftmaxRowBackward(const real* p, real* d, int t, int T, real scale) {
  real dot = real(0.0);
  for (int t2 = 0; t2 <= t; ++t2) dot += p[t2] * d[t2];
  for (int t2 = 0; t2 <= t; ++t2) d[t2] = p[t2] * (d[t2] - dot) * scale;
  for (int t2 = t + 1; t2 < T; ++t2) d[t2] = real(0.0);
}

// One (b, t, head) row of the forward pass (GPU backend).
TP_HOST_DEVICE inline void AttentionRow(const real* qkv, real* att_row, real* y_row, int t, int h, int T,
                                        int Cl, int hs) {
  const int stride = 3 * Cl;
  const real* q = qkv + t * stride + h * hs;
  const real scale = real(1.0) / Sqrt(static_cast<real>(hs));
  for (int t2 = 0; t2 <= t; ++t2) {
    const real* k = qkv + t2 * stride + Cl + h * hs;
    real s = real(0.0);
    for (int i = 0; i < hs; ++i) s += q[i] * k[i];
    att_row[t2] = s * scale;
  }
  CausalSoftmaxRow(att_row, t, T);
  for (int i = 0; i < hs; ++i) y_row[i] = real(0.0);
  for (int t2 = 0; t2 <= t; ++t2) {
    const real* v = qkv + t2 * stride + 2 * Cl + h * hs;
    for (int i = 0; i < hs; ++i) y_row[i] += att_row[t2] * v[i];
  }
}

// One (b, t, head) row of the backward pass (GPU backend), given the saved probabilities:
// accumulates into dqkv (rows of one head touch the same dk, dv: one thread runs a head's rows
// in order). `datt` is scratch for T values.
TP_HOST_DEVICE inline void AttentionRowBackward(const real* qkv, const real* att_row, const real* dy_row,
                                                real* dqkv, real* datt, int t, int h, int T, int Cl, int hs) {
  const int stride = 3 * Cl;
  const real* q = qkv + t * stride + h * hs;
  real* dq = dqkv + t * stride + h * hs;
  const real scale = real(1.0) / Sqrt(static_cast<real>(hs));
  for (int t2 = 0; t2 <= t; ++t2) {
    const real* v = qkv + t2 * stride + 2 * Cl + h * hs;
    real d = real(0.0);
    for (int i = 0; i < hs; ++i) d += dy_row[i] * v[i];
    datt[t2] = d;
  }
  CausalSoftmaxRowBackward(att_row, datt, t, T, scale);
  for (int t2 = 0; t2 <= t; ++t2) {
    const real* k = qkv + t2 * stride + Cl + h * hs;
    real* dk = dqkv + t2 * stride + Cl + h * hs;
    real* dv = dqkv + t2 * stride + 2 * Cl + h * hs;
    for (int i = 0; i < hs; ++i) {
      dv[i] += att_row[t2] * dy_row[i];
      dq[i] += datt[t2] * k[i];
      dk[i] += datt[t2] * q[i];
    }
  }
}

// ---- Cross-entropy over a row of logits split over TP ranks by vocabulary (Megatron's
// vocab-parallel cross-entropy): each rank holds Vl logits starting at token v0. The row's max
// and sum of exponentials are combined over ranks by the caller (all-reduce MAX, then SUM);
// loss = log_sum - logit[target], with the target's logit from the rank that holds it. The
// logits are `Values`: reals as they are, or RoundedValues (fp32 sums read on the 16-bit grid).
template <typename Values>
TP_HOST_DEVICE inline real RowMax(Values logits, int Vl) {
  real max = -INFINITY;
  for (int i = 0; i < Vl; ++i) max = logits[i] > max ? logits[i] : max;
  return max;
}

template <typename Values>
TP_HOST_DEVICE inline real RowSumExp(Values logits, real max, int Vl) {
  real sum = real(0.0);
  for (int i = 0; i < Vl; ++i) sum += Exp(logits[i] - max);
  return sum;
}

// Row n's pass 1 (global_max null: its local max) or pass 2 (its sum of exp(logit - max) and
// the target's logit when this rank holds it, else 0).
template <typename Values>
TP_HOST_DEVICE inline void CrossEntropyStatsRow(real* row_max, real* row_sum, real* target_logit, Values logits,
                                                const int* targets, const real* global_max, int v0, int n, int Vl) {
  const Values l = logits + int64_t{n} * Vl;
  if (global_max == nullptr) {
    row_max[n] = RowMax(l, Vl);
  } else {
    row_sum[n] = RowSumExp(l, global_max[n], Vl);
    const int t = targets[n] - v0;
    target_logit[n] = (t >= 0 && t < Vl) ? l[t] : real(0);
  }
}

// dlogits = (softmax - onehot(target)) * scale, with log_sum = log sum_j exp(logit_j) over the
// whole vocabulary. dlogits may be the logits' own storage (each logit is read before its
// gradient is written).
template <typename Values>
TP_HOST_DEVICE inline void CrossEntropyRowBackward(Values logits, real log_sum, int target, int v0, real* dlogits,
                                                   real scale, int Vl) {
  for (int i = 0; i < Vl; ++i) {
    dlogits[i] = (Exp(logits[i] - log_sum) - (i + v0 == target ? real(1.0) : real(0.0))) * scale;
  }
}

// ---- AdamW on one parameter (decoupled weight decay; bias-corrected moments).
TP_HOST_DEVICE inline void AdamW(real* param, real grad, real* m, real* v, real lr, real beta1, real beta2,
                                 real eps, real weight_decay, real correction1, real correction2) {
  *m = beta1 * *m + (real(1.0) - beta1) * grad;
  *v = beta2 * *v + (real(1.0) - beta2) * grad * grad;
  const real m_hat = *m / correction1, v_hat = *v / correction2;
  *param -= lr * (m_hat / (Sqrt(v_hat) + eps) + weight_decay * *param);
}

}  // namespace tunepar::core
