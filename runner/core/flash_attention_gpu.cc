// The fused causal attention on CUDA (flash_attention.h: the tiling and the per-tile maths, shared
// with the CPU twin that the CPU tests pin). One thread block per (query tile, head, sequence)
// forward and for dQ, one per (key tile, head, sequence) for dK and dV; a block's tiles sit in
// shared memory as fp32 (16-bit inputs widened as they are loaded), 8 warps of 32 lanes, each
// warp owning 8 rows of the block's tile. Templated on the storage (reals, or 16-bit numbers
// through kernels.h's SixteenBitValues / SixteenBitOutputs), so fa1 runs at every precision.
// These CUDA-core kernels run fp32 storage, the real-held 16-bit forms and head sizes that are
// not a multiple of 16. The 16-bit forms (what block.cc calls) run the same tiles and the same
// softmax maths with their products (S = Q K^T, O += P V; dP = dO V^T, dV += P^T dO,
// dK += dS^T Q, dQ += dS K) on tensor cores (wmma, 16-bit operands, fp32 accumulators, sm_80+):
// FlashForwardMmaKernel, FlashKeyValueGradientMmaKernel, FlashQueryGradientMmaKernel.
//
// The HIP build compiles no kernel here: the warp layout assumes 32 lanes, and AMD's waves are 64
// wide; until it is written and measured there, supported_knobs.h keeps fa0 for hip and these
// entry points say so if reached.
#include "runner/core/flash_attention.h"
#include "runner/core/gpu_runtime.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"

#if !defined(__HIPCC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <type_traits>
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

// ---- What a kernel's tiles meet, and where its results go. Causal attention of a whole sequence
// reads its K/V from qkv, masks causally and stores y or dqkv on the storage grid. A ring block
// (context parallelism, flash_attention.h RingBlock) reads another rank's K/V block
// (KvBlockRows), masks by sequence positions, skips the tiles wholly above the diagonal, and
// merges its output into fp32 sums (or adds its gradients to them): the CPU twin's
// BlockForwardTile, BlockKeyValueGradientTile and BlockQueryGradientTile.

struct CausalMask {
  __device__ bool Visible(int query, int key, int T) const { return core::Visible(query, key, T); }
  // Whether query tile qt reads key tile kt (a query tile's key tiles come first).
  __device__ bool TileVisible(int qt, int kt, int T) const { return kt <= LastKeyTile(qt, T); }
  __device__ int FirstQueryTile(int kt) const { return core::FirstQueryTile(kt); }
};
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

