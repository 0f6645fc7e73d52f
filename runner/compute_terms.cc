#include "runner/compute_terms.h"

#include <fmt/format.h>

namespace tunepar::runner {

namespace {

std::string AttentionKind(const ModelShape& m) {
  const int g = m.KvHeads();
  if (g == m.heads) return fmt::format("MHA {} heads", m.heads);
  return fmt::format("{} {}/{}", g == 1 ? "MQA" : "GQA", m.heads, g);
}

std::string_view MlpName(const ModelShape& m) { return m.mlp == MlpKind::kSwiglu ? "SwiGLU" : "GeLU"; }

std::string_view NormName(const ModelShape& m) { return m.norm == NormKind::kRmsNorm ? "RMSNorm" : "LayerNorm"; }

std::string_view PositionsName(const ModelShape& m) {
  switch (m.positions) {
    case Positions::kLearned: return "learned positions";
    case Positions::kRotary: return "rotary";
    case Positions::kAlibi: return "ALiBi";
    case Positions::kNone: return "no positions";
  }
  return "";
}

std::string QkvLabel(const ModelShape& m) {
  const int g = m.KvHeads();
  if (g == m.heads) return fmt::format("Q/K/V projections (MHA: {} heads)", m.heads);
  return fmt::format("Q/K/V projections ({}: {} query heads, {} KV group{}; K and V 1/{} of Q)", g == 1 ? "MQA" : "GQA",
                     m.heads, g, g == 1 ? "" : "s", m.heads / g);
}

std::string ElementwiseLabel(const ModelShape& m) {
  std::string label = fmt::format("norms ({}), dropout, residuals, {}", NormName(m),
                                  m.mlp == MlpKind::kSwiglu ? "SwiGLU product" : "GeLU");
  if (m.positions == Positions::kRotary) label += ", rotary";
  return label + ", softmax";
}

std::string ExpertsLabel(const ModelShape& m) {
  std::string label = fmt::format("MoE experts (router, top-{} of {} experts f {}", m.top_k, m.experts, m.ExpertMlpWidth());
  if (m.shared_experts > 0) label += fmt::format(", {} shared", m.shared_experts);
  if (m.capacity_factor > 0) label += fmt::format(", capacity factor {}", m.capacity_factor);
  if (m.moe_imbalance != 1.0) label += fmt::format(", imbalance {}", m.moe_imbalance);
  return label + ")";
}

std::string EndsLabel(const ModelShape& m) {
  if (!m.HasVocabulary())
    return fmt::format("patch embedding ({} values per patch) and head ({} outputs per token)", m.patch_tokens,
                       m.output_width);
  return fmt::format("LM head and cross-entropy (vocabulary {}, {})", m.vocab, m.tied_embeddings ? "tied" : "untied");
}

}  // namespace

std::vector<NamedTerm> NamedTimeTerms(const TimeBreakdown& t, const Layout& l) {
  std::vector<NamedTerm> terms{{"tp_comm_s", "tensor-parallel communication", t.tp_comm}};
  if (l.cp > 1) terms.push_back({"cp_comm_s", "context-parallel K/V exchange (ring, exposed)", t.cp_comm});
  if (l.ep > 1 || t.moe_all_to_all > 0)
    terms.push_back({"moe_all_to_all_s", "MoE token all-to-alls (dispatch and combine)", t.moe_all_to_all});
  terms.push_back({"pp_p2p_s", "pipeline point-to-point", t.pp_p2p});
  terms.push_back({"bubble_s", "pipeline bubble", t.bubble});
  terms.push_back({"dp_comm_exposed_s", "data-parallel communication (exposed)", t.dp_comm_exposed});
  if (l.zero >= 3) terms.push_back({"weight_gather_exposed_s", "FSDP weight all-gathers (exposed)", t.weight_gather_exposed});
  terms.push_back({"optimizer_s", "optimizer step", t.optimizer});
  if (t.device_sharing > 0)
    terms.push_back({"device_sharing_s", "waiting for devices other ranks use", t.device_sharing});
  return terms;
}

std::vector<NamedTerm> NamedComputeTerms(const ModelShape& m, const ComputeTerms& t, Precision precision) {
  const std::string core = std::string("attention core (QK^T, softmax, V") +
                           (m.positions == Positions::kAlibi ? "; ALiBi biases" : "") +
                           (m.Causal() ? ")" : "; bidirectional)");
  std::vector<NamedTerm> terms = {{"qkv_projections_s", QkvLabel(m), t.qkv_projections},
          {"attention_output_s", "attention output projection", t.attention_output},
          {"mlp_s", fmt::format("MLP ({}: {} matrices, f {})", MlpName(m), m.MlpMatrices(), m.MlpWidth()), t.mlp},
          {"attention_core_s", core, t.attention_core},
          {"elementwise_s", ElementwiseLabel(m) + (precision == Precision::kFp8 ? ", FP8 casts" : ""), t.elementwise},
          {"kernel_overhead_s", "kernel launches (per layer)", t.kernel_overhead},
          {"recompute_s", "recomputation", t.recompute},
          {"head_and_embedding_s", EndsLabel(m), t.head_and_embedding}};
  if (m.experts > 0) terms.push_back({"expert_compute_s", ExpertsLabel(m), t.experts});
  return terms;
}

std::string ShapeFeatures(const ModelShape& m) {
  std::string line = fmt::format("{}, {} f {}, {}, {}", AttentionKind(m), MlpName(m), m.MlpWidth(), PositionsName(m),
                                 NormName(m));
  if (m.HasVocabulary()) {
    line += m.tied_embeddings ? ", tied" : ", untied";
  } else {
    line += fmt::format(", ViT (patch {} -> head {})", m.patch_tokens, m.output_width);
  }
  if (!m.linear_biases) line += ", no biases";
  if (m.experts > 0) {
    line += fmt::format(", MoE {} experts top-{} f_e {}", m.experts, m.top_k, m.ExpertMlpWidth());
    if (m.shared_experts > 0) line += fmt::format(" + {} shared", m.shared_experts);
    if (m.moe_every > 1) line += fmt::format(" every {} layers", m.moe_every);
    line += m.capacity_factor > 0 ? fmt::format(", capacity factor {}", m.capacity_factor) : ", dropless";
  }
  return line;
}

}  // namespace tunepar::runner
