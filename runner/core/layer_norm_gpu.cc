// The GPU build's layer norm (one warp per row; kernels.h's row maths) and the sums over rows of
// the weight and bias gradients: two passes over kChunks fixed chunks of rows, so the result does
// not depend on scheduling. The linear layers' bias gradient (BiasBackward) is the same column
// sum, so it lives here too.
#include <cstddef>
#include <cstdint>

#include "runner/core/gpu_launch.h"
#include "runner/core/gpu_runtime.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"

namespace tunepar::core {

namespace {

using gpu::CheckLaunch;
using gpu::ComputeStream;
using gpu::kRowsPerBlock;
using gpu::kThreads;
using gpu::kWarp;
using gpu::RowBlocks;
using gpu::WarpSum;

constexpr int kChunks = 64;  // row chunks of the two-pass column sums

// Pass 1 of column sums over (N, cols): block (x, chunk) sums its chunk's rows of 32 columns;
// value(n, j) is the summand. Pass 2 adds the chunks in order.
template <typename Value>
__global__ void ColumnPartialsKernel(real* partial, int N, int cols, Value value) {
  const int j = blockIdx.x * kWarp + threadIdx.x % kWarp;
  const int rows_per_chunk = (N + kChunks - 1) / kChunks;
  const int lo = blockIdx.y * rows_per_chunk, hi = min(N, lo + rows_per_chunk);
  __shared__ real sums[kRowsPerBlock][kWarp];
  real s = 0;
  if (j < cols) {
    for (int n = lo + threadIdx.x / kWarp; n < hi; n += kRowsPerBlock) s += value(n, j);
  }
  sums[threadIdx.x / kWarp][threadIdx.x % kWarp] = s;
  __syncthreads();
  if (threadIdx.x < kWarp && j < cols) {
    real t = 0;
    for (int r = 0; r < kRowsPerBlock; ++r) t += sums[r][threadIdx.x];
    partial[int64_t{blockIdx.y} * cols + j] = t;
  }
}

__global__ void AddColumnPartialsKernel(real* out, const real* partial, int cols) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  real s = 0;
  for (int c = 0; c < kChunks; ++c) s += partial[int64_t{c} * cols + j];
  out[j] += s;
}

// out (cols) += sum over the N rows of value(n, j).
template <typename Value>
void AddColumnSums(const char* what, real* out, int N, int cols, Value value) {
  auto* partial = static_cast<real*>(gpu::Scratch(gpu::ScratchSlot::kReduction, size_t{kChunks} * cols * sizeof(real)));
  const dim3 grid((cols + kWarp - 1) / kWarp, kChunks);
  gpu::ProfiledRegion profiled(what);
  ColumnPartialsKernel<<<grid, kThreads, 0, ComputeStream()>>>(partial, N, cols, value);
  CheckLaunch("ColumnPartialsKernel");
  AddColumnPartialsKernel<<<(cols + kThreads - 1) / kThreads, kThreads, 0, ComputeStream()>>>(out, partial, cols);
  CheckLaunch("AddColumnPartialsKernel");
}

// Element (n, j) of a row-major array with rows ld apart: reals or 16-bit numbers.
template <typename Values>
struct ElementOf {
  Values p;
  int ld;
  __device__ real operator()(int n, int j) const { return p[int64_t{n} * ld + j]; }
};
using Element = ElementOf<const real*>;

// Layer norm: one warp per row; the input reals or 16-bit numbers (kernels.h SixteenBitValues),
// the output as well (RealOutputs, SixteenBitOutputs: rounded as written).
template <typename Values, typename Outputs>
__global__ void LayerNormForwardKernel(Outputs out, real* mean, real* rstd, Values inp, const real* w, const real* b,
                                       int N, int C) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const Values x = inp + int64_t{n} * C;
  real s = 0;
  if (mean != nullptr) {  // else RMSNorm: no centring
    for (int i = lane; i < C; i += kWarp) s += x[i];
  }
  const real m = mean != nullptr ? WarpSum(s) / C : real(0);
  real v = 0;
  for (int i = lane; i < C; i += kWarp) v += (x[i] - m) * (x[i] - m);
  const real r = real(1) / Sqrt(WarpSum(v) / C + real(1e-5));
  const int64_t row = int64_t{n} * C;
  for (int i = lane; i < C; i += kWarp) out.Set(row + i, (x[i] - m) * r * w[i] + (b != nullptr ? b[i] : real(0)));
  if (lane == 0) {
    if (mean != nullptr) mean[n] = m;
    rstd[n] = r;
  }
}