// One query row against a key tile (one warp): the lane's scores score_of(c), folded into the
// row's running softmax; store(c, w) gets each weight as the P V product reads it. Returns the
// factor that rescales what the row accumulated before this tile.
template <typename Mask, typename ScoreOf, typename StoreWeight>
__device__ real FoldRow(RunningSoftmax& row, const Mask& mask, int query, int col0, const FlashShape& s,
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

// ---- Forward on tensor cores (16-bit storage, hs a multiple of 16, sm_80+): the same tiles and
// online softmax, with S = Q K^T and O += P V as wmma products of 16-bit operands accumulated in
// fp32. Fragments only move through shared memory (load/store_matrix_sync), so no code depends
// on their register layout; the softmax runs on the stored scores as above.
constexpr int kMma = 16;  // wmma's m = n = k

// Shared memory of the tensor-core forward: q, k, v (kFlashRows x hs) and p (kFlashRows x
// kFlashCols) as 16-bit numbers, the scores s and the output o in fp32. Leading dimensions are
// padded (by 8 16-bit or 4 fp32 values: 16 bytes) against bank conflicts; every tile starts on a
// 32-byte boundary, as wmma's loads and stores require.
struct MmaForwardTiles {
  uint16_t *q, *k, *v, *p;
  float *s, *o;
  int ld16, ldp, lds, ldo;
};
TP_HOST_DEVICE inline int Ld16(int hs) {
  return hs + 8;
}
TP_HOST_DEVICE inline int LdF(int width) {
  return width + 4;
}
size_t MmaForwardBytes(int hs) {
  return size_t{kFlashRows} * (3 * Ld16(hs) * 2 + (kFlashCols + 8) * 2 + LdF(kFlashCols) * 4 + LdF(hs) * 4);
}
__device__ MmaForwardTiles MmaForwardLayout(unsigned char* base, int hs) {
  MmaForwardTiles t;
  t.ld16 = Ld16(hs);
  t.ldp = kFlashCols + 8;
  t.lds = LdF(kFlashCols);
  t.ldo = LdF(hs);
  t.q = reinterpret_cast<uint16_t*>(base);
  t.k = t.q + kFlashRows * t.ld16;
  t.v = t.k + kFlashRows * t.ld16;
  t.p = t.v + kFlashRows * t.ld16;
  t.s = reinterpret_cast<float*>(t.p + kFlashRows * t.ldp);
  t.o = t.s + kFlashRows * t.lds;
  return t;
}

// tile (rows, hs) = rows [row0, row0 + rows) of a head as they are stored (16-bit); +0 past T.
__device__ void CopyTile16(uint16_t* tile, int ld, const uint16_t* src, HeadRows at, int row0, int T, int hs) {
  for (int e = threadIdx.x; e < kFlashRows * hs; e += blockDim.x) {
    const int r = e / hs, i = e % hs;
    tile[r * ld + i] = row0 + r < T ? src[at.first + int64_t{row0 + r} * at.ld + i] : uint16_t{0};
  }
}

// out (m x n, fp32, ldc) = A B + (accumulate ? out : 0), by 16 x 16 tiles shared among the
// warps. A (m x k) is the row-major array a (lda) or, with ALayout col_major, the transpose of
// the row-major k x m array a (P^T for dV); B (k x n) likewise from b (ldb; K^T for Q K^T).
template <typename Element, typename ALayout, typename BLayout>
__device__ void MmaProduct(float* out, int ldc, const uint16_t* a, int lda, const uint16_t* b, int ldb, int m, int n,
                           int k, bool accumulate) {
  namespace wmma = nvcuda::wmma;
  constexpr bool a_transposed = std::is_same_v<ALayout, wmma::col_major>;
  constexpr bool b_transposed = std::is_same_v<BLayout, wmma::col_major>;
  for (int tile = Warp(); tile < (m / kMma) * (n / kMma); tile += kWarps) {
    const int mt = tile / (n / kMma) * kMma, nt = tile % (n / kMma) * kMma;
    wmma::fragment<wmma::accumulator, kMma, kMma, kMma, float> acc;
    if (accumulate) {
      wmma::load_matrix_sync(acc, out + mt * ldc + nt, ldc, wmma::mem_row_major);
    } else {
      wmma::fill_fragment(acc, 0.0f);
    }
    for (int kk = 0; kk < k; kk += kMma) {
      wmma::fragment<wmma::matrix_a, kMma, kMma, kMma, Element, ALayout> fa;
      wmma::fragment<wmma::matrix_b, kMma, kMma, kMma, Element, BLayout> fb;
      wmma::load_matrix_sync(fa, reinterpret_cast<const Element*>(a_transposed ? a + kk * lda + mt : a + mt * lda + kk),
                             lda);
      wmma::load_matrix_sync(fb, reinterpret_cast<const Element*>(b_transposed ? b + nt * ldb + kk : b + kk * ldb + nt), ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + mt * ldc + nt, acc, ldc, wmma::mem_row_major);
  }
}

// One key tile of the tensor-core forward: S = Q K^T, the online softmax of each row (weights
// into p, the row's output rescaled), O += P V.
template <typename Element>
__device__ void MmaForwardStep(const MmaForwardTiles& t, RunningSoftmax (&rows)[kRowsPerWarp], int row0, int col0,
                               const FlashShape& s) {
  namespace wmma = nvcuda::wmma;
  MmaProduct<Element, wmma::row_major, wmma::col_major>(t.s, t.lds, t.q, t.ld16, t.k, t.ld16, kFlashRows, kFlashCols,
                                                        s.hs, false);
  __syncthreads();
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = Warp() * kRowsPerWarp + i;
    const real factor = FoldRow(
        rows[i], CausalMask{}, row0 + r, col0, s, [&](int c) { return s.scale * t.s[r * t.lds + c]; },
        [&](int c, real weight) { t.p[r * t.ldp + c] = To16BitValue(weight, s.precision); });
    for (int d = Lane(); d < s.hs; d += kWarp) t.o[r * t.ldo + d] *= factor;
  }
  __syncthreads();
  MmaProduct<Element, wmma::row_major, wmma::row_major>(t.o, t.ldo, t.p, t.ldp, t.v, t.ld16, kFlashRows, s.hs,
                                                        kFlashCols, true);
}

// Block (query tile, head, sequence), as FlashForwardKernel.
template <typename Element>
__global__ void __launch_bounds__(kThreads)
    FlashForwardMmaKernel(SixteenBitOutputs y, real* lse, const uint16_t* qkv, FlashShape s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // launched only on sm_80+ (TensorCoreForward)
#else
  extern __shared__ __align__(128) unsigned char mma_shared[];
  const MmaForwardTiles t = MmaForwardLayout(mma_shared, s.hs);
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, row0 = qt * kFlashRows;
  CopyTile16(t.q, t.ld16, qkv, QkvRows(s, b, h, 0), row0, s.T, s.hs);
  for (int e = threadIdx.x; e < kFlashRows * t.ldo; e += blockDim.x) t.o[e] = 0;
  RunningSoftmax rows[kRowsPerWarp];
  for (int kt = 0; kt <= LastKeyTile(qt, s.T); ++kt) {
    __syncthreads();  // the last tile's k, v and p are read
    CopyTile16(t.k, t.ld16, qkv, QkvRows(s, b, h, 1), kt * kFlashCols, s.T, s.hs);
    CopyTile16(t.v, t.ld16, qkv, QkvRows(s, b, h, 2), kt * kFlashCols, s.T, s.hs);
    __syncthreads();
    MmaForwardStep<Element>(t, rows, row0, kt * kFlashCols, s);
  }
  __syncthreads();
  const HeadRows out = OutputRows(s, b, h);
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = Warp() * kRowsPerWarp + i, row = row0 + r;
    if (row >= s.T) break;
    for (int d = Lane(); d < s.hs; d += kWarp) y.Set(out.first + int64_t{row} * out.ld + d, t.o[r * t.ldo + d] / rows[i].sum);
    if (Lane() == 0) lse[LseIndex(s, b, h, row)] = LogSumExp(rows[i]);
  }
#endif
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

// ---- Backward on tensor cores (as the forward: 16-bit storage, hs % 16 == 0, sm_80+, and the
// tiles fit the device's shared memory): per pair of tiles S = Q K^T and dP = dO V^T as wmma
// products, P and dS from them as in ScorePair, then dV += P^T dO and dK += dS^T Q (key-tile
// kernel) or dQ += dS K (query-tile kernel), accumulated in fp32 in shared memory.

// Shared memory of the tensor-core backward: q, dout, k, v (kFlashRows x hs) and p, ds
// (kFlashRows x kFlashCols) as 16-bit numbers; s, dp (scores and dP) and two accumulators
// (kFlashRows x hs: dK and dV, or dQ) in fp32; lse and D of the query tile.
struct MmaBackwardTiles {
  uint16_t *q, *dout, *k, *v, *p, *ds;
  float *s, *dp, *acc0, *acc1, *lse, *delta;
  int ld16, ldp, lds, ldo;
};
size_t MmaBackwardBytes(int hs) {
  return size_t{kFlashRows} * (4 * Ld16(hs) * 2 + 2 * (kFlashCols + 8) * 2 + 2 * LdF(kFlashCols) * 4 + 2 * LdF(hs) * 4 + 2 * 4);
}
__device__ MmaBackwardTiles MmaBackwardLayout(unsigned char* base, int hs) {
  MmaBackwardTiles t;
  t.ld16 = Ld16(hs);
  t.ldp = kFlashCols + 8;
  t.lds = LdF(kFlashCols);
  t.ldo = LdF(hs);
  t.q = reinterpret_cast<uint16_t*>(base);
  t.dout = t.q + kFlashRows * t.ld16;
  t.k = t.dout + kFlashRows * t.ld16;
  t.v = t.k + kFlashRows * t.ld16;
  t.p = t.v + kFlashRows * t.ld16;
  t.ds = t.p + kFlashRows * t.ldp;
  t.s = reinterpret_cast<float*>(t.ds + kFlashRows * t.ldp);
  t.dp = t.s + kFlashRows * t.lds;
  t.acc0 = t.dp + kFlashRows * t.lds;
  t.acc1 = t.acc0 + kFlashRows * t.ldo;
  t.lse = t.acc1 + kFlashRows * t.ldo;
  t.delta = t.lse + kFlashRows;
  return t;
}

// The query tile's q and dO (16-bit, as stored), and lse and D = rowsum(dO o O) of its rows.
__device__ void LoadMmaQueryRows(const MmaBackwardTiles& t, const uint16_t* qkv, SixteenBitValues y,
                                 const uint16_t* dy, const real* lse, const FlashShape& s, int b, int h, int row0) {
  CopyTile16(t.q, t.ld16, qkv, QkvRows(s, b, h, 0), row0, s.T, s.hs);
  CopyTile16(t.dout, t.ld16, dy, OutputRows(s, b, h), row0, s.T, s.hs);
  const HeadRows out = OutputRows(s, b, h);
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = Warp() * kRowsPerWarp + i, row = row0 + r;
    real sum = 0;
    if (row < s.T) {
      for (int d = Lane(); d < s.hs; d += kWarp)
        sum += From16BitValue(dy[out.first + int64_t{row} * out.ld + d], s.precision) * y[out.first + int64_t{row} * out.ld + d];
    }
    sum = WarpSum(sum);
    if (Lane() == 0) {
      t.delta[r] = sum;
      t.lse[r] = row < s.T ? lse[LseIndex(s, b, h, row)] : real(0);
    }
  }
}

