// What the GPU build's kernel files share (device code only): the launch shape (kThreads threads
// a block; one 32-lane warp per row for the row kernels), grid-stride loops, warp sums and maxima,
// and TP_LAUNCH, which runs a kernel on the compute stream inside a profiled region and checks the
// launch. Written against HIP's names (nvcc through device_alias.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "runner/core/gpu_runtime.h"
#include "runner/core/real.h"

namespace tunepar::core::gpu {

inline constexpr int kThreads = 256;
inline constexpr int kWarp = 32;
inline constexpr int kRowsPerBlock = kThreads / kWarp;  // one warp per row

// Blocks for a grid-stride loop over n elements.
inline int Blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535 * 4));
}

// Blocks for the row kernels, kRowsPerBlock rows a block.
inline int RowBlocks(int64_t rows) {
  return static_cast<int>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

#define TP_FOR_EACH(i, n) \
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// Sums and maxima over a group of 32 lanes (a CUDA warp; half an AMD wavefront of 64: the
// shuffle's width keeps it inside the 32).
__device__ inline real ShuffleXor(real v, int offset) {
#if defined(__HIPCC__)
  return __shfl_xor(v, offset, kWarp);
#else
  return __shfl_xor_sync(0xffffffffu, v, offset);
#endif
}
__device__ inline real WarpSum(real v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += ShuffleXor(v, offset);
  return v;
}
__device__ inline real WarpMax(real v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmaxf(v, ShuffleXor(v, offset));
  return v;
}

// kernel<<<blocks, threads>>>(...) on the compute stream, timed under the kernel's name when
// profiling, its launch checked.
#define TP_LAUNCH(kernel, blocks, threads, ...)                                               \
  do {                                                                                        \
    ::tunepar::core::gpu::ProfiledRegion profiled(#kernel);                                   \
    kernel<<<(blocks), (threads), 0, ::tunepar::core::gpu::ComputeStream()>>>(__VA_ARGS__);   \
    ::tunepar::core::gpu::CheckLaunch(#kernel);                                               \
  } while (0)

}  // namespace tunepar::core::gpu
