// The shape of the transformer being trained (a GPT-style decoder).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tunepar {

// The MLP width when a model does not give one: 4h.
constexpr int DefaultMlpWidth(int hidden) { return 4 * hidden; }

struct ModelShape {
  std::string name;
  std::string description;
  int layers = 0;               // L
  int hidden = 0;               // h
  int heads = 0;                // a
  int seq_len = 0;              // s
  int vocab = 0;                // V
  int global_batch = 0;         // B, sequences per optimizer step (an input, not a knob)
  int ffn_hidden = 0;           // MLP width; 4h when not given
  bool tied_embeddings = true;  // LM head shares the token-embedding matrix

  // Trainable parameters: per layer QKV + projection (4h^2 + 4h), MLP (2hf + f + h), two layer
  // norms (4h); plus token and position embeddings (V + s) h, a separate LM head when untied,
  // and the final layer norm. With f = 4h this is Narayanan et al. 2021 eq. 2 plus 2h:
  // 12 L h^2 (1 + 13/(12h) + (V + s)/(12 L h)).
  double Parameters() const;
  int HeadDim() const { return hidden / heads; }
  // The MLP width f: ffn_hidden, or the default for a shape built without one.
  int MlpWidth() const { return ffn_hidden > 0 ? ffn_hidden : DefaultMlpWidth(hidden); }
  // Tokens per optimizer step: B s.
  double TokensPerStep() const { return static_cast<double>(global_batch) * seq_len; }
};

// The shape table: one row per field of a model file beyond its name and description, in file
// order. Model files, measured-run CSV files, command placeholders and `tunepar knobs` iterate it,
// so a field (kv heads, experts, ...) is added as one row plus its physics.
struct ShapeRow {
  std::string_view name;    // the TOML key, CSV column and placeholder: "heads"
  std::string_view symbol;  // in formulas: "a"
  bool required = true;     // a model file must give it
  bool is_switch = false;   // true / false in files (1 / 0 in CSV and placeholders); else a positive integer
  std::string_view help;
  int (*get)(const ModelShape&) = nullptr;
  void (*set)(ModelShape&, int) = nullptr;
};
const std::vector<ShapeRow>& ShapeRows();

// Parses and validates a model TOML (keys: name, description and the shape table's fields);
// without `name` the model is named after `file_stem` (a user's own file).
Result<ModelShape> ParseModelShape(std::string_view toml_text, std::string_view source,
                                   std::string_view file_stem = {});

}  // namespace tunepar