// S = Q K^T and dP = dO V^T of the current tiles, then P and dS (ScorePair's maths) as the next
// products read them. Ends with the block in step.
template <typename Element>
__device__ void MmaScoreGradients(const MmaBackwardTiles& t, int row0, int col0, const FlashShape& s) {
  namespace wmma = nvcuda::wmma;
  MmaProduct<Element, wmma::row_major, wmma::col_major>(t.s, t.lds, t.q, t.ld16, t.k, t.ld16, kFlashRows, kFlashCols,
                                                        s.hs, false);
  MmaProduct<Element, wmma::row_major, wmma::col_major>(t.dp, t.lds, t.dout, t.ld16, t.v, t.ld16, kFlashRows,
                                                        kFlashCols, s.hs, false);
  __syncthreads();
  for (int e = threadIdx.x; e < kFlashRows * kFlashCols; e += blockDim.x) {
    const int r = e / kFlashCols, c = e % kFlashCols;
    const real p = RecomputedProbability(s.scale * t.s[r * t.lds + c], t.lse[r], Visible(row0 + r, col0 + c, s.T));
    const real ds = ScoreGradient(p, t.dp[r * t.lds + c], t.delta[r], s.scale);
    t.p[r * t.ldp + c] = To16BitValue(TileOperand(p, s.precision), s.precision);
    t.ds[r * t.ldp + c] = To16BitValue(TileOperand(ds, s.precision), s.precision);
  }
  __syncthreads();
}

