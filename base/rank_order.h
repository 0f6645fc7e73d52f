// Which ranks form a group: the parallel sizes in an order, innermost first (the default
// tp-cp-dp-pp: tensor-parallel ranks adjacent, then context-parallel, data-parallel replicas,
// pipeline stages outermost), in the spirit of Megatron-Core's RankGenerator. A rank's
// coordinate along a dimension, its group along it (the ranks that differ from it only there),
// and the stride that group's members lie apart, all from one place: the performance model
// prices a group's link by its stride (how many consecutive ranks it spans) and tunepar-core
// builds its communicators from the same groups. A new grid dimension is a new row here.
//
// The same ranks are numbered by two grids (Megatron-Core's decoder and expert RankGenerators,
// megatron/core/parallel_state.py, initialize_model_parallel):
//   dense   rank = tp_rank + tp (cp_rank + cp (dp_rank + dp pp_rank))        (default order)
//   expert  rank = etp_rank + etp (ep_rank + ep (edp_rank + edp pp_rank))    etp ep edp pp = world
// Both share their pipeline groups, so the expert ranks of one stage are the dense tp cp dp
// ranks of that stage renumbered: with etp = tp, EP is carved from the dense cp and the inner
// part of dp (torchtitan's parallel_dims.py: "EP would borrow all cp and some dp_shard degree").
// dp is itself shard x replicate (hybrid sharding), shard inner:
//   dp_rank = shard_rank + shard replicate_rank
// as torchtitan's mesh [pp, dp_replicate, dp_shard, cp, tp] and Megatron-Core's partial
// distributed optimizer (contiguous slices of each dp-cp group) both lay it out.
#pragma once

#include <array>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "base/layout.h"
#include "base/status.h"

namespace tunepar {

// The dense grid's dimensions (the first kNumGridDims, which a dense order names), then the two
// parts of dp and the expert grid's own dimensions (its pp is kPp: the grids share stages).
enum class GridDim { kTp, kCp, kDp, kPp, kDpShard, kDpReplicate, kEtp, kEp, kEdp };
inline constexpr int kNumGridDims = 4;
inline constexpr int kNumAllGridDims = 9;
// "tp", "cp", "dp", "pp", "dp_shard", "dp_replicate", "etp", "ep", "edp"
std::string_view ToString(GridDim d);

// The sizes and orders of both grids. world = tp cp dp pp = etp ep edp pp.
struct GridSizes {
  int tp = 1;
  int cp = 1;
  int dp = 1;  // data-parallel replicas in all: dp_shard x dp_replicate
  int pp = 1;
  int dp_replicate = 1;  // 1: plain (or fully sharded) data parallelism; must divide dp
  int etp = 0;           // expert tensor-parallel size; 0: the dense tp (Megatron-Core's default)
  int ep = 1;            // expert-parallel size; etp ep must divide tp cp dp
  std::string order = "tp-cp-dp-pp";           // each of tp, cp, dp, pp once, innermost first
  std::string expert_order = "etp-ep-edp-pp";  // each of etp, ep, edp, pp once, innermost first
};

// Where a group's members sit, for a machine of `gpus_per_node` consecutive ranks per node.
struct GroupPlacement {
  int nodes = 1;             // distinct nodes holding a member
  int members_per_node = 1;  // the most members on any one node
};

class RankOrder {
 public:
  // `sizes` by GridDim; `order` names every dimension once, innermost first ("tp-cp-dp-pp").
  // No hybrid sharding; the expert grid is the dense one without EP (etp = tp, edp = cp dp).
  static Result<RankOrder> Create(std::array<int, kNumGridDims> sizes, std::string_view order = "tp-cp-dp-pp");
  // Both grids; fails, naming the sizes, when a size is not positive, dp_replicate does not
  // divide dp, etp ep does not divide tp cp dp, an order is malformed, or the two orders would
  // give the grids different pipeline groups.
  static Result<RankOrder> CreateGrids(const GridSizes& sizes);
  // A layout's grid in the default order (tp, cp, dp, pp), dp split into shard x replicate by its
  // dp_replicate, and the expert grid (etp = tp, ep, edp = cp dp / ep, pp) by its ep: the ep
  // group's members lie tp apart, inside the tp x cp x dp ranks of a stage.
  static RankOrder Of(const Layout& l);

  int World() const { return world_; }
  int Size(GridDim d) const { return sizes_[static_cast<int>(d)]; }
  // Consecutive ranks between neighbours along `d`: the product of the sizes inside it.
  int Stride(GridDim d) const { return strides_[static_cast<int>(d)]; }
  int Coordinate(int rank, GridDim d) const { return rank / Stride(d) % Size(d); }
  // The rank at `rank`'s coordinates with `d`'s replaced by `coordinate`.
  int WithCoordinate(int rank, GridDim d, int coordinate) const {
    return rank + (coordinate - Coordinate(rank, d)) * Stride(d);
  }
  // The group of `rank` along `d`, in coordinate order; its id (equal for the group's members,
  // distinct between groups: an MPI_Comm_split colour) is GroupId.
  std::vector<int> Group(int rank, GridDim d) const;
  int GroupId(int rank, GridDim d) const { return WithCoordinate(rank, d, 0); }
  // The group of `rank` along several dimensions (Megatron-Core's "dp-cp", "tp-ep"): the ranks
  // reached from it by changing its coordinates along any of `dims`, ascending; its id is its
  // lowest rank. Along one dimension it is Group(rank, d).
  std::vector<int> Group(int rank, std::initializer_list<GridDim> dims) const;
  int GroupId(int rank, std::initializer_list<GridDim> dims) const { return Group(rank, dims).front(); }
  // Where `rank`'s group along `dims` sits on nodes of `gpus_per_node` consecutive ranks.
  GroupPlacement Placement(int rank, std::initializer_list<GridDim> dims, int gpus_per_node) const;
  std::string Order() const;
  std::string ExpertOrder() const;

 private:
  static Result<RankOrder> Arrange(const GridSizes& sizes, const std::array<GridDim, kNumGridDims>& dense,
                                   const std::array<GridDim, kNumGridDims>& expert);
  std::array<int, kNumAllGridDims> sizes_{1, 1, 1, 1, 1, 1, 1, 1, 1};
  std::array<int, kNumAllGridDims> strides_{1, 1, 1, 1, 1, 1, 1, 1, 1};
  std::array<GridDim, kNumGridDims> order_{GridDim::kTp, GridDim::kCp, GridDim::kDp, GridDim::kPp};
  std::array<GridDim, kNumGridDims> expert_order_{GridDim::kEtp, GridDim::kEp, GridDim::kEdp, GridDim::kPp};
  int world_ = 1;
};

}  // namespace tunepar
