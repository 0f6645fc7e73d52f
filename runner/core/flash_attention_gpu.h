// The CUDA flash-attention kernels' shared device code (flash_attention.h: the tiling and the
// per-tile maths): the warp layout, the online softmax of one row, the causal mask, the launches.
// Included by flash_attention_gpu.cc (the CUDA-core kernels: causal and ring blocks) and
// flash_attention_mma_gpu.cc (the tensor-core kernels: causal). CUDA only (32-lane warps).
#pragma once

#include <string>

#include "runner/core/flash_attention.h"
#include "runner/core/gpu_runtime.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"

namespace tunepar::core::flash_gpu {


inline constexpr int kWarp = 32;
inline constexpr int kWarps = 8;
inline constexpr int kThreads = kWarp * kWarps;
inline constexpr int kRowsPerWarp = kFlashRows / kWarps;  // a warp's query rows (forward, dQ)
inline constexpr int kKeysPerWarp = kFlashCols / kWarps;  // a warp's key rows (dK, dV)
inline constexpr int kColsPerLane = kFlashCols / kWarp;   // a lane's key columns of a query row
inline constexpr int kRowsPerLane = kFlashRows / kWarp;   // a lane's query rows of a key row
inline constexpr int kMaxHeadSize = 128;
inline constexpr int kDimsPerLane = kMaxHeadSize / kWarp;  // a lane's output values d = lane + 32 j
static_assert(kFlashRows % kWarps == 0 && kFlashCols % kWarps == 0 && kFlashRows % kWarp == 0 &&
              kFlashCols % kWarp == 0);

__device__ inline real WarpSum(real v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ inline real WarpMax(real v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ inline int Lane() {
  return threadIdx.x % kWarp;
}
__device__ inline int Warp() {
  return threadIdx.x / kWarp;
}

// The causal mask of a whole sequence (the ring blocks' is RingMask, flash_attention_gpu.cc).
struct CausalMask {
  __device__ bool Visible(int query, int key, int T) const { return tunepar::core::Visible(query, key, T); }
  // Whether query tile qt reads key tile kt (a query tile's key tiles come first).
  __device__ bool TileVisible(int qt, int kt, int T) const { return kt <= LastKeyTile(qt, T); }
  __device__ int FirstQueryTile(int kt) const { return tunepar::core::FirstQueryTile(kt); }
};

// One query row against a key tile (one warp): the lane's scores score_of(c), folded into the
// row's running softmax; store(c, w) gets each weight as the P V product reads it. Returns the
// factor that rescales what the row accumulated before this tile.
template <typename Mask, typename ScoreOf, typename StoreWeight>
__device__ inline real FoldRow(RunningSoftmax& row, const Mask& mask, int query, int col0, const FlashShape& s,
                        ScoreOf score_of, StoreWeight store) {
  real scores[kColsPerLane], tile_max = -INFINITY;
  for (int j = 0; j < kColsPerLane; ++j) {
    const int c = Lane() + j * kWarp;
    scores[j] = score_of(c);
    if (mask.Visible(query, col0 + c, s.T)) tile_max = fmaxf(tile_max, scores[j]);
  }
  const real factor = FoldTileMax(row, WarpMax(tile_max));
  real sum = 0;
  for (int j = 0; j < kColsPerLane; ++j) {
    const int c = Lane() + j * kWarp;
    const real w = TileWeight(scores[j], row.max, mask.Visible(query, col0 + c, s.T));
    sum += w;
    store(c, TileOperand(w, s.precision));
  }
  row.sum += WarpSum(sum);
  return factor;
}

inline void CheckHeadSize(const FlashShape& s) {
  if (s.hs > kMaxHeadSize) {
    throw DeviceError("flash attention: head size " + std::to_string(s.hs) + " is over the kernel's " +
                      std::to_string(kMaxHeadSize));
  }
}

// Launches kernel(args...) on the compute stream over (tiles, heads, sequences) blocks: query heads,
// or K/V heads for the dK/dV kernels (KeyValueHeads).
template <typename... Params, typename... Args>
void LaunchOver(int heads, void (*kernel)(Params...), const char* name, const FlashShape& s, int tiles,
                size_t shared_bytes, Args... args) {
  gpu::Check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)),
             name);
  const dim3 grid(tiles, heads, s.B);
  kernel<<<grid, kThreads, shared_bytes, gpu::ComputeStream()>>>(args...);
  gpu::CheckLaunch(name);
}
template <typename... Params, typename... Args>
void Launch(void (*kernel)(Params...), const char* name, const FlashShape& s, int tiles, size_t shared_bytes,
            Args... args) {
  LaunchOver(s.NHl, kernel, name, s, tiles, shared_bytes, args...);
}

// flash_attention_mma_gpu.cc: the causal attention of 16-bit storage on tensor cores, where they
// run it (16-bit storage, hs a multiple of 16, sm_80+, and for the backward the tiles fit the
// device's shared memory); false, having run nothing, elsewhere.
bool TensorCoreForward16(uint16_t* y, real* lse, const uint16_t* qkv, const FlashShape& s);
bool TensorCoreBackward16(uint16_t* dqkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* y, const real* lse,
                          const FlashShape& s);

}  // namespace tunepar::core::flash_gpu
