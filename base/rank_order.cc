#include "base/rank_order.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace tunepar {

std::string_view ToString(GridDim d) {
  switch (d) {
    case GridDim::kTp: return "tp";
    case GridDim::kCp: return "cp";
    case GridDim::kDp: return "dp";
    case GridDim::kPp: return "pp";
    case GridDim::kDpShard: return "dp_shard";
    case GridDim::kDpReplicate: return "dp_replicate";
    case GridDim::kEtp: return "etp";
    case GridDim::kEp: return "ep";
    case GridDim::kEdp: return "edp";
  }
  return "?";
}

namespace {

using OrderDims = std::array<GridDim, kNumGridDims>;
constexpr OrderDims kDenseDims{GridDim::kTp, GridDim::kCp, GridDim::kDp, GridDim::kPp};
constexpr OrderDims kExpertDims{GridDim::kEtp, GridDim::kEp, GridDim::kEdp, GridDim::kPp};

std::string Names(const OrderDims& dims, std::string_view separator = "-") {
  std::string out;
  for (GridDim d : dims) out += (out.empty() ? "" : std::string(separator)) + std::string(ToString(d));
  return out;
}

// `order` names each of `names` once, innermost first.
Result<OrderDims> ParseOrder(std::string_view order, const OrderDims& names) {
  auto bad = [&] {
    return InvalidArgument(fmt::format("rank order '{}': expected each of {} once, innermost first, e.g. {}",
                                       order, Names(names, ", "), Names(names)));
  };
  OrderDims dims{};
  std::array<bool, kNumGridDims> seen{};
  int count = 0;
  size_t at = 0;
  while (at <= order.size()) {
    const size_t dash = std::min(order.find('-', at), order.size());
    const std::string_view name = order.substr(at, dash - at);
    int found = -1;
    for (int i = 0; i < kNumGridDims; ++i)
      if (ToString(names[i]) == name) found = i;
    if (found < 0 || seen[found] || count == kNumGridDims) return bad();
    seen[found] = true;
    dims[count++] = names[found];
    at = dash + 1;
  }
  if (count != kNumGridDims) return bad();
  return dims;
}

}  // namespace

Result<RankOrder> RankOrder::Create(std::array<int, kNumGridDims> sizes, std::string_view order) {
  GridSizes grid;
  grid.tp = sizes[static_cast<int>(GridDim::kTp)];
  grid.cp = sizes[static_cast<int>(GridDim::kCp)];
  grid.dp = sizes[static_cast<int>(GridDim::kDp)];
  grid.pp = sizes[static_cast<int>(GridDim::kPp)];
  grid.order = std::string(order);
  return CreateGrids(grid);
}

Result<RankOrder> RankOrder::CreateGrids(const GridSizes& g) {
  const std::initializer_list<std::pair<const char*, int>> named{
      {"tp", g.tp}, {"cp", g.cp}, {"dp", g.dp}, {"pp", g.pp}, {"dp_replicate", g.dp_replicate}, {"ep", g.ep}};
  for (auto [name, size] : named)
    if (size < 1) return InvalidArgument(fmt::format("rank order: {} size {} is not positive", name, size));
  if (g.etp < 0)
    return InvalidArgument(fmt::format("rank order: etp size {} is negative (0 means the dense tp)", g.etp));
  if (g.dp % g.dp_replicate != 0)
    return InvalidArgument(
        fmt::format("rank order: dp {} is not a multiple of dp_replicate {} (hybrid sharding splits dp into "
                    "shard x replicate)",
                    g.dp, g.dp_replicate));
  const int etp = g.etp == 0 ? g.tp : g.etp;
  // Megatron-Core: expert_data_parallel_size = world_size // (etp ep pp); per stage, the expert
  // tp ep ranks are carved from the stage's tp cp dp ranks.
  if ((g.tp * g.cp * g.dp) % (etp * g.ep) != 0)
    return InvalidArgument(fmt::format(
        "rank order: etp {} x ep {} = {} does not divide the {} ranks of a stage (tp {} x cp {} x dp {})",
        etp, g.ep, etp * g.ep, g.tp * g.cp * g.dp, g.tp, g.cp, g.dp));
  Result<OrderDims> dense = ParseOrder(g.order, kDenseDims);
  if (!dense.ok()) return dense.status();
  Result<OrderDims> expert = ParseOrder(g.expert_order, kExpertDims);
  if (!expert.ok()) return expert.status();
  return Arrange(g, *dense, *expert);
}

