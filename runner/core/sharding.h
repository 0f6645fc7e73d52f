// ZeRO's shards of a stage's flat parameters over the shard group of S ranks (ProcessGrid::
// shard_comm), and ZeRO-3's gathering of whole units before they compute.
//
// ZeRO-1 shards the flat buffer (padded to a multiple of S) as one range: rank r owns
// [r n / S, (r + 1) n / S). ZeRO-2 and 3 shard each FSDP unit (ParameterLayout::units: the
// embedding, each block, the head; each padded to a multiple of S) the same way, so that a unit's
// gradients are reduce-scattered, and its weights gathered, as one collective. A rank's shard
// buffers (gradient shard, optimizer states, ZeRO-3's weight shard) hold its piece of each unit
// in unit order. Without ZeRO the one range is the whole stage on every rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "runner/core/block.h"
#include "runner/core/comm.h"
#include "runner/core/memory.h"
#include "runner/core/parameters.h"

namespace tunepar::core {

// One sharded range of the flat parameters: `size` values from flat offset `begin` (a multiple
// of the group size), `per_rank` of them on each rank, this rank's at `at` in its shard buffers.
struct UnitShard {
  int64_t begin = 0, size = 0, per_rank = 0, at = 0;
  // Where rank `rank`'s piece starts in the flat parameters.
  int64_t PieceBegin(int rank) const { return begin + rank * per_rank; }
};

class ShardLayout {
 public:
  ShardLayout() = default;
  // The flat range [0, count) as one range over `ranks` (count a multiple of it): ZeRO-1, or
  // without ZeRO (one rank: the whole stage).
  static ShardLayout Whole(int64_t count, int ranks, int rank);
  // Each unit of `p` (padded to multiples of `ranks`: LayoutParameters' FSDP layout): ZeRO-2/3.
  static ShardLayout PerUnit(const ParameterLayout& p, int ranks, int rank);

  int ranks() const { return ranks_; }
  int rank() const { return rank_; }
  int64_t values() const { return values_; }  // this rank's shard, all units
  const std::vector<UnitShard>& units() const { return units_; }
  const UnitShard& unit(int i) const { return units_[static_cast<size_t>(i)]; }

  // fn(tensor, flat offset, shard offset, n) for each piece of a tensor in this rank's shard.
  void ForEachPiece(const std::vector<TensorSpec>& tensors,
                    const std::function<void(const TensorSpec&, int64_t, int64_t, int64_t)>& fn) const;
  // This rank's shard out of a flat host vector, and a shard put back at its flat offsets.
  std::vector<real> Extract(const std::vector<real>& flat) const;
  void Place(const std::vector<real>& shard, std::vector<real>& flat) const;

 private:
  int ranks_ = 1, rank_ = 0;
  int64_t values_ = 0;
  std::vector<UnitShard> units_;
};

// ZeRO-3 (FSDP): the whole weights of each unit, all-gathered over the shard group from the
// weight shard before the unit computes, freed after. The step's units are used in an order known
// in advance (the 1F1B schedule's passes), so while one unit computes the next one's gather is
// under way (with nccl on the communication stream; MPI_Iallgather otherwise): at most two
// gathered units at a time, counted as gathered_weights.
class UnitGatherer {
 public:
  UnitGatherer(const ShardLayout& shards, const Buffer& weight_shard, int precision, TrackingAllocator& allocator,
               MPI_Comm group);

  // The units the step computes with, in order (a unit may appear many times).
  void BeginStep(std::vector<int> uses);
  // The whole weights of `unit`, the step's next use, at offsets from the unit's begin: waits for
  // its gather (started during the previous use, or now), then starts the next use's gather.
  // Valid until Release, which must come before the next Acquire.
  StageWeights Acquire(int unit, PhaseClock& clock);
  void Release();

 private:
  struct Gathered {
    int unit = -1;
    Buffer weights;  // the unit's size, at storage width
    CommRequest request;
  };
  // Starts the gather of `unit` into a new buffer.
  Gathered Start(int unit);

  const ShardLayout& shards_;
  const Buffer& weight_shard_;
  int precision_;
  TrackingAllocator& allocator_;
  MPI_Comm group_;
  std::vector<int> uses_;
  size_t next_use_ = 0;
  Gathered current_, next_;
};

}  // namespace tunepar::core
