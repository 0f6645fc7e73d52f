// One rank's part of a training step: the 1F1B pipeline schedule over micro-batches, the
// gradient reduction over data-parallel replicas (bucketed all-reduce overlapping the last
// micro-batch's backward, or ZeRO-1's reduce-scatter), and AdamW with gradient clipping on fp32
// master weights (sharded over replicas with ZeRO-1, then all-gathered), with dynamic loss
// scaling for fp16.
//
// Memory, as a GPU holds it (TrackingAllocator): weights at storage width; fp32 gradients;
// optimizer states m, v (fp32) and, with 16-bit storage, the fp32 master weights; per
// micro-batch in flight the blocks' inputs and (without recomputation) their saved activations.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/core/block.h"
#include "runner/core/data.h"
#include "runner/core/memory.h"
#include "runner/core/parallel.h"
#include "runner/core/parameters.h"

namespace tunepar::core {

struct TrainingOptions {
  int micro_batch = 1;        // B, sequences per micro-batch
  int num_micro_batches = 1;  // M, per replica per step
  int precision = 0;          // 0 fp32, 1 fp16, 2 bf16 (storage; arithmetic and master weights fp32)
  bool zero1 = false;         // shard optimizer states over data-parallel replicas
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
  // The weights as the layers read them (block.h), and their host copies (fp32 values) in and out.
  StageWeights Weights() const;
  void StoreWeights(const std::vector<real>& host);
  std::vector<real> LoadWeights() const;

  ModelDims dims_;
  const ProcessGrid& grid_;
  TrainingOptions options_;
  const TokenSource& data_;
  TrackingAllocator& allocator_;
  StageContext ctx_;
  ParameterLayout params_;
  int64_t padded_count_ = 0;                 // a multiple of dp (ZeRO shards)
  int64_t shard_begin_ = 0, shard_end_ = 0;  // this rank's optimizer range
  Buffer weights_, grads_, master_, m_, v_, grad_shard_;
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
