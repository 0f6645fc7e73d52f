#include "runner/core/trainer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "runner/core/comm.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"
#include "runner/core/waiting.h"

namespace tunepar::core {

namespace {
constexpr int64_t kMaxCount = int64_t{1} << 30;  // MPI counts are ints

// The residual stream's buffers (StageContext::Activation) and its gradient
// (StageContext::ActivationGradient) between stages: moved as they are held (16-bit numbers with
// 16-bit storage).
CommRequest SendStream(const Buffer& b, int64_t n, int precision, int peer, int tag, MPI_Comm world) {
  return precision == 0 ? DeviceSend(b.data(), n, peer, tag, world) : DeviceSend(b.bits16(), n, peer, tag, world);
}

void RecvStream(Buffer& b, int64_t n, int precision, int peer, int tag, MPI_Comm world) {
  if (precision == 0) {
    DeviceRecv(b.data(), n, peer, tag, world);
  } else {
    DeviceRecv(b.bits16(), n, peer, tag, world);
  }
}

void CopyStream(Buffer& to, const Buffer& from, int64_t n, int precision) {
  if (precision == 0) {
    Copy(to.data(), from.data(), n);
  } else {
    Copy16(to.bits16(), from.bits16(), n);
  }
}
}  // namespace

// A micro-batch between its forward and its backward pass on this stage.
struct Trainer::MicroBatch {
  Buffer tokens, targets;               // (N) ints: first stage, last stage
  std::vector<Buffer> inputs;           // each block's input (N, C), and the stage output
  std::vector<BlockActivations> saved;  // each block's activations (without recomputation)
  CommRequest send;  // the stage output on its way to the next stage
};

struct Trainer::PendingSend {
  Buffer buffer;  // an Activation (16-bit numbers with 16-bit storage), counted in comm buffers
  CommRequest request;
};

// Bucketed all-reduce of the gradients over data-parallel replicas. Buckets follow block
// boundaries; the backward pass runs from the end of the buffer to its start, so a bucket is
// launched (a non-blocking sum, comm.h) as soon as the last micro-batch's backward has passed its
// start: with nccl on the communication stream, overlapping the backward kernels queued after it.
// dp_comm holds what is not hidden: with nccl the compute stream's wait in Finish (the launches
// take no device time); with MPI the staging copies and the host's waits.
class Trainer::GradientSync {
 public:
  GradientSync(const ParameterLayout& p, int64_t bucket_values, int64_t hold_from, MPI_Comm comm)
      : comm_(comm), hold_from_(hold_from) {
    std::vector<int64_t> bounds = p.block_begin;
    bounds.push_back(0);
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    int64_t hi = p.count;
    for (auto it = bounds.rbegin(); it != bounds.rend(); ++it) {
      if (*it < hi && (hi - *it >= bucket_values || *it == 0)) {
        buckets_.push_back({*it, hi});
        hi = *it;
      }
    }
  }

  void Begin() {
    launched_.assign(buckets_.size(), false);
    requests_.clear();
  }

  // Gradients at offsets >= `offset` are final.
  void Ready(real* grads, int64_t offset, PhaseClock& clock) {
    TimedScope timed(clock, Phase::kDpComm);
    for (size_t i = 0; i < buckets_.size(); ++i) {
      if (!launched_[i] && buckets_[i].lo >= offset && buckets_[i].hi <= hold_from_) Launch(grads, i);
    }
    for (CommRequest& r : requests_) r.Test();
  }

  void Finish(real* grads, PhaseClock& clock) {
    TimedScope timed(clock, Phase::kDpComm);
    for (size_t i = 0; i < buckets_.size(); ++i) {
      if (!launched_[i]) Launch(grads, i);
    }
    for (CommRequest& r : requests_) r.Wait();
  }

 private:
  struct Bucket {
    int64_t lo, hi;
  };
  void Launch(real* grads, size_t i) {
    launched_[i] = true;
    requests_.push_back(DeviceIallReduceSum(grads + buckets_[i].lo, buckets_[i].hi - buckets_[i].lo, comm_));
  }

