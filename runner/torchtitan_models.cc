#include "runner/torchtitan_models.h"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tunepar::runner {

namespace {

// Meta's SwiGLU width rule as torchtitan has it (FeedForward, torchtitan/models/llama3/model/
// model.py:332-336 @ v0.2.2): int(2 * 4h / 3), times the multiplier, rounded up to multiple_of.
int LlamaMlpWidth(int dim, double ffn_dim_multiplier, int multiple_of) {
  int width = static_cast<int>(2 * (4 * dim) / 3);
  width = static_cast<int>(ffn_dim_multiplier * width);
  return multiple_of * ((width + multiple_of - 1) / multiple_of);
}

// torchtitan's Llama 3 flavours: pytorch/torchtitan v0.2.2 (73a0e6979d, the last release
// before its config refactor; the torchtitan.toml options are of that era)
// torchtitan/models/llama3/__init__.py:51-99 (llama3_args "8B", "70B", "405B"). Common to all
// (model/args.py:33, model/model.py:204-209, 338-340, 382-383, 457-458): vocab_size 128256,
// linear layers without biases, RMSNorm, rotary positions, a separate output layer (untied).
ModelShape Llama3(int layers, int dim, int heads, int kv_heads, double ffn_dim_multiplier, int multiple_of) {
  ModelShape m;
  m.layers = layers;
  m.hidden = dim;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.ffn_hidden = LlamaMlpWidth(dim, ffn_dim_multiplier, multiple_of);
  m.vocab = 128256;
  m.mlp = MlpKind::kSwiglu;
  m.positions = Positions::kRotary;
  m.norm = NormKind::kRmsNorm;
  m.tied_embeddings = false;
  m.linear_biases = false;
  return m;
}

struct Flavor {
  TorchtitanModel model;
  ModelShape shape;
};

const std::vector<Flavor>& Flavors() {
  static const std::vector<Flavor> flavors = {
      {{"llama3", "8B"}, Llama3(32, 4096, 32, 8, 1.3, 1024)},
      {{"llama3", "70B"}, Llama3(80, 8192, 64, 8, 1.3, 4096)},
      {{"llama3", "405B"}, Llama3(126, 16384, 128, 8, 1.2, 4096)},
  };
  return flavors;
}

// Every field of the shape table but those torchtitan takes as options.
bool SameShape(const ModelShape& a, const ModelShape& b) {
  for (const ShapeRow& row : ShapeRows()) {
    if (row.name == "seq_len" || row.name == "global_batch") continue;
    if (row.get(a) != row.get(b)) return false;
  }
  return true;
}

}  // namespace

std::optional<TorchtitanModel> TorchtitanModelOf(const ModelShape& m) {
  for (const Flavor& f : Flavors())
    if (SameShape(f.shape, m)) return f.model;
  return std::nullopt;
}

std::string TorchtitanModelsKnown() {
  std::vector<std::string> names;
  for (const Flavor& f : Flavors()) names.push_back(f.model.flavor);
  return fmt::format("{} {}", Flavors().front().model.name, fmt::join(names, ", "));
}

}  // namespace tunepar::runner
