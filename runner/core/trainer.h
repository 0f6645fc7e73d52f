// One rank's part of a training step: the 1F1B pipeline schedule over micro-batches, the
// gradient reduction over data-parallel replicas, and AdamW with gradient clipping on fp32
// master weights, with dynamic loss scaling for fp16. Over the shard group (sharding.h):
//   ZeRO-0  bucketed all-reduce of the gradients overlapping the last micro-batch's backward.
//   ZeRO-1  reduce-scatter of the step's gradients; AdamW on this rank's shard of the master
//           weights and moments; all-gather of the updated weights.
//   ZeRO-2  each unit's gradients reduce-scattered after every micro-batch's backward through it,
//           accumulated in the gradient shard (no whole gradient buffer held across the step);
//           then as ZeRO-1.
//   ZeRO-3  (FSDP) only the weight shard is kept: each unit's weights are all-gathered before its
//           forward and again before its backward (the next unit's gather prefetched while one
//           computes), gradients as ZeRO-2, AdamW on the shard, no all-gather after it.
// Hybrid sharding (dp_replicate > 1): the gradient shard is all-reduced across the replicas once a
// step, before the optimizer.
//
// Memory, as a GPU holds it (TrackingAllocator): weights at storage width (ZeRO-3: the shard, and
// at most two gathered units as gathered_weights); fp32 gradients (ZeRO-2/3: the shard; a unit's
// whole gradients, while they are made and reduce-scattered, as comm_buffers); optimizer states
// m, v (fp32) and, with 16-bit storage, the fp32 master weights (ZeRO-1-3: the shard); per
// micro-batch in flight the blocks' inputs and (without recomputation) their saved activations.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/core/block.h"
#include "runner/core/data.h"
#include "runner/core/memory.h"
#include "runner/core/parallel.h"
#include "runner/core/parameters.h"
#include "runner/core/sharding.h"

namespace tunepar::core {

struct TrainingOptions {
  int micro_batch = 1;        // B, sequences per micro-batch
  int num_micro_batches = 1;  // M, per replica per step
  int precision = 0;          // 0 fp32, 1 fp16, 2 bf16 (storage; arithmetic and master weights fp32)
  // ZeRO stage over the shard group (dp / dp_replicate ranks): 0 nothing sharded, 1 optimizer
  // states, 2 and gradients, 3 and weights (FSDP). With dp 1 there is nothing to shard: 0.
  int zero = 0;
  // 0 none; 1 selective (attention scores recomputed in the backward pass); 2 full (only each
  // block's input is kept; the block's forward runs again before its backward).
  int recompute = 0;
  // Fused attention (fa1): each row's log-sum-exp is kept instead of the attention probabilities
  // (block.h), so selective recomputation has nothing to recompute.
  bool flash_attention = false;
  // Sequence parallelism (sp1, tp > 1): the residual stream split over the TP group by rows
  // (block.h), so each stage's stream, its pipeline transfers and the norms' activations are
  // 1 / tp of the micro-batch's.
  bool sequence_parallel = false;
  // Blocks per pipeline stage, first to last (base/pipeline_split.h SplitLayers: even, or the
  // uneven rule's); empty: the even split.
  std::vector<int> stage_layers;
  double lr = 3e-4;  // constant
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;          // matrices only
  double clip = 1.0;                  // global gradient-norm clip (0: off)
  double initial_loss_scale = 65536;  // fp16 only
  int loss_scale_window = 1000;       // good steps before the fp16 loss scale doubles
  int64_t bucket_values = 4 << 20;    // data-parallel all-reduce bucket (values)
  uint64_t seed = 1234;               // initialisation and data
};

struct StepStats {
  double loss = 0;       // mean over the global batch's tokens
  double grad_norm = 0;  // before clipping
  bool skipped = false;  // fp16: non-finite gradients, the update was skipped
  double loss_scale = 1;
  double seconds = 0;  // this rank, wall
  PhaseTimes phases;   // compute is filled in as seconds minus the rest
};

class Trainer {
 public:
  // Allocates and initialises the parameters and optimizer states (may throw OutOfMemory).
  Trainer(const ModelDims& dims, const ProcessGrid& grid, const TrainingOptions& options,
          const TokenSource& data, TrackingAllocator& allocator);
  ~Trainer();

  StepStats Step(int64_t step);
  // Gradients of step `step`'s global batch, not reduced over replicas (for checks); returns
  // the mean loss.
  double ComputeGradients(int64_t step);

  // Global tensors assembled at world rank 0 (empty elsewhere), by name, in the unsliced
  // model's order: the weights as stored (16-bit storage widened, exactly) or the gradients of ComputeGradients
  // (summed over replicas, loss scale removed).
  std::map<std::string, std::vector<double>> GatherWeights() const;
  std::map<std::string, std::vector<double>> GatherGradients() const;

