// Fused causal attention (FlashAttention-2, Dao 2023): the tiling and the per-tile maths that
// the CPU twin (flash_attention_cpu.cc) and the CUDA kernels (flash_attention_gpu.cc) share, so
// the CPU tests pin the GPU's algorithm. Nothing of size T x T is ever held: a query tile of
// kFlashRows rows meets the key tiles of kFlashCols columns at or below the diagonal one at a
// time, and the softmax is carried along each row as a running maximum and sum.
//
// Forward, for a query row i, over key tiles j (scores s = q.k / sqrt(hs), causal):
//   m' = max(m, max_j s), l' = l e^(m - m') + sum_j e^(s - m'), o' = o e^(m - m') + P_j V_j
//   y = o / l, lse = m + log l (saved: one fp32 value per row instead of its T probabilities).
// Backward recomputes P = e^(s - lse) tile by tile; with D_i = dO_i . O_i (= sum_j P_ij dP_ij):
//   dV += P^T dO, dP = dO V^T, dS = P (dP - D) / sqrt(hs), dQ += dS K, dK += dS^T Q.
// One pass per key tile makes dK and dV, one per query tile makes dQ (no atomics).
#pragma once

#include <cmath>

#include "runner/core/kernels.h"

namespace tunepar::core {

inline constexpr int kFlashRows = 64;  // Br: query rows per tile
inline constexpr int kFlashCols = 64;  // Bc: key columns per tile

TP_HOST_DEVICE inline int FlashTiles(int T, int tile) {
  return (T + tile - 1) / tile;
}
// The last key tile a causal query tile reads (those past it lie above the diagonal: skipped).
TP_HOST_DEVICE inline int LastKeyTile(int query_tile, int T) {
  const int last_row = ((query_tile + 1) * kFlashRows < T ? (query_tile + 1) * kFlashRows : T) - 1;
  return last_row / kFlashCols;
}
// The first query tile that reads key tile `key_tile`.
TP_HOST_DEVICE inline int FirstQueryTile(int key_tile) {
  return key_tile * kFlashCols / kFlashRows;
}
// Query row i sees key j when j <= i (and both are inside the sequence).
TP_HOST_DEVICE inline bool Visible(int query, int key, int T) {
  return key <= query && query < T;
}

// A call's shape: B sequences of T tokens, NHl query heads of hs = Cl / NHl values in KVl K/V
// groups (grouped-query attention: query head h reads K/V head h / (NHl / KVl); KVl = NHl for
// multi-head attention), scale 1 / sqrt(hs).
struct FlashShape {
  int B, T, Cl, NHl, hs;
  real scale;
  int precision;  // the storage grid of the inputs and outputs (ops.h)
  int KVl;
  TP_HOST_DEVICE int QueryHeadsPerGroup() const { return NHl / KVl; }
  TP_HOST_DEVICE int QkvLd() const { return (NHl + 2 * KVl) * hs; }
};
TP_HOST_DEVICE inline FlashShape FlashShapeOf(int B, int T, int Cl, int NHl, int precision, int KVl = 0) {
  const int hs = Cl / NHl;
  return {B, T, Cl, NHl, hs, real(1) / Sqrt(static_cast<real>(hs)), precision, KVl > 0 ? KVl : NHl};
}

// Where one head's rows lie in a (B, T, ld) array: row t's hs values start at first + t ld.
struct HeadRows {
  int64_t first;
  int ld;
};
// Part 0 (q), 1 (k) or 2 (v) of query head h of sequence b in qkv (B, T, (NHl + 2 KVl) hs): K and V
// are those of h's group.
TP_HOST_DEVICE inline HeadRows QkvRows(const FlashShape& s, int b, int h, int part) {
  const int group = h / s.QueryHeadsPerGroup();
  const int64_t column = part == 0 ? int64_t{h} * s.hs
                                   : (int64_t{s.NHl} + int64_t{part - 1} * s.KVl + group) * s.hs;
  return {int64_t{b} * s.T * s.QkvLd() + column, s.QkvLd()};
}
// Head h of sequence b in y, dy (B, T, Cl).
TP_HOST_DEVICE inline HeadRows OutputRows(const FlashShape& s, int b, int h) {
  return {int64_t{b} * s.T * s.Cl + int64_t{h} * s.hs, s.Cl};
}
// Row t of head h of sequence b in lse (B, NHl, T).
TP_HOST_DEVICE inline int64_t LseIndex(const FlashShape& s, int b, int h, int t) {
  return (int64_t{b} * s.NHl + h) * s.T + t;
}

// A query row's softmax so far: the running maximum of its scores and the sum of e^(s - max).
struct RunningSoftmax {
  real max = -INFINITY;
  real sum = 0;
};

// Raises the running maximum to cover a tile whose largest visible score is `tile_max`; returns
// e^(old max - new max), the factor the sum and the output accumulated so far are multiplied by
// (0 before the row's first visible score, whose tile then starts the sums).
TP_HOST_DEVICE inline real FoldTileMax(RunningSoftmax& row, real tile_max) {
  const real new_max = tile_max > row.max ? tile_max : row.max;
  const real factor = row.max == -INFINITY ? real(0) : Exp(row.max - new_max);
  row.sum *= factor;
  row.max = new_max;
  return factor;
}

// The unnormalised weight of a score against the running maximum (0 where the key is hidden).
TP_HOST_DEVICE inline real TileWeight(real score, real max, bool visible) {
  return visible ? Exp(score - max) : real(0);
}

TP_HOST_DEVICE inline real LogSumExp(const RunningSoftmax& row) {
  return row.max + Log(row.sum);
}

// The backward pass's probability, recomputed from the score and its row's log-sum-exp.
TP_HOST_DEVICE inline real RecomputedProbability(real score, real lse, bool visible) {
  return visible ? Exp(score - lse) : real(0);
}

// dS = P (dP - D) scale: the softmax's backward with D = rowsum(dO o O) in place of sum_j P dP.
TP_HOST_DEVICE inline real ScoreGradient(real p, real dp, real d, real scale) {
  return p * (dp - d) * scale;
}

// P and dS enter the next products as tensor cores read them: on the storage grid (16-bit
// numbers), as the unfused path stores its probabilities and score gradients; the softmax sums
// use them unrounded.
TP_HOST_DEVICE inline real TileOperand(real value, int precision) {
  return RoundTo(value, precision);
}

// ---- Ring attention (context parallelism, context_parallel.h). The sequence of T cp tokens is cut
// into 2 cp chunks and rank i holds chunks i and 2 cp - 1 - i (Megatron-LM's causal load
// balance): its T local rows, the first half chunk i, the second chunk 2 cp - 1 - i. Its queries
// meet the K/V block of each rank of the ring in turn; visibility is by global positions, which
// grow with the local row (so a tile's first and last rows bound its positions). A block's
// partial output is merged into the running one by their log-sum-exps. With cp 1 a block is the
// whole causal attention.
struct RingBlock {
  int cp = 1;
  int query_rank = 0;  // whose chunks the queries are (this rank)
  int key_rank = 0;    // whose chunks the K/V block is
};
// The sequence position of local row `row` of rank `rank`'s T rows (two chunks of T / 2).
TP_HOST_DEVICE inline int SequencePosition(int row, int T, int cp, int rank) {
  const int chunk = T / 2;
  return row < chunk ? rank * chunk + row : (2 * cp - 1 - rank) * chunk + (row - chunk);
}
TP_HOST_DEVICE inline bool VisibleInBlock(const RingBlock& r, int query, int key, int T) {
  return query < T && key < T &&
         SequencePosition(key, T, r.cp, r.key_rank) <= SequencePosition(query, T, r.cp, r.query_rank);
}
// Whether query tile qt sees any key of key tile kt (tiles wholly above the diagonal are skipped).
TP_HOST_DEVICE inline bool BlockTileVisible(const RingBlock& r, int qt, int kt, int T) {
  const int last_row = ((qt + 1) * kFlashRows < T ? (qt + 1) * kFlashRows : T) - 1;
  return SequencePosition(kt * kFlashCols, T, r.cp, r.key_rank) <= SequencePosition(last_row, T, r.cp, r.query_rank);
}
// Head `group`'s K (part 1) or V (part 2) rows of sequence b in a K/V block (B, T, 2 KVl hs): the
// columns of qkv after the queries, as they travel round the ring.
TP_HOST_DEVICE inline HeadRows KvBlockRows(const FlashShape& s, int b, int group, int part) {
  const int ld = 2 * s.KVl * s.hs;
  return {int64_t{b} * s.T * ld + (int64_t{part - 1} * s.KVl + group) * s.hs, ld};
}

// Merges a block's output for one row (o_b normalised by its own sum, log-sum-exp lse_b) into
// the running one (acc, lse): lse' = log(e^lse + e^lse_b), acc' = acc e^(lse - lse') +
// o_b e^(lse_b - lse') (TransformerEngine's flash_attn_fwd_out_correction). Returns the two
// factors; *lse becomes lse'.
struct MergeFactors {
  real running, block;
};
TP_HOST_DEVICE inline MergeFactors MergeBlockLse(real* lse, real block_lse) {
  if (*lse == -INFINITY) {
    *lse = block_lse;
    return {real(0), real(1)};
  }
  const real hi = *lse > block_lse ? *lse : block_lse, lo = *lse > block_lse ? block_lse : *lse;
  const real merged = hi + Log(real(1) + Exp(lo - hi));
  const MergeFactors f{Exp(*lse - merged), Exp(block_lse - merged)};
  *lse = merged;
  return f;
}

}  // namespace tunepar::core
