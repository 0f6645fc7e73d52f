// The process grid of a layout over MPI, and its timed collectives.
//
// Rank order is the one the performance model assumes: tensor-parallel ranks innermost (on one
// node), then data-parallel, then pipeline stages:
//   rank = tp_rank + tp (dp_rank + dp pp_rank)
// so a TP group is tp consecutive ranks, DP members are tp ranks apart and stage neighbours are
// tp dp ranks apart. Groups come from MPI_Comm_split; node-local ranks from MPI_Comm_split_type.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "runner/core/real.h"

namespace tunepar::core {

// Where a rank's time goes (the runner's per-phase breakdown).
enum class Phase { kCompute, kTpComm, kPpWait, kDpComm, kOptimizer };
inline constexpr int kNumPhases = 5;
std::string_view ToString(Phase phase);  // "compute", "tp_comm", "pp_wait", "dp_comm", "optimizer"

// Seconds per phase, accumulated by the timed collectives; compute is what is left of the step.
class PhaseClock {
 public:
  void Add(Phase phase, double seconds) { seconds_[static_cast<int>(phase)] += seconds; }
  double Get(Phase phase) const { return seconds_[static_cast<int>(phase)]; }
  void Reset() { seconds_ = {}; }

 private:
  std::array<double, kNumPhases> seconds_{};
};

// Times a scope into a phase.
class TimedScope {
 public:
  TimedScope(PhaseClock& clock, Phase phase) : clock_(clock), phase_(phase), start_(MPI_Wtime()) {}
  ~TimedScope() { clock_.Add(phase_, MPI_Wtime() - start_); }
  TimedScope(const TimedScope&) = delete;
  TimedScope& operator=(const TimedScope&) = delete;

 private:
  PhaseClock& clock_;
  Phase phase_;
  double start_;
};

inline MPI_Datatype MpiReal() {
  return sizeof(real) == 8 ? MPI_DOUBLE : MPI_FLOAT;
}

struct ProcessGrid {
  int world_size = 1, rank = 0;
  int tp = 1, pp = 1, dp = 1;
  int tp_rank = 0, pp_rank = 0, dp_rank = 0;
  int local_rank = 0, local_size = 1;  // on this node
  MPI_Comm world = MPI_COMM_WORLD;
  MPI_Comm tp_comm = MPI_COMM_NULL;    // the tp ranks of one stage and replica
  MPI_Comm dp_comm = MPI_COMM_NULL;    // the dp replicas of one (stage, tp rank)
  MPI_Comm node_comm = MPI_COMM_NULL;  // the ranks sharing this node's memory
  // The first and last stage of one pipeline (tied embeddings with pp > 1), else MPI_COMM_NULL.
  MPI_Comm embedding_comm = MPI_COMM_NULL;

  bool first_stage() const { return pp_rank == 0; }
  bool last_stage() const { return pp_rank == pp - 1; }
  // The world rank of this rank's counterpart (same tp and dp rank) at pipeline stage `stage`.
  int StageRank(int stage) const { return tp_rank + tp * (dp_rank + dp * stage); }
};

// Fails (kInvalidArgument) when tp pp dp is not the world size.
Result<ProcessGrid> CreateProcessGrid(MPI_Comm world, int tp, int pp, int dp);
void FreeProcessGrid(ProcessGrid& grid);

// In-place sum over `comm` of device data (nothing when the group has one member), through the
// comm layer (comm.h), timed into `phase`.
void AllReduceSum(real* data, int64_t n, MPI_Comm comm, PhaseClock& clock, Phase phase);
void AllReduceMax(real* data, int64_t n, MPI_Comm comm, PhaseClock& clock, Phase phase);

}  // namespace tunepar::core
