#include "search/encoding.h"

#include <set>

#include <gtest/gtest.h>

#include "search/space.h"
#include "tests/test_support.h"

namespace tunepar::search {
namespace {

std::vector<Layout> Legal(const std::string& model, const std::string& space, int world) {
  const ModelShape m = testing::PresetModel(model);
  const SpaceSpec s = testing::PresetSpace(space);
  Result<SpaceEnumeration> e = EnumerateSpace({world, 8, &m, &s});
  EXPECT_TRUE(e.ok());
  return e->legal;
}

TEST(Encoding, CoordinatesLieInTheUnitCubeAndSpanIt) {
  const std::vector<Layout> legal = Legal("gpt-175b", "default", 1024);
  const LayoutEncoder enc = LayoutEncoder::Fit(legal);
  ASSERT_GT(enc.Dimension(), 0);
  std::vector<double> lo(enc.Dimension(), 1.0), hi(enc.Dimension(), 0.0);
  for (const Layout& l : legal) {
    const std::vector<double> x = enc.Encode(l);
    for (int i = 0; i < enc.Dimension(); ++i) {
      EXPECT_GE(x[i], 0.0);
      EXPECT_LE(x[i], 1.0);
      lo[i] = std::min(lo[i], x[i]);
      hi[i] = std::max(hi[i], x[i]);
    }
  }
  for (int i = 0; i < enc.Dimension(); ++i) {
    EXPECT_EQ(lo[i], 0.0) << enc.Dimensions()[i].knob;
    EXPECT_EQ(hi[i], 1.0) << enc.Dimensions()[i].knob;
  }
}

TEST(Encoding, DerivedAndConstantKnobsGetNoDimension) {
  const std::vector<Layout> legal = Legal("gpt-175b", "megatron", 1024);
  const LayoutEncoder enc = LayoutEncoder::Fit(legal);
  std::set<std::string> knobs;
  for (const EncodedDimension& d : enc.Dimensions()) knobs.insert(d.knob);
  EXPECT_TRUE(knobs.count("tp"));
  EXPECT_TRUE(knobs.count("pp"));
  EXPECT_TRUE(knobs.count("micro_batch"));
  EXPECT_FALSE(knobs.count("dp"));                 // derived from tp, pp
  EXPECT_FALSE(knobs.count("num_micro_batches"));  // derived from micro_batch, dp
  EXPECT_FALSE(knobs.count("precision"));          // fp16 only in this space
  EXPECT_FALSE(knobs.count("recompute"));          // full only
}

TEST(Encoding, PowerOfTwoKnobsAreLog2Ordinal) {
  std::vector<Layout> legal(4);
  for (int i = 0; i < 4; ++i) legal[i].micro_batch = 1 << (2 * i);  // 1, 4, 16, 64
  const LayoutEncoder enc = LayoutEncoder::Fit(legal);
  ASSERT_EQ(enc.Dimension(), 1);
  EXPECT_EQ(enc.Dimensions()[0].kind, EncodedDimension::Kind::kLog2);
  EXPECT_DOUBLE_EQ(enc.Encode(legal[1])[0], 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(enc.Encode(legal[2])[0], 2.0 / 3.0);
}

TEST(Encoding, ThreePrecisionsAreOneHot) {
  std::vector<Layout> legal(3);
  legal[0].precision = Precision::kFp32;
  legal[1].precision = Precision::kFp16;
  legal[2].precision = Precision::kBf16;
  const LayoutEncoder enc = LayoutEncoder::Fit(legal);
  ASSERT_EQ(enc.Dimension(), 3);
  for (int i = 0; i < 3; ++i) {
    const std::vector<double> x = enc.Encode(legal[i]);
    EXPECT_DOUBLE_EQ(x[0] + x[1] + x[2], 1.0);
  }
  EXPECT_NE(enc.Encode(legal[0]), enc.Encode(legal[1]));
}

}  // namespace
}  // namespace tunepar::search
