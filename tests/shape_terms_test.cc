// Issue 33: each shape feature's term in the performance model (plan §3.1-3.3), one test per
// term, each changing one field of a Llama-style shape and checking the difference it makes in
// activations, parameters or time, so that dropping a term fails its test.
#include <gtest/gtest.h>

#include "runner/compute_terms.h"
#include "runner/performance_model.h"
#include "tests/test_support.h"

namespace tunepar::runner {
namespace {

class ShapeTerms : public ::testing::Test {
 protected:
  ModelShape model_ = testing::PresetModel("llama3-70b");  // 80 layers, h 8192, 64/8 heads, SwiGLU f 28672
  HardwareProfile hw_ = testing::PresetHardware("lumi-g");

  // pp 1, one micro-batch in flight per layer, flash attention (no scores kept), bf16.
  static tunepar::Layout Layout(int tp, bool sp = false) {
    tunepar::Layout l;
    l.tp = tp;
    l.pp = 1;
    l.dp = 1;
    l.micro_batch = 1;
    l.num_micro_batches = 1024;
    l.precision = Precision::kBf16;
    l.flash_attention = true;
    l.seq_parallel = sp;
    return l;
  }
  static Prediction P(const ModelShape& m, const tunepar::Layout& l, const HardwareProfile& hw) {
    Result<PerformanceModel> pm = PerformanceModel::Create(m, hw);
    EXPECT_TRUE(pm.ok()) << pm.status().message();
    EXPECT_TRUE(pm->CheckLayout(l).ok()) << pm->CheckLayout(l).message();
    return pm->Predict(l);
  }
  Prediction P(const ModelShape& m, const tunepar::Layout& l) const { return P(m, l, hw_); }
  // One activation unit (2 bytes per s b h in 16-bit) times the layers.
  double UnitsToBytes(const ModelShape& m, double units) const {
    return units * m.seq_len * 1.0 * m.hidden * m.layers;
  }
};

// GQA keeps K and V of g heads, not a: 4 g / a units split over tp (Korthikanti's 4 for MHA).
TEST_F(ShapeTerms, GqaKeepsSmallerKeysAndValues) {
  ModelShape mha = model_;
  mha.kv_heads = 64;
  for (int tp : {1, 4}) {
    for (bool sp : {false, true}) {
      if (sp && tp == 1) continue;
      const tunepar::Layout l = Layout(tp, sp);
      const double delta = P(mha, l).memory.activations - P(model_, l).memory.activations;
      const double units = 4.0 * 56 / 64 / tp;  // no SP: S / t; SP: (R + S) / t
      EXPECT_NEAR(delta, UnitsToBytes(model_, units), 1e-9 * delta) << "tp " << tp << " sp " << sp;
    }
  }
  // tp 16 > 8 KV heads: each rank keeps one (replicated) K/V head, 4 * 16/64 / 16 units.
  ModelShape wide = model_;
  wide.kv_heads = 16;
  const double delta = P(wide, Layout(16)).memory.activations - P(model_, Layout(16)).memory.activations;
  EXPECT_NEAR(delta, 0.0, 1e-6);
}

// GQA's smaller K/V projections: the QKV GEMM's N is (h + 2 g d) / t, not 3h / t.
TEST_F(ShapeTerms, GqaShrinksTheQkvProjections) {
  ModelShape mha = model_;
  mha.kv_heads = 64;
  const Prediction gqa = P(model_, Layout(8)), full = P(mha, Layout(8));
  // (h + 2h g/a) / 3h of the FLOPs: 1.25 / 3 at g/a = 1/8, a little more as the thinner GEMM
  // (N 1280 against 3072) runs further from peak.
  const double ratio = gqa.compute_terms.qkv_projections / full.compute_terms.qkv_projections;
  EXPECT_GT(ratio, 1.25 / 3);
  EXPECT_LT(ratio, 1.1 * 1.25 / 3);
  EXPECT_DOUBLE_EQ(gqa.compute_terms.mlp, full.compute_terms.mlp);
  EXPECT_LT(gqa.step_time_s, full.step_time_s);
  // Weights: K and V are g/a of Q's 8192 x 8192 per layer, split over tp.
  const double params = 80.0 * 2 * 8192.0 * 8192 * 56 / 64 / 8;
  EXPECT_NEAR(full.memory.weights - gqa.memory.weights, 2 * params, 1e-9 * params);
}

// SwiGLU keeps the stacked gate and up (4 f/h) and fc2's input (2 f/h): 2 f/h more than GeLU at
// the same f; and its three matrices cost half again the MLP's GEMM time.
TEST_F(ShapeTerms, SwigluKeepsMoreAndComputesMore) {
  ModelShape gelu = model_;
  gelu.mlp = MlpKind::kGelu;
  const double f_over_h = 28672.0 / 8192;
  for (int tp : {1, 4}) {
    const tunepar::Layout l = Layout(tp);
    const Prediction s = P(model_, l), g = P(gelu, l);
    const double delta = s.memory.activations - g.memory.activations;
    EXPECT_NEAR(delta, UnitsToBytes(model_, 2 * f_over_h / tp), 1e-9 * delta) << "tp " << tp;
    EXPECT_NEAR(s.compute_terms.mlp / g.compute_terms.mlp, 1.5, 0.02) << "tp " << tp;
    EXPECT_GT(s.compute_terms.elementwise, g.compute_terms.elementwise);  // the product reads two inputs
    const double params = 80.0 * 8192 * 28672 / tp;                       // W3
    EXPECT_NEAR(s.memory.weights - g.memory.weights, 2 * params, 1e-9 * params);
  }
}

// RMSNorm: one vector per norm, not two: (2L + 1) h fewer parameters; the same bytes moved.
TEST_F(ShapeTerms, RmsNormHasHalfTheNormParameters) {
  ModelShape layernorm = model_;
  layernorm.norm = NormKind::kLayerNorm;
  const Prediction r = P(model_, Layout(8)), n = P(layernorm, Layout(8));
  EXPECT_NEAR(n.memory.weights - r.memory.weights, (2.0 * 80 + 1) * 8192 * 2, 1e-3);
  EXPECT_DOUBLE_EQ(n.time.compute, r.time.compute);
}

// Rotary: no position table (s h parameters fewer), and the rotation of Q and K moves bytes.
// ALiBi adds its biases inside the attention kernel: nothing moves, as with no positions.
TEST_F(ShapeTerms, RotaryRotatesAndHasNoTable) {
  ModelShape learned = model_, alibi = model_, none = model_;
  learned.positions = Positions::kLearned;
  alibi.positions = Positions::kAlibi;
  none.positions = Positions::kNone;
  const Prediction r = P(model_, Layout(8)), l = P(learned, Layout(8)), a = P(alibi, Layout(8)),
                   n = P(none, Layout(8));
  EXPECT_NEAR(l.memory.weights - r.memory.weights, 8192.0 * 8192 * 2, 1e-3);
  EXPECT_DOUBLE_EQ(r.memory.weights, n.memory.weights);
  EXPECT_GT(r.compute_terms.elementwise, n.compute_terms.elementwise);
  EXPECT_DOUBLE_EQ(r.compute_terms.qkv_projections, n.compute_terms.qkv_projections);
  EXPECT_DOUBLE_EQ(a.step_time_s, n.step_time_s);
  EXPECT_DOUBLE_EQ(a.memory_bytes, n.memory_bytes);
}

// Linear biases: Q, K, V (h + 2 g d), the MLP's first k - 1 matrices ((k - 1) f), split over tp;
// one row-parallel bias h on every rank (as before: see StageParams).
TEST_F(ShapeTerms, LinearBiasesAreCounted) {
  ModelShape biased = model_;
  biased.linear_biases = true;
  const int tp = 8;
  const double per_layer = (8192.0 + 2 * 8 * 128 + 2 * 28672) / tp + 8192;
  EXPECT_NEAR(P(biased, Layout(tp)).memory.weights - P(model_, Layout(tp)).memory.weights, 80 * per_layer * 2, 1e-3);
}

// A model without a vocabulary (a ViT): a P x h patch embedding and an h x O head replicated over
// tp, outputs of O values per token instead of logits, no LM-head collective.
TEST_F(ShapeTerms, VitHasPatchEmbeddingAndHead) {
  ModelShape vit = testing::PresetModel("gpt-22b");
  vit.vocab = 0;
  vit.tied_embeddings = false;
  vit.patch_tokens = 192;
  vit.output_width = 192;
  ModelShape wider = vit;
  wider.patch_tokens = 768;
  wider.output_width = 768;
  const tunepar::Layout l = Layout(4);
  const Prediction p = P(vit, l), w = P(wider, l);
  const double tokens = 2048.0;  // s b
  EXPECT_NEAR(w.memory.activations - p.memory.activations, tokens * (768 - 192) * (4 + 2),
              1e-6 * p.memory.activations);
  const double params = (768.0 - 192) * 6144 * 2 + (768 - 192);  // embedding and head, the head's bias
  EXPECT_NEAR(w.memory.weights - p.memory.weights, params * 2, 1e-3);
  EXPECT_GT(w.compute_terms.head_and_embedding, p.compute_terms.head_and_embedding);
  EXPECT_DOUBLE_EQ(w.compute_terms.mlp, p.compute_terms.mlp);
  EXPECT_GT(p.compute_terms.head_and_embedding, 0);
  ModelShape wider_patches = vit;  // the patch embedding alone: (T, h, P) forward and weight gradient
  wider_patches.patch_tokens = 768;
  EXPECT_GT(P(wider_patches, l).compute_terms.head_and_embedding, p.compute_terms.head_and_embedding);
}

// The terms add up to the compute time, and the labels name the shape.
TEST_F(ShapeTerms, TermsAddUpAndNameTheShape) {
  for (bool recompute : {false, true}) {
    tunepar::Layout l = Layout(8);
    if (recompute) l.recompute = Recompute::kFull;
    const Prediction p = P(model_, l);
    EXPECT_NEAR(p.compute_terms.Total(), p.time.compute, 1e-12 * p.time.compute);
    EXPECT_EQ(p.compute_terms.recompute > 0, recompute);
  }
  std::string labels;
  for (const NamedTerm& t : NamedComputeTerms(model_, ComputeTerms{})) labels += t.label + "\n";
  EXPECT_NE(labels.find("GQA: 64 query heads, 8 KV groups; K and V 1/8 of Q"), std::string::npos) << labels;
  EXPECT_NE(labels.find("MLP (SwiGLU: 3 matrices, f 28672)"), std::string::npos) << labels;
  EXPECT_NE(labels.find("RMSNorm"), std::string::npos) << labels;
  EXPECT_NE(labels.find("rotary"), std::string::npos) << labels;
  EXPECT_EQ(ShapeFeatures(model_), "GQA 64/8, SwiGLU f 28672, rotary, RMSNorm, untied, no biases");
  EXPECT_EQ(ShapeFeatures(testing::PresetModel("gpt-175b")), "MHA 96 heads, GeLU f 49152, learned positions, LayerNorm, tied");
}

}  // namespace
}  // namespace tunepar::runner
