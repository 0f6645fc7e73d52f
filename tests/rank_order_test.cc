// base/rank_order.h: which ranks form each group (issue 30 item 2). Today's layouts must produce
// exactly the groups the core and the performance model used before the rank order existed:
// rank = tp_rank + tp (dp_rank + dp pp_rank), TP groups adjacent, DP strided by tp, stages by
// tp dp. The expert grid and hybrid sharding are checked against Megatron-Core's
// generate_masked_orthogonal_rank_groups (megatron/core/parallel_state.py) and torchtitan's
// device mesh (torchtitan/distributed/parallel_dims.py), restated here, and by hand.
#include "base/rank_order.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace tunepar {
namespace {

// Every rank's old colour for a dimension, as the core split its communicators.
int OldColour(int rank, int tp, int dp, GridDim d) {
  const int tp_rank = rank % tp, dp_rank = (rank / tp) % dp, pp_rank = rank / (tp * dp);
  switch (d) {
    case GridDim::kTp: return pp_rank * dp + dp_rank;
    case GridDim::kDp: return pp_rank * tp + tp_rank;
    case GridDim::kPp: return dp_rank * tp + tp_rank;
    case GridDim::kCp: return rank;
    default: break;  // the parts of dp and the expert grid came later
  }
  return -1;
}

// Two colourings of the ranks make the same groups.
bool SamePartition(const std::vector<int>& a, const std::vector<int>& b) {
  std::map<int, int> a_to_b, b_to_a;
  for (size_t r = 0; r < a.size(); ++r) {
    if (a_to_b.emplace(a[r], b[r]).first->second != b[r]) return false;
    if (b_to_a.emplace(b[r], a[r]).first->second != a[r]) return false;
  }
  return true;
}

TEST(RankOrder, EveryGridOfWorldsTwoToEightGivesTodaysGroupsAndStrides) {
  int grids = 0;
  for (int world = 2; world <= 8; ++world) {
    for (int tp = 1; tp <= world; ++tp) {
      for (int dp = 1; tp * dp <= world; ++dp) {
        if (world % (tp * dp) != 0) continue;
        const int pp = world / (tp * dp);
        const RankOrder order = RankOrder::Of(Layout{tp, pp, dp});
        ASSERT_EQ(order.World(), world);
        EXPECT_EQ(order.Stride(GridDim::kTp), 1);
        EXPECT_EQ(order.Stride(GridDim::kDp), tp);
        EXPECT_EQ(order.Stride(GridDim::kPp), tp * dp);
        for (GridDim d : {GridDim::kTp, GridDim::kDp, GridDim::kPp, GridDim::kCp}) {
          std::vector<int> now, before;
          for (int r = 0; r < world; ++r) {
            now.push_back(order.GroupId(r, d));
            before.push_back(OldColour(r, tp, dp, d));
          }
          EXPECT_TRUE(SamePartition(now, before)) << "tp" << tp << " dp" << dp << " pp" << pp << " " << ToString(d);
        }
        for (int r = 0; r < world; ++r) {
          EXPECT_EQ(order.Coordinate(r, GridDim::kTp), r % tp);
          EXPECT_EQ(order.Coordinate(r, GridDim::kDp), (r / tp) % dp);
          EXPECT_EQ(order.Coordinate(r, GridDim::kPp), r / (tp * dp));
          for (int stage = 0; stage < pp; ++stage)  // the 1F1B peers
            EXPECT_EQ(order.WithCoordinate(r, GridDim::kPp, stage), r % tp + tp * ((r / tp) % dp + dp * stage));
          const std::vector<int> group = order.Group(r, GridDim::kDp);
          ASSERT_EQ(static_cast<int>(group.size()), dp);
          EXPECT_EQ(group[order.Coordinate(r, GridDim::kDp)], r);
        }
        ++grids;
      }
    }
  }
  EXPECT_EQ(grids, 3 + 3 + 6 + 3 + 9 + 3 + 10);  // ordered factorisations of 2..8 into tp dp pp
}

TEST(RankOrder, AnotherOrderPutsItsInnermostDimensionOnAdjacentRanks) {
  Result<RankOrder> order = RankOrder::Create({2, 1, 4, 1}, "dp-tp-cp-pp");
  ASSERT_TRUE(order.ok()) << order.status().message();
  EXPECT_EQ(order->Order(), "dp-tp-cp-pp");
  EXPECT_EQ(order->Group(0, GridDim::kDp), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(order->Group(0, GridDim::kTp), (std::vector<int>{0, 4}));
  EXPECT_EQ(order->Stride(GridDim::kTp), 4);
  Result<RankOrder> cp = RankOrder::Create({2, 2, 2, 1});
  ASSERT_TRUE(cp.ok());
  EXPECT_EQ(cp->Group(1, GridDim::kCp), (std::vector<int>{1, 3}));
  EXPECT_EQ(cp->Group(1, GridDim::kDp), (std::vector<int>{1, 5}));
}

TEST(RankOrder, AnOrderMustNameEveryDimensionOnce) {
  for (const char* bad : {"tp-dp-pp", "tp-cp-dp-pp-tp", "tp-tp-dp-pp", "tp-cp-dp-xx", "", "tp--dp-pp", "tp-cp-dp-pp-"})
    EXPECT_FALSE(RankOrder::Create({1, 1, 1, 1}, bad).ok()) << bad;
  EXPECT_FALSE(RankOrder::Create({0, 1, 1, 1}).ok());
  EXPECT_EQ(RankOrder::Create({1, 1, 1, 1}, "pp-dp-cp-tp")->Order(), "pp-dp-cp-tp");
}

// ---- The expert grid and hybrid sharding.

using Groups = std::vector<std::vector<int>>;

// Megatron-Core's generate_masked_orthogonal_rank_groups (megatron/core/parallel_state.py),
// restated: `sizes` innermost first, rank = sum_i coordinate_i prod_{j<i} sizes_j; a group holds
// the ranks that differ only along the masked dimensions; groups are numbered by the unmasked
// coordinates, members by the masked ones, both innermost first.
Groups MegatronMaskedGroups(const std::vector<int>& sizes, const std::vector<bool>& mask) {
  std::vector<int> stride(sizes.size(), 1);
  for (size_t i = 1; i < sizes.size(); ++i) stride[i] = stride[i - 1] * sizes[i - 1];
  std::vector<int> masked_shape, masked_stride, unmasked_shape, unmasked_stride;
  for (size_t i = 0; i < sizes.size(); ++i) {
    (mask[i] ? masked_shape : unmasked_shape).push_back(sizes[i]);
    (mask[i] ? masked_stride : unmasked_stride).push_back(stride[i]);
  }
  auto count = [](const std::vector<int>& shape) {
    int n = 1;
    for (int s : shape) n *= s;
    return n;
  };
  // sum_i ((index / prod_{j<i} shape_j) % shape_i) strides_i
  auto place = [](int index, const std::vector<int>& shape, const std::vector<int>& strides) {
    int rank = 0;
    for (size_t i = 0; i < shape.size(); ++i) {
      rank += index % shape[i] * strides[i];
      index /= shape[i];
    }
    return rank;
  };
  Groups groups;
  for (int g = 0; g < count(unmasked_shape); ++g) {
    std::vector<int> group;
    for (int m = 0; m < count(masked_shape); ++m)
      group.push_back(place(m, masked_shape, masked_stride) + place(g, unmasked_shape, unmasked_stride));
    groups.push_back(group);
  }
  return groups;
}

// Megatron-Core's RankGenerator.get_ranks(token) for the default order "tp-cp-ep-dp-pp": the
// decoder generator has ep 1, the expert generator cp 1 (initialize_model_parallel).
Groups MegatronRanks(std::array<int, 5> tp_cp_ep_dp_pp, const std::string& token) {
  static const std::array<std::string, 5> kOrder{"tp", "cp", "ep", "dp", "pp"};
  std::vector<bool> mask(5, false);
  size_t at = 0;
  while (at <= token.size()) {
    const size_t dash = std::min(token.find('-', at), token.size());
    mask[std::find(kOrder.begin(), kOrder.end(), token.substr(at, dash - at)) - kOrder.begin()] = true;
    at = dash + 1;
  }
  return MegatronMaskedGroups({tp_cp_ep_dp_pp.begin(), tp_cp_ep_dp_pp.end()}, mask);
}

// Each of `reference`'s groups is, for each of its members, that member's group here; together
// the reference groups hold every rank once.
void ExpectSameGroups(const RankOrder& order, std::initializer_list<GridDim> dims, const Groups& reference,
                      const std::string& what) {
  std::vector<int> seen(order.World(), 0);
  for (std::vector<int> group : reference) {
    std::sort(group.begin(), group.end());
    for (int r : group) {
      ++seen[r];
      EXPECT_EQ(order.Group(r, dims), group) << what << " rank " << r;
      EXPECT_EQ(order.GroupId(r, dims), group.front()) << what << " rank " << r;
    }
  }
  for (int r = 0; r < order.World(); ++r) EXPECT_EQ(seen[r], 1) << what << " rank " << r;
}

std::string Describe(const GridSizes& g) {
  return "tp" + std::to_string(g.tp) + " cp" + std::to_string(g.cp) + " dp" + std::to_string(g.dp) + " pp" +
         std::to_string(g.pp) + " replicate" + std::to_string(g.dp_replicate) + " etp" +
         std::to_string(g.etp) + " ep" + std::to_string(g.ep);
}

std::vector<int> Divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// Every grid of worlds 2..`max_world`: tp cp dp pp = world, dp_replicate | dp, etp ep | tp cp dp.
void ForEveryGrid(int max_world, const std::function<void(const GridSizes&)>& visit) {
  for (int world = 2; world <= max_world; ++world)
    for (int tp : Divisors(world))
      for (int cp : Divisors(world / tp))
        for (int dp : Divisors(world / (tp * cp)))
          for (int replicate : Divisors(dp))
            for (int etp : Divisors(tp * cp * dp))
              for (int ep : Divisors(tp * cp * dp / etp)) {
                GridSizes g;
                g.tp = tp, g.cp = cp, g.dp = dp, g.pp = world / (tp * cp * dp);
                g.dp_replicate = replicate, g.etp = etp, g.ep = ep;
                visit(g);
              }
}

TEST(RankOrder, TodaysLayoutsHaveOneShardGroupAndAnExpertGridThatIsTheDenseOne) {
  const RankOrder single;  // a ProcessGrid's before CreateProcessGrid fills it in
  EXPECT_EQ(single.World(), 1);
  EXPECT_EQ(single.Order(), "tp-cp-dp-pp");
  EXPECT_EQ(single.ExpertOrder(), "etp-ep-edp-pp");
  for (int world = 2; world <= 8; ++world) {
    for (int tp : Divisors(world)) {
      for (int dp : Divisors(world / tp)) {
        const RankOrder order = RankOrder::Of(Layout{tp, world / (tp * dp), dp});
        const std::string grid = "tp" + std::to_string(tp) + " dp" + std::to_string(dp);
        EXPECT_EQ(order.ExpertOrder(), "etp-ep-edp-pp");
        EXPECT_EQ(order.Stride(GridDim::kDpShard), order.Stride(GridDim::kDp)) << grid;
        EXPECT_EQ(order.Stride(GridDim::kEdp), order.Stride(GridDim::kDp)) << grid;
        for (int r = 0; r < world; ++r) {
          EXPECT_EQ(order.Group(r, GridDim::kDpShard), order.Group(r, GridDim::kDp)) << grid;
          EXPECT_EQ(order.Group(r, GridDim::kDpReplicate), std::vector<int>{r}) << grid;
          EXPECT_EQ(order.Group(r, GridDim::kEtp), order.Group(r, GridDim::kTp)) << grid;
          EXPECT_EQ(order.Group(r, GridDim::kEp), std::vector<int>{r}) << grid;
          EXPECT_EQ(order.Group(r, GridDim::kEdp), order.Group(r, GridDim::kDp)) << grid;
          EXPECT_EQ(order.Group(r, {GridDim::kEtp, GridDim::kEp}), order.Group(r, GridDim::kTp)) << grid;
        }
      }
    }
  }
}

TEST(RankOrder, WithoutEpTheExpertDataParallelGroupIsTheDenseDataAndContextParallelGroup) {
  int grids = 0;
  ForEveryGrid(16, [&](GridSizes g) {
    if (g.ep != 1 || g.etp != g.tp) return;
    for (int etp : {0, g.tp}) {  // 0: the dense tp
      g.etp = etp;
      Result<RankOrder> order = RankOrder::CreateGrids(g);
      ASSERT_TRUE(order.ok()) << Describe(g) << ": " << order.status().message();
      EXPECT_EQ(order->Size(GridDim::kEdp), g.cp * g.dp) << Describe(g);
      for (int r = 0; r < order->World(); ++r) {
        EXPECT_EQ(order->Group(r, GridDim::kEdp), order->Group(r, {GridDim::kDp, GridDim::kCp}))
            << Describe(g);
        EXPECT_EQ(order->Group(r, GridDim::kEtp), order->Group(r, GridDim::kTp)) << Describe(g);
        EXPECT_EQ(order->Group(r, GridDim::kEp), std::vector<int>{r}) << Describe(g);
      }
      ++grids;
    }
  });
  EXPECT_GT(grids, 100);
}

TEST(RankOrder, EveryGridOfWorldsUpToSixteenGivesMegatronsAndTorchtitansGroups) {
  int grids = 0;
  ForEveryGrid(16, [&](const GridSizes& g) {
    Result<RankOrder> made = RankOrder::CreateGrids(g);
    ASSERT_TRUE(made.ok()) << Describe(g) << ": " << made.status().message();
    const RankOrder& order = *made;
    const std::string at = Describe(g) + " ";
    const int edp = g.tp * g.cp * g.dp / (g.etp * g.ep);
    // Megatron-Core's decoder generator (ep 1) and expert generator (cp 1).
    const std::array<int, 5> dense{g.tp, g.cp, 1, g.dp, g.pp}, expert{g.etp, 1, g.ep, edp, g.pp};
    ExpectSameGroups(order, {GridDim::kTp}, MegatronRanks(dense, "tp"), at + "tp");
    ExpectSameGroups(order, {GridDim::kCp}, MegatronRanks(dense, "cp"), at + "cp");
    ExpectSameGroups(order, {GridDim::kDp}, MegatronRanks(dense, "dp"), at + "dp");
    ExpectSameGroups(order, {GridDim::kPp}, MegatronRanks(dense, "pp"), at + "pp");
    ExpectSameGroups(order, {GridDim::kDp, GridDim::kCp}, MegatronRanks(dense, "dp-cp"), at + "dp-cp");
    ExpectSameGroups(order, {GridDim::kTp, GridDim::kCp}, MegatronRanks(dense, "tp-cp"), at + "tp-cp");
    ExpectSameGroups(order, {GridDim::kEtp}, MegatronRanks(expert, "tp"), at + "expert tp");
    ExpectSameGroups(order, {GridDim::kEp}, MegatronRanks(expert, "ep"), at + "ep");
    ExpectSameGroups(order, {GridDim::kEdp}, MegatronRanks(expert, "dp"), at + "expert dp");
    ExpectSameGroups(order, {GridDim::kEtp, GridDim::kEp}, MegatronRanks(expert, "tp-ep"), at + "tp-ep");
    ExpectSameGroups(order, {GridDim::kPp}, MegatronRanks(expert, "pp"), at + "expert pp");
    // torchtitan's mesh [pp, dp_replicate, dp_shard, cp, tp] (row-major: tp innermost).
    const int shard = g.dp / g.dp_replicate;
    const std::vector<int> mesh{g.tp, g.cp, shard, g.dp_replicate, g.pp};
    ExpectSameGroups(order, {GridDim::kDpShard},
                     MegatronMaskedGroups(mesh, {false, false, true, false, false}), at + "dp_shard");
    ExpectSameGroups(order, {GridDim::kDpReplicate},
                     MegatronMaskedGroups(mesh, {false, false, false, true, false}), at + "dp_replicate");
    ExpectSameGroups(order, {GridDim::kDpShard, GridDim::kCp},
                     MegatronMaskedGroups(mesh, {false, true, true, false, false}), at + "dp_shard_cp");
    // Megatron-Core's partial distributed optimizer: each dp-cp group cut into dp_replicate
    // contiguous slices (INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP) is torchtitan's dp_shard_cp.
    Groups slices;
    for (const std::vector<int>& group : MegatronRanks(dense, "dp-cp"))
      for (size_t at_slice = 0; at_slice < group.size(); at_slice += shard * g.cp)
        slices.emplace_back(group.begin() + at_slice, group.begin() + at_slice + shard * g.cp);
    ExpectSameGroups(order, {GridDim::kDpShard, GridDim::kCp}, slices, at + "intra-partial dp-cp");
    ++grids;
  });
  EXPECT_GT(grids, 1000);
}

TEST(RankOrder, SmallExpertAndShardedGridsWorkedByHand) {
  GridSizes g;
  g.tp = 2, g.dp = 4, g.etp = 1, g.ep = 4;  // EP borrows tp and dp: experts on adjacent ranks
  Result<RankOrder> a = RankOrder::CreateGrids(g);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->Group(5, GridDim::kEp), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(a->Group(5, GridDim::kEdp), (std::vector<int>{1, 5}));
  EXPECT_EQ(a->Group(5, GridDim::kEtp), (std::vector<int>{5}));
  EXPECT_EQ(a->Coordinate(6, GridDim::kEp), 2);

  g.etp = 2, g.ep = 2;  // etp = tp: EP borrows the inner half of dp
  Result<RankOrder> b = RankOrder::CreateGrids(g);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->Group(5, GridDim::kEp), (std::vector<int>{5, 7}));
  EXPECT_EQ(b->Group(5, GridDim::kEdp), (std::vector<int>{1, 5}));
  EXPECT_EQ(b->Group(5, {GridDim::kEtp, GridDim::kEp}), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(b->Stride(GridDim::kEp), 2);
  EXPECT_EQ(b->Stride(GridDim::kEdp), 4);

  g.cp = 2, g.dp = 2;  // with cp, EP borrows cp first
  Result<RankOrder> c = RankOrder::CreateGrids(g);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->Group(0, GridDim::kEp), c->Group(0, GridDim::kCp));
  EXPECT_EQ(c->Group(0, GridDim::kEp), (std::vector<int>{0, 2}));
  EXPECT_EQ(c->Group(0, GridDim::kEdp), (std::vector<int>{0, 4}));
  EXPECT_EQ(c->Group(0, {GridDim::kDp, GridDim::kCp}), (std::vector<int>{0, 2, 4, 6}));

  GridSizes h;  // HSDP: tp 2, dp 4 = 2 shards x 2 replicas
  h.tp = 2, h.dp = 4, h.dp_replicate = 2;
  Result<RankOrder> d = RankOrder::CreateGrids(h);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->Group(1, GridDim::kDpShard), (std::vector<int>{1, 3}));
  EXPECT_EQ(d->Group(1, GridDim::kDpReplicate), (std::vector<int>{1, 5}));
  EXPECT_EQ(d->Group(1, GridDim::kDp), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(d->Coordinate(7, GridDim::kDpShard), 1);
  EXPECT_EQ(d->Coordinate(7, GridDim::kDpReplicate), 1);
  EXPECT_EQ(d->Group(1, GridDim::kTp), (std::vector<int>{0, 1}));  // the dense order is unchanged

  // generate_masked_orthogonal_rank_groups' docstring: tp 2, dp 3, pp 4 in order tp-dp-pp.
  Result<RankOrder> e = RankOrder::Create({2, 1, 3, 4});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->Group(0, GridDim::kDp), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(e->Group(23, GridDim::kDp), (std::vector<int>{19, 21, 23}));
}

TEST(RankOrder, EveryRankIsInExactlyOneGroupOfEachKind) {
  ForEveryGrid(12, [&](const GridSizes& g) {
    const RankOrder order = *RankOrder::CreateGrids(g);
    for (int di = 0; di < kNumAllGridDims; ++di) {
      const GridDim d = static_cast<GridDim>(di);
      std::map<int, std::vector<int>> by_id;
      for (int r = 0; r < order.World(); ++r) {
        const std::vector<int> group = order.Group(r, d);
        ASSERT_EQ(static_cast<int>(group.size()), order.Size(d)) << Describe(g) << " " << ToString(d);
        EXPECT_EQ(group[order.Coordinate(r, d)], r) << Describe(g) << " " << ToString(d);
        EXPECT_TRUE(std::is_sorted(group.begin(), group.end())) << Describe(g) << " " << ToString(d);
        EXPECT_EQ(order.Group(r, {d}), group) << Describe(g) << " " << ToString(d);
        const auto [it, fresh] = by_id.emplace(order.GroupId(r, d), group);
        EXPECT_EQ(it->second, group) << Describe(g) << " " << ToString(d) << ": one id, two groups";
      }
      std::vector<int> seen(order.World(), 0);
      for (const auto& [id, group] : by_id)
        for (int r : group) ++seen[r];
      EXPECT_EQ(seen, std::vector<int>(order.World(), 1)) << Describe(g) << " " << ToString(d);
    }
  });
}

TEST(RankOrder, PlacementAgreesWithTheStridesThePerformanceModelPrices) {
  // GroupLink (runner/performance_model.cc): a group of `size` members `stride` apart covers
  // size stride consecutive ranks, stays in a node when that is at most the node's ranks (a
  // group of one always does), and
  // otherwise has min(size, ranks_per_node / stride) members per node. Power-of-two grids tile
  // the nodes evenly, so the count from the members themselves must agree.
  int checked = 0;
  ForEveryGrid(16, [&](const GridSizes& g) {
    const RankOrder order = *RankOrder::CreateGrids(g);
    if ((order.World() & (order.World() - 1)) != 0) return;
    for (int gpus_per_node : {1, 2, 4, 8}) {
      for (int di = 0; di < kNumAllGridDims; ++di) {
        const GridDim d = static_cast<GridDim>(di);
        const int size = order.Size(d), stride = order.Stride(d);
        const int per_node = std::max(1, std::min(size, gpus_per_node / stride));
        for (int r = 0; r < order.World(); ++r) {
          const GroupPlacement p = order.Placement(r, {d}, gpus_per_node);
          EXPECT_EQ(p.members_per_node, per_node)
              << Describe(g) << " " << ToString(d) << " gpn" << gpus_per_node;
          EXPECT_EQ(p.nodes * p.members_per_node, size) << Describe(g) << " " << ToString(d);
          EXPECT_EQ(p.nodes == 1, size == 1 || size * stride <= gpus_per_node)
              << Describe(g) << " " << ToString(d);
          ++checked;
        }
      }
    }
  });
  EXPECT_GT(checked, 10000);
  // A group along two dimensions: dp-cp of tp 2 cp 2 dp 2 is {0, 2, 4, 6}, on two nodes of 4.
  GridSizes g;
  g.tp = 2, g.cp = 2, g.dp = 2;
  const GroupPlacement p = RankOrder::CreateGrids(g)->Placement(6, {GridDim::kDp, GridDim::kCp}, 4);
  EXPECT_EQ(p.nodes, 2);
  EXPECT_EQ(p.members_per_node, 2);
}

TEST(RankOrder, SizesThatDoNotDivideAreRefusedWithTheSizes) {
  auto refused = [](GridSizes g) {
    Result<RankOrder> r = RankOrder::CreateGrids(g);
    return r.ok() ? std::string("accepted") : std::string(r.status().message());
  };
  GridSizes g;
  g.dp = 6, g.dp_replicate = 4;
  EXPECT_EQ(refused(g),
            "rank order: dp 6 is not a multiple of dp_replicate 4 (hybrid sharding splits dp into shard x "
            "replicate)");
  g = {};
  g.tp = 2, g.dp = 3, g.ep = 2;
  EXPECT_EQ(refused(g),
            "rank order: etp 2 x ep 2 = 4 does not divide the 6 ranks of a stage (tp 2 x cp 1 x dp 3)");
  g = {};
  g.tp = 4, g.dp = 2, g.etp = 3;
  EXPECT_NE(refused(g).find("etp 3 x ep 1 = 3"), std::string::npos) << refused(g);
  g = {};
  g.ep = 0;
  EXPECT_EQ(refused(g), "rank order: ep size 0 is not positive");
  g = {};
  g.dp_replicate = 0;
  EXPECT_EQ(refused(g), "rank order: dp_replicate size 0 is not positive");
  g = {};
  g.etp = -1;
  EXPECT_NE(refused(g).find("etp size -1"), std::string::npos) << refused(g);
  for (const char* bad : {"tp-ep-dp-pp", "etp-ep-edp", "etp-ep-edp-pp-ep", "edp-edp-ep-pp", ""}) {
    g = {};
    g.expert_order = bad;
    EXPECT_NE(refused(g).find("expected each of etp, ep, edp, pp once"), std::string::npos)
        << bad << ": " << refused(g);
  }
  // Dense stages outermost, expert stages inside edp: different pipeline groups.
  g = {};
  g.dp = 2, g.pp = 2, g.expert_order = "etp-ep-pp-edp";
  EXPECT_EQ(refused(g),
            "rank order: dense order 'tp-cp-dp-pp' puts pipeline stages 2 ranks apart, expert order "
            "'etp-ep-pp-edp' 1; the two grids must share their pipeline groups");
  g.pp = 1;  // one stage: nothing to share
  EXPECT_EQ(refused(g), "accepted");
  g = {};  // both orders with pipeline stages innermost share them
  g.dp = 2, g.pp = 2, g.order = "pp-tp-cp-dp", g.expert_order = "pp-etp-ep-edp";
  EXPECT_EQ(refused(g), "accepted");
}

}  // namespace
}  // namespace tunepar
