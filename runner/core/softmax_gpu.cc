// The GPU build's two softmaxes: the causal softmax over attention scores and its gradient (one
// warp per row), and the vocabulary-parallel cross-entropy (one block per row of Vl logits: the
// row statistics, which the caller all-reduces over the TP group, then the loss from them summed
// in double, and the logits' gradient).
#include <cmath>
#include <cstdint>

#include "runner/core/gpu_launch.h"
#include "runner/core/gpu_runtime.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"

namespace tunepar::core {

namespace {

using gpu::kRowsPerBlock;
using gpu::kThreads;
using gpu::kWarp;
using gpu::RowBlocks;
using gpu::WarpMax;
using gpu::WarpSum;

// The block's sum or max, returned to every thread (blockDim.x = kThreads).
__device__ real BlockReduce(real v, bool max) {
  __shared__ real partial[kThreads / kWarp];
  __shared__ real result;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = max ? WarpMax(v) : WarpSum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    real w = lane < kThreads / kWarp ? partial[lane] : (max ? -INFINITY : real(0));
    w = max ? WarpMax(w) : WarpSum(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  const real r = result;
  __syncthreads();
  return r;
}

// Causal softmax: one warp per row of T (query position t = row % T).
__global__ void CausalSoftmaxForwardKernel(real* att, int64_t rows, int T, int precision, uint16_t* out16) {
  const int64_t r = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  real* row = att + r * T;
  const int t = static_cast<int>(r % T);
  real m = -INFINITY;
  for (int i = lane; i <= t; i += kWarp) m = fmaxf(m, row[i]);
  m = WarpMax(m);
  real s = 0;
  for (int i = lane; i <= t; i += kWarp) s += Exp(row[i] - m);
  const real inv = real(1) / WarpSum(s);
  for (int i = lane; i < T; i += kWarp) {
    const real p = i <= t ? RoundTo(Exp(row[i] - m) * inv, precision) : real(0);
    row[i] = p;
    if (out16 != nullptr) out16[r * T + i] = To16BitValue(p, precision);
  }
}

__global__ void CausalSoftmaxBackwardKernel(real* dp, const real* p, int64_t rows, int T, real scale,
                                            int precision, uint16_t* out16) {
  const int64_t r = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  real* d = dp + r * T;
  const real* pr = p + r * T;
  const int t = static_cast<int>(r % T);
  real dot = 0;
  for (int i = lane; i <= t; i += kWarp) dot += pr[i] * d[i];
  dot = WarpSum(dot);
  for (int i = lane; i < T; i += kWarp) {
    const real ds = i <= t ? RoundTo(pr[i] * (d[i] - dot) * scale, precision) : real(0);
    d[i] = ds;
    if (out16 != nullptr) out16[r * T + i] = To16BitValue(ds, precision);
  }
}

// The loss from the all-reduced row statistics: one block; each thread's rows, then the block's
// sum in double (a tree in shared memory; kThreads is a power of two).
__global__ void CrossEntropyLossKernel(real* row_max, const real* row_sum, const real* target_logit, int N,
                                       double* loss) {
  static_assert((kThreads & (kThreads - 1)) == 0, "the tree needs a power of two");
  __shared__ double partial[kThreads];
  double s = 0;
  for (int n = threadIdx.x; n < N; n += kThreads) {
    const real log_sum = Log(row_sum[n]) + row_max[n];
    row_max[n] = log_sum;
    s += static_cast<double>(log_sum) - target_logit[n];
  }
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = partial[0];
}

// Cross-entropy: one block per row of Vl logits, each rounded to `precision` as it is loaded
// (RoundedValues: the LM head leaves its fp32 sums unrounded).
__global__ void CrossEntropyStatsKernel(real* row_max, real* row_sum, real* target_logit, const real* logits,
                                        const int* targets, const real* global_max, int v0, int Vl,
                                        int precision) {
  const int n = blockIdx.x;
  const RoundedValues l = RoundedValues{logits, precision} + int64_t{n} * Vl;
  if (global_max == nullptr) {
    real m = -INFINITY;
    for (int i = threadIdx.x; i < Vl; i += kThreads) m = fmaxf(m, l[i]);
    m = BlockReduce(m, true);
    if (threadIdx.x == 0) row_max[n] = m;
    return;
  }
  const real m = global_max[n];
  real s = 0;
  for (int i = threadIdx.x; i < Vl; i += kThreads) s += Exp(l[i] - m);
  s = BlockReduce(s, false);
  if (threadIdx.x == 0) {
    row_sum[n] = s;
    const int t = targets[n] - v0;
    target_logit[n] = (t >= 0 && t < Vl) ? l[t] : real(0);
  }
}

// dlogits written as Outputs (RealOutputs, or SixteenBitOutputs: straight into 16 bits).
template <typename Outputs>
__global__ void CrossEntropyBackwardKernel(Outputs dlogits, const real* logits, const real* log_sum,
                                           const int* targets, int v0, real scale, int Vl, int precision) {
  const int n = blockIdx.x;
  const int64_t row = int64_t{n} * Vl;
  const RoundedValues l = RoundedValues{logits, precision} + row;
  const real ls = log_sum[n];
  const int target = targets[n];
  for (int i = threadIdx.x; i < Vl; i += kThreads)
    dlogits.Set(row + i, (Exp(l[i] - ls) - (i + v0 == target ? real(1) : real(0))) * scale);
}

}  // namespace

void CausalSoftmaxForward(real* att, int64_t rows, int T, int precision, uint16_t* out16) {
  if (rows > 0) TP_LAUNCH(CausalSoftmaxForwardKernel, RowBlocks(rows), kThreads, att, rows, T, precision, out16);
}

void CausalSoftmaxBackward(real* dp, const real* p, int64_t rows, int T, real scale, int precision,
                           uint16_t* out16) {
  if (rows > 0) {
    TP_LAUNCH(CausalSoftmaxBackwardKernel, RowBlocks(rows), kThreads, dp, p, rows, T, scale, precision, out16);
  }
}

void CrossEntropyStats(real* row_max, real* row_sum, real* target_logit, const real* logits,
                       const int* targets, const real* global_max, int v0, int N, int Vl, int precision) {
  if (N > 0) {
    TP_LAUNCH(CrossEntropyStatsKernel, N, kThreads, row_max, row_sum, target_logit, logits, targets, global_max,
              v0, Vl, precision);
  }
}

void CrossEntropyLoss(real* row_max, const real* row_sum, const real* target_logit, int N, double* loss) {
  TP_LAUNCH(CrossEntropyLossKernel, 1, kThreads, row_max, row_sum, target_logit, N, loss);
}

void CrossEntropyBackward(real* dlogits, const real* logits, const real* log_sum, const int* targets, int v0,
                          real scale, int N, int Vl, int precision) {
  if (N > 0) {
    TP_LAUNCH(CrossEntropyBackwardKernel<RealOutputs>, N, kThreads, RealOutputs{dlogits, precision}, logits,
              log_sum, targets, v0, scale, Vl, precision);
  }
}

void CrossEntropyBackward16(uint16_t* dlogits, const real* logits, const real* log_sum, const int* targets, int v0,
                            real scale, int N, int Vl, int precision) {
  if (N > 0) {
    TP_LAUNCH(CrossEntropyBackwardKernel<SixteenBitOutputs>, N, kThreads, SixteenBitOutputs{dlogits, precision},
              logits, log_sum, targets, v0, scale, Vl, precision);
  }
}

}  // namespace tunepar::core
