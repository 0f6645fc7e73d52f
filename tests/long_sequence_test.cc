// Context parallelism and uneven pipeline stages in the performance model and the legality rules
// (issue 35): each term with a test that fails when the term is dropped.
#include <algorithm>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "base/layout_rules.h"
#include "base/pipeline_split.h"
#include "runner/performance_model.h"
#include "search/space.h"
#include "tests/test_support.h"

namespace tunepar::runner {
namespace {

// Llama 3 8B on DGX H100 (8 GPUs a node, NVLink 450 GB/s a direction at 0.75, 5 us a step;
// InfiniBand 8 x 50 GB/s a node at 0.8, 10 us).
class ContextParallel : public ::testing::Test {
 protected:
  ModelShape model_ = testing::PresetModel("llama3-8b");  // 32 layers, 32 heads, 8 K/V heads, s 8192
  HardwareProfile hw_ = testing::PresetHardware("dgx-h100");

  Layout Cp(int tp, int cp, int dp) const {
    Layout l;
    l.tp = tp, l.cp = cp, l.dp = dp;
    l.micro_batch = 1;
    l.num_micro_batches = model_.global_batch / dp;
    l.flash_attention = true;
    return l;
  }
  Prediction P(const Layout& l) const {
    Result<PerformanceModel> m = PerformanceModel::Create(model_, hw_);
    EXPECT_TRUE(m.ok());
    EXPECT_TRUE(m->CheckLayout(l).ok()) << m->CheckLayout(l).message();
    return m->Predict(l);
  }
  // One K/V block: a rank's s / cp tokens, K and V of its tp share of the 8 K/V heads of 128 values, bf16.
  double Block(const Layout& l) const {
    return static_cast<double>(model_.seq_len) / l.cp * 2 * (8.0 / l.tp) * 128 * 2;
  }
};

// The K/V ring's exposed time, by hand: at 131072 tokens a block's 1/cp of the attention hides
// every hop but the dK/dV's last one home.
TEST_F(ContextParallel, LongSequencesHideEveryHopButTheLastOneHome) {
  model_.seq_len = 131072;
  model_.global_batch = 64;
  const Layout l = Cp(2, 4, 8);  // tp 2 x cp 4 = 8 ranks: the ring stays in the node
  const Prediction p = P(l);
  const double hop = Block(l) / (450e9 * 0.75) + 5e-6;
  const double per_step = l.num_micro_batches * 32.0;  // micro-batches x layers
  EXPECT_NEAR(p.time.cp_comm, per_step * hop, 1e-9 * per_step * hop);
}

// At a short sequence across nodes nothing hides a hop: forward cp - 1 hops of the block,
// backward cp - 1 of the block with its dK/dV, and the last one home, each past its block's
// attention.
TEST_F(ContextParallel, ShortSequencesAcrossNodesExposeTheRing) {
  model_.seq_len = 1024;
  const Layout l = Cp(8, 4, 8);  // tp 8 fills a node: the cp ring runs over InfiniBand
  const Prediction p = P(l);
  // The ring's members are on 4 nodes, one a node: 1/8 of a node's NICs each.
  const double bandwidth = 8 * 50e9 * 0.8 / 8, latency = 10e-6;
  auto hop = [&](double bytes) { return bytes / bandwidth + latency; };
  const double s = model_.seq_len, h = model_.hidden;
  const double attention_forward = 4 * s * s * h / 8 / 4 / (989e12 * 0.45), attention_backward = 2.5 * attention_forward;
  const double b = Block(l);
  const double per_layer = 3 * (hop(b) - attention_forward / 4) + 3 * (hop(2 * b) - attention_backward / 4) + hop(b);
  ASSERT_GT(hop(b), attention_forward / 4);  // the case is what it says
  const double per_step = l.num_micro_batches * 32.0;
  EXPECT_NEAR(p.time.cp_comm, per_step * per_layer, 1e-9 * per_step * per_layer);
}

// GQA sends only the K/V heads: 8 of 32, a quarter of multi-head attention's bytes.
TEST_F(ContextParallel, GqaShrinksTheExchangeByKvHeadsOverHeads) {
  model_.seq_len = 131072;
  model_.global_batch = 64;
  const Layout l = Cp(1, 8, 8);
  const double latency = l.num_micro_batches * 32.0 * 5e-6;
  const double gqa = P(l).time.cp_comm - latency;
  model_.kv_heads = 32;
  const double mha = P(l).time.cp_comm - latency;
  EXPECT_NEAR(gqa / mha, 8.0 / 32.0, 1e-9);
}

// Recomputation runs the forward ring again.
TEST_F(ContextParallel, RecomputationRunsTheForwardRingAgain) {
  model_.seq_len = 1024;
  Layout l = Cp(8, 4, 8);
  const double none = P(l).time.cp_comm;
  l.recompute = Recompute::kFull;
  const double full = P(l).time.cp_comm;
  const double bandwidth = 8 * 50e9 * 0.8 / 8, latency = 10e-6;
  const double s = model_.seq_len, h = model_.hidden, b = Block(l);
  const double forward = 3 * (b / bandwidth + latency - 4 * s * s * h / 8 / 4 / (989e12 * 0.45) / 4);
  EXPECT_NEAR(full - none, l.num_micro_batches * 32.0 * forward, 1e-9 * none);
}

// A rank keeps the activations of its s / cp tokens; the attention's work per rank is 1 / cp.
TEST_F(ContextParallel, ActivationsAndAttentionFallByCp) {
  model_.seq_len = 32768;
  model_.global_batch = 64;
  const Prediction one = P(Cp(1, 1, 8)), two = P(Cp(1, 2, 4));
  EXPECT_NEAR(two.memory.activations, one.memory.activations / 2, 1e-9 * one.memory.activations);
  // Per micro-batch (cp 2 runs twice as many: dp 4), half the attention each.
  EXPECT_NEAR(two.compute_terms.attention_core, one.compute_terms.attention_core, 1e-9 * one.compute_terms.attention_core);
  EXPECT_NEAR(two.compute_terms.mlp, one.compute_terms.mlp, 0.05 * one.compute_terms.mlp);
  EXPECT_GT(two.memory.comm_buffers, one.memory.comm_buffers);  // the ring's K/V blocks
}

// Weights are replicated over cp: ZeRO shards them over dp x cp (Megatron-Core's dp-cp group).
TEST_F(ContextParallel, ZeroShardsOverDpTimesCp) {
  model_.seq_len = 32768;
  model_.global_batch = 64;
  Layout one = Cp(1, 1, 8), two = Cp(1, 2, 4);
  one.zero = two.zero = 1;
  EXPECT_DOUBLE_EQ(P(two).memory.optimizer_states, P(one).memory.optimizer_states);
  EXPECT_DOUBLE_EQ(P(two).time.optimizer, P(one).time.optimizer);
  Layout alone = Cp(1, 2, 1);  // cp 2, dp 1: ZeRO still shards over the two cp ranks
  alone.num_micro_batches = 64, alone.zero = 1;
  Layout unsharded = alone;
  unsharded.zero = 0;
  EXPECT_NEAR(P(alone).memory.optimizer_states, P(unsharded).memory.optimizer_states / 2, 1.0);
}

TEST_F(ContextParallel, NeedsFlashAttentionAndASequenceOf2CpChunks) {
  Result<PerformanceModel> m = PerformanceModel::Create(model_, hw_);
  Layout l = Cp(1, 2, 4);
  l.flash_attention = false;
  EXPECT_NE(m->CheckLayout(l).message().find("flash"), std::string::npos);
  model_.seq_len = 8190;  // 2 x 3 x 1365: not 4 chunks
  Result<PerformanceModel> odd = PerformanceModel::Create(model_, hw_);
  EXPECT_NE(odd->CheckLayout(Cp(1, 2, 4)).message().find("4 equal chunks"), std::string::npos);
}

// A 70-layer GPT (h 8192, 64 heads) on 8 stages, and the same with 72 layers, split evenly (9 a
// stage). Uneven: 8 + 6 x 9 + 8, the slowest stages the middle ones (9 layers, no head).
class UnevenStages : public ::testing::Test {
 protected:
  ModelShape Gpt(int layers) const {
    ModelShape m = testing::PresetModel("gpt-22b");
    m.layers = layers, m.hidden = 8192, m.heads = 64;
    return m;
  }
  Prediction P(const ModelShape& m, bool uneven) const {
    Layout l;
    l.tp = 8, l.pp = 8, l.dp = 8, l.micro_batch = 1, l.num_micro_batches = m.global_batch / 8;
    l.uneven_stages = uneven;
    l.flash_attention = true;
    Result<PerformanceModel> pm = PerformanceModel::Create(m, testing::PresetHardware("lumi-g"));
    EXPECT_TRUE(pm->CheckLayout(l).ok()) << pm->CheckLayout(l).message();
    return pm->Predict(l);
  }
};

// The pruned search finds the split the exhaustive one defines, for heads light and heavy
// (GPT, Llama 3 8B's 1.8 layers, a ViT with a patch embedding on the first stage).
TEST(PipelineSplit, ThePrunedSearchFindsTheExhaustiveOnesSplit) {
  for (const char* preset : {"gpt-22b", "llama3-8b", "climax", "tiny"}) {
    ModelShape m = testing::PresetModel(preset);
    for (int layers = 2; layers <= 130; layers += (layers < 40 ? 1 : 7)) {
      m.layers = layers;
      for (int pp = 2; pp <= std::min(layers, 24); ++pp)
        EXPECT_EQ(UnevenSplit(m, pp).layers, UnevenSplitByEveryCandidate(m, pp).layers)
            << preset << " " << layers << " layers on " << pp;
    }
  }
}

TEST_F(UnevenStages, TheRuleSplitsSeventyLayersOverEightStages) {
  EXPECT_EQ(UnevenSplit(Gpt(70), 8).Text(), "8 + 6 x 9 + 8");
}

// The step is m + p - 1 slots of the slowest stage: a middle stage of 9 layers, which the even
// 72-layer split's last stage exceeds by the head alone.
TEST_F(UnevenStages, TheSlowestStageSetsTheStep) {
  const Prediction uneven = P(Gpt(70), true), even = P(Gpt(72), false);
  EXPECT_EQ(uneven.compute_terms.head_and_embedding, 0.0);  // the slowest stage has no head
  EXPECT_GT(even.compute_terms.head_and_embedding, 0.0);
  EXPECT_NEAR(even.time.compute - uneven.time.compute, even.compute_terms.head_and_embedding,
              1e-9 * even.time.compute);
  EXPECT_NEAR(even.compute_terms.mlp, uneven.compute_terms.mlp, 1e-9 * even.compute_terms.mlp);  // 9 layers each
  EXPECT_LT(uneven.time.bubble, even.time.bubble);
}

// 1F1B: the first stage holds 8 micro-batches of its 8 layers (64 layer-activations), the second
// 7 of 9 (63); evenly, 8 of 9 (72).
TEST_F(UnevenStages, TheFirstStageKeepsActivationsOfItsOwnLayers) {
  const Prediction uneven = P(Gpt(70), true), even = P(Gpt(72), false);
  EXPECT_NEAR(uneven.memory.activations / even.memory.activations, 64.0 / 72.0, 1e-9);
}

// Llama 3 8B (32 layers, s 8192, batch 1024) at world 64 in the default space.
class LongSequenceRules : public ::testing::Test {
 protected:
  ModelShape model_ = testing::PresetModel("llama3-8b");
  SpaceSpec space_ = testing::PresetSpace("long-context");

