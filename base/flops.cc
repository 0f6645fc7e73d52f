#include "base/flops.h"

namespace tunepar {

namespace {

// The share of the s x s score matrix counted: half for kCausalHalf of a causal model.
double ScoreShare(const ModelShape& m, ScoreFlops scores) {
  return scores == ScoreFlops::kCausalHalf && m.Causal() ? 0.5 : 1.0;
}

// The attention core of one layer's forward pass for one sequence: Q K^T and its product with V.
double AttentionCoreForwardFlops(const ModelShape& m, ScoreFlops scores) {
  const double s = m.seq_len, h = m.hidden;
  return ScoreShare(m, scores) * 4 * s * s * h;
}

// One layer's forward pass for one sequence: the GEMMs (Q and the projection h x h each, K and V
// h x g d each, the MLP's k matrices h x f) and the attention core. Every term is an integer
// below 2^53, so for GPT (g d = h, k = 2) this is today's 2s (4h^2 + 2hf) + 4 s^2 h, bit for bit.
double LayerForwardFlops(const ModelShape& m, ScoreFlops scores) {
  const double s = m.seq_len, h = m.hidden, f = m.MlpWidth();
  const double kv_width = static_cast<double>(m.KvHeads()) * m.HeadDim();
  return 2 * s * (2 * h * h + 2 * h * kv_width + m.MlpMatrices() * h * f) + AttentionCoreForwardFlops(m, scores);
}

// A MoE layer's forward pass for one sequence: the dense layer's attention, and in place of its
// MLP each token's k routed and the shared experts (k h f_e matrices each). The router's h x E
// GEMM is not counted, as Megatron-LM's num_floating_point_operations does not count it.
double MoeLayerForwardFlops(const ModelShape& m, ScoreFlops scores) {
  const double s = m.seq_len, h = m.hidden, f = m.MlpWidth(), f_e = m.ExpertMlpWidth();
  const double experts_per_token = m.top_k + m.shared_experts;
  return LayerForwardFlops(m, scores) + 2 * s * m.MlpMatrices() * h * (experts_per_token * f_e - f);
}

// Every layer's forward pass for one sequence: the dense and the MoE layers.
double LayersForwardFlops(const ModelShape& m, ScoreFlops scores) {
  const double dense = m.DenseLayers() * LayerForwardFlops(m, scores);
  return m.MoeLayers() > 0 ? dense + m.MoeLayers() * MoeLayerForwardFlops(m, scores) : dense;
}

// The forward pass outside the layers for one sequence: a language model's logits (s x h x V),
// or a ViT's head (s x h x O) and patch embedding (s x P x h).
double HeadForwardFlops(const ModelShape& m) {
  const double s = m.seq_len, h = m.hidden;
  if (m.HasVocabulary()) return 2.0 * s * h * m.vocab;
  return 2.0 * s * h * m.output_width + 2.0 * s * m.patch_tokens * h;
}

}  // namespace

double LayerForwardFlops(const ModelShape& m) {
  if (m.MoeLayers() == 0) return LayerForwardFlops(m, ScoreFlops::kFull);
  return LayersForwardFlops(m, ScoreFlops::kFull) / m.layers;
}

EndsFlops EndsForwardFlops(const ModelShape& m) {
  const double s = m.seq_len, h = m.hidden;
  if (m.HasVocabulary()) return {0.0, 2.0 * s * h * m.vocab};
  return {2.0 * s * m.patch_tokens * h, 2.0 * s * h * m.output_width};
}

double ModelFlopsPerStep(const ModelShape& m, ScoreFlops scores) {
  return 3 * (LayersForwardFlops(m, scores) + HeadForwardFlops(m)) * m.global_batch;
}

double HardwareFlopsPerStep(const ModelShape& m, Recompute recompute, ScoreFlops scores) {
  double extra_forward = 0;
  if (recompute == Recompute::kFull) extra_forward = LayersForwardFlops(m, scores);
  if (recompute == Recompute::kSelective) extra_forward = m.layers * AttentionCoreForwardFlops(m, scores);
  return ModelFlopsPerStep(m, scores) + extra_forward * m.global_batch;
}

double ModelTflopsPerGpu(const ModelShape& model, double step_time_s, int gpus) {
  return ModelFlopsPerStep(model) / step_time_s / gpus / 1e12;
}

}  // namespace tunepar
