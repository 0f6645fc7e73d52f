// The performance model: step time and memory of a layout, from FLOPs, bytes and the hardware
// profile. It is the `model` backend (a dry run at any scale) and the search's prior.
#pragma once

#include <string_view>

#include "runner/hardware_profile.h"
#include "search/layout.h"
#include "search/model_shape.h"

namespace tunepar::runner {

// Which model produced a prediction; stored with every model-backend trial.
inline constexpr std::string_view kPerformanceModelId = "estimate-v0";
inline constexpr std::string_view kPerformanceModelVersion =
    "estimate-v0: FLOPs at the device's dense peak, 1F1B bubble, no communication; memory from "
    "Korthikanti et al. 2022";

struct TimeBreakdown {  // seconds per optimizer step
  double compute = 0;
  double tp_comm = 0;
  double pp_p2p = 0;
  double bubble = 0;
  double dp_comm_exposed = 0;
  double optimizer = 0;
};

struct MemoryBreakdown {  // bytes per device, on the most loaded pipeline stage
  double weights = 0;
  double gradients = 0;
  double optimizer_states = 0;
  double activations = 0;
  double comm_buffers = 0;
  double runtime_overhead = 0;
  double Total() const {
    return weights + gradients + optimizer_states + activations + comm_buffers + runtime_overhead;
  }
};

struct Prediction {
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;  // model FLOPs (Korthikanti eq. 7, no recompute) / step / GPUs
  double mfu = 0;             // tflops_per_gpu / device peak for the layout's precision
  double memory_bytes = 0;
  bool fits = false;  // memory_bytes <= device memory
  TimeBreakdown time;
  MemoryBreakdown memory;
};

// Model FLOPs per optimizer step (no recomputation): 72 B L s h^2 (1 + s/(6h) + V/(12 h L)),
// generalised to an MLP width f.
double ModelFlopsPerStep(const search::ModelShape& model);
// FLOPs the hardware executes per step, including recomputation (full: one more forward pass
// of the layers, Narayanan et al. eq. 3; selective: the attention core's forward again,
// 4 B L s^2 h. Korthikanti et al.'s eq. 8 counts 12 B L s^2 h for it; we count what runs).
double HardwareFlopsPerStep(const search::ModelShape& model, search::Recompute recompute);

Prediction Predict(const search::Layout& layout, const search::ModelShape& model,
                   const HardwareProfile& hardware);

}  // namespace tunepar::runner
