// The layers of one pipeline stage on one rank: token embedding, transformer blocks, and the
// head (final layer norm, LM head, cross-entropy), forward and backward, with Megatron's tensor
// parallelism (the all-reduces are here; the pipeline and data parallelism are the trainer's).
//
// Block, with x (B, T, C) replicated over the TP group:
//   ln1 = LN(x); qkv = ln1 Wqkv^T + bqkv        (column-parallel: this rank's heads)
//   y = attention(qkv); res2 = x + allreduce(y Wo^T) + bo     (row-parallel)
//   ln2 = LN(res2); h = gelu(ln2 Wfc^T + bfc)   (column-parallel)
//   out = res2 + allreduce(h Wp^T) + bp         (row-parallel)
// Backward all-reduces the gradients of ln1 and ln2 (the inputs of the column-parallel layers).
// Replicated biases are added by TP rank 0 before the all-reduce, so they count once.
//
// With sequence parallelism (Korthikanti et al. 2022, Megatron-LM's --sequence-parallel) x, the
// norms and the residual adds hold this rank's N / tp rows of the micro-batch: each column-
// parallel layer's input is all-gathered to N rows before it (and again in the backward pass,
// which keeps only the rows), each row-parallel layer's partial sum is reduce-scattered back to
// the rows (the backward pass mirrors both), and the norms' weight gradients, each over its
// rank's rows, are summed over TP once a step (SumRowGradientsOverTp). Rank r holds rows
// [r N/tp, (r + 1) N/tp) of the (B T) rows: with B = 1 Megatron's sequence chunk; with B > 1 the
// same count of rows (Megatron's [s, b, h] layout orders them otherwise, which no row-wise op
// can see).
//
// With context parallelism (cp > 1, context_parallel.h) a rank holds T / cp tokens of each
// sequence, two chunks of it (Megatron-LM's causal load balance), and every op but attention
// runs on those rows alone: ctx.dims.T is then the rank's tokens per sequence, and positions (the
// learned table, rotary angles) are the chunks' places in the whole sequence.
#pragma once

#include <mpi.h>

#include <vector>

#include "runner/core/context_parallel.h"
#include "runner/core/memory.h"
#include "runner/core/parallel.h"
#include "runner/core/parameters.h"

namespace tunepar::core {

// What the layers of a stage need to run a micro-batch.
struct StageContext {
  ModelDims dims;
  Shard shard;
  int B = 1;          // micro-batch (sequences)
  int precision = 0;  // storage of weights and activations: 0 fp32, 1 fp16, 2 bf16
  // Fused attention (ops.h FlashAttentionForward): a row's log-sum-exp is kept instead of its
  // probabilities, and the backward recomputes them tile by tile; no T x T buffer at all.
  bool flash_attention = false;
  TrackingAllocator* allocator = nullptr;
  PhaseClock* clock = nullptr;
  MPI_Comm tp_comm = MPI_COMM_NULL;
  bool sequence_parallel = false;  // sp1: the residual stream split over TP by rows
  // Context parallelism: dims.T is this rank's T / cp tokens of a sequence, chunks cp_rank and
  // 2 cp - 1 - cp_rank of the model's; attention runs round the ring of cp_comm.
  int cp = 1, cp_rank = 0;
  MPI_Comm cp_comm = MPI_COMM_NULL;

  RingContext Ring() const;  // what ring attention needs of it (context_parallel.h)
  int SequenceLength() const { return dims.T * cp; }  // the model's tokens per sequence
  // Where this rank's chunk `half` (0: its first T / 2 rows, 1: the rest) starts in the sequence.
  int ChunkStart(int half) const { return (half == 0 ? cp_rank : 2 * cp - 1 - cp_rank) * (dims.T / 2); }