// rows [row0, row0 + kFlashRows) of a head (those before T) = acc (fp32, ldo), rounded as stored.
__device__ void StoreAccumulator(SixteenBitOutputs out, HeadRows at, const float* acc, int ldo, int row0,
                                 const FlashShape& s) {
  for (int e = threadIdx.x; e < kFlashRows * s.hs; e += blockDim.x) {
    const int r = e / s.hs, d = e % s.hs;
    if (row0 + r < s.T) out.Set(at.first + int64_t{row0 + r} * at.ld + d, acc[r * ldo + d]);
  }
}

// Block (key tile, head, sequence), as FlashKeyValueGradientKernel.
template <typename Element>
__global__ void __launch_bounds__(kThreads)
    FlashKeyValueGradientMmaKernel(SixteenBitOutputs dqkv, const uint16_t* dy, const uint16_t* qkv,
                                   SixteenBitValues y, const real* lse, FlashShape s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // launched only on sm_80+ (TensorCoreBackward)
#else
  namespace wmma = nvcuda::wmma;
  extern __shared__ __align__(128) unsigned char mma_shared[];
  const MmaBackwardTiles t = MmaBackwardLayout(mma_shared, s.hs);
  const int kt = blockIdx.x, h = blockIdx.y * s.QueryHeadsPerGroup(), b = blockIdx.z, col0 = kt * kFlashCols;
  CopyTile16(t.k, t.ld16, qkv, QkvRows(s, b, h, 1), col0, s.T, s.hs);
  CopyTile16(t.v, t.ld16, qkv, QkvRows(s, b, h, 2), col0, s.T, s.hs);
  for (int e = threadIdx.x; e < kFlashRows * t.ldo; e += blockDim.x) t.acc0[e] = t.acc1[e] = 0;  // dK, dV
  const int query_tiles = FlashTiles(s.T, kFlashRows), first = FirstQueryTile(kt);
  for (int visit = 0; visit < (query_tiles - first) * s.QueryHeadsPerGroup(); ++visit) {
    const int query_head = h + visit / (query_tiles - first), qt = first + visit % (query_tiles - first);
    const int row0 = qt * kFlashRows;
    __syncthreads();  // the last query tile is read
    LoadMmaQueryRows(t, qkv, y, dy, lse, s, b, query_head, row0);
    __syncthreads();
    MmaScoreGradients<Element>(t, row0, col0, s);
    MmaProduct<Element, wmma::col_major, wmma::row_major>(t.acc1, t.ldo, t.p, t.ldp, t.dout, t.ld16, kFlashCols,
                                                          s.hs, kFlashRows, true);  // dV += P^T dO
    MmaProduct<Element, wmma::col_major, wmma::row_major>(t.acc0, t.ldo, t.ds, t.ldp, t.q, t.ld16, kFlashCols,
                                                          s.hs, kFlashRows, true);  // dK += dS^T Q
  }
  __syncthreads();
  StoreAccumulator(dqkv, QkvRows(s, b, h, 1), t.acc0, t.ldo, col0, s);
  StoreAccumulator(dqkv, QkvRows(s, b, h, 2), t.acc1, t.ldo, col0, s);
#endif
}

