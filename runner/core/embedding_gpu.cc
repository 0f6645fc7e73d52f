// The GPU build's embeddings: the lookup of token and position embeddings (this rank's rows
// v0 .. v0 + Vl of the vocabulary; the TP all-reduce that completes it is the caller's) and their
// gradients (the token rows with atomics, since tokens repeat; the positions summed over the
// sequences in order).
#include <cstdint>

#include "runner/core/gpu_launch.h"
#include "runner/core/gpu_runtime.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"

namespace tunepar::core {

namespace {

using gpu::Blocks;
using gpu::kThreads;

__global__ void EncoderForward16Kernel(real* out, const int* tokens, const uint16_t* wte, const real* wpe, int v0,
                                       int Vl, int64_t n, int T, int C, int precision) {
  TP_FOR_EACH(id, n) {
    const int64_t bt = id / C;
    const int i = static_cast<int>(id % C), row = tokens[bt] - v0;
    const real e = (row >= 0 && row < Vl) ? From16BitValue(wte[int64_t{row} * C + i], precision) : real(0);
    out[id] = e + (wpe != nullptr ? wpe[(bt % T) * C + i] : real(0));
  }
}

__global__ void EncoderForwardKernel(real* out, const int* tokens, const real* wte, const real* wpe, int v0,
                                     int Vl, int64_t n, int T, int C) {
  TP_FOR_EACH(id, n) {
    const int64_t bt = id / C;
    const int i = static_cast<int>(id % C), row = tokens[bt] - v0;
    const real e = (row >= 0 && row < Vl) ? wte[int64_t{row} * C + i] : real(0);
    out[id] = e + (wpe != nullptr ? wpe[(bt % T) * C + i] : real(0));
  }
}

// dwte rows of the tokens held here += dout rows (atomics: tokens repeat); dout reals or 16-bit
// numbers.
template <typename Values>
__global__ void TokenEmbeddingGradKernel(real* dwte, Values dout, const int* tokens, int v0, int Vl, int64_t n,
                                         int C) {
  TP_FOR_EACH(id, n) {
    const int row = tokens[id / C] - v0;
    if (row >= 0 && row < Vl) atomicAdd(dwte + int64_t{row} * C + id % C, dout[id]);
  }
}

// dwpe (T, C) += the sum over sequences of dout, in sequence order.
template <typename Values>
__global__ void PositionEmbeddingGradKernel(real* dwpe, Values dout, int B, int T, int C) {
  TP_FOR_EACH(id, int64_t{T} * C) {
    real s = 0;
    for (int b = 0; b < B; ++b) s += dout[int64_t{b} * T * C + id];
    dwpe[id] += s;
  }
}

}  // namespace

void EncoderForward(real* out, const int* tokens, const real* wte, const real* wpe, int v0, int Vl, int B,
                    int T, int C) {
  const int64_t n = int64_t{B} * T * C;
  if (n > 0) TP_LAUNCH(EncoderForwardKernel, Blocks(n), kThreads, out, tokens, wte, wpe, v0, Vl, n, T, C);
}

void EncoderForward16(real* out, const int* tokens, const uint16_t* wte, const real* wpe, int v0, int Vl, int B,
                      int T, int C, int precision) {
  const int64_t n = int64_t{B} * T * C;
  if (n > 0) {
    TP_LAUNCH(EncoderForward16Kernel, Blocks(n), kThreads, out, tokens, wte, wpe, v0, Vl, n, T, C, precision);
  }
}

namespace {
template <typename Values>
void EncoderBackwardOf(real* dwte, real* dwpe, Values dout, const int* tokens, int v0, int Vl, int B, int T, int C) {
  const int64_t n = int64_t{B} * T * C;
  if (n == 0) return;
  TP_LAUNCH(TokenEmbeddingGradKernel<Values>, Blocks(n), kThreads, dwte, dout, tokens, v0, Vl, n, C);
  if (dwpe != nullptr) {
    TP_LAUNCH(PositionEmbeddingGradKernel<Values>, Blocks(int64_t{T} * C), kThreads, dwpe, dout, B, T, C);
  }
}
}  // namespace

void EncoderBackward(real* dwte, real* dwpe, const real* dout, const int* tokens, int v0, int Vl, int B,
                     int T, int C) {
  EncoderBackwardOf(dwte, dwpe, dout, tokens, v0, Vl, B, T, C);
}

void EncoderBackward16(real* dwte, real* dwpe, const uint16_t* dout, const int* tokens, int v0, int Vl, int B,
                       int T, int C, int precision) {
  EncoderBackwardOf(dwte, dwpe, SixteenBitValues{dout, precision}, tokens, v0, Vl, B, T, C);
}

}  // namespace tunepar::core