  MPI_Comm comm_;
  int64_t hold_from_;  // buckets reaching past this wait for Finish (the tied embedding copy)
  std::vector<Bucket> buckets_;
  std::vector<bool> launched_;
  std::vector<CommRequest> requests_;
};

Trainer::Trainer(const ModelDims& dims, const ProcessGrid& grid, const TrainingOptions& options,
                 const TokenSource& data, TrackingAllocator& allocator)
    : dims_(dims), grid_(grid), options_(options), data_(data), allocator_(allocator) {
  ctx_.dims = dims;
  ctx_.shard = ShardOf(dims, grid.tp, grid.tp_rank, grid.pp, grid.pp_rank);
  ctx_.B = options.micro_batch;
  ctx_.precision = options.precision;
  ctx_.flash_attention = options.flash_attention;
  ctx_.allocator = &allocator;
  ctx_.clock = &clock_;
  ctx_.tp_comm = grid.tp_comm;
  ctx_.sequence_parallel = options.sequence_parallel && grid.tp > 1;
  params_ = LayoutParameters(dims, ctx_.shard);
  loss_scale_ = options.precision == 1 ? options.initial_loss_scale : 1.0;

  const bool zero = options.zero1 && grid.dp > 1;
  const bool mixed = options.precision != 0;
  padded_count_ = (params_.count + grid.dp - 1) / grid.dp * grid.dp;
  const int64_t shard = padded_count_ / grid.dp;
  shard_begin_ = zero ? grid.dp_rank * shard : 0;
  shard_end_ = zero ? shard_begin_ + shard : params_.count;
  const size_t optimized = static_cast<size_t>(shard_end_ - shard_begin_);

  weights_ = mixed ? Buffer::SixteenBit(allocator, MemoryCategory::kWeights, padded_count_)
                   : Buffer(allocator, MemoryCategory::kWeights, padded_count_, 4.0);
  grads_ = Buffer(allocator, MemoryCategory::kGradients, padded_count_, 4.0);
  if (zero) grad_shard_ = Buffer(allocator, MemoryCategory::kGradients, optimized, 4.0);
  if (mixed) master_ = Buffer(allocator, MemoryCategory::kOptimizer, optimized, 4.0);
  m_ = Buffer(allocator, MemoryCategory::kOptimizer, optimized, 4.0);
  v_ = Buffer(allocator, MemoryCategory::kOptimizer, optimized, 4.0);

  std::vector<real> host(static_cast<size_t>(padded_count_), real(0));
  for (const TensorSpec& t : params_.tensors) {
    for (int64_t i = 0; i < t.size; ++i) {
      host[t.offset + i] = static_cast<real>(InitialValue(t, t.GlobalIndex(i), options.seed));
    }
  }
  if (mixed) Upload(master_.data(), host.data() + shard_begin_, optimized * sizeof(real));
  StoreWeights(host);

  workspace_ = AllocateBlockWorkspace(ctx_, options.recompute == 1);
  dx_ = ctx_.ActivationGradient(static_cast<size_t>(ctx_.StreamValues()));
  if (ctx_.shard.has_head) {  // a double per micro-batch: two reals each
    losses_ = Buffer(allocator, MemoryCategory::kWorkspace, 2 * static_cast<size_t>(options.num_micro_batches), 4.0);
  }
  if (options.recompute == 2) {
    recompute_ = std::make_unique<BlockActivations>(AllocateBlockActivations(ctx_, true));
    recompute_out_ = ctx_.Activation(static_cast<size_t>(ctx_.StreamValues()));
  }
  if (grid.dp > 1 && !zero) {
    const bool tied_copy = dims.tied && grid.pp > 1 && grid.last_stage();
    sync_ = std::make_unique<GradientSync>(
        params_, options.bucket_values, tied_copy ? params_.block_begin.back() : params_.count, grid.dp_comm);
  }
}

Trainer::~Trainer() = default;

StageWeights Trainer::Weights() const {
  if (options_.precision == 0) return {weights_.data(), nullptr, 0};
  return {nullptr, weights_.bits16(), options_.precision};
}

void Trainer::StoreWeights(const std::vector<real>& host) {
  const int P = options_.precision;
  if (P == 0) {
    Upload(weights_.data(), host.data(), host.size() * sizeof(real));
    return;
  }
  std::vector<uint16_t> bits(host.size());
  for (size_t i = 0; i < host.size(); ++i) bits[i] = To16BitValue(static_cast<float>(RoundTo(host[i], P)), P);
  Upload(weights_.bits16(), bits.data(), bits.size() * sizeof(uint16_t));
}

std::vector<real> Trainer::LoadWeights() const {
  std::vector<real> host(static_cast<size_t>(padded_count_));
  const int P = options_.precision;
  if (P == 0) {
    Download(host.data(), weights_.data(), host.size() * sizeof(real));
    return host;
  }
  std::vector<uint16_t> bits(host.size());
  Download(bits.data(), weights_.bits16(), bits.size() * sizeof(uint16_t));
  for (size_t i = 0; i < bits.size(); ++i) host[i] = From16BitValue(bits[i], P);
  return host;
}

void Trainer::SendGradient(const Buffer& gradient, int peer, int tag) {
  const int64_t n = ctx_.StreamValues();
  PendingSend* free = nullptr;
  for (auto& s : sends_) {
    if (s->request.Test()) {
      free = s.get();
      break;
    }
  }
  if (free == nullptr) {
    sends_.push_back(std::make_unique<PendingSend>());
    sends_.back()->buffer = options_.precision == 0
                                ? Buffer(allocator_, MemoryCategory::kCommBuffers, static_cast<size_t>(n), 4.0)
                                : Buffer::SixteenBit(allocator_, MemoryCategory::kCommBuffers, static_cast<size_t>(n));
    free = sends_.back().get();
  }
  CopyStream(free->buffer, gradient, n, options_.precision);
  free->request = SendStream(free->buffer, n, options_.precision, peer, tag, grid_.world);
}

void Trainer::Forward(int64_t step, int j, bool sync_last) {
  const int B = ctx_.B, T = dims_.T, N = ctx_.N(), P = options_.precision;
  const int64_t NC = ctx_.StreamValues();  // the stream's values between stages
  const Shard& s = ctx_.shard;
  auto mb = std::make_unique<MicroBatch>();
  std::vector<int> sample(static_cast<size_t>(T) + 1), tokens(N), targets(N);
  const int64_t global_batch = int64_t{B} * options_.num_micro_batches * grid_.dp;
  for (int b = 0; b < B; ++b) {
    const int64_t index =
        step * global_batch + (int64_t{grid_.dp_rank} * options_.num_micro_batches + j) * B + b;
    data_.Sample(index, T + 1, sample.data());
    std::copy(sample.begin(), sample.end() - 1, tokens.begin() + int64_t{b} * T);
    std::copy(sample.begin() + 1, sample.end(), targets.begin() + int64_t{b} * T);
  }
  mb->tokens = Buffer(allocator_, MemoryCategory::kWorkspace, N, 4.0, false);
  UploadAsync(mb->tokens.data(), tokens.data(), N * sizeof(int));
  if (s.has_head) {
    mb->targets = Buffer(allocator_, MemoryCategory::kWorkspace, N, 4.0, false);
    UploadAsync(mb->targets.data(), targets.data(), N * sizeof(int));
  }
  for (int i = 0; i <= s.num_layers; ++i) mb->inputs.push_back(ctx_.Activation(static_cast<size_t>(NC)));
  if (options_.recompute != 2) {
    for (int i = 0; i < s.num_layers; ++i)
      mb->saved.push_back(AllocateBlockActivations(ctx_, options_.recompute == 0));
  }

  if (s.has_embedding) {
    // The workspace is free outside the blocks: the lookup's fp32 sum (and its rows with sequence
    // parallelism) are made there.
    EmbeddingForward(ctx_, Weights(), params_, mb->tokens.as_ints(), mb->inputs[0], workspace_);
  } else {
    TimedScope timed(clock_, Phase::kPpWait);
    RecvStream(mb->inputs[0], NC, P, grid_.StageRank(grid_.pp_rank - 1), 2 * j, grid_.world);
  }
  for (int i = 0; i < s.num_layers; ++i) {
    BlockActivations& a = options_.recompute == 2 ? *recompute_ : mb->saved[i];
    BlockForward(ctx_, Weights(), params_.blocks[i], mb->inputs[i], a, workspace_, mb->inputs[i + 1]);
  }
  if (s.has_head) {
    const double tokens_per_step = static_cast<double>(global_batch) * T;
    // The gradient of the stage output goes to dx_, where this micro-batch's backward pass, next
    // on the last stage, takes it.
    HeadForwardBackward(ctx_, Weights(), grads_.data(), params_, mb->inputs.back(), mb->targets.as_ints(),
                        loss_scale_ / tokens_per_step, workspace_, dx_, MicroBatchLosses() + j);
    if (LastMicroBatch(j)) SumRowGradientsOverTp(ctx_, grads_.data(), params_);
    if (sync_last) sync_->Ready(grads_.data(), params_.block_begin.back(), clock_);
  } else {
    mb->send = SendStream(mb->inputs.back(), NC, P, grid_.StageRank(grid_.pp_rank + 1), 2 * j, grid_.world);
  }
  in_flight_.push_back(std::move(mb));
}

void Trainer::Backward(int j, bool sync_last) {
  const int64_t NC = ctx_.StreamValues();
  const int P = options_.precision;
  const Shard& s = ctx_.shard;
  MicroBatch& mb = *in_flight_.front();
  if (s.has_head) {
    // 1F1B has no warm-up on the last stage: each micro-batch's backward follows its forward, so
    // dx_ still holds the gradient the head wrote.
    if (in_flight_.size() != 1) throw std::logic_error("the last stage runs a backward pass right after its forward");
  } else {
    TimedScope timed(clock_, Phase::kPpWait);
    RecvStream(dx_, NC, P, grid_.StageRank(grid_.pp_rank + 1), 2 * j + 1, grid_.world);
  }
  for (int i = s.num_layers - 1; i >= 0; --i) {
    if (options_.recompute == 2) {
      BlockForward(ctx_, Weights(), params_.blocks[i], mb.inputs[i], *recompute_, workspace_, recompute_out_);
    }
    const BlockActivations& a = options_.recompute == 2 ? *recompute_ : mb.saved[i];
    BlockBackward(ctx_, Weights(), grads_.data(), params_.blocks[i], mb.inputs[i], a, workspace_, dx_);
    if (LastMicroBatch(j)) SumRowGradientsOverTp(ctx_, grads_.data(), params_.blocks[i]);
    if (sync_last) sync_->Ready(grads_.data(), params_.block_begin[i], clock_);
  }
  if (s.has_embedding) {
    EmbeddingBackward(ctx_, grads_.data(), params_, mb.tokens.as_ints(), dx_, workspace_);
  } else {
    SendGradient(dx_, grid_.StageRank(grid_.pp_rank - 1), 2 * j + 1);
  }
  if (mb.send.active()) {
    TimedScope timed(clock_, Phase::kPpWait);
    mb.send.Wait();
  }
  in_flight_.pop_front();
}

void Trainer::RunSchedule(int64_t step, bool sync) {
  // 1F1B (PipeDream-flush): stage s runs min(p - s - 1, M) forward passes, then alternates one
  // forward and one backward, then drains the remaining backward passes.
  const int M = options_.num_micro_batches;
  const int warmup = std::min(grid_.pp - grid_.pp_rank - 1, M);
  if (sync) sync_->Begin();
  for (int j = 0; j < warmup; ++j) {
    Forward(step, j, sync && j == M - 1);
    IssueQueuedSends();  // the next stage starts on micro-batch j now, not at this stage's first backward
  }
  for (int j = 0; j < M - warmup; ++j) {
    Forward(step, warmup + j, sync && warmup + j == M - 1);
    Backward(j, sync && j == M - 1);
  }
  for (int j = M - warmup; j < M; ++j) Backward(j, sync && j == M - 1);
  {
    TimedScope timed(clock_, Phase::kPpWait);
    for (auto& s : sends_) s->request.Wait();
  }
  // Tied embeddings over several stages: the first and last stage add their gradients.
  if (dims_.tied && grid_.pp > 1 && (grid_.first_stage() || grid_.last_stage())) {
    const TensorSpec* wte = nullptr;
    for (const TensorSpec& t : params_.tensors) {
      if (t.name == "wte") wte = &t;
    }
    AllReduceSum(grads_.data() + wte->offset, wte->size, grid_.embedding_comm, clock_, Phase::kPpWait);
  }
}

double* Trainer::MicroBatchLosses() {
  return reinterpret_cast<double*>(losses_.data());
}

double Trainer::StepLossSum() {
  if (!ctx_.shard.has_head) return 0;
  std::vector<double> host(static_cast<size_t>(options_.num_micro_batches));
  Download(host.data(), MicroBatchLosses(), host.size() * sizeof(double));
  double sum = 0;
  for (double micro_batch : host) sum += micro_batch;  // in micro-batch order
  return sum;
}

double Trainer::ComputeGradients(int64_t step) {
  clock_.Reset();
  Fill(grads_.data(), padded_count_, 0);
  RunSchedule(step, false);
  double loss = StepLossSum();
  const bool counts = grid_.last_stage() && grid_.tp_rank == 0;
  double local = counts ? loss : 0.0;
  Allreduce(&local, &loss, 1, MPI_DOUBLE, MPI_SUM, grid_.world);
  const double tokens = static_cast<double>(ctx_.B) * options_.num_micro_batches * grid_.dp * dims_.T;
  return loss / tokens;
}

StepStats Trainer::Step(int64_t step) {
  StepStats stats;
  Synchronize();
  Barrier(grid_.world);
  const double start = MPI_Wtime();
  clock_.Reset();
  Fill(grads_.data(), padded_count_, 0);
  const bool zero = options_.zero1 && grid_.dp > 1;
  RunSchedule(step, sync_ != nullptr);
  if (sync_ != nullptr) {
    sync_->Finish(grads_.data(), clock_);
  } else if (zero) {
    TimedScope timed(clock_, Phase::kDpComm);
    DeviceReduceScatter(grads_.data(), grad_shard_.data(), shard_end_ - shard_begin_, grid_.dp_comm);
  }
  stats.loss_scale = loss_scale_;
  Optimize(stats);
  {
    TimedScope timed(clock_, Phase::kOptimizer);
    const bool counts = grid_.last_stage() && grid_.tp_rank == 0;
    // Read after the optimizer is queued (it waits for the device anyway), not before.
    double local = counts ? StepLossSum() : 0.0, total = 0;
    Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, grid_.world);
    const double tokens = static_cast<double>(ctx_.B) * options_.num_micro_batches * grid_.dp * dims_.T;
    stats.loss = total / tokens;
  }
  Synchronize();  // the step ends when the device's last kernel does
  stats.seconds = MPI_Wtime() - start;
  clock_.Settle();
  double other = 0;
  for (Phase p : {Phase::kTpComm, Phase::kPpWait, Phase::kDpComm, Phase::kOptimizer}) other += clock_.Get(p);
  stats.phases = clock_.times();
  stats.phases.Add(Phase::kCompute, std::max(0.0, stats.seconds - other));
  return stats;
}

