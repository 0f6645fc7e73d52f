// The fused causal attention on CUDA (flash_attention.h: the tiling and the per-tile maths, shared
// with the CPU twin that the CPU tests pin). One thread block per (query tile, head, sequence)
// forward and for dQ, one per (key tile, head, sequence) for dK and dV; a block's tiles sit in
// shared memory as fp32 (16-bit inputs widened as they are loaded), 8 warps of 32 lanes, each
// warp owning 8 rows of the block's tile. Templated on the storage (reals, or 16-bit numbers
// through kernels.h's SixteenBitValues / SixteenBitOutputs), so fa1 runs at every precision.
//
// The HIP build compiles no kernel here: the warp layout assumes 32 lanes, and AMD's waves are 64
// wide; until it is written and measured there, supported_knobs.h keeps fa0 for hip and these
// entry points say so if reached.
#include "runner/core/flash_attention.h"
#include "runner/core/gpu_runtime.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"

namespace tunepar::core {

#if defined(__HIPCC__)

namespace {
[[noreturn]] void NoHipKernel() {
  throw DeviceError("flash attention: the HIP build has no fused attention kernel (not measured on 64-wide waves)");
}
}  // namespace

void FlashAttentionForward(real*, real*, const real*, int, int, int, int, int) {
  NoHipKernel();
}
void FlashAttentionBackward(real*, const real*, const real*, const real*, const real*, int, int, int, int, int) {
  NoHipKernel();
}
void FlashAttentionForward16(uint16_t*, real*, const uint16_t*, int, int, int, int, int) {
  NoHipKernel();
}
void FlashAttentionBackward16(uint16_t*, const uint16_t*, const uint16_t*, const uint16_t*, const real*, int, int,
                              int, int, int) {
  NoHipKernel();
}

#else

namespace {

constexpr int kWarp = 32;
constexpr int kWarps = 8;
constexpr int kThreads = kWarp * kWarps;
constexpr int kRowsPerWarp = kFlashRows / kWarps;  // a warp's query rows (forward, dQ)
constexpr int kKeysPerWarp = kFlashCols / kWarps;  // a warp's key rows (dK, dV)
constexpr int kColsPerLane = kFlashCols / kWarp;   // a lane's key columns of a query row
constexpr int kRowsPerLane = kFlashRows / kWarp;   // a lane's query rows of a key row
constexpr int kMaxHeadSize = 128;
constexpr int kDimsPerLane = kMaxHeadSize / kWarp;  // a lane's output values d = lane + 32 j
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

// Shared memory: tiles of rows x hs values, rows ld = hs + 1 apart (lanes reading down a column
// hit distinct banks), and rows x kFlashCols weight tiles.
struct SharedTiles {
  real* base;
  int ld;
  __device__ real* Tile(int i) const { return base + i * kFlashRows * ld; }
};
TP_HOST_DEVICE inline int TileLd(int hs) {
  return hs + 1;
}

// tile (rows, hs) = rows [row0, row0 + rows) of a head, widened; zeros past T. All threads.
template <typename Values>
__device__ void LoadTile(real* tile, int ld, Values src, HeadRows at, int row0, int rows, int T, int hs) {
  for (int e = threadIdx.x; e < rows * hs; e += blockDim.x) {
    const int r = e / hs, i = e % hs;
    tile[r * ld + i] = row0 + r < T ? src[at.first + int64_t{row0 + r} * at.ld + i] : real(0);
  }
}

// Row `row` of a tile dotted with row `other` of another, over hs values.
__device__ inline real RowDot(const real* a, int row, const real* b, int other, int ld, int hs) {
  real s = 0;
  for (int i = 0; i < hs; ++i) s += a[row * ld + i] * b[other * ld + i];
  return s;
}

// D = rowsum(dO o O) of a query row: dO from its tile, O (y) from global memory. One warp.
template <typename Values>
__device__ real RowDelta(const real* dout, int r, int ld, Values y, HeadRows at, int row, int T, int hs) {
  real s = 0;
  if (row < T) {
    for (int d = Lane(); d < hs; d += kWarp) s += dout[r * ld + d] * y[at.first + int64_t{row} * at.ld + d];
  }
  return WarpSum(s);
}

// ---- Forward.

// One query row against a key tile: the lane's scores, folded into the row's running softmax;
// the weights (as the P V product reads them) go to w_row. Returns the factor that rescales what
// the row accumulated before this tile.
__device__ real FoldRow(RunningSoftmax& row, real* w_row, const real* q, int r, const real* k, int ld,
                        int query, int col0, const FlashShape& s) {
  real scores[kColsPerLane], tile_max = -INFINITY;
  for (int j = 0; j < kColsPerLane; ++j) {
    const int c = Lane() + j * kWarp;
    scores[j] = s.scale * RowDot(q, r, k, c, ld, s.hs);
    if (Visible(query, col0 + c, s.T)) tile_max = fmaxf(tile_max, scores[j]);
  }
  const real factor = FoldTileMax(row, WarpMax(tile_max));
  real sum = 0;
  for (int j = 0; j < kColsPerLane; ++j) {
    const int c = Lane() + j * kWarp;
    const real w = TileWeight(scores[j], row.max, Visible(query, col0 + c, s.T));
    sum += w;
    w_row[c] = TileOperand(w, s.precision);
  }
  row.sum += WarpSum(sum);
  return factor;
}

// o (the lane's values of a row) = o factor + w_row V.
__device__ void AccumulateRow(real (&o)[kDimsPerLane], real factor, const real* w_row, const real* v, int ld, int hs) {
  for (int j = 0; j < kDimsPerLane; ++j) {
    const int d = Lane() + j * kWarp;
    if (d >= hs) break;
    real acc = o[j] * factor;
    for (int c = 0; c < kFlashCols; ++c) acc += w_row[c] * v[c * ld + d];
    o[j] = acc;
  }
}

// Block (query tile, head, sequence). Shared: q, k, v tiles and the weights.
template <typename Values, typename Outputs>
__global__ void __launch_bounds__(kThreads) FlashForwardKernel(Outputs y, real* lse, Values qkv, FlashShape s) {
  extern __shared__ real shared[];
  const SharedTiles tiles{shared, TileLd(s.hs)};
  real *q = tiles.Tile(0), *k = tiles.Tile(1), *v = tiles.Tile(2), *w = tiles.Tile(3);
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, row0 = qt * kFlashRows;
  LoadTile(q, tiles.ld, qkv, QkvRows(s, b, h, 0), row0, kFlashRows, s.T, s.hs);
  RunningSoftmax rows[kRowsPerWarp];
  real o[kRowsPerWarp][kDimsPerLane] = {};
  for (int kt = 0; kt <= LastKeyTile(qt, s.T); ++kt) {
    const int col0 = kt * kFlashCols;
    __syncthreads();  // the last tile's k, v and weights are read
    LoadTile(k, tiles.ld, qkv, QkvRows(s, b, h, 1), col0, kFlashCols, s.T, s.hs);
    LoadTile(v, tiles.ld, qkv, QkvRows(s, b, h, 2), col0, kFlashCols, s.T, s.hs);
    __syncthreads();
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = Warp() * kRowsPerWarp + i;
      const real factor = FoldRow(rows[i], w + r * kFlashCols, q, r, k, tiles.ld, row0 + r, col0, s);
      __syncwarp();
      AccumulateRow(o[i], factor, w + r * kFlashCols, v, tiles.ld, s.hs);
    }
  }
  const HeadRows out = OutputRows(s, b, h);
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = row0 + Warp() * kRowsPerWarp + i;
    if (row >= s.T) break;
    for (int j = 0; j < kDimsPerLane && Lane() + j * kWarp < s.hs; ++j)
      y.Set(out.first + int64_t{row} * out.ld + Lane() + j * kWarp, o[i][j] / rows[i].sum);
    if (Lane() == 0) lse[LseIndex(s, b, h, row)] = LogSumExp(rows[i]);
  }
}