  int N() const { return B * dims.T; }  // rows (tokens) per micro-batch: what the GEMMs see
  // The residual stream's rows on this rank (what the norms, the residual adds and the pipeline
  // see): N, or N / tp with sequence parallelism.
  int StreamRows() const { return sequence_parallel ? N() / shard.tp : N(); }
  int64_t StreamValues() const { return int64_t{StreamRows()} * dims.C; }
  int QkvCols() const { return shard.QkvCols(dims.HeadSize()); }  // qkv's row: [Q | K | V] of this rank's heads
  int MlpInCols() const { return dims.swiglu ? 2 * shard.Fl : shard.Fl; }  // fc's output row (SwiGLU: gate, up)
  double StorageBytes() const { return precision == 0 ? 4.0 : 2.0; }
  // An activation kept for the backward pass or sent down the pipeline, counted in activations:
  // with 16-bit storage held as 16-bit numbers (two bytes on the device, as counted; read and
  // written through bits16()), else as reals.
  Buffer Activation(size_t values) const;
  // Layer-norm mean and rstd: fp32 values whatever the storage, as a framework keeps them
  // (counted in activations at 4 bytes).
  Buffer Statistics(size_t values) const;
  // An activation gradient of the backward pass (the stage's gradient stream and the blocks'
  // workspace), counted in workspace: with 16-bit storage held as 16-bit numbers, as counted.
  Buffer ActivationGradient(size_t values) const;
  // A row-parallel layer's partial sum (all-reduced over TP before it is rounded, so any TP size
  // rounds the same sums): reals, counted in comm buffers at storage width, as a framework's
  // 16-bit partial sum (the one buffer per stage held wider than counted with 16-bit storage).
  Buffer PartialSum(size_t values) const;
  void Store(real* p, int64_t n) const;    // rounds to the storage precision
  void TpAllReduce(real* p, int64_t n) const;
};

// The stage's weights as the layers read them, at ParameterLayout's flat offsets: reals (fp32
// storage) or 16-bit numbers (16-bit storage: what the GEMMs read as they are).
struct StageWeights {
  const real* values = nullptr;      // fp32 storage
  const uint16_t* bits16 = nullptr;  // 16-bit storage
  int precision = 0;

