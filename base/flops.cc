#include "base/flops.h"

namespace tunepar {

namespace {

// One layer's forward pass for one sequence: the four GEMMs (QKV, projection, MLP in and out)
// and the attention core (scores and their product with the values).
double LayerForwardFlops(const ModelShape& m) {
  const double s = m.seq_len, h = m.hidden, f = m.MlpWidth();
  return 2 * s * (4 * h * h + 2 * h * f) + 4 * s * s * h;
}

}  // namespace

double ModelFlopsPerStep(const ModelShape& m) {
  const double logits_forward = 2.0 * m.seq_len * m.hidden * m.vocab;
  return 3 * (m.layers * LayerForwardFlops(m) + logits_forward) * m.global_batch;
}

double HardwareFlopsPerStep(const ModelShape& m, Recompute recompute) {
  const double s = m.seq_len, h = m.hidden;
  double extra_forward = 0;
  if (recompute == Recompute::kFull) extra_forward = m.layers * LayerForwardFlops(m);
  if (recompute == Recompute::kSelective) extra_forward = m.layers * 4 * s * s * h;
  return ModelFlopsPerStep(m) + extra_forward * m.global_batch;
}

double ModelTflopsPerGpu(const ModelShape& model, double step_time_s, int gpus) {
  return ModelFlopsPerStep(model) / step_time_s / gpus / 1e12;
}

}  // namespace tunepar