// ---- Backward.

// A query tile's rows as the backward reads them: q and dO in shared tiles, lse and D per row.
struct QueryRows {
  real *q, *dout, *lse, *delta;
  int ld;
};

template <typename Values>
__device__ void LoadQueryRows(const QueryRows& t, Values qkv, Values y, Values dy, const real* lse,
                              const FlashShape& s, int b, int h, int row0) {
  LoadTile(t.q, t.ld, qkv, QkvRows(s, b, h, 0), row0, kFlashRows, s.T, s.hs);
  LoadTile(t.dout, t.ld, dy, OutputRows(s, b, h), row0, kFlashRows, s.T, s.hs);
  __syncthreads();
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = Warp() * kRowsPerWarp + i, row = row0 + r;
    const real delta = RowDelta(t.dout, r, t.ld, y, OutputRows(s, b, h), row, s.T, s.hs);
    if (Lane() == 0) {
      t.delta[r] = delta;
      t.lse[r] = row < s.T ? lse[LseIndex(s, b, h, row)] : real(0);
    }
  }
}

// P and dS of query row r (of the tile starting at row0) and key row c (of the tile at col0),
// as the next products read them.
struct ProbabilityAndGradient {
  real p, ds;
};
__device__ inline ProbabilityAndGradient ScorePair(const QueryRows& t, int r, int row0, const real* k, const real* v,
                                                   int c, int col0, const FlashShape& s) {
  const bool visible = Visible(row0 + r, col0 + c, s.T);
  const real score = s.scale * RowDot(t.q, r, k, c, t.ld, s.hs);
  const real p = RecomputedProbability(score, t.lse[r], visible);
  const real dp = RowDot(t.dout, r, v, c, t.ld, s.hs);
  return {TileOperand(p, s.precision), TileOperand(ScoreGradient(p, dp, t.delta[r], s.scale), s.precision)};
}