  // Gradient check support (one rank, fp32 storage): the parameters in this rank's flat order.
  const ParameterLayout& parameters() const { return params_; }
  double Parameter(int64_t offset) const;
  void SetParameter(int64_t offset, double value);
  double Gradient(int64_t offset) const;

 private:
  void SetUpContext(const ModelDims& dims, const ProcessGrid& grid, const TrainingOptions& options,
                    TrackingAllocator& allocator);
  struct MicroBatch;
  class GradientSync;

  void RunSchedule(int64_t step, bool sync_during_backward);
  // sync_last: this is the step's last micro-batch and its gradients are reduced as they become final.
  void Forward(int64_t step, int j, bool sync_last);
  void Backward(int j, bool sync_last);
  // The step's last micro-batch (its backward pass finishes the gradients).
  bool LastMicroBatch(int j) const { return j == options_.num_micro_batches - 1; }
  // To the previous stage: the gradient of this stage's input, copied into a pooled send buffer
  // (dx_ is overwritten by the next backward pass while the send may still be in flight).
  void SendGradient(const Buffer& gradient, int peer, int tag);
  // The last stage's per-micro-batch loss sums on the device (the head writes slot j), and the
  // step's total, read back once per step (0 on other stages).
  double* MicroBatchLosses();
  double StepLossSum();
  void Optimize(StepStats& stats);
  // `local`: this rank's values (weights or gradients) in its flat order, on the host.
  std::map<std::string, std::vector<double>> Gather(const std::vector<real>& local, bool gradients) const;
  // The weights as the layers read them (block.h), and their host copies (fp32 values) in and out:
  // the whole stage's (ZeRO-0-2), or with ZeRO-3 this rank's pieces in a flat vector.
  StageWeights Weights() const;
  void StoreWeights(const std::vector<real>& host);
  std::vector<real> LoadWeights() const;

  // A unit's layers (parameters.h ParameterUnit): its weights as they read them, at offsets from
  // Base(unit) (ZeRO-3: the gathered unit, held until ReleaseWeights), and its gradients: with
  // ZeRO-2/3 a whole-unit buffer (UnitGradients) that FinishGradients reduce-scatters into the
  // gradient shard; else the stage's gradients.
  int64_t Base(int unit) const;
  StageWeights UnitWeights(int unit);
  void ReleaseWeights();
  Buffer UnitGradients(int unit);
  real* GradientsOf(Buffer& unit_gradients);
  // `sum_rows` (sequence parallelism's norm gradients over TP) on a micro-batch's unit gradients
  // (ZeRO-2/3), or once a step on the stage's.
  void FinishGradients(int unit, Buffer& unit_gradients, bool last_micro_batch,
                       const std::function<void(real*)>& sum_rows);
  // The units the step's passes compute with, in the schedule's order (ZeRO-3's gathers).
  std::vector<int> StepUnitUses() const;
  // Tied embeddings over several stages: the first and last stage add their gradients.
  void SumTiedEmbeddingGradients();
  // The master weights of the piece at flat offset `flat`, shard offset `at`.
  real* MasterAt(int64_t flat, int64_t at);

  ModelDims dims_;
  const ProcessGrid& grid_;
  TrainingOptions options_;
  const TokenSource& data_;
  TrackingAllocator& allocator_;
  StageContext ctx_;
  ParameterLayout params_;
  int zero_ = 0;                 // the ZeRO stage run (0 with one rank in the shard group)
  int64_t padded_count_ = 0;     // the flat buffers' values: a multiple of the shard group
  ShardLayout shards_;           // this rank's optimizer range(s)
  Buffer weights_;               // ZeRO-0-2: the stage's weights
  Buffer weight_shard_;          // ZeRO-3: this rank's shard of them
  Buffer grads_;                 // ZeRO-0/1: the stage's gradients
  Buffer grad_shard_;            // ZeRO-1-3
  Buffer master_, m_, v_;        // on the shard
  std::unique_ptr<UnitGatherer> gatherer_;  // ZeRO-3
  BlockWorkspace workspace_;
  Buffer dx_;  // the gradient flowing back through the stage (an ActivationGradient)
  Buffer recompute_out_;
  std::unique_ptr<BlockActivations> recompute_;
  std::deque<std::unique_ptr<MicroBatch>> in_flight_;
  struct PendingSend;
  std::vector<std::unique_ptr<PendingSend>> sends_;
  std::unique_ptr<GradientSync> sync_;
  PhaseClock clock_;
  double loss_scale_ = 1;
  int good_steps_ = 0;
  int64_t adam_steps_ = 0;
  Buffer losses_;  // last stage: each micro-batch's sum of token losses (doubles, on the device)
};

}  // namespace tunepar::core
