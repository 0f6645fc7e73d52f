// The parameter count of every shape the model files can say (issue 33, plan section 1.3):
// Llama 3's published sizes to the parameter, each field's own term by a closed form (so a
// dropped or doubled term fails), and GPT's counts as they were before the fields existed.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "base/model_shape.h"
#include "runner/core_backend.h"
#include "tests/test_support.h"
#include "tuner/loops/calibration_sweep.h"

namespace tunepar {
namespace {

using testing::PresetModel;

// Meta's published sizes (arXiv 2407.21783: 8B, 70B, 405B; Hugging Face model cards 8.03B, 70.6B,
// 405.8B) from the shapes of meta-llama/llama-models sku_list.py; the exact totals are the plan's
// sums of 2h^2 (1 + g/a) L, 3hfL, (2L + 1) h and 2Vh.
TEST(ModelShapeParameters, Llama3MatchesMetasSizes) {
  const struct {
    const char* preset;
    int64_t exact;
    double published;
  } rows[] = {{"llama3-8b", 8'030'261'248, 8.03e9},
              {"llama3-70b", 70'553'706'496, 70.6e9},
              {"llama3-405b", 405'853'388'800, 405.8e9}};
  for (const auto& r : rows) {
    const double p = PresetModel(r.preset).Parameters();
    EXPECT_EQ(p, static_cast<double>(r.exact)) << r.preset;
    EXPECT_LT(std::abs(p / r.published - 1), 0.01) << r.preset;
  }
}

// Each case changes one field of Llama 3 8B (GQA 8/32, SwiGLU, rotary, RMSNorm, untied, no
// biases) and checks the change against its closed form.
class OneField : public ::testing::Test {
 protected:
  ModelShape base_ = PresetModel("llama3-8b");
  const int64_t L = base_.layers, h = base_.hidden, f = base_.ffn_hidden, V = base_.vocab, s = base_.seq_len;
  double Delta(const ModelShape& changed) const { return changed.Parameters() - base_.Parameters(); }
};

TEST_F(OneField, KvHeads) {  // K and V are h x (g d) each: 2h^2 (g' - g)/a per layer
  ModelShape m = base_;
  m.kv_heads = 32;
  EXPECT_EQ(Delta(m), static_cast<double>(L * 2 * h * h * 24 / 32));
}

TEST_F(OneField, TiedEmbeddings) {  // the untied head is a second V x h matrix
  ModelShape m = base_;
  m.tied_embeddings = true;
  EXPECT_EQ(Delta(m), -static_cast<double>(V * h));
}

TEST_F(OneField, Positions) {  // only a learned table has parameters: s x h
  ModelShape m = base_;
  m.positions = Positions::kLearned;
  EXPECT_EQ(Delta(m), static_cast<double>(s * h));
  m.positions = Positions::kAlibi;
  EXPECT_EQ(Delta(m), 0.0);
  m.positions = Positions::kNone;
  EXPECT_EQ(Delta(m), 0.0);
}

TEST_F(OneField, Norm) {  // LayerNorm has a bias beside RMSNorm's weight: 2 norms per layer + the final one
  ModelShape m = base_;
  m.norm = NormKind::kLayerNorm;
  EXPECT_EQ(Delta(m), static_cast<double>((2 * L + 1) * h));
}

TEST_F(OneField, Mlp) {  // at equal f, GELU lacks SwiGLU's gate matrix h x f (and its bias f)
  ModelShape m = base_;
  m.mlp = MlpKind::kGelu;
  EXPECT_EQ(Delta(m), -static_cast<double>(L * h * f));
  ModelShape biased = base_;
  biased.linear_biases = true;
  ModelShape biased_gelu = biased;
  biased_gelu.mlp = MlpKind::kGelu;
  EXPECT_EQ(biased_gelu.Parameters() - biased.Parameters(), -static_cast<double>(L * (h * f + f)));
}

TEST_F(OneField, LinearBiases) {  // Q h, K and V 2h g/a, O h; gate and up 2f, down h; per layer
  ModelShape m = base_;
  m.linear_biases = true;
  EXPECT_EQ(Delta(m), static_cast<double>(L * (h + 2 * h * 8 / 32 + h + 2 * f + h)));
}

TEST_F(OneField, Vocab) {  // embedding and untied head
  ModelShape m = base_;
  m.vocab += 1000;
  EXPECT_EQ(Delta(m), static_cast<double>(2 * 1000 * h));
}

TEST_F(OneField, FfnHidden) {  // three h x f matrices
  ModelShape m = base_;
  m.ffn_hidden += 1024;
  EXPECT_EQ(Delta(m), static_cast<double>(L * 3 * h * 1024));
}

// A ViT (the climax preset): a P x h patch embedding with its bias in the vocabulary's place, a
// learned s x h position table, and an h x O head with its bias.
TEST(ModelShapeParameters, VitInputAndHeadInTheVocabularysPlace) {
  const ModelShape vit = PresetModel("climax");
  ASSERT_FALSE(vit.HasVocabulary());
  const int64_t L = vit.layers, h = vit.hidden, f = vit.ffn_hidden, P = vit.patch_tokens, O = vit.output_width,
                s = vit.seq_len;
  const int64_t per_layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
  EXPECT_EQ(vit.Parameters(), static_cast<double>(L * per_layer + (P * h + h) + s * h + (h * O + O) + 2 * h));
  ModelShape m = vit;
  m.patch_tokens += 4;
  EXPECT_EQ(m.Parameters() - vit.Parameters(), static_cast<double>(4 * h));
  m = vit;
  m.output_width += 4;
  EXPECT_EQ(m.Parameters() - vit.Parameters(), static_cast<double>(4 * h + 4));
}

// Dense GPT presets count what they did before the shape fields (commit ca7c228), bit for bit.
TEST(ModelShapeParameters, GptPresetsCountAsBefore) {
  for (const char* name : {"gpt-1.3b", "gpt-22b", "gpt-175b", "gpt-1t", "small", "tiny"}) {
    for (bool tied : {true, false}) {
      ModelShape m = PresetModel(name);
      m.tied_embeddings = tied;
      const double h = m.hidden, f = m.MlpWidth(), L = m.layers;
      const double per_layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
      const double embeddings = (static_cast<double>(m.vocab) + m.seq_len) * h;
      const double lm_head = m.tied_embeddings ? 0.0 : static_cast<double>(m.vocab) * h;
      EXPECT_EQ(m.Parameters(), L * per_layer + embeddings + lm_head + 2 * h) << name << " tied " << tied;
    }
  }
}

// The calibration sweep's shape variants (half the hidden size halves the heads) keep every shape
// rule: K/V heads halve with the query heads, so tiny (4 heads) and Llama's 8 KV groups stay legal.
TEST(ModelShapeParameters, CalibrationVariantsKeepTheShapeRules) {
  for (const char* name : {"tiny", "small", "tiny-llama", "llama3-8b", "climax"}) {
    const ModelShape m = PresetModel(name);
    const std::vector<ModelShape> variants = ShapeVariants(m, kMaxSweepShapes);
    EXPECT_EQ(variants.size(), 4u) << name;
    for (const ModelShape& v : variants) {
      const ShapeRule broken = BrokenShapeRule(v);
      EXPECT_TRUE(broken.field.empty()) << v.name << ": " << broken.field << " " << broken.rule;
      EXPECT_EQ(v.heads / v.KvHeads(), m.heads / m.KvHeads()) << v.name;
    }
  }
}

// The model file a trial hands tunepar-core reads back as the same shape for every preset (a
// Llama's GQA, SwiGLU, rotary, RMSNorm and no biases; a ViT without a vocabulary), and a GPT's
// file holds only the keys it always did.
TEST(ModelShapeParameters, TheCoresModelFileReadsBackAsTheSameShape) {
  for (const char* name : {"tiny", "gpt-1t", "tiny-llama", "llama3-70b", "climax"}) {
    const ModelShape m = PresetModel(name);
    const std::string text = runner::ModelToml(m);
    Result<ModelShape> back = ParseModelShape(text, "model.toml");
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().message() << "\n" << text;
    for (const ShapeRow& row : ShapeRows()) EXPECT_EQ(row.get(*back), row.get(m)) << name << " " << row.name;
    EXPECT_EQ(back->Parameters(), m.Parameters()) << name;
  }
  const std::string gpt = runner::ModelToml(PresetModel("tiny"));
  for (const char* key : {"kv_heads", "mlp", "positions", "norm", "linear_biases", "patch_tokens", "output_width"})
    EXPECT_EQ(gpt.find(key), std::string::npos) << key << "\n" << gpt;
}

}  // namespace
}  // namespace tunepar