// acc (the lane's values of one row) += weights (kFlashRows) . tile (kFlashRows, hs).
__device__ void AccumulateColumnSum(real (&acc)[kDimsPerLane], const real* weights, const real* tile, int ld, int hs) {
  for (int j = 0; j < kDimsPerLane; ++j) {
    const int d = Lane() + j * kWarp;
    if (d >= hs) break;
    real sum = acc[j];
    for (int r = 0; r < kFlashRows; ++r) sum += weights[r] * tile[r * ld + d];
    acc[j] = sum;
  }
}

template <typename Outputs>
__device__ void StoreRow(Outputs out, HeadRows at, int row, const real (&values)[kDimsPerLane], int hs) {
  for (int j = 0; j < kDimsPerLane && Lane() + j * kWarp < hs; ++j)
    out.Set(at.first + int64_t{row} * at.ld + Lane() + j * kWarp, values[j]);
}

// Block (key tile, head, sequence): dK and dV of the tile's keys, over the query tiles that see
// them. A warp owns kKeysPerWarp keys; its lanes split the query rows, then the head's values.
// Shared: k, v, q, dO tiles, P^T and dS^T (keys x query rows), lse and D.
template <typename Values, typename Outputs>
__global__ void __launch_bounds__(kThreads)
    FlashKeyValueGradientKernel(Outputs dqkv, Values dy, Values qkv, Values y, const real* lse, FlashShape s) {
  extern __shared__ real shared[];
  const SharedTiles tiles{shared, TileLd(s.hs)};
  real *k = tiles.Tile(0), *v = tiles.Tile(1), *pt = tiles.Tile(4), *dst = pt + kFlashCols * kFlashRows;
  const QueryRows t{tiles.Tile(2), tiles.Tile(3), dst + kFlashCols * kFlashRows, dst + kFlashCols * kFlashRows + kFlashRows,
                    tiles.ld};
  const int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, col0 = kt * kFlashCols;
  LoadTile(k, tiles.ld, qkv, QkvRows(s, b, h, 1), col0, kFlashCols, s.T, s.hs);
  LoadTile(v, tiles.ld, qkv, QkvRows(s, b, h, 2), col0, kFlashCols, s.T, s.hs);
  real dk[kKeysPerWarp][kDimsPerLane] = {}, dv[kKeysPerWarp][kDimsPerLane] = {};
  for (int qt = FirstQueryTile(kt); qt < FlashTiles(s.T, kFlashRows); ++qt) {
    const int row0 = qt * kFlashRows;
    __syncthreads();  // the last query tile is read
    LoadQueryRows(t, qkv, y, dy, lse, s, b, h, row0);
    __syncthreads();
    for (int i = 0; i < kKeysPerWarp; ++i) {
      const int c = Warp() * kKeysPerWarp + i;
      for (int j = 0; j < kRowsPerLane; ++j) {
        const int r = Lane() + j * kWarp;
        const ProbabilityAndGradient g = ScorePair(t, r, row0, k, v, c, col0, s);
        pt[c * kFlashRows + r] = g.p;
        dst[c * kFlashRows + r] = g.ds;
      }
      __syncwarp();
      AccumulateColumnSum(dv[i], pt + c * kFlashRows, t.dout, t.ld, s.hs);  // P^T dO
      AccumulateColumnSum(dk[i], dst + c * kFlashRows, t.q, t.ld, s.hs);    // dS^T Q
    }
  }
  for (int i = 0; i < kKeysPerWarp; ++i) {
    const int key = col0 + Warp() * kKeysPerWarp + i;
    if (key >= s.T) break;
    StoreRow(dqkv, QkvRows(s, b, h, 1), key, dk[i], s.hs);
    StoreRow(dqkv, QkvRows(s, b, h, 2), key, dv[i], s.hs);
  }
}

