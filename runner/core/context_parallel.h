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
// The communication runs through the comm layer (comm.h), over MPI (the GPU builds pin cp 1).
#pragma once

#include "runner/core/block.h"

namespace tunepar::core {

// The ring's buffers in `w` (block.h BlockWorkspace: kv, ring_sum, dkv, dkv_in).
void AllocateRingBuffers(const StageContext& ctx, BlockWorkspace& w);
// y (N, Cl; storage) and lse (B, NHl, T) of this rank's queries of qkv (N, QkvCols) against the
// whole sequence's keys before them.
void RingAttentionForward(const StageContext& ctx, Buffer& y, Buffer& lse, const Buffer& qkv, BlockWorkspace& w);
// dqkv (N, QkvCols; storage) overwritten: this rank's dQ and its own K/V block's dK, dV summed over
// every query of the sequence.
void RingAttentionBackward(const StageContext& ctx, Buffer& dqkv, const Buffer& dy, const Buffer& qkv,
                           const Buffer& y, const Buffer& lse, BlockWorkspace& w);

}  // namespace tunepar::core
