#include "runner/core/sharding.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "runner/core/ops.h"

namespace tunepar::core {

ShardLayout ShardLayout::Whole(int64_t count, int ranks, int rank) {
  ShardLayout s;
  s.ranks_ = ranks;
  s.rank_ = rank;
  s.values_ = count / ranks;
  s.units_.push_back({0, count, s.values_, 0});
  return s;
}

ShardLayout ShardLayout::PerUnit(const ParameterLayout& p, int ranks, int rank) {
  ShardLayout s;
  s.ranks_ = ranks;
  s.rank_ = rank;
  for (const ParameterUnit& u : p.units) {
    if (u.size() % ranks != 0) throw std::logic_error("ShardLayout::PerUnit: a unit not padded to the shard group");
    s.units_.push_back({u.begin, u.size(), u.size() / ranks, s.values_});
    s.values_ += u.size() / ranks;
  }
  return s;
}

void ShardLayout::ForEachPiece(const std::vector<TensorSpec>& tensors,
                               const std::function<void(const TensorSpec&, int64_t, int64_t, int64_t)>& fn) const {
  for (const UnitShard& u : units_) {
    const int64_t lo = u.PieceBegin(rank_), hi = lo + u.per_rank;
    for (const TensorSpec& t : tensors) {
      const int64_t a = std::max(lo, t.offset), b = std::min(hi, t.offset + t.size);
      if (a < b) fn(t, a, u.at + (a - lo), b - a);
    }
  }
}

std::vector<real> ShardLayout::Extract(const std::vector<real>& flat) const {
  std::vector<real> shard(static_cast<size_t>(values_));
  for (const UnitShard& u : units_) {
    const auto from = flat.begin() + u.PieceBegin(rank_);
    std::copy(from, from + u.per_rank, shard.begin() + u.at);
  }
  return shard;
}

void ShardLayout::Place(const std::vector<real>& shard, std::vector<real>& flat) const {
  for (const UnitShard& u : units_) {
    const auto from = shard.begin() + u.at;
    std::copy(from, from + u.per_rank, flat.begin() + u.PieceBegin(rank_));
  }
}

UnitGatherer::UnitGatherer(const ShardLayout& shards, const Buffer& weight_shard, int precision,
                           TrackingAllocator& allocator, MPI_Comm group)
    : shards_(shards), weight_shard_(weight_shard), precision_(precision), allocator_(allocator), group_(group) {}

void UnitGatherer::BeginStep(std::vector<int> uses) {
  if (next_.unit >= 0) next_.request.Wait();  // nothing may still write a buffer about to be freed
  current_ = Gathered();
  next_ = Gathered();
  uses_ = std::move(uses);
  next_use_ = 0;
}

UnitGatherer::Gathered UnitGatherer::Start(int unit) {
  const UnitShard& u = shards_.unit(unit);
  Gathered g;
  g.unit = unit;
  const int64_t mine = u.per_rank * shards_.rank();
  if (precision_ == 0) {
    g.weights = Buffer(allocator_, MemoryCategory::kGatheredWeights, static_cast<size_t>(u.size), 4.0, false);
    Copy(g.weights.data() + mine, weight_shard_.data() + u.at, u.per_rank);
    g.request = DeviceIallGather(g.weights.data(), u.per_rank, group_);
  } else {
    g.weights = Buffer::SixteenBit(allocator_, MemoryCategory::kGatheredWeights, static_cast<size_t>(u.size));
    Copy16(g.weights.bits16() + mine, weight_shard_.bits16() + u.at, u.per_rank);
    g.request = DeviceIallGather16(g.weights.bits16(), u.per_rank, group_);
  }
  return g;
}

StageWeights UnitGatherer::Acquire(int unit, PhaseClock& clock) {
  if (current_.unit >= 0) throw std::logic_error("UnitGatherer: a unit acquired before the previous one was released");
  if (next_use_ >= uses_.size() || uses_[next_use_] != unit)
    throw std::logic_error("UnitGatherer: units used out of the step's order");
  {
    TimedScope timed(clock, Phase::kDpComm);  // what the previous unit's compute did not hide
    current_ = next_.unit == unit ? std::move(next_) : Start(unit);
    next_ = Gathered();
    current_.request.Wait();
  }
  if (++next_use_ < uses_.size()) next_ = Start(uses_[next_use_]);
  if (precision_ == 0) return {current_.weights.data(), nullptr, 0};
  return {nullptr, current_.weights.bits16(), precision_};
}

void UnitGatherer::Release() {
  current_ = Gathered();
}

}  // namespace tunepar::core
