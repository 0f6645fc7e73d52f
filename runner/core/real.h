// The arithmetic type of the core: fp32 (float), or fp64 (double) in the gradient-check build
// (-DTUNEPAR_CORE_FP64=1: tunepar-core-fp64, which compares the backward pass with finite
// differences). 16-bit storage (kernels.h's rounding and 16-bit numbers) works with either.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "runner/core/device_alias.h"

namespace tunepar::core {

#if TUNEPAR_CORE_FP64
using real = double;
TP_HOST_DEVICE inline real Exp(real x) {
  return exp(x);
}
TP_HOST_DEVICE inline real Log(real x) {
  return log(x);
}
TP_HOST_DEVICE inline real Sqrt(real x) {
  return sqrt(x);
}
TP_HOST_DEVICE inline real Tanh(real x) {
  return tanh(x);
}
#else
using real = float;
// exp without a library call, so loops over it vectorise (libm's expf and tanhf are scalar
// calls: they took a third of a training step on the CPU). Cody-Waite reduction x = n ln2 + r,
// |r| <= ln2 / 2, Cephes' degree-6 polynomial for e^r, 2^n from the exponent bits: within
// 2 ulp of expf on [-87, 88]; inputs are clamped to that range (the core only exponentiates
// shifted logits and attention scores, <= 0, and GeLU's argument).
TP_HOST_DEVICE inline real Exp(real x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = rintf(x * 1.44269504088896341f);
  float r = fmaf(n, -0.693359375f, x);
  r = fmaf(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  const float y = fmaf(p, r * r, r) + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}
TP_HOST_DEVICE inline real Log(real x) {
  return logf(x);
}
TP_HOST_DEVICE inline real Sqrt(real x) {
  return sqrtf(x);
}
// tanh through one exp: (1 - e) / (1 + e) with e = exp(-2 |x|). Its absolute error is an ulp
// of 1, which is what GeLU needs (it uses 1 + tanh and 1 - tanh^2).
TP_HOST_DEVICE inline real Tanh(real x) {
  const float e = Exp(-2.0f * fabsf(x));
  return copysignf((1.0f - e) / (1.0f + e), x);
}
#endif

}  // namespace tunepar::core
