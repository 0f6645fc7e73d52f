// Measured training runs, the data a hardware profile is calibrated against: a model shape, a
// layout and the measured time per optimizer step. Read from CSV text (published tables) or
// built from a study's measured trials.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/layout.h"
#include "base/model_shape.h"

namespace tunepar::runner {

struct MeasuredRun {
  std::string label;  // e.g. "megatron-1008B"
  ModelShape model;
  Layout layout;
  double step_time_s = 0;  // measured wall clock per optimizer step
  std::string source;      // where the measurement comes from
  // The FLOP formula the run's TFLOP/s were published with (one of ParseMeasuredRuns'), so
  // reports compare like with like; "model" when the run was measured as a step time.
  std::string tflops_formula = "model";
  // Ranks the run placed on each node; 0: one per GPU (the profile's GPUs per node). More ranks
  // than GPUs time-share them (oversubscribed runs on a workstation).
  int ranks_per_node = 0;

  // FLOPs per step by the run's formula: TFLOP/s per GPU = FlopsPerStep() / step / GPUs.
  double FlopsPerStep() const;
};

// Parses CSV with a header row and these columns (order free; '#' lines are comments):
//   label, gpus, source, one column per field of the model's shape table (base/model_shape.h;
//   ffn_hidden and tied_embeddings may be left out), one column per knob by its name
//   (base/knobs.h; a knob with a neutral value may be left out or empty),
//   optionally ranks_per_node (empty or 0: one rank per GPU), and either step_time_s, or tflops_per_gpu with tflops_formula:
//     "recompute-counted": 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) FLOPs per step (Narayanan
//                          et al. 2021 eq. 3, what Megatron's Table 1 and Megatron-DeepSpeed print)
//     "model":             72 B L s h^2 (1 + s/(6h) + V/(12 h L)) (Korthikanti et al. eq. 7)
//     "megatron-full":     ModelFlopsPerStep(kFull) (base/flops.h): GQA, SwiGLU and the full s^2
//                          score term, as Megatron-LM counted before 2025-03 (NeMo 24.07's tables)
//     "megatron-causal":   ModelFlopsPerStep(kCausalHalf): half the score term of a causal model,
//                          as Megatron-LM since 2025-03 and Megatron-Bridge (NeMo 26.04's tables)
//     "llm-foundry":       B (6 N s + 12 L h s^2), N = ModelShape::Parameters() (every trainable
//                          parameter: embeddings, position table, biases and norms included), the
//                          full s^2 score term: MosaicML llm-foundry's "Model TFLOP" and MFU
//                          (scripts/train/benchmarking/collect_results.py)
// Errors name the source, the line and the column.
Result<std::vector<MeasuredRun>> ParseMeasuredRuns(std::string_view csv_text, std::string_view source);

// FLOPs per step by the formulas above, for converting TFLOP/s to step time and back.
double RecomputeCountedFlops(const ModelShape& model);
double ModelFormulaFlops(const ModelShape& model);
double LlmFoundryFlops(const ModelShape& model);
// By the formula's name; nothing for a name that is none of the five.
std::optional<double> FlopsPerStepByFormula(const ModelShape& model, std::string_view formula);

}  // namespace tunepar::runner
