// The CPU twin of the fused attention kernels (flash_attention_gpu.cc): the same tiles, the same
// order over them and the same per-tile maths (flash_attention.h), in fp32 arithmetic with
// 16-bit inputs widened a tile at a time; one OpenMP task per (sequence, head, tile) as the GPU
// runs one thread block per tile. Scratch is a few tiles per task; nothing is T x T.
#include <cstdint>
#include <cstring>
#include <vector>

#include "runner/core/flash_attention.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"

namespace tunepar::core {

namespace {

// tile (rows, hs) = rows [row0, row0 + rows) of the head, widened to reals; zeros past T.
template <typename Values>
void WidenTile(std::vector<real>& tile, Values src, HeadRows at, int row0, int rows, int T, int hs) {
  tile.assign(static_cast<size_t>(rows) * hs, real(0));
  for (int r = 0; r < rows && row0 + r < T; ++r) {
    const int64_t from = at.first + int64_t{row0 + r} * at.ld;
    for (int i = 0; i < hs; ++i) tile[static_cast<size_t>(r) * hs + i] = src[from + i];
  }
}

real Dot(const real* a, const real* b, int n) {
  real s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// acc (rows, hs) += weights (rows, cols) values (cols, hs), or with `transposed` weights read as
// (cols, rows) (the backward's P^T dO and dS^T Q).
void AccumulateProduct(std::vector<real>& acc, const std::vector<real>& weights, const std::vector<real>& values,
                       int rows, int cols, int hs, bool transposed) {
  for (int r = 0; r < rows; ++r) {
    real* out = acc.data() + static_cast<size_t>(r) * hs;
    for (int c = 0; c < cols; ++c) {
      const real w = transposed ? weights[static_cast<size_t>(c) * rows + r] : weights[static_cast<size_t>(r) * cols + c];
      const real* v = values.data() + static_cast<size_t>(c) * hs;
      for (int i = 0; i < hs; ++i) out[i] += w * v[i];
    }
  }
}

// One query tile's forward: the online softmax over its key tiles, then y and lse for its rows.
template <typename Values, typename Outputs>
void ForwardTile(Outputs y, real* lse, Values qkv, const FlashShape& s, int b, int h, int qt) {
  const int row0 = qt * kFlashRows, hs = s.hs;
  std::vector<real> q, k, v, weights(static_cast<size_t>(kFlashRows) * kFlashCols);
  std::vector<real> o(static_cast<size_t>(kFlashRows) * hs, real(0));
  RunningSoftmax rows[kFlashRows];
  WidenTile(q, qkv, QkvRows(s, b, h, 0), row0, kFlashRows, s.T, hs);
  for (int kt = 0; kt <= LastKeyTile(qt, s.T); ++kt) {
    const int col0 = kt * kFlashCols;
    WidenTile(k, qkv, QkvRows(s, b, h, 1), col0, kFlashCols, s.T, hs);
    WidenTile(v, qkv, QkvRows(s, b, h, 2), col0, kFlashCols, s.T, hs);
    for (int r = 0; r < kFlashRows; ++r) {
      real scores[kFlashCols], tile_max = -INFINITY;
      for (int c = 0; c < kFlashCols; ++c) {
        scores[c] = s.scale * Dot(&q[static_cast<size_t>(r) * hs], &k[static_cast<size_t>(c) * hs], hs);
        if (Visible(row0 + r, col0 + c, s.T) && scores[c] > tile_max) tile_max = scores[c];
      }
      const real factor = FoldTileMax(rows[r], tile_max);
      for (int i = 0; i < hs; ++i) o[static_cast<size_t>(r) * hs + i] *= factor;
      for (int c = 0; c < kFlashCols; ++c) {
        const real w = TileWeight(scores[c], rows[r].max, Visible(row0 + r, col0 + c, s.T));
        rows[r].sum += w;
        weights[static_cast<size_t>(r) * kFlashCols + c] = TileOperand(w, s.precision);
      }
    }
    AccumulateProduct(o, weights, v, kFlashRows, kFlashCols, hs, false);
  }
  const HeadRows out = OutputRows(s, b, h);
  for (int r = 0; r < kFlashRows && row0 + r < s.T; ++r) {
    for (int i = 0; i < hs; ++i) y.Set(out.first + int64_t{row0 + r} * out.ld + i, o[static_cast<size_t>(r) * hs + i] / rows[r].sum);
    lse[LseIndex(s, b, h, row0 + r)] = LogSumExp(rows[r]);
  }
}

// What a query tile brings to the backward pass: its q, dO, lse and D = rowsum(dO o O).
struct QueryTile {
  int row0;
  std::vector<real> q, dout, lse, d;
};

template <typename Values>
QueryTile LoadQueryTile(Values qkv, Values y, Values dy, const real* lse, const FlashShape& s, int b, int h, int qt) {
  QueryTile t;
  t.row0 = qt * kFlashRows;
  std::vector<real> o;
  WidenTile(t.q, qkv, QkvRows(s, b, h, 0), t.row0, kFlashRows, s.T, s.hs);
  WidenTile(o, y, OutputRows(s, b, h), t.row0, kFlashRows, s.T, s.hs);
  WidenTile(t.dout, dy, OutputRows(s, b, h), t.row0, kFlashRows, s.T, s.hs);
  t.lse.assign(kFlashRows, real(0));
  t.d.assign(kFlashRows, real(0));
  for (int r = 0; r < kFlashRows && t.row0 + r < s.T; ++r) {
    t.lse[r] = lse[LseIndex(s, b, h, t.row0 + r)];
    t.d[r] = Dot(&t.dout[static_cast<size_t>(r) * s.hs], &o[static_cast<size_t>(r) * s.hs], s.hs);
  }
  return t;
}

// P and dS (kFlashRows, kFlashCols) of a query tile against a key tile starting at col0, both
// as the next products read them (TileOperand). `visible(row, key)`: the mask (causal, or by
// sequence positions in a ring block).
template <typename Visibility>
void ScoreGradientTile(std::vector<real>& p, std::vector<real>& ds, const QueryTile& t, const std::vector<real>& k,
                       const std::vector<real>& v, int col0, const FlashShape& s, const Visibility& visible_at) {
  p.assign(static_cast<size_t>(kFlashRows) * kFlashCols, real(0));
  ds.assign(p.size(), real(0));
  for (int r = 0; r < kFlashRows; ++r) {
    const real* q = &t.q[static_cast<size_t>(r) * s.hs];
    const real* dout = &t.dout[static_cast<size_t>(r) * s.hs];
    for (int c = 0; c < kFlashCols; ++c) {
      const bool visible = visible_at(t.row0 + r, col0 + c);
      const real score = s.scale * Dot(q, &k[static_cast<size_t>(c) * s.hs], s.hs);
      const real prob = RecomputedProbability(score, t.lse[r], visible);
      const real dp = Dot(dout, &v[static_cast<size_t>(c) * s.hs], s.hs);
      p[static_cast<size_t>(r) * kFlashCols + c] = TileOperand(prob, s.precision);
      ds[static_cast<size_t>(r) * kFlashCols + c] = TileOperand(ScoreGradient(prob, dp, t.d[r], s.scale), s.precision);
    }
  }
}

template <typename Outputs>
void StoreTile(Outputs out, HeadRows at, const std::vector<real>& tile, int row0, int T, int hs) {
  for (int r = 0; r < kFlashRows && row0 + r < T; ++r) {
    for (int i = 0; i < hs; ++i) out.Set(at.first + int64_t{row0 + r} * at.ld + i, tile[static_cast<size_t>(r) * hs + i]);
  }
}

// One key tile's dK and dV of K/V head `group`, over the query tiles that see it, of each query head
// of the group in turn.
template <typename Values, typename Outputs>
void KeyValueGradientTile(Outputs dqkv, Values dy, Values qkv, Values y, const real* lse, const FlashShape& s, int b,
                          int group, int kt) {
  const int h = group * s.QueryHeadsPerGroup();  // the group's first query head: its K/V rows
  const int col0 = kt * kFlashCols, hs = s.hs;
  std::vector<real> k, v, p, ds;
  std::vector<real> dk(static_cast<size_t>(kFlashCols) * hs, real(0)), dv(dk.size(), real(0));
  WidenTile(k, qkv, QkvRows(s, b, h, 1), col0, kFlashCols, s.T, hs);
  WidenTile(v, qkv, QkvRows(s, b, h, 2), col0, kFlashCols, s.T, hs);
  for (int query_head = h; query_head < h + s.QueryHeadsPerGroup(); ++query_head) {
    for (int qt = FirstQueryTile(kt); qt < FlashTiles(s.T, kFlashRows); ++qt) {
      const QueryTile t = LoadQueryTile(qkv, y, dy, lse, s, b, query_head, qt);
      ScoreGradientTile(p, ds, t, k, v, col0, s, [&](int q, int key) { return Visible(q, key, s.T); });
      AccumulateProduct(dv, p, t.dout, kFlashCols, kFlashRows, hs, true);  // P^T dO
      AccumulateProduct(dk, ds, t.q, kFlashCols, kFlashRows, hs, true);    // dS^T Q
    }
  }
  StoreTile(dqkv, QkvRows(s, b, h, 1), dk, col0, s.T, hs);
  StoreTile(dqkv, QkvRows(s, b, h, 2), dv, col0, s.T, hs);
}

// One query tile's dQ, over the key tiles it sees.
template <typename Values, typename Outputs>
void QueryGradientTile(Outputs dqkv, Values dy, Values qkv, Values y, const real* lse, const FlashShape& s, int b, int h,
                       int qt) {
  const QueryTile t = LoadQueryTile(qkv, y, dy, lse, s, b, h, qt);
  std::vector<real> k, v, p, ds, dq(static_cast<size_t>(kFlashRows) * s.hs, real(0));
  for (int kt = 0; kt <= LastKeyTile(qt, s.T); ++kt) {
    const int col0 = kt * kFlashCols;
    WidenTile(k, qkv, QkvRows(s, b, h, 1), col0, kFlashCols, s.T, s.hs);
    WidenTile(v, qkv, QkvRows(s, b, h, 2), col0, kFlashCols, s.T, s.hs);
    ScoreGradientTile(p, ds, t, k, v, col0, s, [&](int q, int key) { return Visible(q, key, s.T); });
    AccumulateProduct(dq, ds, k, kFlashRows, kFlashCols, s.hs, false);  // dS K
  }
  StoreTile(dqkv, QkvRows(s, b, h, 0), dq, t.row0, s.T, s.hs);
}

// Calls task(b, h, tile) for every tile of every head (of `heads`: query or K/V heads) of every
// sequence, in parallel.
template <typename Task>
void ForEachTile(const FlashShape& s, int heads, int tiles, const Task& task) {
  const int64_t count = int64_t{s.B} * heads * tiles;
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < count; ++i) {
    task(static_cast<int>(i / (int64_t{heads} * tiles)), static_cast<int>(i / tiles % heads),
         static_cast<int>(i % tiles));
  }
}

template <typename Values, typename Outputs>
void Forward(Outputs y, real* lse, Values qkv, const FlashShape& s) {
  ForEachTile(s, s.NHl, FlashTiles(s.T, kFlashRows),
              [&](int b, int h, int qt) { ForwardTile(y, lse, qkv, s, b, h, qt); });
}

template <typename Values, typename Outputs>
void Backward(Outputs dqkv, Values dy, Values qkv, Values y, const real* lse, const FlashShape& s) {
  ForEachTile(s, s.KVl, FlashTiles(s.T, kFlashCols),
              [&](int b, int group, int kt) { KeyValueGradientTile(dqkv, dy, qkv, y, lse, s, b, group, kt); });
  ForEachTile(s, s.NHl, FlashTiles(s.T, kFlashRows),
              [&](int b, int h, int qt) { QueryGradientTile(dqkv, dy, qkv, y, lse, s, b, h, qt); });
}

// ---- Ring attention's blocks (context_parallel.h): this rank's queries against one K/V block
// (KvBlockRows), masked by sequence positions (RingBlock), the same tiles and per-tile maths.

// tile (rows, hs) += values at `at` from row0, fp32 in place (the ring's accumulators).
void AddTileTo(real* to, HeadRows at, const std::vector<real>& tile, int row0, int T, int hs) {
  for (int r = 0; r < kFlashRows && row0 + r < T; ++r) {
    for (int i = 0; i < hs; ++i) to[at.first + int64_t{row0 + r} * at.ld + i] += tile[static_cast<size_t>(r) * hs + i];
  }
}

// One query tile against the block: the online softmax over the block's visible key tiles, then
// each row's block output merged into the running output `acc` (B, T, Cl; fp32) and `lse`.
template <typename Values>
void BlockForwardTile(real* acc, real* lse, Values qkv, Values kv, const FlashShape& s, const RingBlock& ring, int b,
                      int h, int qt) {
  const int row0 = qt * kFlashRows, hs = s.hs, group = h / s.QueryHeadsPerGroup();
  std::vector<real> q, k, v, weights(static_cast<size_t>(kFlashRows) * kFlashCols);
  std::vector<real> o(static_cast<size_t>(kFlashRows) * hs, real(0));
  RunningSoftmax rows[kFlashRows];
  WidenTile(q, qkv, QkvRows(s, b, h, 0), row0, kFlashRows, s.T, hs);
  for (int kt = 0; kt < FlashTiles(s.T, kFlashCols) && BlockTileVisible(ring, qt, kt, s.T); ++kt) {
    const int col0 = kt * kFlashCols;
    WidenTile(k, kv, KvBlockRows(s, b, group, 1), col0, kFlashCols, s.T, hs);
    WidenTile(v, kv, KvBlockRows(s, b, group, 2), col0, kFlashCols, s.T, hs);
    for (int r = 0; r < kFlashRows; ++r) {
      real scores[kFlashCols], tile_max = -INFINITY;
      for (int c = 0; c < kFlashCols; ++c) {
        scores[c] = s.scale * Dot(&q[static_cast<size_t>(r) * hs], &k[static_cast<size_t>(c) * hs], hs);
        if (VisibleInBlock(ring, row0 + r, col0 + c, s.T) && scores[c] > tile_max) tile_max = scores[c];
      }
      const real factor = FoldTileMax(rows[r], tile_max);
      for (int i = 0; i < hs; ++i) o[static_cast<size_t>(r) * hs + i] *= factor;
      for (int c = 0; c < kFlashCols; ++c) {
        const real w = TileWeight(scores[c], rows[r].max, VisibleInBlock(ring, row0 + r, col0 + c, s.T));
        rows[r].sum += w;
        weights[static_cast<size_t>(r) * kFlashCols + c] = TileOperand(w, s.precision);
      }
    }
    AccumulateProduct(o, weights, v, kFlashRows, kFlashCols, hs, false);
  }
  const HeadRows out = OutputRows(s, b, h);
  for (int r = 0; r < kFlashRows && row0 + r < s.T; ++r) {
    if (rows[r].sum == 0) continue;  // no key of this block is visible to the row
    const MergeFactors f = MergeBlockLse(&lse[LseIndex(s, b, h, row0 + r)], LogSumExp(rows[r]));
    real* a = acc + out.first + int64_t{row0 + r} * out.ld;
    for (int i = 0; i < hs; ++i) a[i] = a[i] * f.running + o[static_cast<size_t>(r) * hs + i] / rows[r].sum * f.block;
  }
}

// One key tile of the block: its dK and dV over the query tiles that see it, each query head of
// the group in turn, added to dkv (B, T, 2 KVl hs; fp32).
template <typename Values>
void BlockKeyValueGradientTile(real* dkv, Values dy, Values qkv, Values kv, Values y, const real* lse,
                               const FlashShape& s, const RingBlock& ring, int b, int group, int kt) {
  const int h = group * s.QueryHeadsPerGroup(), col0 = kt * kFlashCols, hs = s.hs;
  std::vector<real> k, v, p, ds;
  std::vector<real> dk(static_cast<size_t>(kFlashCols) * hs, real(0)), dv(dk.size(), real(0));
  WidenTile(k, kv, KvBlockRows(s, b, group, 1), col0, kFlashCols, s.T, hs);
  WidenTile(v, kv, KvBlockRows(s, b, group, 2), col0, kFlashCols, s.T, hs);
  auto visible = [&](int q, int key) { return VisibleInBlock(ring, q, key, s.T); };
  for (int query_head = h; query_head < h + s.QueryHeadsPerGroup(); ++query_head) {
    for (int qt = 0; qt < FlashTiles(s.T, kFlashRows); ++qt) {
      if (!BlockTileVisible(ring, qt, kt, s.T)) continue;
      const QueryTile t = LoadQueryTile(qkv, y, dy, lse, s, b, query_head, qt);
      ScoreGradientTile(p, ds, t, k, v, col0, s, visible);
      AccumulateProduct(dv, p, t.dout, kFlashCols, kFlashRows, hs, true);  // P^T dO
      AccumulateProduct(dk, ds, t.q, kFlashCols, kFlashRows, hs, true);    // dS^T Q
    }
  }
  AddTileTo(dkv, KvBlockRows(s, b, group, 1), dk, col0, s.T, hs);
  AddTileTo(dkv, KvBlockRows(s, b, group, 2), dv, col0, s.T, hs);
}

// One query tile's dQ over the block's key tiles it sees, added to dq (B, T, Cl; fp32).
template <typename Values>
void BlockQueryGradientTile(real* dq, Values dy, Values qkv, Values kv, Values y, const real* lse, const FlashShape& s,
                            const RingBlock& ring, int b, int h, int qt) {
  const int group = h / s.QueryHeadsPerGroup();
  const QueryTile t = LoadQueryTile(qkv, y, dy, lse, s, b, h, qt);
  std::vector<real> k, v, p, ds, dq_tile(static_cast<size_t>(kFlashRows) * s.hs, real(0));
  auto visible = [&](int q, int key) { return VisibleInBlock(ring, q, key, s.T); };
  for (int kt = 0; kt < FlashTiles(s.T, kFlashCols) && BlockTileVisible(ring, qt, kt, s.T); ++kt) {
    const int col0 = kt * kFlashCols;
    WidenTile(k, kv, KvBlockRows(s, b, group, 1), col0, kFlashCols, s.T, s.hs);
    WidenTile(v, kv, KvBlockRows(s, b, group, 2), col0, kFlashCols, s.T, s.hs);
    ScoreGradientTile(p, ds, t, k, v, col0, s, visible);
    AccumulateProduct(dq_tile, ds, k, kFlashRows, kFlashCols, s.hs, false);  // dS K
  }
  AddTileTo(dq, OutputRows(s, b, h), dq_tile, t.row0, s.T, s.hs);
}

template <typename Values>
void BlockForward(real* acc, real* lse, Values qkv, Values kv, const FlashShape& s, const RingBlock& ring) {
  ForEachTile(s, s.NHl, FlashTiles(s.T, kFlashRows),
              [&](int b, int h, int qt) { BlockForwardTile(acc, lse, qkv, kv, s, ring, b, h, qt); });
}

template <typename Values>
void BlockBackward(real* dq, real* dkv, Values dy, Values qkv, Values kv, Values y, const real* lse,
                   const FlashShape& s, const RingBlock& ring) {
  ForEachTile(s, s.KVl, FlashTiles(s.T, kFlashCols), [&](int b, int group, int kt) {
    BlockKeyValueGradientTile(dkv, dy, qkv, kv, y, lse, s, ring, b, group, kt);
  });
  ForEachTile(s, s.NHl, FlashTiles(s.T, kFlashRows),
              [&](int b, int h, int qt) { BlockQueryGradientTile(dq, dy, qkv, kv, y, lse, s, ring, b, h, qt); });
}

}  // namespace

void FlashAttentionForward(real* y, real* lse, const real* qkv, int B, int T, int Cl, int NHl, int precision, int KVl) {
  Forward(RealOutputs{y, precision}, lse, qkv, FlashShapeOf(B, T, Cl, NHl, precision, KVl));
}

void FlashAttentionBackward(real* dqkv, const real* dy, const real* qkv, const real* y, const real* lse, int B,
                            int T, int Cl, int NHl, int precision, int KVl) {
  Backward(RealOutputs{dqkv, precision}, dy, qkv, y, lse, FlashShapeOf(B, T, Cl, NHl, precision, KVl));
}

void FlashAttentionForward16(uint16_t* y, real* lse, const uint16_t* qkv, int B, int T, int Cl, int NHl,
                             int precision, int KVl) {
  Forward(SixteenBitOutputs{y, precision}, lse, SixteenBitValues{qkv, precision}, FlashShapeOf(B, T, Cl, NHl, precision, KVl));
}

void FlashAttentionBackward16(uint16_t* dqkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* y,
                              const real* lse, int B, int T, int Cl, int NHl, int precision, int KVl) {
  Backward(SixteenBitOutputs{dqkv, precision}, SixteenBitValues{dy, precision}, SixteenBitValues{qkv, precision},
           SixteenBitValues{y, precision}, lse, FlashShapeOf(B, T, Cl, NHl, precision, KVl));
}

void FlashAttentionBlockForward(real* acc, real* lse, const real* qkv, const real* kv, int cp, int query_rank,
                                int key_rank, int B, int T, int Cl, int NHl, int precision, int KVl) {
  BlockForward(acc, lse, qkv, kv, FlashShapeOf(B, T, Cl, NHl, precision, KVl), RingBlock{cp, query_rank, key_rank});
}

void FlashAttentionBlockForward16(real* acc, real* lse, const uint16_t* qkv, const uint16_t* kv, int cp,
                                  int query_rank, int key_rank, int B, int T, int Cl, int NHl, int precision, int KVl) {
  BlockForward(acc, lse, SixteenBitValues{qkv, precision}, SixteenBitValues{kv, precision},
               FlashShapeOf(B, T, Cl, NHl, precision, KVl), RingBlock{cp, query_rank, key_rank});
}

void FlashAttentionBlockBackward(real* dq, real* dkv, const real* dy, const real* qkv, const real* kv, const real* y,
                                 const real* lse, int cp, int query_rank, int key_rank, int B, int T, int Cl, int NHl,
                                 int precision, int KVl) {
  BlockBackward(dq, dkv, dy, qkv, kv, y, lse, FlashShapeOf(B, T, Cl, NHl, precision, KVl),
                RingBlock{cp, query_rank, key_rank});
}

void FlashAttentionBlockBackward16(real* dq, real* dkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* kv,
                                   const uint16_t* y, const real* lse, int cp, int query_rank, int key_rank, int B,
                                   int T, int Cl, int NHl, int precision, int KVl) {
  BlockBackward(dq, dkv, SixteenBitValues{dy, precision}, SixteenBitValues{qkv, precision},
                SixteenBitValues{kv, precision}, SixteenBitValues{y, precision}, lse,
                FlashShapeOf(B, T, Cl, NHl, precision, KVl), RingBlock{cp, query_rank, key_rank});
}

void CopyColumns(void* dst, const void* src, int64_t rows, int ld, int first, int width, size_t element_bytes) {
  const auto* from = static_cast<const char*>(src);
  auto* to = static_cast<char*>(dst);
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(to + r * width * element_bytes, from + (r * ld + first) * element_bytes, width * element_bytes);
  }
}

void StoreColumns(real* dst, const real* src, int64_t rows, int ld, int first, int width, int precision) {
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    for (int i = 0; i < width; ++i) dst[r * ld + first + i] = RoundTo(src[r * width + i], precision);
  }
}

void StoreColumns16(uint16_t* dst, const real* src, int64_t rows, int ld, int first, int width, int precision) {
  const SixteenBitOutputs out{dst, precision};
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    for (int i = 0; i < width; ++i) out.Set(r * ld + first + i, src[r * width + i]);
  }
}

}  // namespace tunepar::core