// Block (query tile, head, sequence): dQ of the tile's rows, over the key tiles they see. A warp
// owns kRowsPerWarp rows; its lanes split the keys, then the head's values. Shared: q, dO, k, v
// tiles, dS (rows x keys), lse and D.
template <typename Values, typename Outputs>
__global__ void __launch_bounds__(kThreads)
    FlashQueryGradientKernel(Outputs dqkv, Values dy, Values qkv, Values y, const real* lse, FlashShape s) {
  extern __shared__ real shared[];
  const SharedTiles tiles{shared, TileLd(s.hs)};
  real *k = tiles.Tile(2), *v = tiles.Tile(3), *ds = tiles.Tile(4);
  const QueryRows t{tiles.Tile(0), tiles.Tile(1), ds + kFlashRows * kFlashCols, ds + kFlashRows * kFlashCols + kFlashRows,
                    tiles.ld};
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, row0 = qt * kFlashRows;
  LoadQueryRows(t, qkv, y, dy, lse, s, b, h, row0);
  real dq[kRowsPerWarp][kDimsPerLane] = {};
  for (int kt = 0; kt <= LastKeyTile(qt, s.T); ++kt) {
    const int col0 = kt * kFlashCols;
    __syncthreads();  // the last key tile is read (and, first time, lse and D are written)
    LoadTile(k, tiles.ld, qkv, QkvRows(s, b, h, 1), col0, kFlashCols, s.T, s.hs);
    LoadTile(v, tiles.ld, qkv, QkvRows(s, b, h, 2), col0, kFlashCols, s.T, s.hs);
    __syncthreads();
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = Warp() * kRowsPerWarp + i;
      for (int j = 0; j < kColsPerLane; ++j) {
        const int c = Lane() + j * kWarp;
        ds[r * kFlashCols + c] = ScorePair(t, r, row0, k, v, c, col0, s).ds;
      }
      __syncwarp();
      AccumulateColumnSum(dq[i], ds + r * kFlashCols, k, tiles.ld, s.hs);  // dS K
    }
  }
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = row0 + Warp() * kRowsPerWarp + i;
    if (row >= s.T) break;
    StoreRow(dqkv, QkvRows(s, b, h, 0), row, dq[i], s.hs);
  }
}