// Block (query tile, head, sequence), as FlashQueryGradientKernel.
template <typename Element>
__global__ void __launch_bounds__(kThreads)
    FlashQueryGradientMmaKernel(SixteenBitOutputs dqkv, const uint16_t* dy, const uint16_t* qkv, SixteenBitValues y,
                                const real* lse, FlashShape s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // launched only on sm_80+ (TensorCoreBackward)
#else
  namespace wmma = nvcuda::wmma;
  extern __shared__ __align__(128) unsigned char mma_shared[];
  const MmaBackwardTiles t = MmaBackwardLayout(mma_shared, s.hs);
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, row0 = qt * kFlashRows;
  LoadMmaQueryRows(t, qkv, y, dy, lse, s, b, h, row0);
  for (int e = threadIdx.x; e < kFlashRows * t.ldo; e += blockDim.x) t.acc0[e] = 0;  // dQ
  for (int kt = 0; kt <= LastKeyTile(qt, s.T); ++kt) {
    const int col0 = kt * kFlashCols;
    __syncthreads();  // the last key tile is read
    CopyTile16(t.k, t.ld16, qkv, QkvRows(s, b, h, 1), col0, s.T, s.hs);
    CopyTile16(t.v, t.ld16, qkv, QkvRows(s, b, h, 2), col0, s.T, s.hs);
    __syncthreads();
    MmaScoreGradients<Element>(t, row0, col0, s);
    MmaProduct<Element, wmma::row_major, wmma::row_major>(t.acc0, t.ldo, t.ds, t.ldp, t.k, t.ld16, kFlashRows, s.hs,
                                                          kFlashCols, true);  // dQ += dS K
  }
  __syncthreads();
  StoreAccumulator(dqkv, QkvRows(s, b, h, 0), t.acc0, t.ldo, row0, s);
#endif
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

// The bound device's attribute (queried once: a process binds one device).
int DeviceAttribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  gpu::Check(cudaGetDevice(&device), "cudaGetDevice");
  gpu::Check(cudaDeviceGetAttribute(&value, attribute, device), "cudaDeviceGetAttribute");
  return value;
}