  // A vector the row kernels read in fp32 (layer-norm weights, biases, the position embedding):
  // in place, or with 16-bit storage widened into op scratch `slot` (2 or 3; valid until that
  // slot's next use).
  const real* Vector(int64_t offset, int64_t n, int slot) const;
};

// A linear layer's weight and bias offsets (bias < 0: none, or not added on this rank).
struct LinearTensors {
  int64_t w, bias;
};

// A block's saved activations for the backward pass (all but its input x): StageContext::
// Activation (16-bit numbers with 16-bit storage, read as they are by the GEMMs, attention and
// the row ops' 16-bit-input forms), but for the layer norms' mean and rstd
// (StageContext::Statistics, fp32), and with fused attention its log-sum-exp (fp32 too).
// (The norms' outputs, their statistics and res2 have the stream's rows, R = StreamRows().)
struct BlockActivations {
  Buffer ln1, ln1_mean, ln1_rstd;  // (R, C), (R), (R)
  Buffer qkv;                      // (N, 3 Cl)
  Buffer att;                      // (B, NHl, T, T): the probabilities (not with fused attention)
  Buffer lse;                      // (B, NHl, T): fused attention's log-sum-exp per row
  Buffer atty;                     // (N, Cl)
  Buffer res2;                     // (R, C): the residual stream between attention and MLP
  Buffer ln2, ln2_mean, ln2_rstd;  // (R, C), (R), (R)
  Buffer fch, fcg;                 // (N, Fl) before and after GeLU
};
// keep_scores false (selective recomputation): no `att`; the passes use a shared scratch. With
// fused attention there is never an `att`, only `lse`, whatever keep_scores says: selective
// recomputation then has nothing left to recompute.
BlockActivations AllocateBlockActivations(const StageContext& ctx, bool keep_scores);

// Buffers a stage reuses across blocks and micro-batches. `partial` is a PartialSum: the
// row-parallel layers' outputs in the forward pass, the column-parallel layers' input gradients
// in the backward pass (then the layer norms' dout); the others are ActivationGradients of the
// backward pass; `scores` is an Activation. With sequence parallelism, `all_rows` (at storage
// width, as an ActivationGradient) holds what is all-gathered to N rows in turn: a column-parallel
// layer's input, a row-parallel layer's output gradient, the final norm's output; `row_sum` (a
// PartialSum) the stream rows of a reduce-scattered partial sum.
struct BlockWorkspace {
  Buffer partial;     // (N, C)
  Buffer dres2;       // (R, C)
  Buffer datty;       // (N, Cl)
  Buffer dqkv;        // (N, 3 Cl)
  Buffer dfcg, dfch;  // (N, Fl)
  Buffer scores;      // (B, NHl, T, T): selective recomputation's attention probabilities
                      // (none with fused attention)
  Buffer all_rows;    // (N, C), sequence parallelism only
  Buffer row_sum;     // (R, C), sequence parallelism only
  RingBuffers ring;   // context parallelism only (context_parallel.h)
};
BlockWorkspace AllocateBlockWorkspace(const StageContext& ctx, bool selective);

// The residual stream (the embedding's output, each block's input and output, the stage's
// output) is made of Activation buffers (R, C): 16-bit numbers with 16-bit storage.
// Block `b` of this stage: weights/grads are the flat buffers, `t` the block's offsets.
void BlockForward(const StageContext& ctx, const StageWeights& weights, const BlockTensors& t, const Buffer& x,
                  BlockActivations& a, BlockWorkspace& w, Buffer& out);
// dx (an ActivationGradient): in, the gradient of the block's output; out, the gradient of its
// input x. Without saved scores (selective recomputation, unfused attention) the attention's
// forward runs again first.
void BlockBackward(const StageContext& ctx, const StageWeights& weights, real* grads, const BlockTensors& t,
                   const Buffer& x, const BlockActivations& a, BlockWorkspace& w, Buffer& dx);

// x (R, C) = wte[tokens] + wpe (vocabulary-parallel lookup, summed over TP: all-reduced, or
// reduce-scattered to the stream rows). The sum is made in fp32 first, in the workspace's
// partial (free outside the blocks) unless it can go straight to x (fp32 storage, all rows).
void EmbeddingForward(const StageContext& ctx, const StageWeights& weights, const ParameterLayout& p,
                      const int* tokens, Buffer& x, BlockWorkspace& w);
// dx (R, C): all-gathered to N rows first with sequence parallelism (into the workspace).
void EmbeddingBackward(const StageContext& ctx, real* grads, const ParameterLayout& p, const int* tokens,
                       const Buffer& dx, BlockWorkspace& w);

// The head on a micro-batch's stage output x: final layer norm, logits over this rank's
// vocabulary rows, cross-entropy against `targets`, and straight away its backward (the 1F1B
// last stage runs a micro-batch's backward right after its forward): accumulates the head's
// weight gradients and writes dx (R, C; an ActivationGradient). With sequence parallelism the
// final norm's output is all-gathered to N rows for the LM head (into the workspace). `grad_scale` multiplies
// dloss/dlogit (1 / tokens per step, times the fp16 loss scale). The sum of the micro-batch's
// token losses goes to *loss (one double in device memory: the host does not wait for it).
void HeadForwardBackward(const StageContext& ctx, const StageWeights& weights, real* grads, const ParameterLayout& p,
                         const Buffer& x, const int* targets, double grad_scale, BlockWorkspace& w, Buffer& dx,
                         double* loss);

// Sequence parallelism: the norm weight gradients of a block (of the head: the final norm's),
// each accumulated over this rank's rows, summed over TP, so every TP rank holds the whole
// gradient (the tensors stay replicated). Called once a step, after the step's last backward
// pass through them and before the data-parallel sum; nothing without sequence parallelism.
void SumRowGradientsOverTp(const StageContext& ctx, real* grads, const BlockTensors& t);
void SumRowGradientsOverTp(const StageContext& ctx, real* grads, const ParameterLayout& p);

}  // namespace tunepar::core
