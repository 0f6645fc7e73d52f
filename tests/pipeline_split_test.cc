// The pipeline split rule (base/pipeline_split.h): the even split as tunepar-core has always run
// it, Megatron-LM's first/last-stage counts balanced against the embedding and the head (Llama 3
// 405B's 7 + 14 x 8 + 7, as Meta describes it), how the splits are said, and no split where the
// rule has none.
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "base/pipeline_split.h"
#include "tests/test_support.h"

namespace tunepar {
namespace {

using testing::PresetModel;

int Sum(const StageSplit& split) { return std::accumulate(split.layers.begin(), split.layers.end(), 0); }

// A GPT of 70 layers (hidden 8192, 2048 tokens, GPT-2's vocabulary padded to 51200): its head
// (2 s h V) is half a layer's forward work.
ModelShape Gpt70() {
  ModelShape m;
  m.name = "gpt-70l";
  m.layers = 70;
  m.hidden = 8192;
  m.heads = 64;
  m.seq_len = 2048;
  m.vocab = 51200;
  m.global_batch = 512;
  return m;
}

TEST(PipelineSplit, Llama3405bOnSixteenStagesHoldsOneLayerFewerAtEachEnd) {
  const ModelShape m = PresetModel("llama3-405b");
  ASSERT_EQ(m.layers, 126);
  ASSERT_EQ(m.hidden, 16384);
  ASSERT_EQ(m.KvHeads(), 8);
  ASSERT_EQ(m.MlpWidth(), 53248);
  ASSERT_EQ(m.vocab, 128256);
  std::vector<int> expected(16, 8);
  expected.front() = expected.back() = 7;
  EXPECT_EQ(UnevenSplit(m, 16).layers, expected);
  EXPECT_EQ(SplitLayers(m, 16, true).layers, expected);
  EXPECT_EQ(SplitLayers(m, 16, true).Text(), "7 + 14 x 8 + 7");
  EXPECT_EQ(SplitLayers(m, 16, true).Most(), 8);
  EXPECT_FALSE(SplitLayers(m, 16, true).Even());
}

TEST(PipelineSplit, A70LayerGptOnEightStagesKeepsItsMiddleStagesEqual) {
  const StageSplit split = UnevenSplit(Gpt70(), 8);
  ASSERT_EQ(split.Stages(), 8);
  EXPECT_EQ(Sum(split), 70);
  for (int stage = 2; stage < 7; ++stage) EXPECT_EQ(split.layers[stage], split.layers[1]) << "stage " << stage;
  EXPECT_GE(split.First(), 1);
  EXPECT_GE(split.Last(), 1);
  // The head costs half a layer: the ends give up one layer each to the six middle stages.
  EXPECT_EQ(split.layers, (std::vector<int>{8, 9, 9, 9, 9, 9, 9, 8}));
  EXPECT_EQ(split.Text(), "8 + 6 x 9 + 8");
}

// The even split is what tunepar-core ran before the rule (runner/core/parameters.cc): layers / pp
// each, the first layers % pp stages one more; uneven off, or pp 1, gives it.
TEST(PipelineSplit, TheEvenSplitIsUnchanged) {
  for (int layers : {1, 4, 5, 7, 70, 126}) {
    for (int pp = 1; pp <= layers && pp <= 16; ++pp) {
      const StageSplit split = EvenSplit(layers, pp);
      ASSERT_EQ(split.Stages(), pp);
      EXPECT_EQ(Sum(split), layers);
      int first_layer = 0;
      for (int stage = 0; stage < pp; ++stage) {
        // The formula ShardOf used: first = stage * base + min(stage, extra).
        const int base = layers / pp, extra = layers % pp;
        EXPECT_EQ(split.layers[stage], base + (stage < extra ? 1 : 0)) << layers << " over " << pp;
        EXPECT_EQ(first_layer, stage * base + std::min(stage, extra)) << layers << " over " << pp;
        first_layer += split.layers[stage];
      }
    }
  }
  ModelShape m = Gpt70();
  EXPECT_EQ(SplitLayers(m, 8, false).layers, EvenSplit(70, 8).layers);
  EXPECT_EQ(SplitLayers(m, 1, true).layers, std::vector<int>{70});  // uneven asks for pp > 1
  m.layers = 64;
  EXPECT_EQ(SplitLayers(m, 8, false).layers, std::vector<int>(8, 8));
}

TEST(PipelineSplit, TextSaysTheSplit) {
  EXPECT_EQ(EvenSplit(32, 4).Text(), "4 x 8");
  EXPECT_EQ((StageSplit{{9, 7}}.Text()), "9 + 7");
  EXPECT_EQ((StageSplit{{3, 4, 3}}.Text()), "3 + 4 + 3");
  EXPECT_EQ((StageSplit{{7, 8, 8, 7}}.Text()), "7 + 2 x 8 + 7");
  EXPECT_EQ(EvenSplit(7, 3).Text(), "3 + 2 + 2");
  EXPECT_EQ(EvenSplit(70, 8).Text(), "9 + 9 + 9 + 9 + 9 + 9 + 8 + 8");  // middle stages unequal
  EXPECT_EQ(StageSplit{}.Text(), "no split");
}

TEST(PipelineSplit, NoSplitWithFewerLayersThanStagesOrOneStage) {
  ModelShape m = Gpt70();
  m.layers = 3;
  EXPECT_TRUE(UnevenSplit(m, 4).layers.empty());
  EXPECT_TRUE(SplitLayers(m, 4, true).layers.empty());
  EXPECT_TRUE(UnevenSplit(m, 1).layers.empty());
  // pp 2 needs one layer per end; 3 stages need the middle one to hold one.
  m.layers = 2;
  EXPECT_EQ(UnevenSplit(m, 2).layers, (std::vector<int>{1, 1}));
  EXPECT_TRUE(UnevenSplit(m, 3).layers.empty());
}

}  // namespace
}  // namespace tunepar
