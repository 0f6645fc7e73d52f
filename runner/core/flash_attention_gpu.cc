// The fused causal attention on CUDA (flash_attention.h: the tiling and the per-tile maths, shared
// with the CPU twin that the CPU tests pin). One thread block per (query tile, head, sequence)
// forward and for dQ, one per (key tile, head, sequence) for dK and dV; a block's tiles sit in
// shared memory as fp32 (16-bit inputs widened as they are loaded), 8 warps of 32 lanes, each
// warp owning 8 rows of the block's tile. Templated on the storage (reals, or 16-bit numbers
// through kernels.h's SixteenBitValues / SixteenBitOutputs), so fa1 runs at every precision, and
// on what the tiles meet and where results go (causal attention, or a ring block of context
// parallelism). These CUDA-core kernels run fp32 storage, the real-held 16-bit forms, head sizes
// that are not a multiple of 16, and every ring block. The 16-bit causal forms (what block.cc
// calls) run on tensor cores where they can (flash_attention_mma_gpu.cc); the device code both
// share is flash_attention_gpu.h.
//
// The HIP build compiles no kernel here: the warp layout assumes 32 lanes, and AMD's waves are 64
// wide; until it is written and measured there, supported_knobs.h keeps fa0 for hip and these
// entry points say so if reached.
#include "runner/core/flash_attention.h"
#include "runner/core/gpu_runtime.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"

#if !defined(__HIPCC__)
#include "runner/core/flash_attention_gpu.h"
#endif

