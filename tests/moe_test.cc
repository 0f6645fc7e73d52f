// Mixtures of experts (issue 36): the shape fields, parameters (total and active) and FLOPs. Each
// field has a case that fails when its term is dropped; dense shapes count as before.
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/flops.h"
#include "base/layout_rules.h"
#include "base/model_shape.h"
#include "base/rank_order.h"
#include "runner/core/supported_knobs.h"
#include "runner/core_backend.h"
#include "runner/performance_model.h"
#include "search/space.h"
#include "tests/test_support.h"

namespace tunepar {
namespace {

using testing::PresetModel;

// Mistral AI's published sizes (arXiv 2401.04088: 47B total, 13B active; the Hugging Face card
// 46.7B and 12.9B); the exact sums: per layer 2h^2 (1 + g/a) + 8 x 3 h f_e + h E (router) + 2h,
// plus 2 V h and the final norm h.
TEST(MoeShape, MixtralCountsItsPublishedTotalAndActiveParameters) {
  const ModelShape m = PresetModel("mixtral-8x7b");
  const int64_t L = 32, h = 4096, f_e = 14336, V = 32000, E = 8, k = 2;
  const int64_t attention = 2 * h * h + 2 * h * h * 8 / 32;
  const int64_t total = L * (attention + E * 3 * h * f_e + h * E + 2 * h) + 2 * V * h + h;
  const int64_t active = total - L * (E - k) * 3 * h * f_e;
  EXPECT_EQ(m.Parameters(), static_cast<double>(total));
  EXPECT_EQ(m.ActiveParameters(), static_cast<double>(active));
  EXPECT_LT(std::abs(m.Parameters() / 46.7e9 - 1), 0.01) << m.Parameters();
  EXPECT_LT(std::abs(m.ActiveParameters() / 12.9e9 - 1), 0.01) << m.ActiveParameters();
}

// The DeepSeek-V3-like preset: per layer MHA 4h^2, 256 + 1 experts of 3 h f_e, the router h E and
// two norms; 704.9B total and 38.7B active, within 6% of DeepSeek's 671B and 37B (MHA in place of
// MLA, every layer MoE, no MTP module: the file says why).
TEST(MoeShape, DeepSeekV3LikeIsNearItsPublishedSizes) {
  const ModelShape m = PresetModel("deepseek-v3-like");
  const int64_t L = 61, h = 7168, E = 256, expert = 3 * h * 2048, V = 129280;
  const int64_t total = L * (4 * h * h + (E + 1) * expert + h * E + 2 * h) + 2 * V * h + h;
  EXPECT_EQ(m.MoeLayers(), 61);
  EXPECT_EQ(m.Parameters(), static_cast<double>(total));
  EXPECT_EQ(m.ActiveParameters(), static_cast<double>(total - L * (E - 8) * expert));
  EXPECT_LT(std::abs(m.Parameters() / 671e9 - 1), 0.06) << m.Parameters();
  EXPECT_LT(std::abs(m.ActiveParameters() / 37e9 - 1), 0.06) << m.ActiveParameters();
}

// One MoE field of Mixtral at a time, against its closed form.
class MoeOneField : public ::testing::Test {
 protected:
  ModelShape base_ = PresetModel("mixtral-8x7b");
  const int64_t L = base_.layers, h = base_.hidden, f = base_.ffn_hidden, f_e = base_.expert_ffn_hidden;
  const double expert = 3.0 * h * f_e;
  double Delta(const ModelShape& changed) const { return changed.Parameters() - base_.Parameters(); }
  double ActiveDelta(const ModelShape& changed) const {
    return changed.ActiveParameters() - base_.ActiveParameters();
  }
};

TEST_F(MoeOneField, Experts) {  // each expert 3 h f_e and a router column h, in every layer
  ModelShape m = base_;
  m.experts = 16;
  EXPECT_EQ(Delta(m), L * 8 * (expert + h));
  EXPECT_EQ(ActiveDelta(m), static_cast<double>(L * 8 * h));  // only the router grows for a token
}

TEST_F(MoeOneField, TopK) {  // a token passes through one more expert per layer
  ModelShape m = base_;
  m.top_k = 3;
  EXPECT_EQ(Delta(m), 0.0);
  EXPECT_EQ(ActiveDelta(m), L * expert);
}

TEST_F(MoeOneField, ExpertFfnHidden) {  // 8 experts of 3 h matrices each, of which 2 active
  ModelShape m = base_;
  m.expert_ffn_hidden += 1024;
  EXPECT_EQ(Delta(m), static_cast<double>(L * 8 * 3 * h * 1024));
  EXPECT_EQ(ActiveDelta(m), static_cast<double>(L * 2 * 3 * h * 1024));
  m.expert_ffn_hidden = 0;  // not given: ffn_hidden
  m.ffn_hidden = f + 1024;
  EXPECT_EQ(m.ExpertMlpWidth(), f + 1024);
}

TEST_F(MoeOneField, SharedExperts) {  // one more f_e-wide MLP that every token passes through
  ModelShape m = base_;
  m.shared_experts = 1;
  EXPECT_EQ(Delta(m), L * expert);
  EXPECT_EQ(ActiveDelta(m), L * expert);
}

TEST_F(MoeOneField, MoeEvery) {  // every 2nd layer (0, 2, ..., 30) MoE: 16 layers a dense f-wide MLP
  ModelShape m = base_;
  m.moe_every = 2;
  EXPECT_EQ(m.MoeLayers(), 16);
  EXPECT_EQ(Delta(m), 16 * (3.0 * h * f - 8 * expert - 8.0 * h));
  m.moe_every = 3;  // layers 0, 3, ..., 30: ceil(32 / 3)
  EXPECT_EQ(m.MoeLayers(), 11);
}

TEST_F(MoeOneField, CapacityFactorReadsAsANumberAndWritesBack) {
  Result<ModelShape> m = ParseModelShape(runner::ModelToml(base_) + "capacity_factor = 1.25\n", "m.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->capacity_factor, 1.25);
  for (const ShapeRow& row : ShapeRows()) {
    if (row.name == "capacity_factor") EXPECT_EQ(ShapeFieldText(row, *m), "1.25");
  }
  Result<ModelShape> back = ParseModelShape(runner::ModelToml(*m), "back.toml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->capacity_factor, 1.25);
  EXPECT_EQ(back->Parameters(), m->Parameters());  // capacity changes time, not parameters
  Result<ModelShape> whole = ParseModelShape(runner::ModelToml(base_) + "capacity_factor = 2\n", "m.toml");
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->capacity_factor, 2.0);
}

// The Mixtral file read back through the core's model file (every MoE field), and a dense file
// holds no MoE key.
TEST(MoeShape, ModelFileRoundTripsAndDenseFilesHoldNoMoeKey) {
  ModelShape m = PresetModel("deepseek-v3-like");
  m.moe_every = 2;
  m.capacity_factor = 1.5;
  Result<ModelShape> back = ParseModelShape(runner::ModelToml(m), "m.toml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  for (const ShapeRow& row : ShapeRows()) EXPECT_EQ(row.get(*back), row.get(m)) << row.name;
  const std::string dense = runner::ModelToml(PresetModel("llama3-8b"));
  for (const char* key : {"experts", "top_k", "expert_ffn_hidden", "shared_experts", "moe_every", "capacity_factor"})
    EXPECT_EQ(dense.find(key), std::string::npos) << key << "\n" << dense;
}

// Inconsistent MoE fields: the field and what is wrong, one message each.
TEST(MoeShape, InconsistentFieldsAreNamed) {
  const std::string base = runner::ModelToml(PresetModel("llama3-8b"));
  const struct {
    const char* lines;
    const char* field;
    const char* says;
  } cases[] = {
      {"experts = 8\ntop_k = 9\n", "top_k", "at most experts (top 9 of 8 experts)"},
      {"experts = 8\n", "top_k", "required with experts"},
      {"experts = 1\ntop_k = 1\n", "experts", "at least 2"},
      {"top_k = 2\n", "top_k", "only with experts"},
      {"shared_experts = 1\n", "shared_experts", "only with experts"},
      {"expert_ffn_hidden = 1024\n", "expert_ffn_hidden", "only with experts"},
      {"moe_every = 2\n", "moe_every", "only with experts"},
      {"capacity_factor = 1.0\n", "capacity_factor", "only with experts"},
      {"experts = 8\ntop_k = 2\nmoe_every = 33\n", "moe_every", "at most layers"},
      {"experts = 8\ntop_k = 2\ncapacity_factor = 1.255\n", "capacity_factor", "at most 2 decimals"},
      {"experts = 8\ntop_k = 2\ncapacity_factor = -1.0\n", "capacity_factor", "non-negative"},
  };
  for (const auto& c : cases) {
    Result<ModelShape> m = ParseModelShape(base + c.lines, "m.toml");
    ASSERT_FALSE(m.ok()) << c.lines;
    EXPECT_NE(m.status().message().find(c.field), std::string::npos) << m.status().message();
    EXPECT_NE(m.status().message().find(c.says), std::string::npos) << m.status().message();
  }
}

// FLOPs: 6 per token per GEMM parameter; a MoE layer's MLP is (k + shared) experts of 3 h f_e
// (Megatron-LM's count; the router not counted). One sequence per step: exact integers.
TEST(MoeFlops, ExpertGemmsPerTokenAreTopKPlusShared) {
  ModelShape m = PresetModel("mixtral-8x7b");
  m.global_batch = 1;
  const double s = m.seq_len, h = m.hidden, f_e = m.expert_ffn_hidden, L = m.layers, V = m.vocab;
  const double attention = 2 * h * h + 2 * h * h * 8 / 32;
  const double expected = 6 * s * (L * (attention + 2 * 3 * h * f_e) + h * V) + 12 * s * s * h * L;
  EXPECT_EQ(ModelFlopsPerStep(m), expected);
  ModelShape shared = m;
  shared.shared_experts = 1;
  EXPECT_EQ(ModelFlopsPerStep(shared) - ModelFlopsPerStep(m), 6 * s * L * 3 * h * f_e);
  ModelShape top3 = m;
  top3.top_k = 3;
  EXPECT_EQ(ModelFlopsPerStep(top3) - ModelFlopsPerStep(m), 6 * s * L * 3 * h * f_e);
  ModelShape halves = m;  // 16 dense layers of f = 14336: one expert's GEMMs fewer each
  halves.moe_every = 2;
  EXPECT_EQ(ModelFlopsPerStep(m) - ModelFlopsPerStep(halves), 6 * s * 16 * 3 * h * f_e);
  ModelShape more = m;  // experts nobody is routed to cost no FLOPs
  more.experts = 64;
  EXPECT_EQ(ModelFlopsPerStep(more), ModelFlopsPerStep(m));
}

// Full recomputation reruns every layer's forward pass, the MoE layers' at their own count.
TEST(MoeFlops, FullRecomputeRerunsTheMoeForward) {
  ModelShape m = PresetModel("mixtral-8x7b");
  m.global_batch = 1;
  const double extra = HardwareFlopsPerStep(m, Recompute::kFull) - ModelFlopsPerStep(m);
  EXPECT_EQ(extra, LayerForwardFlops(m) * m.layers);
}

// ---- The ep knob: its rules, the rank order, the space.

const ConstraintRow& Rule(Constraint c) { return ConstraintRows()[static_cast<int>(c)]; }

TEST(MoeKnob, RulesNameWhatEpNeeds) {
  const ModelShape dense = PresetModel("llama3-8b"), mixtral = PresetModel("mixtral-8x7b");
  Layout l;
  l.tp = 2, l.pp = 2, l.ep = 2;
  const LayoutQuery on_dense{64, 8, &dense, nullptr}, on_mixtral{64, 8, &mixtral, nullptr};
  EXPECT_TRUE(Rule(Constraint::kEpNeedsExperts).fails(on_dense, l));
  EXPECT_FALSE(Rule(Constraint::kEpNeedsExperts).fails(on_mixtral, l));
  EXPECT_FALSE(Rule(Constraint::kEpDividesExperts).fails(on_mixtral, l));
  l.ep = 16;  // 8 experts
  EXPECT_TRUE(Rule(Constraint::kEpDividesExperts).fails(on_mixtral, l));
  l.ep = 8;  // dp x cp = 64 / (2 x 2) = 16: 8 divides it; at pp 16 it is 2
  EXPECT_FALSE(Rule(Constraint::kEpDividesDpCp).fails(on_mixtral, l));
  l.pp = 16;
  EXPECT_TRUE(Rule(Constraint::kEpDividesDpCp).fails(on_mixtral, l));
  EXPECT_EQ(ConstraintId(Constraint::kEpDividesDpCp), "ep_divides_dp_cp");
}

// Megatron-Core's expert grid with etp = tp: the ep group's members lie tp apart, inside dp x cp.
TEST(MoeKnob, TheEpGroupIsTpApart) {
  Layout l;
  l.tp = 4, l.cp = 2, l.dp = 8, l.pp = 2, l.ep = 8;
  const RankOrder order = RankOrder::Of(l);
  EXPECT_EQ(order.Size(GridDim::kEp), 8);
  EXPECT_EQ(order.Stride(GridDim::kEp), 4);
  EXPECT_EQ(order.Size(GridDim::kEdp), 2);  // cp dp / ep
  EXPECT_EQ(order.Group(0, GridDim::kEp), (std::vector<int>{0, 4, 8, 12, 16, 20, 24, 28}));
}

// A space that omits ep offers the divisors of the model's experts: a dense model's space is what
// it was (ep 1 alone, the same candidates), Mixtral's has legal ep 2, 4, 8 layouts.
TEST(MoeKnob, OmittedEpOffersTheExpertsDivisors) {
  const SpaceSpec space = testing::PresetSpace("default");
  const ModelShape dense = PresetModel("gpt-1t"), mixtral = PresetModel("mixtral-8x7b");
  Result<search::SpaceEnumeration> d = search::EnumerateSpace({3072, 8, &dense, &space});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->legal.size(), 114300u);  // README's dry run
  EXPECT_EQ(d->candidates, 9757440);
  Result<search::SpaceEnumeration> m = search::EnumerateSpace({256, 8, &mixtral, &space});
  ASSERT_TRUE(m.ok());
  std::set<int> eps;
  for (const Layout& l : m->legal) eps.insert(l.ep);
  EXPECT_EQ(eps, (std::set<int>{1, 2, 4, 8}));
}

// tunepar-core has no MoE layer: it refuses a model with experts (one line naming the model and
// the count) and pins ep 1 for it; a dense model's support is what it was (no ep entry).
TEST(MoeKnob, TheCoreRefusesExpertsAndPinsEpOne) {
  const ModelShape mixtral = PresetModel("mixtral-8x7b");
  const Status refused = core::SupportsModel(mixtral);
  EXPECT_EQ(refused.code(), StatusCode::kConfig);
  EXPECT_NE(refused.message().find("model mixtral-8x7b has 8 experts: tunepar-core has no MoE layer yet"),
            std::string::npos)
      << refused.message();
  EXPECT_EQ(core::SupportedKnobs(core::CoreBuild::kCpu, mixtral).Of(Knob::kEp), std::vector<int>{1});
  EXPECT_TRUE(core::SupportedKnobs(core::CoreBuild::kCpu, PresetModel("llama3-8b")).Of(Knob::kEp).empty());
  EXPECT_TRUE(core::SupportsModel(PresetModel("llama3-8b")).ok());
}

// ---- The performance model's MoE terms: Mixtral on DGX H100 (8 GPUs a node; NVLink 450 GB/s a
// direction at 0.75, 5 us; InfiniBand 8 x 50 GB/s a node at 0.8).
class MoeModel : public ::testing::Test {
 protected:
  ModelShape model_ = PresetModel("mixtral-8x7b");  // 32 MoE layers, 8 experts top-2, s 4096
  runner::HardwareProfile hw_ = testing::PresetHardware("dgx-h100");

  Layout L(int tp, int dp, int ep, int zero = 0) const {
    Layout l;
    l.tp = tp, l.dp = dp, l.ep = ep, l.zero = zero;
    l.micro_batch = 1;
    l.num_micro_batches = model_.global_batch / dp;
    l.flash_attention = true;
    return l;
  }
  runner::Prediction P(const Layout& l, const ModelShape& m) const {
    Result<runner::PerformanceModel> pm = runner::PerformanceModel::Create(m, hw_);
    EXPECT_TRUE(pm.ok());
    EXPECT_TRUE(pm->CheckLayout(l).ok()) << pm->CheckLayout(l).message();
    return pm->Predict(l);
  }
  runner::Prediction P(const Layout& l) const { return P(l, model_); }
};

// ep 8 at tp 1: the group is one node's 8 GPUs, each all-to-all sends 7/8 of T k h bf16 values
// over NVLink; four per MoE layer and micro-batch.
TEST_F(MoeModel, AllToAllInsideANodeByHand) {
  const Layout l = L(1, 64, 8);
  const runner::Prediction p = P(l);
  const double bytes = 4096.0 * 2 * 4096 * 2;  // T k h, bf16
  const double one = bytes * 7 / 8 / (450e9 * 0.75) + 5e-6;
  const double expected = l.num_micro_batches * 32.0 * 4 * one;
  EXPECT_NEAR(p.time.moe_all_to_all, expected, 1e-9 * expected);
  EXPECT_EQ(P(L(1, 64, 1)).time.moe_all_to_all, 0.0);
}

// The same ep 8 with its members tp 2 apart spans two nodes: half of what it sends goes through
// the NICs, and the all-to-all takes longer though each rank sends half the tokens (T / tp).
TEST_F(MoeModel, AllToAllGrowsWhenEpCrossesNodes) {
  const Layout in_node = L(1, 64, 8), two_nodes = L(2, 32, 8);
  const double inside = P(in_node).time.moe_all_to_all / in_node.num_micro_batches;  // per micro-batch
  const double across = P(two_nodes).time.moe_all_to_all / two_nodes.num_micro_batches;
  EXPECT_GT(across, 2 * inside);
}

// The stated imbalance: the most loaded expert rank's share sets the expert GEMMs and the
// all-to-all bytes (exactly twice at 2: the GEMMs near twice, their efficiency rising with rows).
TEST_F(MoeModel, ImbalanceScalesTheExpertTime) {
  const Layout l = L(1, 64, 8);
  ModelShape skewed = model_;
  skewed.moe_imbalance = 2.0;
  const runner::Prediction even = P(l), skew = P(l, skewed);
  EXPECT_GT(skew.compute_terms.experts, 1.8 * even.compute_terms.experts);
  EXPECT_LT(skew.compute_terms.experts, 2.0 * even.compute_terms.experts);
  EXPECT_NEAR(skew.time.moe_all_to_all - 32.0 * l.num_micro_batches * 4 * 5e-6,
              2 * (even.time.moe_all_to_all - 32.0 * l.num_micro_batches * 4 * 5e-6), 1e-9);
  EXPECT_GT(skew.step_time_s, even.step_time_s);
}

// A capacity factor pads every expert to ep ceil(T k CF / E) rows: at T = 4097, 4097 x 2 / 8 is
// 1024.25, so CF 1 pads to 1025 and costs more than dropless balanced routing; the imbalance is
// capped (its tokens beyond capacity dropped): CF 1 with imbalance 2 costs what CF 1 does.
TEST_F(MoeModel, CapacityPadsAndCapsTheLoad) {
  model_.seq_len = 4097;
  const Layout l = L(1, 64, 8);
  ModelShape capped = model_;
  capped.capacity_factor = 1.0;
  ModelShape capped_skewed = capped;
  capped_skewed.moe_imbalance = 2.0;
  ModelShape wide = model_;
  wide.capacity_factor = 1.5;
  const double dropless = P(l).compute_terms.experts, one = P(l, capped).compute_terms.experts;
  EXPECT_GT(one, dropless);
  EXPECT_EQ(P(l, capped_skewed).compute_terms.experts, one);
  EXPECT_GT(P(l, wide).compute_terms.experts, 1.4 * one);
  EXPECT_GT(P(l, wide).time.moe_all_to_all, P(l, capped).time.moe_all_to_all);
}

// Memory: a rank holds E / ep experts (split over tp); at ZeRO 1 their optimizer states shard over
// the expert-dp ranks (dp / ep), the rest over dp.
TEST_F(MoeModel, ExpertStatesShardOverEpAndExpertDp) {
  const double h = 4096, f_e = 14336, expert = 3 * h * f_e;
  const runner::Prediction ep1 = P(L(1, 64, 1)), ep8 = P(L(1, 64, 8));
  EXPECT_NEAR(ep1.memory.weights - ep8.memory.weights, 32 * 7 * expert * 2, 1.0);
  const runner::Prediction z1 = P(L(1, 64, 8, 1));
  const double all = ep8.memory.weights / 2, experts = 32 * expert;  // parameters: all, of which one expert a layer
  EXPECT_NEAR(z1.memory.optimizer_states, (all - experts) * 12 / 64 + experts * 12 / 8, 1e-3 * experts);
  EXPECT_LT(z1.memory.optimizer_states, ep8.memory.optimizer_states);
  // The optimizer step updates those shards: against ZeRO 0's whole update.
  const double share = ((all - experts) / 64 + experts / 8) / all;
  EXPECT_NEAR(z1.time.optimizer / ep8.time.optimizer, share, 1e-12);
}

// The expert GEMMs replace the dense MLP: Mixtral priced with no experts is a dense 14336-wide
// model, and its MLP term goes to the expert term; the shared experts add a dense MLP's GEMMs.
TEST_F(MoeModel, ExpertTermsReplaceTheMlp) {
  const Layout l = L(1, 64, 8);
  const runner::Prediction p = P(l);
  EXPECT_EQ(p.compute_terms.mlp, 0.0);  // every layer MoE
  EXPECT_GT(p.compute_terms.experts, 0.0);
  ModelShape shared = model_;
  shared.shared_experts = 1;
  EXPECT_GT(P(l, shared).compute_terms.experts, 1.4 * p.compute_terms.experts);
  ModelShape half = model_;
  half.moe_every = 2;  // 16 dense layers: MLP and experts each about half
  const runner::Prediction h = P(l, half);
  EXPECT_GT(h.compute_terms.mlp, 0.0);
  EXPECT_NEAR(h.compute_terms.experts, p.compute_terms.experts / 2, 1e-9 * p.compute_terms.experts);
}

}  // namespace
}  // namespace tunepar
