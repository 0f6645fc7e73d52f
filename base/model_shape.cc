#include "base/model_shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <cmath>
#include <limits>

#include "base/toml_fields.h"

namespace tunepar {

double ModelShape::ExpertParameters() const {
  const double h = hidden, f_e = ExpertMlpWidth(), k = MlpMatrices(), biases = linear_biases ? 1 : 0;
  return k * h * f_e + biases * ((k - 1) * f_e + h);
}

double ModelShape::Parameters() const {
  // Every term is an integer below 2^53, so the sum is exact in any order.
  const double h = hidden, f = MlpWidth(), g_over_a = static_cast<double>(KvHeads()) / heads;
  const double k = MlpMatrices(), biases = linear_biases ? 1 : 0;
  const double norm_vectors = norm == NormKind::kLayerNorm ? 2 : 1;  // weight (+ bias)
  const double attention = 2 * h * h + 2 * h * h * g_over_a + biases * (h + 2 * h * g_over_a + h);
  const double mlp_params = k * h * f + biases * ((k - 1) * f + h);
  const double moe_mlp = (experts + shared_experts) * ExpertParameters() + h * experts;  // experts and router
  const double not_mlp = attention + 2 * norm_vectors * h;
  const double positions_table = positions == Positions::kLearned ? static_cast<double>(seq_len) * h : 0.0;
  const double input = HasVocabulary() ? static_cast<double>(vocab) * h : patch_tokens * h + biases * h;
  const double head = HasVocabulary() ? (tied_embeddings ? 0.0 : static_cast<double>(vocab) * h)
                                      : h * output_width + biases * output_width;
  const double layer_params = DenseLayers() * (not_mlp + mlp_params) + MoeLayers() * (not_mlp + moe_mlp);
  return layer_params + input + positions_table + head + norm_vectors * h;
}

double ModelShape::ActiveParameters() const {
  return Parameters() - static_cast<double>(MoeLayers()) * (experts - top_k) * ExpertParameters();
}

std::string ModelShape::VocabularyText() const {
  return HasVocabulary() ? fmt::format("V {}", vocab) : fmt::format("P {} O {}", patch_tokens, output_width);
}

#define TUNEPAR_SHAPE_FIELD(field)                                \
  [](const ModelShape& m) { return static_cast<int>(m.field); }, \
      [](ModelShape& m, int v) { m.field = static_cast<decltype(m.field)>(v); }

const std::vector<ShapeRow>& ShapeRows() {
  static const std::vector<ShapeRow> rows = {
      {"layers", "L", true, false, "transformer layers", TUNEPAR_SHAPE_FIELD(layers)},
      {"hidden", "h", true, false, "hidden size", TUNEPAR_SHAPE_FIELD(hidden)},
      {"heads", "a", true, false, "attention heads", TUNEPAR_SHAPE_FIELD(heads)},
      {"seq_len", "s", true, false, "sequence length", TUNEPAR_SHAPE_FIELD(seq_len)},
      {"vocab", "V", false, false, "vocabulary size (required unless patch_tokens)", TUNEPAR_SHAPE_FIELD(vocab), {}, 0},
      {"global_batch", "B", true, false, "sequences per optimizer step (an input, not a knob)",
       TUNEPAR_SHAPE_FIELD(global_batch)},
      {"ffn_hidden", "f", false, false, "MLP width (default 4h)", TUNEPAR_SHAPE_FIELD(ffn_hidden)},
      {"tied_embeddings", "", false, true, "the LM head shares the token-embedding matrix (default true)",
       [](const ModelShape& m) { return m.tied_embeddings ? 1 : 0; },
       [](ModelShape& m, int v) { m.tied_embeddings = v != 0; }},
      {"kv_heads", "g", false, false, "K/V heads, the query groups of grouped-query attention (default heads; 1 = MQA)",
       TUNEPAR_SHAPE_FIELD(kv_heads)},
      {"mlp", "", false, false, "the MLP: gelu (2 matrices) or swiglu (3; needs ffn_hidden)",
       TUNEPAR_SHAPE_FIELD(mlp), {"gelu", "swiglu"}, 1, "\"gelu\""},
      {"positions", "", false, false, "positions: learned table, rotary, alibi or none",
       TUNEPAR_SHAPE_FIELD(positions), {"learned", "rotary", "alibi", "none"}, 1, "\"learned\""},
      {"norm", "", false, false, "normalisation: layernorm or rmsnorm", TUNEPAR_SHAPE_FIELD(norm),
       {"layernorm", "rmsnorm"}, 1, "\"layernorm\""},
      {"linear_biases", "", false, true, "the linear layers have biases (default true; Llama: false)",
       [](const ModelShape& m) { return m.linear_biases ? 1 : 0; },
       [](ModelShape& m, int v) { m.linear_biases = v != 0; }, {}, 1, "true"},
      {"patch_tokens", "P", false, false, "values per input patch (channels p^2) of a model without a vocabulary",
       TUNEPAR_SHAPE_FIELD(patch_tokens), {}, 0, "0"},
      {"output_width", "O", false, false, "values the head predicts per token of a model without a vocabulary",
       TUNEPAR_SHAPE_FIELD(output_width), {}, 0, "0"},
      {"experts", "E", false, false, "routed experts per MoE layer (default 0: a dense model)",
       TUNEPAR_SHAPE_FIELD(experts), {}, 0, "0"},
      {"top_k", "k", false, false, "experts each token is routed to (required with experts)",
       TUNEPAR_SHAPE_FIELD(top_k), {}, 0, "0"},
      {"expert_ffn_hidden", "f_e", false, false, "one expert's MLP width (default ffn_hidden)",
       TUNEPAR_SHAPE_FIELD(expert_ffn_hidden), {}, 0, "0"},
      {"shared_experts", "", false, false, "experts every token passes through, each expert_ffn_hidden wide (default 0)",
       TUNEPAR_SHAPE_FIELD(shared_experts), {}, 0, "0"},
      {"moe_every", "", false, false, "layer i (from 0) has experts when i % moe_every == 0, the others are dense (default 1)",
       TUNEPAR_SHAPE_FIELD(moe_every), {}, 1, "1"},
      {"capacity_factor", "CF", false, false,
       "tokens an expert takes, as a multiple of the balanced share, up to 2 decimals (default 0: dropless)",
       [](const ModelShape& m) { return static_cast<int>(std::lround(m.capacity_factor * 100)); },
       [](ModelShape& m, int v) { m.capacity_factor = v / 100.0; }, {}, 0, "0", 2},
  };
  return rows;
}

#undef TUNEPAR_SHAPE_FIELD

namespace {

// A field with decimals (capacity_factor = 1.25): a non-negative number with at most that many.
Status ReadDecimalField(TomlFields& f, const ShapeRow& row, ModelShape* m) {
  const double scale = std::pow(10.0, row.decimals);
  double value = row.get(*m) / scale;
  TUNEPAR_RETURN_IF_ERROR(f.Number(row.name, &value, row.required));
  const double units = value * scale;
  if (!(value >= 0) || units > std::numeric_limits<int>::max())
    return f.Error(row.name, "must be a non-negative number");
  if (std::abs(units - std::round(units)) > 1e-6)
    return f.Error(row.name, fmt::format("at most {} decimals ({})", row.decimals, value));
  row.set(*m, static_cast<int>(std::lround(units)));
  return Status::Ok();
}

// One field of the shape table from the model file (absent and optional: left as it is).
Status ReadShapeField(TomlFields& f, const ShapeRow& row, ModelShape* m) {
  if (row.is_switch) {
    bool on = row.get(*m) != 0;
    TUNEPAR_RETURN_IF_ERROR(f.Bool(row.name, &on, row.required));
    row.set(*m, on ? 1 : 0);
    return Status::Ok();
  }
  if (!row.choices.empty()) {
    std::string text(row.choices[row.get(*m)]);
    TUNEPAR_RETURN_IF_ERROR(f.String(row.name, &text, row.required));
    const int index = ShapeChoiceIndex(row, text);
    if (index < 0) return f.Error(row.name, fmt::format("unknown {} '{}' (expected {})", row.name, text,
                                                         fmt::join(row.choices, " or ")));
    row.set(*m, index);
    return Status::Ok();
  }
  if (row.decimals > 0) return ReadDecimalField(f, row, m);
  if (row.min >= 1) {
    int value = row.get(*m);
    TUNEPAR_RETURN_IF_ERROR(f.PositiveInt(row.name, &value, row.required));
    row.set(*m, value);
    return Status::Ok();
  }
  int64_t value = row.get(*m);
  TUNEPAR_RETURN_IF_ERROR(f.Int(row.name, &value, row.required));
  if (value < row.min || value > std::numeric_limits<int>::max()) {
    return f.Error(row.name, "must be a non-negative integer");
  }
  row.set(*m, static_cast<int>(value));
  return Status::Ok();
}

}  // namespace

Result<ModelShape> ParseModelShape(std::string_view toml_text, std::string_view source,
                                   std::string_view file_stem) {
  Result<toml::table> doc = ParseToml(toml_text, source);
  if (!doc.ok()) return doc.status();
  TomlFields f(*doc, source);
  ModelShape m;
  TUNEPAR_RETURN_IF_ERROR(f.Name(&m.name, file_stem));
  TUNEPAR_RETURN_IF_ERROR(f.String("description", &m.description, false));
  for (const ShapeRow& row : ShapeRows()) TUNEPAR_RETURN_IF_ERROR(ReadShapeField(f, row, &m));
  TUNEPAR_RETURN_IF_ERROR(f.Number("moe_imbalance", &m.moe_imbalance, false));
  TUNEPAR_RETURN_IF_ERROR(f.RejectUnknownKeys());
  const bool ffn_given = m.ffn_hidden != 0;
  if (m.ffn_hidden == 0) m.ffn_hidden = DefaultMlpWidth(m.hidden);
  if (m.kv_heads == 0) m.kv_heads = m.heads;
  const ShapeRule broken = BrokenShapeRule(m, ffn_given);
  if (!broken.field.empty()) return f.Error(broken.field, broken.rule);
  return m;
}

std::string ShapeFieldText(const ShapeRow& row, const ModelShape& m) {
  const int value = row.get(m);
  if (row.decimals > 0) return fmt::format("{}", value / std::pow(10.0, row.decimals));
  if (!row.choices.empty()) return std::string(row.choices.at(value));
  return std::to_string(value);
}

int ShapeChoiceIndex(const ShapeRow& row, std::string_view text) {
  for (size_t i = 0; i < row.choices.size(); ++i)
    if (row.choices[i] == text) return static_cast<int>(i);
  return -1;
}

namespace {

// The mixture-of-experts fields' rules (issue 36).
ShapeRule BrokenMoeRule(const ModelShape& m) {
  const auto rule = [](std::string_view field, std::string text) { return ShapeRule{std::string(field), std::move(text)}; };
  if (m.experts == 0) {
    if (m.top_k > 0) return rule("top_k", "only with experts (a dense model routes nothing)");
    if (m.expert_ffn_hidden > 0) return rule("expert_ffn_hidden", "only with experts");
    if (m.shared_experts > 0) return rule("shared_experts", "only with experts (a dense model's MLP is ffn_hidden)");
    if (m.moe_every != 1) return rule("moe_every", "only with experts");
    if (m.capacity_factor > 0) return rule("capacity_factor", "only with experts");
    if (m.moe_imbalance != 1.0) return rule("moe_imbalance", "only with experts");
    return {};
  }
  if (m.experts == 1) return rule("experts", "0 (a dense model) or at least 2 (one expert is a dense MLP)");
  if (m.top_k == 0) return rule("top_k", fmt::format("required with experts ({} experts)", m.experts));
  if (m.top_k > m.experts)
    return rule("top_k", fmt::format("at most experts (top {} of {} experts)", m.top_k, m.experts));
  if (!(m.moe_imbalance >= 1.0))
    return rule("moe_imbalance", fmt::format("at least 1 (the most loaded expert rank over the balanced share), got {}",
                                             m.moe_imbalance));
  if (m.moe_every > m.layers)
    return rule("moe_every", fmt::format("at most layers ({} layers, every {})", m.layers, m.moe_every));
  return {};
}

}  // namespace

ShapeRule BrokenShapeRule(const ModelShape& m, bool ffn_given) {
  const auto rule = [](std::string_view field, std::string text) { return ShapeRule{std::string(field), std::move(text)}; };
  if (m.hidden % m.heads != 0)
    return rule("heads", fmt::format("must divide hidden (hidden {} is not a multiple of {} heads)", m.hidden, m.heads));
  if (m.kv_heads > m.heads)
    return rule("kv_heads", fmt::format("at most heads ({} heads, {} KV heads)", m.heads, m.kv_heads));
  if (m.heads % m.kv_heads != 0)
    return rule("kv_heads", fmt::format("must divide heads ({} heads are not a multiple of {} KV heads)", m.heads,
                                        m.kv_heads));
  if (m.mlp == MlpKind::kSwiglu && !ffn_given)
    return rule("ffn_hidden", "required with mlp = \"swiglu\" (Llama 3 8B: 14336, Meta's 1024 ceil(1.3 int(8h/3) / 1024))");
  if (m.positions == Positions::kRotary && m.HeadDim() % 2 != 0)
    return rule("positions", fmt::format("rotary needs an even head size (hidden / heads = {})", m.HeadDim()));
  if (m.vocab == 0 && m.patch_tokens == 0)
    return rule("vocab", "required (or patch_tokens for a model without a vocabulary, a ViT)");
  if (m.vocab > 0 && m.patch_tokens > 0) return rule("vocab", "give a vocabulary or patch_tokens, not both");
  if (m.patch_tokens > 0 && m.output_width == 0)
    return rule("output_width", "required with patch_tokens (values the head predicts per token)");
  if (m.patch_tokens == 0 && m.output_width > 0)
    return rule("output_width", "only with patch_tokens (a language model's output is its vocabulary)");
  if (m.patch_tokens > 0 && m.tied_embeddings)
    return rule("tied_embeddings", "a model without a vocabulary has no token embedding to tie (set it to false)");
  return BrokenMoeRule(m);
}

}  // namespace tunepar
