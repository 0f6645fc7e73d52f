#include "runner/core/trainer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
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

// The block context: this stage's blocks (the split the options give, else even), the storage
// and attention settings, the TP and CP groups, and this rank's tokens of each sequence.
void Trainer::SetUpContext(const ModelDims& dims, const ProcessGrid& grid, const TrainingOptions& options,
                           TrackingAllocator& allocator) {
  ctx_.dims = dims;
  const StageSplit split =
      options.stage_layers.empty() ? EvenSplit(dims.L, grid.pp) : StageSplit{options.stage_layers};
  if (split.Stages() != grid.pp || std::accumulate(split.layers.begin(), split.layers.end(), 0) != dims.L)
    throw std::logic_error("Trainer: the stage split " + split.Text() + " is not of " + std::to_string(dims.L) +
                           " layers over " + std::to_string(grid.pp) + " stages");
  ctx_.shard = ShardOf(dims, grid.tp, grid.tp_rank, split, grid.pp_rank);
  ctx_.B = options.micro_batch;
  ctx_.precision = options.precision;
  ctx_.flash_attention = options.flash_attention;
  ctx_.allocator = &allocator;
  ctx_.clock = &clock_;
  ctx_.tp_comm = grid.tp_comm;
  ctx_.sequence_parallel = options.sequence_parallel && grid.tp > 1;
  ctx_.cp = grid.cp;
  ctx_.cp_rank = grid.cp_rank;
  ctx_.cp_comm = grid.cp_comm;
  ctx_.dims.T = dims.T / grid.cp;  // this rank's tokens of each sequence (block.h)
}

