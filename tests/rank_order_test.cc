// base/rank_order.h: which ranks form each group (issue 30 item 2). Today's layouts must produce
// exactly the groups the core and the performance model used before the rank order existed:
// rank = tp_rank + tp (dp_rank + dp pp_rank), TP groups adjacent, DP strided by tp, stages by
// tp dp.
#include "base/rank_order.h"

#include <map>
#include <set>

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

}  // namespace
}  // namespace tunepar
