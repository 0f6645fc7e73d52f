#include "runner/performance_model.h"

#include <algorithm>

namespace tunepar::runner {

using search::Layout;
using search::ModelShape;
using search::Precision;
using search::Recompute;

namespace {

// Forward FLOPs of one layer for one sequence: GEMMs 2 s (4h^2 + 2hf) plus attention
// scores and values 4 s^2 h. With f = 4h: 24 s h^2 + 4 s^2 h (Narayanan et al. 2021).
double LayerForwardGemmFlops(const ModelShape& m) {
  const double s = m.seq_len, h = m.hidden, f = m.ffn_hidden;
  return 2 * s * (4 * h * h + 2 * h * f);
}
double LayerForwardAttentionFlops(const ModelShape& m) {
  const double s = m.seq_len, h = m.hidden;
  return 4 * s * s * h;
}
double LogitsForwardFlops(const ModelShape& m) {
  return 2.0 * m.seq_len * m.hidden * m.vocab;
}

double BytesPerValue(Precision p) {
  return p == Precision::kFp32 ? 4.0 : 2.0;
}

}  // namespace

double ModelFlopsPerStep(const ModelShape& m) {
  const double per_sequence =
      3 * (m.layers * (LayerForwardGemmFlops(m) + LayerForwardAttentionFlops(m)) + LogitsForwardFlops(m));
  return per_sequence * m.global_batch;
}

double HardwareFlopsPerStep(const ModelShape& m, Recompute recompute) {
  double extra_forward = 0;
  if (recompute == Recompute::kFull)
    extra_forward = m.layers * (LayerForwardGemmFlops(m) + LayerForwardAttentionFlops(m));
  if (recompute == Recompute::kSelective) extra_forward = m.layers * LayerForwardAttentionFlops(m);
  return ModelFlopsPerStep(m) + extra_forward * m.global_batch;
}

Prediction Predict(const Layout& l, const ModelShape& m, const HardwareProfile& hw) {
  Prediction p;
  const double world = l.World();
  const double peak = hw.PeakFlops(l.precision);

  // Time: every device executes its share of the hardware FLOPs at peak; the 1F1B schedule
  // idles each stage for (p - 1) / (v m) of the ideal time.
  const double flops_per_device = HardwareFlopsPerStep(m, l.recompute) / world;
  p.time.compute = flops_per_device / peak;
  p.time.bubble = p.time.compute * (l.pp - 1) / (static_cast<double>(l.virtual_stages) * l.num_micro_batches);
  p.step_time_s = p.time.compute + p.time.bubble;

  const double tokens = static_cast<double>(m.global_batch) * m.seq_len;
  p.tokens_per_s = tokens / p.step_time_s;
  p.tflops_per_gpu = ModelFlopsPerStep(m) / p.step_time_s / world / 1e12;
  p.mfu = p.tflops_per_gpu * 1e12 / peak;

  // Memory on the first pipeline stage (it holds the embeddings and the most activations).
  const double h = m.hidden, s = m.seq_len, a = m.heads, b = l.micro_batch, t = l.tp;
  const double layer_params = 4 * h * h + 4 * h + 2 * h * m.ffn_hidden + m.ffn_hidden + 5 * h;
  const double stage_params =
      (m.layers / static_cast<double>(l.pp)) * layer_params / t + (static_cast<double>(m.vocab) + s) * h / t;
  const bool fp32 = l.precision == Precision::kFp32;
  const double weight_bytes = fp32 ? 4 : 2;
  // Megatron accumulates bf16 gradients in fp32; fp16 keeps fp16 gradients.
  const double grad_bytes = (fp32 || l.precision == Precision::kBf16) ? 4 : 2;
  // Adam: two fp32 moments, plus an fp32 master copy in mixed precision; ZeRO-1 shards them.
  const double optimizer_bytes = (fp32 ? 8 : 12) / (l.zero == 1 ? static_cast<double>(l.dp) : 1.0);
  p.memory.weights = stage_params * weight_bytes;
  p.memory.gradients = stage_params * grad_bytes;
  p.memory.optimizer_states = stage_params * optimizer_bytes;

  // Activations per layer per micro-batch (Korthikanti et al. 2022, 16-bit values).
  const double attention_scores = l.flash_attention ? 0.0 : 5 * a * s / h;
  double per_layer;
  if (l.recompute == Recompute::kFull) {
    per_layer = s * b * h * 2;
  } else {
    const double scores = l.recompute == Recompute::kSelective ? 0.0 : attention_scores;
    per_layer = l.seq_parallel ? s * b * h * (34 / t + scores / t) : s * b * h * (10 + 24 / t + scores / t);
  }
  per_layer *= BytesPerValue(l.precision) / 2.0;
  const double in_flight = std::min(l.pp, l.num_micro_batches);
  const double interleave = 1.0 + (l.pp - 1.0) / (l.pp * static_cast<double>(l.virtual_stages));
  const double layers_per_stage = m.layers / static_cast<double>(l.pp);
  p.memory.activations = per_layer * layers_per_stage * in_flight * (l.virtual_stages > 1 ? interleave : 1.0);
  if (l.recompute == Recompute::kFull) {
    // The layer being recomputed holds its full activations during its backward pass.
    p.memory.activations +=
        s * b * h * (10 + 24 / t + attention_scores / t) * BytesPerValue(l.precision) / 2.0;
  }
  // Logits in fp32 on the last stage (counted here: with pp = 1 it is the same device).
  if (l.pp == 1) p.memory.activations += 4 * s * b * m.vocab / t;
  p.memory.runtime_overhead = 1.0e9;  // framework context and allocator slack (assumed)
  p.memory_bytes = p.memory.Total();
  p.fits = p.memory_bytes <= hw.MemoryBytes();
  return p;
}

}  // namespace tunepar::runner
