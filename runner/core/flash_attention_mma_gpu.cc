// The fused causal attention on tensor cores (flash_attention_gpu.cc's kernels, for 16-bit
// storage): the same tiles and softmax maths with their products (S = Q K^T, O += P V; dP = dO V^T,
// dV += P^T dO, dK += dS^T Q, dQ += dS K) as wmma products of 16-bit operands accumulated in fp32
// (sm_80+). The HIP build compiles nothing here (flash_attention_gpu.cc says why).
#if !defined(__HIPCC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <type_traits>

#include "runner/core/flash_attention_gpu.h"

namespace tunepar::core::flash_gpu {

namespace {

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

bool TensorCoreForward16(uint16_t* y, real* lse, const uint16_t* qkv, const FlashShape& s) {
  if (!TensorCoreForward(s)) return false;
  CheckHeadSize(s);
  gpu::ProfiledRegion profiled("FlashAttentionForward");
  const SixteenBitOutputs out{y, s.precision};
  if (s.precision == 1) {
    Launch(FlashForwardMmaKernel<__half>, "FlashForwardMmaKernel", s, FlashTiles(s.T, kFlashRows),
           MmaForwardBytes(s.hs), out, lse, qkv, s);
  } else {
    Launch(FlashForwardMmaKernel<__nv_bfloat16>, "FlashForwardMmaKernel", s, FlashTiles(s.T, kFlashRows),
           MmaForwardBytes(s.hs), out, lse, qkv, s);
  }
  return true;
}

bool TensorCoreBackward16(uint16_t* dqkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* y, const real* lse,
                          const FlashShape& s) {
  if (!TensorCoreBackward(s)) return false;
  CheckHeadSize(s);
  if (s.precision == 1) {
    MmaBackward<__half>(dqkv, dy, qkv, y, lse, s);
  } else {
    MmaBackward<__nv_bfloat16>(dqkv, dy, qkv, y, lse, s);
  }
  return true;
}

}  // namespace tunepar::core::flash_gpu

#endif
