#include "runner/core/parallel.h"

#include <fmt/format.h>

#include <algorithm>

namespace tunepar::core {

std::string_view ToString(Phase phase) {
  switch (phase) {
    case Phase::kCompute: return "compute";
    case Phase::kTpComm: return "tp_comm";
    case Phase::kPpWait: return "pp_wait";
    case Phase::kDpComm: return "dp_comm";
    case Phase::kOptimizer: return "optimizer";
  }
  return "?";
}

void PhaseClock::Reset() {
  times_ = PhaseTimes();
  used_ = settled_ = 0;
}

size_t PhaseClock::Begin(Phase phase) {
  if (used_ == spans_.size()) spans_.emplace_back();
  Span& span = spans_[used_];
  span.phase = phase;
  span.start.Record(Stream::kCompute);
  return used_++;
}

void PhaseClock::End(size_t span) {
  spans_[span].stop.Record(Stream::kCompute);
}

void PhaseClock::Settle() {
  for (; settled_ < used_; ++settled_) {
    const Span& span = spans_[settled_];
    times_.Add(span.phase, std::max(0.0, SecondsBetween(span.start, span.stop)));
  }
}

namespace {
// Splits `world` into `rank`'s group along `dims`, members in ascending world rank; returns this
// rank's place in it.
int SplitAlong(MPI_Comm world, const RankOrder& order, int rank, std::initializer_list<GridDim> dims, MPI_Comm* comm) {
  const std::vector<int> group = order.Group(rank, dims);
  const int place = static_cast<int>(std::find(group.begin(), group.end(), rank) - group.begin());
  MPI_Comm_split(world, group.front(), place, comm);
  return place;
}
}  // namespace

Result<ProcessGrid> CreateProcessGrid(MPI_Comm world, int tp, int pp, int dp, int dp_replicate, int cp) {
  ProcessGrid g;
  MPI_Comm_size(world, &g.world_size);
  MPI_Comm_rank(world, &g.rank);
  if (tp < 1 || pp < 1 || dp < 1 || cp < 1 || tp * cp * pp * dp != g.world_size) {
    return InvalidArgument(fmt::format("layout tp{} x cp{} x pp{} x dp{} = {} ranks, but the job has {} MPI ranks",
                                       tp, cp, pp, dp, tp * cp * pp * dp, g.world_size));
  }
  g.world = world;
  g.tp = tp;
  g.pp = pp;
  g.dp = dp;
  g.cp = cp;
  GridSizes sizes;
  sizes.tp = tp;
  sizes.cp = cp;
  sizes.dp = dp;
  sizes.pp = pp;
  sizes.dp_replicate = dp_replicate;
  Result<RankOrder> order = RankOrder::CreateGrids(sizes);  // the groups the performance model prices
  if (!order.ok()) return order.status();
  g.order = *order;
  g.dp_replicate = dp_replicate;
  g.shard = cp * (dp / dp_replicate);
  g.tp_rank = g.order.Coordinate(g.rank, GridDim::kTp);
  g.dp_rank = g.order.Coordinate(g.rank, GridDim::kDp);
  g.pp_rank = g.order.Coordinate(g.rank, GridDim::kPp);
  g.cp_rank = g.order.Coordinate(g.rank, GridDim::kCp);
  g.replicate_rank = g.order.Coordinate(g.rank, GridDim::kDpReplicate);
  MPI_Comm_split(world, g.order.GroupId(g.rank, GridDim::kTp), g.tp_rank, &g.tp_comm);
  MPI_Comm_split(world, g.order.GroupId(g.rank, GridDim::kCp), g.cp_rank, &g.cp_comm);
  g.shard_rank = SplitAlong(world, g.order, g.rank, {GridDim::kDp, GridDim::kCp}, &g.dp_comm);
  g.shard_comm = g.dp_comm;
  if (dp_replicate > 1) {
    g.shard_rank = SplitAlong(world, g.order, g.rank, {GridDim::kDpShard, GridDim::kCp}, &g.shard_comm);
    MPI_Comm_split(world, g.order.GroupId(g.rank, GridDim::kDpReplicate), g.replicate_rank, &g.replicate_comm);
  }
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, g.rank, MPI_INFO_NULL, &g.node_comm);
  MPI_Comm_rank(g.node_comm, &g.local_rank);
  MPI_Comm_size(g.node_comm, &g.local_size);
  if (pp > 1) {
    const bool end = g.first_stage() || g.last_stage();
    MPI_Comm_split(world, end ? g.order.GroupId(g.rank, GridDim::kPp) : MPI_UNDEFINED, g.pp_rank, &g.embedding_comm);
  }
  return g;
}

void FreeProcessGrid(ProcessGrid& g) {
  if (g.shard_comm == g.dp_comm) g.shard_comm = MPI_COMM_NULL;  // one communicator, freed once
  for (MPI_Comm* c : {&g.tp_comm, &g.cp_comm, &g.dp_comm, &g.shard_comm, &g.replicate_comm, &g.node_comm, &g.embedding_comm}) {
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
}

}  // namespace tunepar::core