  std::string Failed(Layout l) const {
    const search::SpaceQuery q{64, 8, &model_, &space_};
    l.dp = std::max(1, 64 / (l.tp * l.cp * l.pp));
    l.num_micro_batches = static_cast<int>(model_.global_batch / (l.micro_batch * l.dp));
    return std::string(search::CheckLegal(q, l).message());
  }
  static Layout Flash(int tp, int cp, int pp) {
    Layout l;
    l.tp = tp, l.cp = cp, l.pp = pp, l.flash_attention = true;
    return l;
  }
};

TEST_F(LongSequenceRules, ContextParallelismNamesWhatItNeeds) {
  EXPECT_EQ(Failed(Flash(1, 2, 1)), "");
  Layout unfused = Flash(1, 2, 1);
  unfused.flash_attention = false;
  EXPECT_NE(Failed(unfused).find("cp_needs_flash"), std::string::npos);
  EXPECT_NE(Failed(Flash(4, 32, 1)).find("tp_pp_divide_world"), std::string::npos);  // tp x cp = 128 > 64
  model_.seq_len = 8190;  // 4 chunks of 2047.5 tokens
  EXPECT_NE(Failed(Flash(1, 2, 1)).find("cp_splits_sequence"), std::string::npos);
  EXPECT_EQ(Failed(Flash(1, 1, 1)), "");
  Layout sp = Flash(2, 2, 1);
  sp.seq_parallel = true;
  model_.seq_len = 8196;  // 4 chunks of 2049: 4098 tokens a rank, over tp 2; 8196 % (2 x 2) = 0
  EXPECT_EQ(Failed(sp), "");
  sp.tp = 4;  // 8196 % (4 x 2) != 0
  EXPECT_NE(Failed(sp).find("seq_parallel_splits_sequence"), std::string::npos);
}

TEST_F(LongSequenceRules, UnevenStagesReplacePpDividesLayers) {
  Layout three = Flash(1, 1, 3);  // 32 layers on 3 stages; world 63 = 3 x 21 below
  model_.global_batch = 21 * 16;
  const search::SpaceQuery q{63, 8, &model_, &space_};
  three.dp = 21, three.num_micro_batches = 16;
  EXPECT_NE(search::CheckLegal(q, three).message().find("pp_divides_layers"), std::string::npos);
  three.uneven_stages = true;
  EXPECT_EQ(search::CheckLegal(q, three).message(), "");
  EXPECT_EQ(UnevenSplit(model_, 3).Text(), "11 + 11 + 10");  // the LM head weighs 1.8 layers
  // 32 layers on 4 stages unevenly (7 + 2 x 9 + 7), interleaved: the rule refuses it.
  model_.global_batch = 1024;
  Layout four = Flash(1, 1, 4);
  four.uneven_stages = true;
  EXPECT_EQ(Failed(four), "");
  four.virtual_stages = 2;
  EXPECT_NE(Failed(four).find("uneven_without_interleave"), std::string::npos);
  Layout one = Flash(1, 1, 1);
  one.uneven_stages = true;
  EXPECT_NE(Failed(one).find("uneven_needs_pp"), std::string::npos);
  // A GPT whose head weighs half a layer: on 8 stages of 9 its even split is the rule's, so the
  // uneven layout would run the even one.
  model_ = testing::PresetModel("gpt-22b");
  model_.layers = 72, model_.hidden = 8192, model_.heads = 64;
  Layout even = Flash(1, 1, 8);
  even.uneven_stages = true;
  EXPECT_NE(Failed(even).find("uneven_stages_split"), std::string::npos);
}

}  // namespace
}  // namespace tunepar::runner