void Trainer::Optimize(StepStats& stats) {
  const bool zero = options_.zero1 && grid_.dp > 1;
  const int64_t lo = shard_begin_, hi = shard_end_;
  real* g = zero ? grad_shard_.data() : grads_.data();
  real* master = options_.precision != 0 ? master_.data() : weights_.data() + lo;
  // The update runs on [lo, hi): this rank's ZeRO shard, or all its parameters.
  // The pieces of each tensor inside [lo, hi), as offsets from lo.
  auto for_each_piece = [&](const std::function<void(const TensorSpec&, int64_t, int64_t)>& fn) {
    for (const TensorSpec& t : params_.tensors) {
      const int64_t a = std::max(lo, t.offset), b = std::min(hi, t.offset + t.size);
      if (a < b) fn(t, a - lo, b - a);
    }
  };
  double sums[2] = {0, 0};  // squared norm, non-finite values
  {
    TimedScope timed(clock_, Phase::kOptimizer);
    if (zero || grid_.dp_rank == 0) {
      std::vector<DeviceRange> counted;  // one wait for the device, not one per tensor
      for_each_piece([&](const TensorSpec& t, int64_t at, int64_t n) {
        if (t.tied_copy || (t.tp_replicated && grid_.tp_rank != 0)) return;
        counted.push_back({g + at, n});
      });
      sums[0] = SumOfSquares(counted);
    }
    sums[1] = static_cast<double>(CountNonFinite(g, hi - lo));
    Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, grid_.world);
  }
  stats.grad_norm = std::sqrt(sums[0]) / loss_scale_;
  if (sums[1] > 0 && options_.precision == 1) {
    // fp16 overflow: skip the update and halve the loss scale.
    stats.skipped = true;
    loss_scale_ = std::max(1.0, loss_scale_ / 2);
    good_steps_ = 0;
    return;
  }
  {
    TimedScope timed(clock_, Phase::kOptimizer);
    const double clip =
        options_.clip > 0 && stats.grad_norm > options_.clip ? options_.clip / (stats.grad_norm + 1e-6) : 1.0;
    const double factor = clip / loss_scale_;
    if (factor != 1.0) Scale(g, hi - lo, static_cast<real>(factor));
    ++adam_steps_;
    const real c1 = static_cast<real>(1 - std::pow(options_.beta1, adam_steps_));
    const real c2 = static_cast<real>(1 - std::pow(options_.beta2, adam_steps_));
    for_each_piece([&](const TensorSpec& t, int64_t at, int64_t n) {
      AdamWUpdate(master + at, g + at, m_.data() + at, v_.data() + at, n, static_cast<real>(options_.lr),
                  static_cast<real>(options_.beta1), static_cast<real>(options_.beta2),
                  static_cast<real>(options_.eps), static_cast<real>(t.decay ? options_.weight_decay : 0.0),
                  c1, c2);
    });
    if (options_.precision != 0) Round16Bit(weights_.bits16() + lo, master, hi - lo, options_.precision);
  }
  if (zero) {
    TimedScope gather(clock_, Phase::kDpComm);
    if (options_.precision != 0) {
      DeviceAllGather16(weights_.bits16(), hi - lo, grid_.dp_comm);
    } else {
      DeviceAllGather(weights_.data(), hi - lo, grid_.dp_comm);
    }
  }
  if (options_.precision == 1 && ++good_steps_ >= options_.loss_scale_window) {
    loss_scale_ *= 2;
    good_steps_ = 0;
  }
}