// dx += the row's gradient (LayerNormRowBackward's, one warp per row); dx read and written as
// Outputs (rounded as written).
template <typename Values, typename Outputs>
__global__ void LayerNormInputGradKernel(Outputs dinp, const real* dout, Values inp, const real* w, const real* mean,
                                         const real* rstd, int N, int C) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const Values x = inp + int64_t{n} * C;
  const real* d = dout + int64_t{n} * C;
  const real m = mean != nullptr ? mean[n] : real(0), r = rstd[n];
  real dnorm_mean = 0, dnorm_norm_mean = 0;
  for (int i = lane; i < C; i += kWarp) {
    const real dnorm = w[i] * d[i];
    dnorm_mean += dnorm;
    dnorm_norm_mean += dnorm * (x[i] - m) * r;
  }
  dnorm_mean = mean != nullptr ? WarpSum(dnorm_mean) / C : real(0);  // RMSNorm: no mean term
  dnorm_norm_mean = WarpSum(dnorm_norm_mean) / C;
  const int64_t row = int64_t{n} * C;
  for (int i = lane; i < C; i += kWarp) {
    const real norm = (x[i] - m) * r;
    dinp.Set(row + i, dinp[row + i] + (w[i] * d[i] - dnorm_mean - norm * dnorm_norm_mean) * r);
  }
}

template <typename Values>
struct NormTimesGrad {
  Values x;
  const real* dout;
  const real* mean;
  const real* rstd;
  int C;
  __device__ real operator()(int n, int i) const {
    const int64_t at = int64_t{n} * C + i;
    return (x[at] - (mean != nullptr ? mean[n] : real(0))) * rstd[n] * dout[at];
  }
};

}  // namespace

void BiasBackward(real* dbias, const real* dout, int N, int OC) {
  AddColumnSums("ColumnSums (bias gradient)", dbias, N, OC, Element{dout, OC});
}

void BiasBackward16(real* dbias, const uint16_t* dout, int N, int OC, int precision) {
  AddColumnSums("ColumnSums (bias gradient)", dbias, N, OC, ElementOf<SixteenBitValues>{{dout, precision}, OC});
}

namespace {

template <typename Values, typename Outputs>
void LayerNormForwardRows(Outputs out, real* mean, real* rstd, Values inp, const real* w, const real* b, int N,
                          int C) {
  if (N == 0) return;
  gpu::ProfiledRegion profiled("LayerNormForwardKernel");
  LayerNormForwardKernel<<<RowBlocks(N), kThreads, 0, ComputeStream()>>>(out, mean, rstd, inp, w, b, N, C);
  CheckLaunch("LayerNormForwardKernel");
}

template <typename Values, typename Outputs>
void LayerNormBackwardRows(Outputs dinp, real* dw, real* db, const real* dout, Values inp, const real* w,
                           const real* mean, const real* rstd, int N, int C) {
  if (N == 0) return;
  {
    gpu::ProfiledRegion profiled("LayerNormInputGradKernel");
    LayerNormInputGradKernel<<<RowBlocks(N), kThreads, 0, ComputeStream()>>>(dinp, dout, inp, w, mean, rstd, N, C);
    CheckLaunch("LayerNormInputGradKernel");
  }
  AddColumnSums("ColumnSums (layer norm dw)", dw, N, C, NormTimesGrad<Values>{inp, dout, mean, rstd, C});
  if (db != nullptr) AddColumnSums("ColumnSums (layer norm db)", db, N, C, Element{dout, C});
}

}  // namespace

void LayerNormForward(real* out, real* mean, real* rstd, const real* inp, const real* w, const real* b, int N,
                      int C, int precision) {
  LayerNormForwardRows(RealOutputs{out, precision}, mean, rstd, inp, w, b, N, C);
}

void LayerNormForward16(uint16_t* out, real* mean, real* rstd, const uint16_t* inp, const real* w, const real* b,
                        int N, int C, int precision) {
  LayerNormForwardRows(SixteenBitOutputs{out, precision}, mean, rstd, SixteenBitValues{inp, precision}, w, b, N, C);
}

void LayerNormBackward(real* dinp, real* dw, real* db, const real* dout, const real* inp, const real* w,
                       const real* mean, const real* rstd, int N, int C, int precision) {
  LayerNormBackwardRows(RealOutputs{dinp, precision}, dw, db, dout, inp, w, mean, rstd, N, C);
}

void LayerNormBackward16(uint16_t* dinp, real* dw, real* db, const real* dout, const uint16_t* inp, const real* w,
                         const real* mean, const real* rstd, int N, int C, int precision) {
  LayerNormBackwardRows(SixteenBitOutputs{dinp, precision}, dw, db, dout, SixteenBitValues{inp, precision}, w, mean,
                        rstd, N, C);
}

}  // namespace tunepar::core