// The sizes and strides of both grids in the given orders (sizes already checked).
Result<RankOrder> RankOrder::Arrange(const GridSizes& g, const std::array<GridDim, kNumGridDims>& dense,
                                     const std::array<GridDim, kNumGridDims>& expert) {
  const int etp = g.etp == 0 ? g.tp : g.etp;
  RankOrder r;
  r.order_ = dense;
  r.expert_order_ = expert;
  auto set = [&r](GridDim d, int size, int stride) {
    r.sizes_[static_cast<int>(d)] = size;
    r.strides_[static_cast<int>(d)] = stride;
  };
  const int shard = g.dp / g.dp_replicate, edp = g.tp * g.cp * g.dp / (etp * g.ep);
  const std::array<int, kNumAllGridDims> sizes{g.tp, g.cp, g.dp, g.pp, shard, g.dp_replicate, etp, g.ep, edp};
  int stride = 1;
  for (GridDim d : r.order_) {
    set(d, sizes[static_cast<int>(d)], stride);
    stride *= sizes[static_cast<int>(d)];
  }
  r.world_ = stride;
  // dp_rank = shard_rank + shard replicate_rank: shard groups contiguous within dp.
  const int dp_stride = r.Stride(GridDim::kDp);
  set(GridDim::kDpShard, shard, dp_stride);
  set(GridDim::kDpReplicate, g.dp_replicate, dp_stride * shard);

  stride = 1;
  for (GridDim d : r.expert_order_) {
    if (d == GridDim::kPp) {
      // Megatron-Core asserts the decoder and expert generators give the same "pp" groups.
      if (g.pp > 1 && stride != r.Stride(GridDim::kPp))
        return InvalidArgument(
            fmt::format("rank order: dense order '{}' puts pipeline stages {} ranks apart, expert order '{}' "
                        "{}; the two grids must share their pipeline groups",
                        r.Order(), r.Stride(GridDim::kPp), Names(r.expert_order_), stride));
    } else {
      set(d, sizes[static_cast<int>(d)], stride);
    }
    stride *= sizes[static_cast<int>(d)];
  }
  return r;
}

// The performance model asks for a layout's grid several times per prediction: the default
// orders are arranged directly, without parsing their names, and this thread's last grid is kept.
RankOrder RankOrder::Of(const Layout& l) {
  const int replicas = l.dp_replicate >= 1 && l.dp % l.dp_replicate == 0 ? l.dp_replicate : 1;
  // ep inside dp x cp (the rule ep_divides_dp_cp); an illegal ep is left out of the grid (1).
  const int ep = l.ep >= 1 && (l.cp * l.dp) % l.ep == 0 ? l.ep : 1;
  const std::array<int, 6> sizes_key{l.tp, l.cp, l.dp, l.pp, replicas, ep};
  thread_local std::array<int, 6> last_key{0, 0, 0, 0, 0, 0};
  thread_local RankOrder last;
  if (sizes_key == last_key) return last;
  GridSizes sizes;
  sizes.tp = l.tp;
  sizes.cp = l.cp;
  sizes.dp = l.dp;
  sizes.pp = l.pp;
  sizes.dp_replicate = replicas;
  sizes.ep = ep;
  last = *Arrange(sizes, kDenseDims, kExpertDims);
  last_key = sizes_key;
  return last;
}

std::vector<int> RankOrder::Group(int rank, GridDim d) const {
  std::vector<int> group;
  for (int c = 0; c < Size(d); ++c) group.push_back(WithCoordinate(rank, d, c));
  return group;
}

std::vector<int> RankOrder::Group(int rank, std::initializer_list<GridDim> dims) const {
  // Closed under every dimension in turn, so that dimensions of the two grids may be mixed.
  std::vector<int> members{rank};
  std::vector<bool> member(world_, false);
  member[rank] = true;
  for (size_t i = 0; i < members.size(); ++i) {
    for (GridDim d : dims) {
      for (int c = 0; c < Size(d); ++c) {
        const int other = WithCoordinate(members[i], d, c);
        if (!member[other]) {
          member[other] = true;
          members.push_back(other);
        }
      }
    }
  }
  std::sort(members.begin(), members.end());
  return members;
}

GroupPlacement RankOrder::Placement(int rank, std::initializer_list<GridDim> dims, int gpus_per_node) const {
  std::map<int, int> per_node;
  for (int member : Group(rank, dims)) ++per_node[member / std::max(1, gpus_per_node)];
  GroupPlacement p;
  p.nodes = static_cast<int>(per_node.size());
  for (const auto& [node, members] : per_node) p.members_per_node = std::max(p.members_per_node, members);
  return p;
}

std::string RankOrder::Order() const {
  return Names(order_);
}

std::string RankOrder::ExpertOrder() const {
  return Names(expert_order_);
}

}  // namespace tunepar