std::map<std::string, std::vector<double>> Trainer::Gather(const std::vector<real>& local, bool gradients) const {
  const ModelDims& d = dims_;
  const ParameterLayout whole = LayoutParameters(d, ShardOf(d, 1, 0, 1, 0));
  std::map<std::string, int64_t> global_offset;
  for (const TensorSpec& t : whole.tensors) global_offset[t.name] = t.offset;
  std::vector<double> global(static_cast<size_t>(whole.count), 0.0);
  const bool replica_counts = gradients || grid_.dp_rank == 0;
  if (replica_counts) {
    const double unscale = gradients ? 1.0 / loss_scale_ : 1.0;
    for (const TensorSpec& t : params_.tensors) {
      if (t.tp_replicated && grid_.tp_rank != 0) continue;
      if (t.tied_copy) continue;  // its gradient was added to the first stage's
      const int64_t base = global_offset.at(t.name);
      for (int64_t i = 0; i < t.size; ++i) global[base + t.GlobalIndex(i)] += local[t.offset + i] * unscale;
    }
  }
  for (int64_t at = 0; at < whole.count; at += kMaxCount) {
    const int count = static_cast<int>(std::min(kMaxCount, whole.count - at));
    MPI_Reduce(grid_.rank == 0 ? MPI_IN_PLACE : global.data() + at, global.data() + at, count, MPI_DOUBLE,
               MPI_SUM, 0, grid_.world);
  }
  std::map<std::string, std::vector<double>> out;
  if (grid_.rank != 0) return out;
  for (const TensorSpec& t : whole.tensors) {
    out[t.name].assign(global.begin() + t.offset, global.begin() + t.offset + t.size);
  }
  return out;
}

std::map<std::string, std::vector<double>> Trainer::GatherWeights() const {
  return Gather(LoadWeights(), false);
}
std::map<std::string, std::vector<double>> Trainer::GatherGradients() const {
  std::vector<real> grads(static_cast<size_t>(padded_count_));
  Download(grads.data(), grads_.data(), grads.size() * sizeof(real));
  return Gather(grads, true);
}

double Trainer::Parameter(int64_t offset) const {
  if (options_.precision != 0) throw std::logic_error("Trainer::Parameter: gradient checks run in fp32 storage");
  real value;
  Download(&value, weights_.data() + offset, sizeof(real));
  return value;
}

void Trainer::SetParameter(int64_t offset, double value) {
  if (options_.precision != 0) throw std::logic_error("Trainer::SetParameter: gradient checks run in fp32 storage");
  const real v = static_cast<real>(value);
  Upload(weights_.data() + offset, &v, sizeof(real));
}

double Trainer::Gradient(int64_t offset) const {
  real value;
  Download(&value, grads_.data() + offset, sizeof(real));
  return value / loss_scale_;
}

}  // namespace tunepar::core