Trainer::Trainer(const ModelDims& dims, const ProcessGrid& grid, const TrainingOptions& options,
                 const TokenSource& data, TrackingAllocator& allocator)
    : dims_(dims), grid_(grid), options_(options), data_(data), allocator_(allocator) {
  SetUpContext(dims, grid, options, allocator);
  loss_scale_ = options.precision == 1 ? options.initial_loss_scale : 1.0;

  const bool mixed = options.precision != 0;
  zero_ = grid.shard > 1 ? options.zero : 0;
  const int S = grid.shard;
  params_ = LayoutParameters(dims, ctx_.shard, zero_ >= 2 ? S : 0);  // FSDP units for ZeRO-2/3
  const int G = grid.GradientGroupSize();
  padded_count_ = zero_ >= 2 ? params_.count : (params_.count + G - 1) / G * G;
  if (zero_ >= 2) {
    shards_ = ShardLayout::PerUnit(params_, S, grid.shard_rank);
  } else if (zero_ == 1) {
    shards_ = ShardLayout::Whole(padded_count_, S, grid.shard_rank);
  } else {
    shards_ = ShardLayout::Whole(params_.count, 1, 0);
  }
  const size_t optimized = static_cast<size_t>(shards_.values());

  auto storage = [&](MemoryCategory category, size_t values) {
    return mixed ? Buffer::SixteenBit(allocator, category, values) : Buffer(allocator, category, values, 4.0);
  };
  if (zero_ == 3) {
    weight_shard_ = storage(MemoryCategory::kWeights, optimized);
  } else {
    weights_ = storage(MemoryCategory::kWeights, static_cast<size_t>(padded_count_));
  }
  if (zero_ < 2) grads_ = Buffer(allocator, MemoryCategory::kGradients, padded_count_, 4.0);
  if (zero_ >= 1) grad_shard_ = Buffer(allocator, MemoryCategory::kGradients, optimized, 4.0);
  if (mixed) master_ = Buffer(allocator, MemoryCategory::kOptimizer, optimized, 4.0);
  m_ = Buffer(allocator, MemoryCategory::kOptimizer, optimized, 4.0);
  v_ = Buffer(allocator, MemoryCategory::kOptimizer, optimized, 4.0);

  std::vector<real> host(static_cast<size_t>(padded_count_), real(0));
  for (const TensorSpec& t : params_.tensors) {
    for (int64_t i = 0; i < t.size; ++i) {
      host[t.offset + i] = static_cast<real>(InitialValue(t, t.GlobalIndex(i), options.seed));
    }
  }
  if (mixed) {
    const std::vector<real> shard = shards_.Extract(host);
    Upload(master_.data(), shard.data(), optimized * sizeof(real));
  }
  StoreWeights(host);
  if (zero_ == 3) {
    gatherer_ = std::make_unique<UnitGatherer>(shards_, weight_shard_, options.precision, allocator, grid.shard_comm);
  }

  workspace_ = AllocateBlockWorkspace(ctx_, options.recompute == 1);
  dx_ = ctx_.ActivationGradient(static_cast<size_t>(ctx_.StreamValues()));
  if (ctx_.shard.has_head) {  // a double per micro-batch: two reals each
    losses_ = Buffer(allocator, MemoryCategory::kWorkspace, 2 * static_cast<size_t>(options.num_micro_batches), 4.0);
  }
  if (options.recompute == 2) {
    recompute_ = std::make_unique<BlockActivations>(AllocateBlockActivations(ctx_, true));
    recompute_out_ = ctx_.Activation(static_cast<size_t>(ctx_.StreamValues()));
  }
  if (grid.GradientGroupSize() > 1 && zero_ == 0) {
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

namespace {

// A buffer at storage width from fp32 host values (rounded to the 16-bit grid with 16-bit
// storage), and back (exactly).
void StoreValues(Buffer& to, const std::vector<real>& host, int precision) {
  if (precision == 0) {
    Upload(to.data(), host.data(), host.size() * sizeof(real));
    return;
  }
  std::vector<uint16_t> bits(host.size());
  for (size_t i = 0; i < host.size(); ++i)
    bits[i] = To16BitValue(static_cast<float>(RoundTo(host[i], precision)), precision);
  Upload(to.bits16(), bits.data(), bits.size() * sizeof(uint16_t));
}

std::vector<real> LoadValues(const Buffer& from, size_t n, int precision) {
  std::vector<real> host(n);
  if (precision == 0) {
    Download(host.data(), from.data(), n * sizeof(real));
    return host;
  }
  std::vector<uint16_t> bits(n);
  Download(bits.data(), from.bits16(), n * sizeof(uint16_t));
  for (size_t i = 0; i < n; ++i) host[i] = From16BitValue(bits[i], precision);
  return host;
}

}  // namespace

void Trainer::StoreWeights(const std::vector<real>& host) {
  if (zero_ == 3) {
    StoreValues(weight_shard_, shards_.Extract(host), options_.precision);
  } else {
    StoreValues(weights_, host, options_.precision);
  }
}

std::vector<real> Trainer::LoadWeights() const {
  if (zero_ != 3) return LoadValues(weights_, static_cast<size_t>(padded_count_), options_.precision);
  std::vector<real> flat(static_cast<size_t>(padded_count_), real(0));
  shards_.Place(LoadValues(weight_shard_, static_cast<size_t>(shards_.values()), options_.precision), flat);
  return flat;
}

int64_t Trainer::Base(int unit) const {
  return zero_ >= 2 ? params_.units[static_cast<size_t>(unit)].begin : 0;
}

StageWeights Trainer::UnitWeights(int unit) {
  if (zero_ == 3) return gatherer_->Acquire(unit, clock_);
  StageWeights w = Weights();
  const int64_t base = Base(unit);
  if (w.values != nullptr) w.values += base;
  if (w.bits16 != nullptr) w.bits16 += base;
  return w;
}

void Trainer::ReleaseWeights() {
  if (zero_ == 3) gatherer_->Release();
}

Buffer Trainer::UnitGradients(int unit) {
  if (zero_ < 2) return Buffer();
  return Buffer(allocator_, MemoryCategory::kCommBuffers, static_cast<size_t>(params_.units[unit].size()), 4.0);
}

real* Trainer::GradientsOf(Buffer& unit_gradients) {
  return zero_ >= 2 ? unit_gradients.data() : grads_.data();
}

void Trainer::FinishGradients(int unit, Buffer& unit_gradients, bool last_micro_batch,
                              const std::function<void(real*)>& sum_rows) {
  if (zero_ < 2) {
    if (last_micro_batch) sum_rows(grads_.data());
    return;
  }
  sum_rows(unit_gradients.data());
  const UnitShard& u = shards_.unit(unit);
  TimedScope timed(clock_, Phase::kDpComm);
  Buffer reduced(allocator_, MemoryCategory::kCommBuffers, static_cast<size_t>(u.per_rank), 4.0, false);
  DeviceReduceScatter(unit_gradients.data(), reduced.data(), u.per_rank, grid_.shard_comm);
  Accumulate(grad_shard_.data() + u.at, reduced.data(), u.per_rank);
  unit_gradients.Reset();
}

std::vector<int> Trainer::StepUnitUses() const {
  const Shard& s = ctx_.shard;
  std::vector<int> forward, backward;  // the embedding's backward reads no weights
  if (s.has_embedding) forward.push_back(params_.embedding_unit);
  for (int i = 0; i < s.num_layers; ++i) forward.push_back(params_.BlockUnit(i));
  if (s.has_head) forward.push_back(params_.HeadComputeUnit());
  for (int i = s.num_layers - 1; i >= 0; --i) backward.push_back(params_.BlockUnit(i));
  // RunSchedule's passes: warm-up forwards, one forward and one backward each, the drain.
  const int M = options_.num_micro_batches, warmup = std::min(grid_.pp - grid_.pp_rank - 1, M);
  std::vector<int> uses;
  auto add = [&uses](const std::vector<int>& pass) { uses.insert(uses.end(), pass.begin(), pass.end()); };
  for (int j = 0; j < warmup; ++j) add(forward);
  for (int j = 0; j < M - warmup; ++j) {
    add(forward);
    add(backward);
  }
  for (int j = M - warmup; j < M; ++j) add(backward);
  return uses;
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
  // This rank's tokens of each sequence (all T, or with context parallelism its two chunks) and
  // their next tokens, the targets.
  const int Tl = ctx_.dims.T, chunk = grid_.cp == 1 ? T : Tl / 2;
  for (int b = 0; b < B; ++b) {
    const int64_t index =
        step * global_batch + (int64_t{grid_.dp_rank} * options_.num_micro_batches + j) * B + b;
    data_.Sample(index, T + 1, sample.data());
    for (int half = 0; half * chunk < Tl; ++half) {
      const int from = grid_.cp == 1 ? 0 : ctx_.ChunkStart(half);
      const int64_t to = int64_t{b} * Tl + int64_t{half} * chunk;
      std::copy(sample.begin() + from, sample.begin() + from + chunk, tokens.begin() + to);
      std::copy(sample.begin() + from + 1, sample.begin() + from + chunk + 1, targets.begin() + to);
    }
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
    const int u = params_.embedding_unit;
    const StageWeights weights = UnitWeights(u);
    EmbeddingForward(ctx_, weights, EndsRebased(params_, Base(u)), mb->tokens.as_ints(), mb->inputs[0], workspace_);
    ReleaseWeights();
  } else {
    TimedScope timed(clock_, Phase::kPpWait);
    RecvStream(mb->inputs[0], NC, P, grid_.StageRank(grid_.pp_rank - 1), 2 * j, grid_.world);
  }
  for (int i = 0; i < s.num_layers; ++i) {
    BlockActivations& a = options_.recompute == 2 ? *recompute_ : mb->saved[i];
    const int u = params_.BlockUnit(i);
    const StageWeights weights = UnitWeights(u);
    BlockForward(ctx_, weights, Rebased(params_.blocks[i], Base(u)), mb->inputs[i], a, workspace_, mb->inputs[i + 1]);
    ReleaseWeights();
  }
  if (s.has_head) {
    const double tokens_per_step = static_cast<double>(global_batch) * T;
    const int u = params_.HeadComputeUnit();
    const ParameterLayout head = EndsRebased(params_, Base(u));
    const StageWeights weights = UnitWeights(u);
    Buffer unit_gradients = UnitGradients(u);
    // The gradient of the stage output goes to dx_, where this micro-batch's backward pass, next
    // on the last stage, takes it.
    HeadForwardBackward(ctx_, weights, GradientsOf(unit_gradients), head, mb->inputs.back(), mb->targets.as_ints(),
                        loss_scale_ / tokens_per_step, workspace_, dx_, MicroBatchLosses() + j);
    ReleaseWeights();
    FinishGradients(u, unit_gradients, LastMicroBatch(j), [&](real* g) { SumRowGradientsOverTp(ctx_, g, head); });
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
    const int u = params_.BlockUnit(i);
    const BlockTensors t = Rebased(params_.blocks[i], Base(u));
    const StageWeights weights = UnitWeights(u);
    if (options_.recompute == 2) {
      BlockForward(ctx_, weights, t, mb.inputs[i], *recompute_, workspace_, recompute_out_);
    }
    const BlockActivations& a = options_.recompute == 2 ? *recompute_ : mb.saved[i];
    Buffer unit_gradients = UnitGradients(u);
    BlockBackward(ctx_, weights, GradientsOf(unit_gradients), t, mb.inputs[i], a, workspace_, dx_);
    ReleaseWeights();
    FinishGradients(u, unit_gradients, LastMicroBatch(j), [&](real* g) { SumRowGradientsOverTp(ctx_, g, t); });
    if (sync_last) sync_->Ready(grads_.data(), params_.block_begin[i], clock_);
  }
  if (s.has_embedding) {
    const int u = params_.embedding_unit;
    Buffer unit_gradients = UnitGradients(u);
    EmbeddingBackward(ctx_, GradientsOf(unit_gradients), EndsRebased(params_, Base(u)), mb.tokens.as_ints(), dx_,
                      workspace_);
    FinishGradients(u, unit_gradients, LastMicroBatch(j), [](real*) {});
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
  if (gatherer_ != nullptr) gatherer_->BeginStep(StepUnitUses());
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
  if (dims_.tied && grid_.pp > 1 && (grid_.first_stage() || grid_.last_stage())) SumTiedEmbeddingGradients();
}

void Trainer::SumTiedEmbeddingGradients() {
  const TensorSpec* wte = nullptr;
  for (const TensorSpec& t : params_.tensors) {
    if (t.name == "wte") wte = &t;
  }
  if (zero_ < 2) {
    AllReduceSum(grads_.data() + wte->offset, wte->size, grid_.embedding_comm, clock_, Phase::kPpWait);
    return;
  }
  // Sharded gradients: the first stage's embedding unit and the last stage's head unit shard
  // differently, so the unit holding wte is gathered whole (for the moment), its wte summed, and
  // this rank's piece taken back.
  const UnitShard& u = shards_.unit(grid_.first_stage() ? params_.embedding_unit : params_.head_unit);
  const int64_t mine = u.per_rank * grid_.shard_rank;
  Buffer whole(allocator_, MemoryCategory::kCommBuffers, static_cast<size_t>(u.size), 4.0, false);
  Copy(whole.data() + mine, grad_shard_.data() + u.at, u.per_rank);
  {
    TimedScope timed(clock_, Phase::kDpComm);
    DeviceAllGather(whole.data(), u.per_rank, grid_.shard_comm);
  }
  AllReduceSum(whole.data() + (wte->offset - u.begin), wte->size, grid_.embedding_comm, clock_, Phase::kPpWait);
  Copy(grad_shard_.data() + u.at, whole.data() + mine, u.per_rank);
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
  if (zero_ < 2) Fill(grads_.data(), padded_count_, 0);
  if (zero_ >= 2) Fill(grad_shard_.data(), shards_.values(), 0);
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
  if (zero_ < 2) Fill(grads_.data(), padded_count_, 0);
  if (zero_ >= 2) Fill(grad_shard_.data(), shards_.values(), 0);  // accumulated over micro-batches
  RunSchedule(step, sync_ != nullptr);
  if (sync_ != nullptr) {
    sync_->Finish(grads_.data(), clock_);
  } else if (zero_ == 1) {
    TimedScope timed(clock_, Phase::kDpComm);
    DeviceReduceScatter(grads_.data(), grad_shard_.data(), shards_.values(), grid_.shard_comm);
  }
  if (zero_ >= 1) {  // hybrid sharding: the shard's sum across replicas (nothing with one replica)
    AllReduceSum(grad_shard_.data(), shards_.values(), grid_.replicate_comm, clock_, Phase::kDpComm);
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

real* Trainer::MasterAt(int64_t flat, int64_t at) {
  if (options_.precision != 0) return master_.data() + at;
  return zero_ == 3 ? weight_shard_.data() + at : weights_.data() + flat;
}

void Trainer::Optimize(StepStats& stats) {
  // The update runs on this rank's shard (all its parameters without ZeRO), tensor piece by piece.
  const int64_t n = shards_.values();
  real* g = zero_ >= 1 ? grad_shard_.data() : grads_.data();
  double sums[2] = {0, 0};  // squared norm, non-finite values
  {
    TimedScope timed(clock_, Phase::kOptimizer);
    // Each value counted once: one replica's shards (every replica holds the same sums).
    if (zero_ >= 1 ? grid_.replicate_rank == 0 : grid_.first_replica()) {
      std::vector<DeviceRange> counted;  // one wait for the device, not one per tensor
      shards_.ForEachPiece(params_.tensors, [&](const TensorSpec& t, int64_t, int64_t at, int64_t count) {
        if (t.tied_copy || (t.tp_replicated && grid_.tp_rank != 0)) return;
        counted.push_back({g + at, count});
      });
      sums[0] = SumOfSquares(counted);
    }
    sums[1] = static_cast<double>(CountNonFinite(g, n));
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
    if (factor != 1.0) Scale(g, n, static_cast<real>(factor));
    ++adam_steps_;
    const real c1 = static_cast<real>(1 - std::pow(options_.beta1, adam_steps_));
    const real c2 = static_cast<real>(1 - std::pow(options_.beta2, adam_steps_));
    shards_.ForEachPiece(params_.tensors, [&](const TensorSpec& t, int64_t flat, int64_t at, int64_t count) {
      AdamWUpdate(MasterAt(flat, at), g + at, m_.data() + at, v_.data() + at, count, static_cast<real>(options_.lr),
                  static_cast<real>(options_.beta1), static_cast<real>(options_.beta2),
                  static_cast<real>(options_.eps), static_cast<real>(t.decay ? options_.weight_decay : 0.0),
                  c1, c2);
    });
    if (options_.precision != 0) {
      for (const UnitShard& u : shards_.units()) {
        uint16_t* to = zero_ == 3 ? weight_shard_.bits16() + u.at : weights_.bits16() + u.PieceBegin(shards_.rank());
        Round16Bit(to, master_.data() + u.at, u.per_rank, options_.precision);
      }
    }
  }
  if (zero_ == 1 || zero_ == 2) {  // the updated weights to every rank of the shard group
    TimedScope gather(clock_, Phase::kDpComm);
    for (const UnitShard& u : shards_.units()) {
      if (options_.precision != 0) {
        DeviceAllGather16(weights_.bits16() + u.begin, u.per_rank, grid_.shard_comm);
      } else {
        DeviceAllGather(weights_.data() + u.begin, u.per_rank, grid_.shard_comm);
      }
    }
  }
  if (options_.precision == 1 && ++good_steps_ >= options_.loss_scale_window) {
    loss_scale_ *= 2;
    good_steps_ = 0;
  }
}

std::map<std::string, std::vector<double>> Trainer::Gather(const std::vector<real>& local, bool gradients) const {
  const ModelDims& d = dims_;
  const ParameterLayout whole = LayoutParameters(d, ShardOf(d, 1, 0, EvenSplit(d.L, 1), 0));
  std::map<std::string, int64_t> global_offset;
  for (const TensorSpec& t : whole.tensors) global_offset[t.name] = t.offset;
  std::vector<double> global(static_cast<size_t>(whole.count), 0.0);
  // Gradients: every replica's part of the sum. Weights: one replica's (ZeRO-3: its shard group's
  // pieces).
  const bool replica_counts = gradients || (zero_ == 3 ? grid_.replicate_rank == 0 : grid_.first_replica());
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
  std::vector<real> grads(static_cast<size_t>(padded_count_), real(0));
  if (zero_ < 2) {
    Download(grads.data(), grads_.data(), grads.size() * sizeof(real));
  } else {  // this rank's pieces, each already summed over the shard group
    std::vector<real> shard(static_cast<size_t>(shards_.values()));
    Download(shard.data(), grad_shard_.data(), shard.size() * sizeof(real));
    shards_.Place(shard, grads);
  }
  return Gather(grads, true);
}

double Trainer::Parameter(int64_t offset) const {
  if (options_.precision != 0 || zero_ == 3)
    throw std::logic_error("Trainer::Parameter: gradient checks run in fp32 storage on one rank");
  real value;
  Download(&value, weights_.data() + offset, sizeof(real));
  return value;
}

void Trainer::SetParameter(int64_t offset, double value) {
  if (options_.precision != 0 || zero_ == 3)
    throw std::logic_error("Trainer::SetParameter: gradient checks run in fp32 storage on one rank");
  const real v = static_cast<real>(value);
  Upload(weights_.data() + offset, &v, sizeof(real));
}

double Trainer::Gradient(int64_t offset) const {
  if (zero_ >= 2) throw std::logic_error("Trainer::Gradient: gradient checks run on one rank");
  real value;
  Download(&value, grads_.data() + offset, sizeof(real));
  return value / loss_scale_;
}

}  // namespace tunepar::core
