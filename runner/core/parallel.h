// The process grid of a layout over MPI, and the phases a step's time is charged to (the
// collectives timed into them are the comm layer's: comm.h AllReduceSum, AllReduceMax).
//
// Rank order is the one the performance model assumes (base/rank_order.h): tensor-parallel ranks
// innermost (on one node), then context-parallel, data-parallel, pipeline stages:
//   rank = tp_rank + tp (cp_rank + cp (dp_rank + dp pp_rank))
// so a TP group is tp consecutive ranks, CP members are tp ranks apart, DP members tp cp apart and
// stage neighbours tp cp dp ranks apart. The CP ranks of one dp rank read the same sequences, each
// its part of them (block.h), and hold the same weights: gradients are summed, and ZeRO shards,
// over the dp x cp group (Megatron-Core's dp-cp group; Layout::ZeroGroup). Hybrid sharding splits dp into shard x replicate, shard inner
// (dp_rank = shard_rank + shard replicate_rank: base/rank_order.h): ZeRO shards over the shard
// group and all-reduces the gradient shard across replicas. Groups come from MPI_Comm_split;
// node-local ranks from MPI_Comm_split_type.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "base/rank_order.h"
#include "base/status.h"
#include "runner/core/ops.h"
#include "runner/core/real.h"

namespace tunepar::core {

// Where a rank's time goes (the runner's per-phase breakdown).
enum class Phase { kCompute, kTpComm, kPpWait, kDpComm, kOptimizer };
inline constexpr int kNumPhases = 5;
std::string_view ToString(Phase phase);  // "compute", "tp_comm", "pp_wait", "dp_comm", "optimizer"

// Seconds per phase of one step on one rank.
class PhaseTimes {
 public:
  void Add(Phase phase, double seconds) { seconds_[static_cast<int>(phase)] += seconds; }
  double Get(Phase phase) const { return seconds_[static_cast<int>(phase)]; }

 private:
  std::array<double, kNumPhases> seconds_{};
};

// The phases of a step, as the device ran them: a span is two events on the compute stream (its
// start runs once the work queued before it has, its stop once the work inside it has), so a
// collective's span is the communication alone, an exposed wait for the communication stream is
// the wait alone, and nothing queued asynchronously is charged to the call that happens to wait
// for it. Spans are resolved by Settle, after the step's last device wait (the collectives do not
// wait for the device; copies to and from the host still do); compute is what is left of the step. On the CPU backend the events are
// host times, so a span is the host's time inside it.
class PhaseClock {
 public:
  // Forgets the step's spans and times (their events are kept for the next step).
  void Reset();
  size_t Begin(Phase phase);  // records the start of a span; returns its number
  void End(size_t span);      // records its stop
  // Adds every span's device time to its phase (waits for their events).
  void Settle();
  const PhaseTimes& times() const { return times_; }
  double Get(Phase phase) const { return times_.Get(phase); }

 private:
  struct Span {
    Phase phase = Phase::kCompute;
    DeviceEvent start, stop;
  };
  PhaseTimes times_;
  std::vector<Span> spans_;
  size_t used_ = 0, settled_ = 0;
};

// Times a scope into a phase (a span of the compute stream).
class TimedScope {
 public:
  TimedScope(PhaseClock& clock, Phase phase) : clock_(clock), span_(clock.Begin(phase)) {}
  // A device error while the scope unwinds would fail the stop's record too: it surfaces at the
  // next device call, and an exception escaping a destructor would end the process unreported.
  ~TimedScope() {
    try {
      clock_.End(span_);
    } catch (const std::exception&) {
    }
  }
  TimedScope(const TimedScope&) = delete;
  TimedScope& operator=(const TimedScope&) = delete;

 private:
  PhaseClock& clock_;
  size_t span_;
};

inline MPI_Datatype MpiReal() {
  return sizeof(real) == 8 ? MPI_DOUBLE : MPI_FLOAT;
}

struct ProcessGrid {
  int world_size = 1, rank = 0;
  int tp = 1, pp = 1, dp = 1, cp = 1;
  int tp_rank = 0, pp_rank = 0, dp_rank = 0, cp_rank = 0;
  // dp = dp_shard x dp_replicate; ZeRO's shard group is cp x dp_shard ranks (`shard` of them),
  // shard_rank this rank's place in it (ascending world rank).
  int dp_replicate = 1, shard = 1;
  int shard_rank = 0, replicate_rank = 0;
  RankOrder order;  // which ranks form each group (base/rank_order.h)
  int local_rank = 0, local_size = 1;  // on this node
  MPI_Comm world = MPI_COMM_WORLD;
  MPI_Comm tp_comm = MPI_COMM_NULL;    // the tp ranks of one stage and replica
  // The ranks gradients are summed over: the dp replicas and cp ranks of one (stage, tp rank).
  MPI_Comm dp_comm = MPI_COMM_NULL;
  MPI_Comm cp_comm = MPI_COMM_NULL;    // the cp ranks of one (stage, tp rank, dp rank): the K/V ring
  // ZeRO's shard group (dp_comm itself when dp_replicate is 1) and the replicas of one shard rank
  // (MPI_COMM_NULL when dp_replicate is 1).
  MPI_Comm shard_comm = MPI_COMM_NULL;
  MPI_Comm replicate_comm = MPI_COMM_NULL;
  MPI_Comm node_comm = MPI_COMM_NULL;  // the ranks sharing this node's memory
  // The first and last stage of one pipeline (tied embeddings with pp > 1), else MPI_COMM_NULL.
  MPI_Comm embedding_comm = MPI_COMM_NULL;

  int GradientGroupSize() const { return dp * cp; }  // dp_comm's ranks
  // One of the replicas that hold the same weights and gradients after their sum (dp and cp rank 0).
  bool first_replica() const { return dp_rank == 0 && cp_rank == 0; }
  bool first_stage() const { return pp_rank == 0; }
  bool last_stage() const { return pp_rank == pp - 1; }
  // The world rank of this rank's counterpart (same tp and dp rank) at pipeline stage `stage`.
  int StageRank(int stage) const { return order.WithCoordinate(rank, GridDim::kPp, stage); }
};

// Fails (kInvalidArgument) when tp cp pp dp is not the world size or dp_replicate does not divide dp.
Result<ProcessGrid> CreateProcessGrid(MPI_Comm world, int tp, int pp, int dp, int dp_replicate = 1, int cp = 1);
void FreeProcessGrid(ProcessGrid& grid);

}  // namespace tunepar::core
