// The shape of the transformer being trained (a GPT-style decoder).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tunepar {

// The MLP width when a model does not give one: 4h.
constexpr int DefaultMlpWidth(int hidden) { return 4 * hidden; }

// The MLP: GPT's GELU (h -> f -> h, two matrices) or Llama's SwiGLU (gate W1 and up W3, h -> f
// each, their product silu(gate) * up, then W2 f -> h: three matrices).
enum class MlpKind { kGelu = 0, kSwiglu = 1 };
// How token positions enter: a learned table added to the input, rotary embeddings of Q and K
// (RoFormer; Llama), ALiBi's linear score biases, or nothing.
enum class Positions { kLearned = 0, kRotary = 1, kAlibi = 2, kNone = 3 };
// The normalisation before attention, before the MLP and before the head.
enum class NormKind { kLayerNorm = 0, kRmsNorm = 1 };

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
  int kv_heads = 0;             // g, K/V heads (query groups; 1 = MQA); heads once parsed
  MlpKind mlp = MlpKind::kGelu;
  Positions positions = Positions::kLearned;
  NormKind norm = NormKind::kLayerNorm;
  bool linear_biases = true;  // the linear layers have biases (GPT); Llama's have none
  int patch_tokens = 0;       // P, values in one input patch (channels p^2) of a model without a vocabulary (a ViT)
  int output_width = 0;       // O, values the head predicts per token when there is no vocabulary
  // A mixture of experts (issue 36; Megatron-LM's names in brackets). experts = 0: a dense model.
  int experts = 0;            // E routed experts per MoE layer [--num-experts]
  int top_k = 0;              // k experts each token is routed to [--moe-router-topk]
  int expert_ffn_hidden = 0;  // f_e, one expert's MLP width (0: ffn_hidden) [--moe-ffn-hidden-size]
  int shared_experts = 0;     // experts every token passes through, each f_e wide (DeepSeek)
  int moe_every = 1;          // layer i (from 0) is MoE when i % moe_every == 0, else dense [--moe-layer-freq]
  double capacity_factor = 0; // CF: each expert takes at most ceil(T k / E CF) tokens; 0 = dropless
  // The most loaded expert rank's tokens over the balanced share (>= 1; 1: balanced routing, as
  // NVIDIA's performance recipes force). An assumption of the performance model about the routing,
  // not a shape a program is told: read from the model file, outside the shape table. With a
  // capacity factor every expert is padded to capacity and the load is CF instead.
  double moe_imbalance = 1.0;

  // Trainable parameters: per layer QKV + projection (4h^2 + 4h), MLP (2hf + f + h), two layer
  // norms (4h); plus token and position embeddings (V + s) h, a separate LM head when untied,
  // and the final layer norm. With f = 4h this is Narayanan et al. 2021 eq. 2 plus 2h:
  // 12 L h^2 (1 + 13/(12h) + (V + s)/(12 L h)). A MoE layer's MLP is E + shared experts and the
  // router h x E (no bias) in place of the dense MLP.
  double Parameters() const;
  int HeadDim() const { return hidden / heads; }
  // The MLP width f: ffn_hidden, or the default for a shape built without one.
  int MlpWidth() const { return ffn_hidden > 0 ? ffn_hidden : DefaultMlpWidth(hidden); }
  // K/V heads: g, or a (multi-head attention) for a shape built without it.
  int KvHeads() const { return kv_heads > 0 ? kv_heads : heads; }
  // A language model reads tokens of a vocabulary; a ViT reads patches (patch_tokens > 0).
  bool HasVocabulary() const { return patch_tokens == 0; }
  // A language model attends causally; a ViT attends both ways.
  bool Causal() const { return HasVocabulary(); }
  // Matrices of the MLP: 2 (GELU) or 3 (SwiGLU).
  int MlpMatrices() const { return mlp == MlpKind::kSwiglu ? 3 : 2; }
  // What the model reads and predicts per token, in summaries: "V 51200", or a ViT's "P 192 O 192".
  std::string VocabularyText() const;
  // Layers with experts: ceil(L / moe_every) of a MoE model (Megatron's pattern i % freq == 0), else 0.
  int MoeLayers() const { return experts > 0 ? (layers + moe_every - 1) / moe_every : 0; }
  int DenseLayers() const { return layers - MoeLayers(); }
  // f_e: expert_ffn_hidden, or the MLP width when not given.
  int ExpertMlpWidth() const { return expert_ffn_hidden > 0 ? expert_ffn_hidden : MlpWidth(); }
  // Parameters of one expert (and of one shared expert): k h f_e (+ biases (k - 1) f_e + h).
  double ExpertParameters() const;
  // Parameters a token passes through: the total less the E - k routed experts it is not sent to
  // in each MoE layer (Mixtral 8x7B: 12.9B of 46.7B). A dense model's are all of them.
  double ActiveParameters() const;
  // An expert rank's routed tokens over the balanced share T k: CF when padded to capacity, else
  // the stated imbalance.
  double ExpertLoad() const { return capacity_factor > 0 ? capacity_factor : moe_imbalance; }
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
  bool is_switch = false;   // true / false in files (1 / 0 in CSV and placeholders); else an integer
  std::string_view help;
  int (*get)(const ModelShape&) = nullptr;
  void (*set)(ModelShape&, int) = nullptr;
  // A named choice ("gelu" | "swiglu"): a string in files, CSV and placeholders, stored as its index.
  std::vector<std::string_view> choices = {};
  int min = 1;  // the smallest integer allowed (0 where 0 means absent)
  // For a field added after stored studies existed (issue 33), the TOML text of the value that
  // means what leaving it out means ("\"gelu\"", "true", "0"): a model file that writes it keeps
  // its study id (tuner/study/study_identity.cc, LateInputs). Empty: no such value (kv_heads's
  // neutral is heads, not a constant) or an older field.
  std::string_view neutral = {};
  // A number with this many decimals in files, CSV and placeholders (capacity_factor: 2, "1.25"),
  // held in the table as an integer in units of 10^-decimals (125); 0: an integer field.
  int decimals = 0;
};
const std::vector<ShapeRow>& ShapeRows();

// A field's text in CSV files and placeholders: a choice's name ("swiglu"), else the integer.
std::string ShapeFieldText(const ShapeRow& row, const ModelShape& m);

// The index of a choice row's value ("swiglu" -> 1), or -1.
int ShapeChoiceIndex(const ShapeRow& row, std::string_view text);

// The first rule a shape breaks, with the field it names; empty when it breaks none. `ffn_given`:
// the MLP width was given (SwiGLU has no default).
struct ShapeRule {
  std::string field, rule;
};
ShapeRule BrokenShapeRule(const ModelShape& m, bool ffn_given = true);

// Parses and validates a model TOML (keys: name, description and the shape table's fields);
// without `name` the model is named after `file_stem` (a user's own file).
Result<ModelShape> ParseModelShape(std::string_view toml_text, std::string_view source,
                                   std::string_view file_stem = {});

}  // namespace tunepar
