// Context parallelism (Megatron-Core's --context-parallel-size with cp_comm_type p2p,
// TransformerEngine's attn_forward_func_with_cp): ring attention over the cp ranks of one
// (stage, tp rank, dp rank), each holding T / cp tokens of every sequence (block.h: chunks i and
// 2 cp - 1 - i of 2 cp, the causal load balance).
//
// Forward, rank i, steps j = 0 .. cp - 1: it holds the K/V block of rank (i - j) mod cp (its own
// first), posts the block's send to rank i + 1 and the next block's receive from rank i - 1, and
// meanwhile runs the fused kernel of its queries against the held block, masked by sequence
// positions (flash_attention.h RingBlock: whole blocks below the diagonal, the diagonal's halves,
// blocks wholly above skipped tile by tile), merging each block's output into the running one by
// their log-sum-exps; the output is rounded to the storage grid once at the end. Only the K/V
// heads travel (GQA: KVl of them).
// Backward (Megatron's p2p backward): the same ring of K/V blocks, each block's probabilities
// recomputed from the final log-sum-exp and output (D = rowsum(dO o O)); dQ accumulates here
// (fp32); a block's dK/dV (fp32) travels with it, each rank adding its part before sending it on,
// the previous step's transfer overlapping this step's kernel, and after the cp-th hop it is home.
// The communication runs through the comm layer (comm.h) in any mode: over MPI, or with nccl each
// step's transfers issued together as one NCCL group (the dK/dV of the last block is posted with
// the next block's K/V so that every rank groups them alike). The block kernels are
// flash_attention_{cpu,gpu}.cc's (CPU and CUDA builds; the HIP build pins cp 1).
#pragma once

#include <mpi.h>

#include "runner/core/memory.h"

namespace tunepar::core {

// A rank's attention as the ring sees it (block.cc fills it from its StageContext): B sequences
// of T rows (this rank's two chunks), NHl query heads of hs values in KVl K/V groups (Cl = NHl hs),
// the storage precision, and the ring.
struct RingContext {
  int B = 1, T = 0, Cl = 0, NHl = 0, KVl = 0, hs = 0, precision = 0;
  int cp = 1, cp_rank = 0;
  MPI_Comm cp_comm = MPI_COMM_NULL;
  TrackingAllocator* allocator = nullptr;
};

// The ring's buffers, reused by every block of a stage: the K/V block computed with and the one
// arriving (N, 2 KVl hs at storage width: comm buffers), the fp32 output (forward) or dQ
// (backward) being summed (N, Cl: workspace), and the backward's dK/dV of a block: two being sent
// on and one arriving (N, 2 KVl hs, fp32: comm buffers).
struct RingBuffers {
  Buffer kv[2];
  Buffer sum;
  Buffer dkv[2], dkv_in;
};
RingBuffers AllocateRingBuffers(const RingContext& ctx);
// y (N, Cl; storage) and lse (B, NHl, T) of this rank's queries of qkv (N, (NHl + 2 KVl) hs)
// against the whole sequence's keys before them.
void RingAttentionForward(const RingContext& ctx, Buffer& y, Buffer& lse, const Buffer& qkv, RingBuffers& w);
// dqkv (N, (NHl + 2 KVl) hs; storage) overwritten: this rank's dQ and its own K/V block's dK, dV
// summed over every query of the sequence.
void RingAttentionBackward(const RingContext& ctx, Buffer& dqkv, const Buffer& dy, const Buffer& qkv,
                           const Buffer& y, const Buffer& lse, RingBuffers& w);

}  // namespace tunepar::core
