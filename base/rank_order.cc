#include "base/rank_order.h"

#include <algorithm>

#include <fmt/format.h>

namespace tunepar {

std::string_view ToString(GridDim d) {
  switch (d) {
    case GridDim::kTp: return "tp";
    case GridDim::kCp: return "cp";
    case GridDim::kDp: return "dp";
    case GridDim::kPp: return "pp";
  }
  return "?";
}

namespace {

Result<std::array<GridDim, kNumGridDims>> ParseOrder(std::string_view order) {
  const Status bad = InvalidArgument(
      fmt::format("rank order '{}': expected each of tp, cp, dp, pp once, innermost first, e.g. tp-cp-dp-pp", order));
  std::array<GridDim, kNumGridDims> dims{};
  std::array<bool, kNumGridDims> seen{};
  int count = 0;
  size_t at = 0;
  while (at <= order.size()) {
    const size_t dash = std::min(order.find('-', at), order.size());
    const std::string_view name = order.substr(at, dash - at);
    int found = -1;
    for (int d = 0; d < kNumGridDims; ++d)
      if (ToString(static_cast<GridDim>(d)) == name) found = d;
    if (found < 0 || seen[found] || count == kNumGridDims) return bad;
    seen[found] = true;
    dims[count++] = static_cast<GridDim>(found);
    at = dash + 1;
  }
  if (count != kNumGridDims) return bad;
  return dims;
}

}  // namespace

Result<RankOrder> RankOrder::Create(std::array<int, kNumGridDims> sizes, std::string_view order) {
  Result<std::array<GridDim, kNumGridDims>> dims = ParseOrder(order);
  if (!dims.ok()) return dims.status();
  RankOrder r;
  r.sizes_ = sizes;
  r.order_ = *dims;
  int stride = 1;
  for (GridDim d : r.order_) {
    if (sizes[static_cast<int>(d)] < 1)
      return InvalidArgument(fmt::format("rank order: {} size {} is not positive", ToString(d), sizes[static_cast<int>(d)]));
    r.strides_[static_cast<int>(d)] = stride;
    stride *= sizes[static_cast<int>(d)];
  }
  r.world_ = stride;
  return r;
}

RankOrder RankOrder::Of(const Layout& l) {
  return *Create({l.tp, 1, l.dp, l.pp});
}

std::vector<int> RankOrder::Group(int rank, GridDim d) const {
  std::vector<int> group;
  for (int c = 0; c < Size(d); ++c) group.push_back(WithCoordinate(rank, d, c));
  return group;
}

std::string RankOrder::Order() const {
  std::string out;
  for (GridDim d : order_) out += (out.empty() ? "" : "-") + std::string(ToString(d));
  return out;
}

}  // namespace tunepar