// Tensor cores take 16-bit operands in 16 x 16 tiles and, for bf16, need sm_80.
bool TensorCoreForward(const FlashShape& s) {
  static const int major = DeviceAttribute(cudaDevAttrComputeCapabilityMajor);
  return (s.precision == 1 || s.precision == 2) && s.hs % kMma == 0 && major >= 8;
}
// The backward's tiles need more shared memory (hs 128 outgrows an A100's).
bool TensorCoreBackward(const FlashShape& s) {
  static const int shared_bytes = DeviceAttribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  return TensorCoreForward(s) && MmaBackwardBytes(s.hs) <= static_cast<size_t>(shared_bytes);
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

template <typename Element>
void MmaBackward(uint16_t* dqkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* y, const real* lse,
                 const FlashShape& s) {
  gpu::ProfiledRegion profiled("FlashAttentionBackward");
  const SixteenBitOutputs out{dqkv, s.precision};
  const SixteenBitValues outputs{y, s.precision};
  LaunchOver(s.KVl, FlashKeyValueGradientMmaKernel<Element>, "FlashKeyValueGradientMmaKernel", s,
             FlashTiles(s.T, kFlashCols), MmaBackwardBytes(s.hs), out, dy, qkv, outputs, lse, s);
  Launch(FlashQueryGradientMmaKernel<Element>, "FlashQueryGradientMmaKernel", s, FlashTiles(s.T, kFlashRows),
         MmaBackwardBytes(s.hs), out, dy, qkv, outputs, lse, s);
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
  if (TensorCoreForward(s)) {
    CheckHeadSize(s);
    gpu::ProfiledRegion profiled("FlashAttentionForward");
    const SixteenBitOutputs out{y, precision};
    if (precision == 1) {
      Launch(FlashForwardMmaKernel<__half>, "FlashForwardMmaKernel", s, FlashTiles(T, kFlashRows),
             MmaForwardBytes(s.hs), out, lse, qkv, s);
    } else {
      Launch(FlashForwardMmaKernel<__nv_bfloat16>, "FlashForwardMmaKernel", s, FlashTiles(T, kFlashRows),
             MmaForwardBytes(s.hs), out, lse, qkv, s);
    }
    return;
  }
  CausalForward(SixteenBitOutputs{y, precision}, lse, SixteenBitValues{qkv, precision}, s);
}

void FlashAttentionBackward16(uint16_t* dqkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* y,
                              const real* lse, int B, int T, int Cl, int NHl, int precision, int KVl) {
  const FlashShape s = FlashShapeOf(B, T, Cl, NHl, precision, KVl);
  if (TensorCoreBackward(s)) {
    CheckHeadSize(s);
    if (precision == 1) {
      MmaBackward<__half>(dqkv, dy, qkv, y, lse, s);
    } else {
      MmaBackward<__nv_bfloat16>(dqkv, dy, qkv, y, lse, s);
    }
    return;
  }
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
