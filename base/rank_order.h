// Which ranks form a group: the parallel sizes in an order, innermost first (the default
// tp-cp-dp-pp: tensor-parallel ranks adjacent, then context-parallel, data-parallel replicas,
// pipeline stages outermost), in the spirit of Megatron-Core's RankGenerator. A rank's
// coordinate along a dimension, its group along it (the ranks that differ from it only there),
// and the stride that group's members lie apart, all from one place: the performance model
// prices a group's link by its stride (how many consecutive ranks it spans) and tunepar-core
// builds its communicators from the same groups. A new grid dimension is a new row here.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "base/layout.h"
#include "base/status.h"

namespace tunepar {

enum class GridDim { kTp, kCp, kDp, kPp };
inline constexpr int kNumGridDims = 4;
std::string_view ToString(GridDim d);  // "tp", "cp", "dp", "pp"

class RankOrder {
 public:
  // `sizes` by GridDim; `order` names every dimension once, innermost first ("tp-cp-dp-pp").
  static Result<RankOrder> Create(std::array<int, kNumGridDims> sizes, std::string_view order = "tp-cp-dp-pp");
  // A layout's grid in the default order (cp 1 until layouts carry it).
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
  std::string Order() const;

 private:
  std::array<int, kNumGridDims> sizes_{1, 1, 1, 1};
  std::array<int, kNumGridDims> strides_{1, 1, 1, 1};
  std::array<GridDim, kNumGridDims> order_{GridDim::kTp, GridDim::kCp, GridDim::kDp, GridDim::kPp};
  int world_ = 1;
};

}  // namespace tunepar
