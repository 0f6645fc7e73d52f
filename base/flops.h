// FLOPs per optimizer step of a transformer: what TFLOP/s per GPU is counted with, by the tuner,
// the backends and tunepar-core alike. docs/flop-convention.md says which convention and why.
#pragma once

#include "base/layout.h"
#include "base/model_shape.h"

namespace tunepar {

// How the attention core (scores Q K^T and their product with V, 4 s^2 h per layer forward) is
// counted. kFull: the whole s x s matrix (Korthikanti et al. 2022 eq. 7; Megatron-LM before
// 8873b55d6a, NeMo 24.07's table). kCausalHalf: half of it for a causal model, as Megatron-LM
// counts since 2025-03 and Megatron-Bridge does ("only half of the attention matrix is
// non-zero"); a ViT attends both ways and keeps the full count.
enum class ScoreFlops { kFull, kCausalHalf };

// Model FLOPs per optimizer step (no recomputation): 3 passes x (L layer + head) per sequence,
// with d = h/a, g KV heads, k MLP matrices (2 GELU, 3 SwiGLU) and c = 1/2 only for kCausalHalf
// of a causal model:
//   layer = 2s (2h^2 + 2h g d + k h f) + c 4 s^2 h
//   head  = 2 s h V (a language model's logits) | 2 s h O + 2 s P h (a ViT's head and patch
//           embedding; the patch embedding's missing data gradient is counted like any GEMM's,
//           as Megatron-Bridge's vit_flops does)
// With g = a, k = 2, f = 4h this is 72 B L s h^2 (1 + s/(6h) + V/(12 h L)) (Korthikanti eq. 7).
// A MoE layer (issue 36) runs (top_k + shared_experts) k h f_e matrices per token in place of
// k h f, as Megatron-LM counts it (num_floating_point_operations); its router's h x E GEMM is not
// counted (about E / (3 f_e (top_k + shared)) of the expert GEMMs: 0.02% for Mixtral).
double ModelFlopsPerStep(const ModelShape& model, ScoreFlops scores = ScoreFlops::kFull);

// FLOPs the hardware executes per step, including recomputation (full: one more forward pass
// of the layers, Narayanan et al. eq. 3; selective: the attention core's forward again,
// c 4 B L s^2 h. Korthikanti et al.'s eq. 8 counts 12 B L s^2 h for it; we count what runs).
double HardwareFlopsPerStep(const ModelShape& model, Recompute recompute, ScoreFlops scores = ScoreFlops::kFull);

// One layer's forward pass for one sequence (kFull scores): what the pipeline split balances. Of
// a MoE model, the mean over its dense and MoE layers (the split counts layers, not their kinds).
double LayerForwardFlops(const ModelShape& model);
// The forward work outside the layers for one sequence, by the stage it runs on: the first stage's
// (a ViT's patch embedding; a token embedding is a lookup, 0) and the last stage's (the LM head's
// logits, or a ViT's head).
struct EndsFlops {
  double first = 0, last = 0;
};
EndsFlops EndsForwardFlops(const ModelShape& model);

// Model TFLOP/s per GPU of a step that took `step_time_s` on `gpus` devices (kFull).
double ModelTflopsPerGpu(const ModelShape& model, double step_time_s, int gpus);

}  // namespace tunepar