// ---- Launches.

// Shared bytes: `tiles` row tiles of hs (padded), `weights` tiles of kFlashRows x kFlashCols, and
// lse and D of a query tile.
size_t SharedBytes(int hs, int tiles, int weights) {
  return sizeof(real) * (size_t{kFlashRows} * TileLd(hs) * tiles + size_t{kFlashRows} * kFlashCols * weights +
                         2 * kFlashRows);
}

void CheckHeadSize(const FlashShape& s) {
  if (s.hs > kMaxHeadSize) {
    throw DeviceError("flash attention: head size " + std::to_string(s.hs) + " is over the kernel's " +
                      std::to_string(kMaxHeadSize));
  }
}

// Launches kernel(args...) on the compute stream over (tiles, heads, sequences) blocks.
template <typename... Params, typename... Args>
void Launch(void (*kernel)(Params...), const char* name, const FlashShape& s, int tiles, size_t shared_bytes,
            Args... args) {
  gpu::Check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)),
             name);
  const dim3 grid(tiles, s.NHl, s.B);
  kernel<<<grid, kThreads, shared_bytes, gpu::ComputeStream()>>>(args...);
  gpu::CheckLaunch(name);
}

template <typename Values, typename Outputs>
void Forward(Outputs y, real* lse, Values qkv, const FlashShape& s) {
  CheckHeadSize(s);
  gpu::ProfiledRegion profiled("FlashAttentionForward");
  Launch(FlashForwardKernel<Values, Outputs>, "FlashForwardKernel", s, FlashTiles(s.T, kFlashRows),
         SharedBytes(s.hs, 3, 1), y, lse, qkv, s);
}

template <typename Values, typename Outputs>
void Backward(Outputs dqkv, Values dy, Values qkv, Values y, const real* lse, const FlashShape& s) {
  CheckHeadSize(s);
  gpu::ProfiledRegion profiled("FlashAttentionBackward");
  Launch(FlashKeyValueGradientKernel<Values, Outputs>, "FlashKeyValueGradientKernel", s, FlashTiles(s.T, kFlashCols),
         SharedBytes(s.hs, 4, 2), dqkv, dy, qkv, y, lse, s);
  Launch(FlashQueryGradientKernel<Values, Outputs>, "FlashQueryGradientKernel", s, FlashTiles(s.T, kFlashRows),
         SharedBytes(s.hs, 4, 1), dqkv, dy, qkv, y, lse, s);
}

}  // namespace

void FlashAttentionForward(real* y, real* lse, const real* qkv, int B, int T, int Cl, int NHl, int precision) {
  Forward(RealOutputs{y, precision}, lse, qkv, FlashShapeOf(B, T, Cl, NHl, precision));
}

void FlashAttentionBackward(real* dqkv, const real* dy, const real* qkv, const real* y, const real* lse, int B,
                            int T, int Cl, int NHl, int precision) {
  Backward(RealOutputs{dqkv, precision}, dy, qkv, y, lse, FlashShapeOf(B, T, Cl, NHl, precision));
}

void FlashAttentionForward16(uint16_t* y, real* lse, const uint16_t* qkv, int B, int T, int Cl, int NHl,
                             int precision) {
  Forward(SixteenBitOutputs{y, precision}, lse, SixteenBitValues{qkv, precision}, FlashShapeOf(B, T, Cl, NHl, precision));
}

void FlashAttentionBackward16(uint16_t* dqkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* y,
                              const real* lse, int B, int T, int Cl, int NHl, int precision) {
  Backward(SixteenBitOutputs{dqkv, precision}, SixteenBitValues{dy, precision}, SixteenBitValues{qkv, precision},
           SixteenBitValues{y, precision}, lse, FlashShapeOf(B, T, Cl, NHl, precision));
}

#endif

}  // namespace tunepar::core