namespace tunepar::runner {
namespace {

// A space that omits cp offers the powers of two leaving each rank 8192 tokens or more: nothing
// for the presets' 2048- and 8192-token sequences (their spaces and the README's dry run are what
// they were), cp 1-16 at 131072 tokens; a space that lists cp keeps its list; ForModel makes the
// list explicit for everything handed the space.
TEST(LongSequenceSpace, AnOmittedCpFollowsTheSequence) {
  const SpaceSpec space = testing::PresetSpace("default");
  ModelShape llama = testing::PresetModel("llama3-8b");
  EXPECT_EQ(space.Values(Knob::kCp, 64, {0, llama.seq_len}), std::vector<int>{1});
  EXPECT_EQ(space.Values(Knob::kCp, 64, {0, 16384}), (std::vector<int>{1, 2}));
  EXPECT_EQ(space.Values(Knob::kCp, 64, {0, 131072}), (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(testing::PresetSpace("long-context").Values(Knob::kCp, 64, {0, 2048}),
            (std::vector<int>{1, 2, 4, 8, 16, 32}));
  const SpaceSpec resolved = ForModel(space, {0, 131072});
  EXPECT_FALSE(resolved.Of(Knob::kCp).sequence_splits);
  EXPECT_EQ(resolved.Values(Knob::kCp, 64), (std::vector<int>{1, 2, 4, 8, 16}));

  const ModelShape gpt = testing::PresetModel("gpt-1t");
  Result<search::SpaceEnumeration> d = search::EnumerateSpace({3072, 8, &gpt, &space});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->legal.size(), 114300u);  // README's dry run
  llama.seq_len = 131072;
  llama.global_batch = 64;
  Result<search::SpaceEnumeration> l = search::EnumerateSpace({64, 8, &llama, &space});
  ASSERT_TRUE(l.ok());
  std::set<int> cps;
  for (const Layout& layout : l->legal) cps.insert(layout.cp);
  EXPECT_EQ(cps, (std::set<int>{1, 2, 4, 8, 16}));
}

}  // namespace
}  // namespace tunepar::runner
