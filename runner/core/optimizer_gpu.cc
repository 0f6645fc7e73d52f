// The GPU build's optimizer ops: AdamW over a flat range of parameters, and the reductions the
// step's checks read on the host (the sum of squares of the gradients for the global norm, summed
// in double over fixed blocks; the count of non-finite values).
#include <cstdint>
#include <vector>

#include "runner/core/gpu_launch.h"
#include "runner/core/gpu_runtime.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"

namespace tunepar::core {

namespace {

using gpu::Blocks;
using gpu::Check;
using gpu::ComputeStream;
using gpu::kThreads;

__global__ void AdamWKernel(real* params, const real* grads, real* m, real* v, int64_t n, real lr, real beta1,
                            real beta2, real eps, real weight_decay, real correction1, real correction2) {
  TP_FOR_EACH(i, n) AdamW(params + i, grads[i], m + i, v + i, lr, beta1, beta2, eps, weight_decay, correction1, correction2);
}

constexpr int kReductionBlocks = 256;

__global__ void SumOfSquaresKernel(double* partial, const real* p, int64_t n) {
  __shared__ double sums[kThreads];
  double s = 0;
  TP_FOR_EACH(i, n) s += static_cast<double>(p[i]) * p[i];
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) sums[threadIdx.x] += sums[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
}

__global__ void CountNonFiniteKernel(unsigned long long* count, const real* p, int64_t n) {
  unsigned long long c = 0;
  TP_FOR_EACH(i, n) c += isfinite(p[i]) ? 0 : 1;
  if (c > 0) atomicAdd(count, c);
}

}  // namespace

void AdamWUpdate(real* params, const real* grads, real* m, real* v, int64_t n, real lr, real beta1,
                 real beta2, real eps, real weight_decay, real correction1, real correction2) {
  if (n > 0) {
    TP_LAUNCH(AdamWKernel, Blocks(n), kThreads, params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
              correction1, correction2);
  }
}

double SumOfSquares(const real* p, int64_t n) {
  if (n == 0) return 0;
  auto* partial = static_cast<double*>(gpu::Scratch(gpu::ScratchSlot::kReduction, kReductionBlocks * sizeof(double)));
  TP_LAUNCH(SumOfSquaresKernel, kReductionBlocks, kThreads, partial, p, n);
  std::vector<double> host(kReductionBlocks);
  Download(host.data(), partial, kReductionBlocks * sizeof(double));
  double s = 0;
  for (double x : host) s += x;
  return s;
}

double SumOfSquares(const std::vector<DeviceRange>& ranges) {
  const size_t values = ranges.size() * kReductionBlocks;
  if (values == 0) return 0;
  auto* partial = static_cast<double*>(gpu::Scratch(gpu::ScratchSlot::kReduction, values * sizeof(double)));
  Check(hipMemsetAsync(partial, 0, values * sizeof(double), ComputeStream()), "hipMemsetAsync");
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].n > 0) {
      TP_LAUNCH(SumOfSquaresKernel, kReductionBlocks, kThreads, partial + i * kReductionBlocks, ranges[i].p,
                ranges[i].n);
    }
  }
  std::vector<double> host(values);
  Download(host.data(), partial, values * sizeof(double));
  double s = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    double range = 0;
    for (int b = 0; b < kReductionBlocks; ++b) range += host[i * kReductionBlocks + b];
    s += range;
  }
  return s;
}

int64_t CountNonFinite(const real* p, int64_t n) {
  if (n == 0) return 0;
  auto* count = static_cast<unsigned long long*>(gpu::Scratch(gpu::ScratchSlot::kReduction, sizeof(unsigned long long)));
  Check(hipMemsetAsync(count, 0, sizeof(unsigned long long), ComputeStream()), "hipMemsetAsync");
  TP_LAUNCH(CountNonFiniteKernel, kReductionBlocks, kThreads, count, p, n);
  unsigned long long host = 0;
  Download(&host, count, sizeof(host));
  return static_cast<int64_t>(host);
}

}  // namespace tunepar::core