namespace tunepar::core {

#if defined(__HIPCC__)

namespace {
[[noreturn]] void NoHipKernel() {
  throw DeviceError("flash attention: the HIP build has no fused attention kernel (not measured on 64-wide waves)");
}
}  // namespace

void FlashAttentionForward(real*, real*, const real*, int, int, int, int, int, int) {
  NoHipKernel();
}
void FlashAttentionBackward(real*, const real*, const real*, const real*, const real*, int, int, int, int, int, int) {
  NoHipKernel();
}
void FlashAttentionForward16(uint16_t*, real*, const uint16_t*, int, int, int, int, int, int) {
  NoHipKernel();
}
void FlashAttentionBackward16(uint16_t*, const uint16_t*, const uint16_t*, const uint16_t*, const real*, int, int,
                              int, int, int, int) {
  NoHipKernel();
}

// Ring attention's blocks (context parallelism) likewise: supported_knobs.h pins cp 1 for hip.
namespace {
[[noreturn]] void NoHipRingKernel() {
  throw DeviceError("context parallelism: the HIP build has no ring attention kernels (cp 1 only)");
}
}  // namespace

void FlashAttentionBlockForward(real*, real*, const real*, const real*, int, int, int, int, int, int, int, int, int) {
  NoHipRingKernel();
}
void FlashAttentionBlockForward16(real*, real*, const uint16_t*, const uint16_t*, int, int, int, int, int, int, int,
                                  int, int) {
  NoHipRingKernel();
}
void FlashAttentionBlockBackward(real*, real*, const real*, const real*, const real*, const real*, const real*, int,
                                 int, int, int, int, int, int, int, int) {
  NoHipRingKernel();
}
void FlashAttentionBlockBackward16(real*, real*, const uint16_t*, const uint16_t*, const uint16_t*, const uint16_t*,
                                   const real*, int, int, int, int, int, int, int, int, int) {
  NoHipRingKernel();
}

#else

namespace {

using namespace flash_gpu;  // the shared device code (flash_attention_gpu.h)

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

// ---- What a kernel's tiles meet, and where its results go. Causal attention of a whole sequence
// reads its K/V from qkv, masks causally and stores y or dqkv on the storage grid. A ring block
// (context parallelism, flash_attention.h RingBlock) reads another rank's K/V block
// (KvBlockRows), masks by sequence positions, skips the tiles wholly above the diagonal, and
// merges its output into fp32 sums (or adds its gradients to them): the CPU twin's
// BlockForwardTile, BlockKeyValueGradientTile and BlockQueryGradientTile.

struct RingMask {
  RingBlock ring;
  __device__ bool Visible(int query, int key, int T) const { return VisibleInBlock(ring, query, key, T); }
  __device__ bool TileVisible(int qt, int kt, int T) const { return BlockTileVisible(ring, qt, kt, T); }
  __device__ int FirstQueryTile(int) const { return 0; }
};
// The keys and values: `values` holds them, Rows finds K/V head `group`'s K (part 1) or V (2).
template <typename Values>
struct OwnKeys : CausalMask {
  Values values;  // qkv
  __device__ HeadRows Rows(const FlashShape& s, int b, int group, int part) const {
    return QkvRows(s, b, group * s.QueryHeadsPerGroup(), part);
  }
};
template <typename Values>
struct BlockKeys : RingMask {
  Values values;  // the K/V block (B, T, 2 KVl hs)
  __device__ HeadRows Rows(const FlashShape& s, int b, int group, int part) const {
    return KvBlockRows(s, b, group, part);
  }
};

// ---- Forward.

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

// Where a row's forward result goes (one warp; o: the lane's values d = lane + 32 j, unnormalised).
// Causal: y = o / l on the storage grid, lse = m + log l.
template <typename Outputs>
struct StoredOutput {
  Outputs y;
  real* lse;
  __device__ void Row(const FlashShape& s, int b, int h, int row, const real (&o)[kDimsPerLane],
                      const RunningSoftmax& softmax) const {
    const HeadRows out = OutputRows(s, b, h);
    for (int j = 0; j < kDimsPerLane && Lane() + j * kWarp < s.hs; ++j)
      y.Set(out.first + int64_t{row} * out.ld + Lane() + j * kWarp, o[j] / softmax.sum);
    if (Lane() == 0) lse[LseIndex(s, b, h, row)] = LogSumExp(softmax);
  }
};
// A ring block: acc' = acc f.running + (o / l) f.block and lse merged (MergeBlockLse), into the
// fp32 sum acc (B, T, Cl); a row that sees none of the block's keys keeps both.
struct MergedOutput {
  real* acc;
  real* lse;
  __device__ void Row(const FlashShape& s, int b, int h, int row, const real (&o)[kDimsPerLane],
                      const RunningSoftmax& softmax) const {
    if (softmax.sum == 0) return;  // the warp's common sum: the whole warp returns
    real* row_lse = lse + LseIndex(s, b, h, row);
    real merged = *row_lse;
    const MergeFactors f = MergeBlockLse(&merged, LogSumExp(softmax));
    __syncwarp();  // every lane has read the row's old lse
    if (Lane() == 0) *row_lse = merged;
    const HeadRows out = OutputRows(s, b, h);
    real* a = acc + out.first + int64_t{row} * out.ld;
    for (int j = 0; j < kDimsPerLane && Lane() + j * kWarp < s.hs; ++j) {
      const int d = Lane() + j * kWarp;
      a[d] = a[d] * f.running + o[j] / softmax.sum * f.block;
    }
  }
};

// Block (query tile, head, sequence). Shared: q, k, v tiles and the weights.
template <typename Values, typename Keys, typename Output>
__global__ void __launch_bounds__(kThreads) FlashForwardKernel(Output out, Values qkv, Keys keys, FlashShape s) {
  extern __shared__ real shared[];
  const SharedTiles tiles{shared, TileLd(s.hs)};
  real *q = tiles.Tile(0), *k = tiles.Tile(1), *v = tiles.Tile(2), *w = tiles.Tile(3);
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, row0 = qt * kFlashRows;
  const int group = h / s.QueryHeadsPerGroup();
  LoadTile(q, tiles.ld, qkv, QkvRows(s, b, h, 0), row0, kFlashRows, s.T, s.hs);
  RunningSoftmax rows[kRowsPerWarp];
  real o[kRowsPerWarp][kDimsPerLane] = {};
  for (int kt = 0; kt < FlashTiles(s.T, kFlashCols) && keys.TileVisible(qt, kt, s.T); ++kt) {
    const int col0 = kt * kFlashCols;
    __syncthreads();  // the last tile's k, v and weights are read
    LoadTile(k, tiles.ld, keys.values, keys.Rows(s, b, group, 1), col0, kFlashCols, s.T, s.hs);
    LoadTile(v, tiles.ld, keys.values, keys.Rows(s, b, group, 2), col0, kFlashCols, s.T, s.hs);
    __syncthreads();
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = Warp() * kRowsPerWarp + i;
      real* w_row = w + r * kFlashCols;
      const real factor = FoldRow(
          rows[i], keys, row0 + r, col0, s, [&](int c) { return s.scale * RowDot(q, r, k, c, tiles.ld, s.hs); },
          [&](int c, real weight) { w_row[c] = weight; });
      __syncwarp();
      AccumulateRow(o[i], factor, w_row, v, tiles.ld, s.hs);
    }
  }
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = row0 + Warp() * kRowsPerWarp + i;
    if (row >= s.T) break;
    out.Row(s, b, h, row, o[i], rows[i]);
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
template <typename Mask>
__device__ inline ProbabilityAndGradient ScorePair(const QueryRows& t, const Mask& mask, int r, int row0, const real* k,
                                                   const real* v, int c, int col0, const FlashShape& s) {
  const bool visible = mask.Visible(row0 + r, col0 + c, s.T);
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

// Where a backward kernel's rows of dQ, dK or dV go (one warp; the lane's values d = lane + 32 j).
// Causal: stored into dqkv on the storage grid.
template <typename Outputs>
struct StoredGradients {
  Outputs dqkv;
  __device__ void Query(const FlashShape& s, int b, int h, int row, const real (&values)[kDimsPerLane]) const {
    StoreRow(dqkv, QkvRows(s, b, h, 0), row, values, s.hs);
  }
  __device__ void KeyValue(const FlashShape& s, int b, int group, int part, int key,
                           const real (&values)[kDimsPerLane]) const {
    StoreRow(dqkv, QkvRows(s, b, group * s.QueryHeadsPerGroup(), part), key, values, s.hs);
  }
};
// A ring block: added to the fp32 sums dq (B, T, Cl) and dkv (B, T, 2 KVl hs; KvBlockRows). Each
// row has one writer (its thread block), so no atomics.
struct AddedGradients {
  real* dq;
  real* dkv;
  __device__ static void AddRow(real* to, HeadRows at, int row, const real (&values)[kDimsPerLane], int hs) {
    for (int j = 0; j < kDimsPerLane && Lane() + j * kWarp < hs; ++j)
      to[at.first + int64_t{row} * at.ld + Lane() + j * kWarp] += values[j];
  }
  __device__ void Query(const FlashShape& s, int b, int h, int row, const real (&values)[kDimsPerLane]) const {
    AddRow(dq, OutputRows(s, b, h), row, values, s.hs);
  }
  __device__ void KeyValue(const FlashShape& s, int b, int group, int part, int key,
                           const real (&values)[kDimsPerLane]) const {
    AddRow(dkv, KvBlockRows(s, b, group, part), key, values, s.hs);
  }
};

// Block (key tile, head, sequence): dK and dV of the tile's keys, over the query tiles that see
// them. A warp owns kKeysPerWarp keys; its lanes split the query rows, then the head's values.
// Shared: k, v, q, dO tiles, P^T and dS^T (keys x query rows), lse and D.
template <typename Values, typename Keys, typename Gradients>
__global__ void __launch_bounds__(kThreads) FlashKeyValueGradientKernel(Gradients out, Values dy, Values qkv, Keys keys,
                                                                        Values y, const real* lse, FlashShape s) {
  extern __shared__ real shared[];
  const SharedTiles tiles{shared, TileLd(s.hs)};
  real *k = tiles.Tile(0), *v = tiles.Tile(1), *pt = tiles.Tile(4), *dst = pt + kFlashCols * kFlashRows;
  const QueryRows t{tiles.Tile(2), tiles.Tile(3), dst + kFlashCols * kFlashRows, dst + kFlashCols * kFlashRows + kFlashRows,
                    tiles.ld};
  // blockIdx.y is a K/V head: its group's query heads are visited in turn (grouped-query attention).
  const int kt = blockIdx.x, group = blockIdx.y, h = group * s.QueryHeadsPerGroup(), b = blockIdx.z;
  const int col0 = kt * kFlashCols;
  LoadTile(k, tiles.ld, keys.values, keys.Rows(s, b, group, 1), col0, kFlashCols, s.T, s.hs);
  LoadTile(v, tiles.ld, keys.values, keys.Rows(s, b, group, 2), col0, kFlashCols, s.T, s.hs);
  real dk[kKeysPerWarp][kDimsPerLane] = {}, dv[kKeysPerWarp][kDimsPerLane] = {};
  const int query_tiles = FlashTiles(s.T, kFlashRows), first = keys.FirstQueryTile(kt);
  for (int visit = 0; visit < (query_tiles - first) * s.QueryHeadsPerGroup(); ++visit) {
    const int query_head = h + visit / (query_tiles - first), qt = first + visit % (query_tiles - first);
    const int row0 = qt * kFlashRows;
    if (!keys.TileVisible(qt, kt, s.T)) continue;  // the same for the whole block
    __syncthreads();  // the last query tile is read
    LoadQueryRows(t, qkv, y, dy, lse, s, b, query_head, row0);
    __syncthreads();
    for (int i = 0; i < kKeysPerWarp; ++i) {
      const int c = Warp() * kKeysPerWarp + i;
      for (int j = 0; j < kRowsPerLane; ++j) {
        const int r = Lane() + j * kWarp;
        const ProbabilityAndGradient g = ScorePair(t, keys, r, row0, k, v, c, col0, s);
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
    out.KeyValue(s, b, group, 1, key, dk[i]);
    out.KeyValue(s, b, group, 2, key, dv[i]);
  }
}

// Block (query tile, head, sequence): dQ of the tile's rows, over the key tiles they see. A warp
// owns kRowsPerWarp rows; its lanes split the keys, then the head's values. Shared: q, dO, k, v
// tiles, dS (rows x keys), lse and D.
template <typename Values, typename Keys, typename Gradients>
__global__ void __launch_bounds__(kThreads) FlashQueryGradientKernel(Gradients out, Values dy, Values qkv, Keys keys,
                                                                     Values y, const real* lse, FlashShape s) {
  extern __shared__ real shared[];
  const SharedTiles tiles{shared, TileLd(s.hs)};
  real *k = tiles.Tile(2), *v = tiles.Tile(3), *ds = tiles.Tile(4);
  const QueryRows t{tiles.Tile(0), tiles.Tile(1), ds + kFlashRows * kFlashCols, ds + kFlashRows * kFlashCols + kFlashRows,
                    tiles.ld};
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, row0 = qt * kFlashRows;
  const int group = h / s.QueryHeadsPerGroup();
  LoadQueryRows(t, qkv, y, dy, lse, s, b, h, row0);
  real dq[kRowsPerWarp][kDimsPerLane] = {};
  for (int kt = 0; kt < FlashTiles(s.T, kFlashCols) && keys.TileVisible(qt, kt, s.T); ++kt) {
    const int col0 = kt * kFlashCols;
    __syncthreads();  // the last key tile is read (and, first time, lse and D are written)
    LoadTile(k, tiles.ld, keys.values, keys.Rows(s, b, group, 1), col0, kFlashCols, s.T, s.hs);
    LoadTile(v, tiles.ld, keys.values, keys.Rows(s, b, group, 2), col0, kFlashCols, s.T, s.hs);
    __syncthreads();
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = Warp() * kRowsPerWarp + i;
      for (int j = 0; j < kColsPerLane; ++j) {
        const int c = Lane() + j * kWarp;
        ds[r * kFlashCols + c] = ScorePair(t, keys, r, row0, k, v, c, col0, s).ds;
      }
      __syncwarp();
      AccumulateColumnSum(dq[i], ds + r * kFlashCols, k, tiles.ld, s.hs);  // dS K
    }
  }
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = row0 + Warp() * kRowsPerWarp + i;
    if (row >= s.T) break;
    out.Query(s, b, h, row, dq[i]);
  }
}

// ---- Launches.

// Shared bytes: `tiles` row tiles of hs (padded), `weights` tiles of kFlashRows x kFlashCols, and
// lse and D of a query tile.
size_t SharedBytes(int hs, int tiles, int weights) {
  return sizeof(real) * (size_t{kFlashRows} * TileLd(hs) * tiles + size_t{kFlashRows} * kFlashCols * weights +
                         2 * kFlashRows);
}

// The CUDA-core kernels over queries of qkv against `keys` (OwnKeys: causal, BlockKeys: a ring
// block), their results to `out` (StoredOutput / StoredGradients, or MergedOutput /
// AddedGradients); `region` names them in a profile.
template <typename Values, typename Keys, typename Output>
void Forward(Output out, Values qkv, Keys keys, const FlashShape& s, const char* region) {
  CheckHeadSize(s);
  gpu::ProfiledRegion profiled(region);
  Launch(FlashForwardKernel<Values, Keys, Output>, "FlashForwardKernel", s, FlashTiles(s.T, kFlashRows),
         SharedBytes(s.hs, 3, 1), out, qkv, keys, s);
}

template <typename Values, typename Keys, typename Gradients>
void Backward(Gradients out, Values dy, Values qkv, Keys keys, Values y, const real* lse, const FlashShape& s,
              const char* region) {
  CheckHeadSize(s);
  gpu::ProfiledRegion profiled(region);
  LaunchOver(s.KVl, FlashKeyValueGradientKernel<Values, Keys, Gradients>, "FlashKeyValueGradientKernel", s,
             FlashTiles(s.T, kFlashCols), SharedBytes(s.hs, 4, 2), out, dy, qkv, keys, y, lse, s);
  Launch(FlashQueryGradientKernel<Values, Keys, Gradients>, "FlashQueryGradientKernel", s,
         FlashTiles(s.T, kFlashRows), SharedBytes(s.hs, 4, 1), out, dy, qkv, keys, y, lse, s);
}

// Causal attention of the whole sequence (what block.cc calls without context parallelism).
template <typename Values, typename Outputs>
void CausalForward(Outputs y, real* lse, Values qkv, const FlashShape& s) {
  Forward(StoredOutput<Outputs>{y, lse}, qkv, OwnKeys<Values>{{}, qkv}, s, "FlashAttentionForward");
}
template <typename Values, typename Outputs>
void CausalBackward(Outputs dqkv, Values dy, Values qkv, Values y, const real* lse, const FlashShape& s) {
  Backward(StoredGradients<Outputs>{dqkv}, dy, qkv, OwnKeys<Values>{{}, qkv}, y, lse, s, "FlashAttentionBackward");
}

}  // namespace

void FlashAttentionForward(real* y, real* lse, const real* qkv, int B, int T, int Cl, int NHl, int precision, int KVl) {
  CausalForward(RealOutputs{y, precision}, lse, qkv, FlashShapeOf(B, T, Cl, NHl, precision, KVl));
}

void FlashAttentionBackward(real* dqkv, const real* dy, const real* qkv, const real* y, const real* lse, int B,
                            int T, int Cl, int NHl, int precision, int KVl) {
  CausalBackward(RealOutputs{dqkv, precision}, dy, qkv, y, lse, FlashShapeOf(B, T, Cl, NHl, precision, KVl));
}

void FlashAttentionForward16(uint16_t* y, real* lse, const uint16_t* qkv, int B, int T, int Cl, int NHl,
                             int precision, int KVl) {
  const FlashShape s = FlashShapeOf(B, T, Cl, NHl, precision, KVl);
  if (flash_gpu::TensorCoreForward16(y, lse, qkv, s)) return;
  CausalForward(SixteenBitOutputs{y, precision}, lse, SixteenBitValues{qkv, precision}, s);
}

void FlashAttentionBackward16(uint16_t* dqkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* y,
                              const real* lse, int B, int T, int Cl, int NHl, int precision, int KVl) {
  const FlashShape s = FlashShapeOf(B, T, Cl, NHl, precision, KVl);
  if (flash_gpu::TensorCoreBackward16(dqkv, dy, qkv, y, lse, s)) return;
  CausalBackward(SixteenBitOutputs{dqkv, precision}, SixteenBitValues{dy, precision},
                 SixteenBitValues{qkv, precision}, SixteenBitValues{y, precision}, lse, s);
}

// ---- Ring attention's blocks (context_parallel.h): the CUDA-core kernels with BlockKeys, at every
// precision (16-bit storage widened as loaded; the tensor-core kernels stay causal-only).

void FlashAttentionBlockForward(real* acc, real* lse, const real* qkv, const real* kv, int cp, int query_rank,
                                int key_rank, int B, int T, int Cl, int NHl, int precision, int KVl) {
  Forward(MergedOutput{acc, lse}, qkv, BlockKeys<const real*>{{RingBlock{cp, query_rank, key_rank}}, kv},
          FlashShapeOf(B, T, Cl, NHl, precision, KVl), "FlashAttentionBlockForward");
}

void FlashAttentionBlockForward16(real* acc, real* lse, const uint16_t* qkv, const uint16_t* kv, int cp,
                                  int query_rank, int key_rank, int B, int T, int Cl, int NHl, int precision, int KVl) {
  const BlockKeys<SixteenBitValues> keys{{RingBlock{cp, query_rank, key_rank}}, SixteenBitValues{kv, precision}};
  Forward(MergedOutput{acc, lse}, SixteenBitValues{qkv, precision}, keys, FlashShapeOf(B, T, Cl, NHl, precision, KVl),
          "FlashAttentionBlockForward");
}

void FlashAttentionBlockBackward(real* dq, real* dkv, const real* dy, const real* qkv, const real* kv, const real* y,
                                 const real* lse, int cp, int query_rank, int key_rank, int B, int T, int Cl, int NHl,
                                 int precision, int KVl) {
  Backward(AddedGradients{dq, dkv}, dy, qkv, BlockKeys<const real*>{{RingBlock{cp, query_rank, key_rank}}, kv}, y, lse,
           FlashShapeOf(B, T, Cl, NHl, precision, KVl), "FlashAttentionBlockBackward");
}

void FlashAttentionBlockBackward16(real* dq, real* dkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* kv,
                                   const uint16_t* y, const real* lse, int cp, int query_rank, int key_rank, int B,
                                   int T, int Cl, int NHl, int precision, int KVl) {
  const BlockKeys<SixteenBitValues> keys{{RingBlock{cp, query_rank, key_rank}}, SixteenBitValues{kv, precision}};
  Backward(AddedGradients{dq, dkv}, SixteenBitValues{dy, precision}, SixteenBitValues{qkv, precision}, keys,
           SixteenBitValues{y, precision}, lse, FlashShapeOf(B, T, Cl, NHl, precision, KVl),
           "FlashAttentionBlockBackward");
}

#endif

}  // namespace tunepar::core
