// FLOPs per optimizer step of a GPT-style decoder: what TFLOP/s per GPU is counted with, by
// the tuner, the backends and tunepar-core alike.
#pragma once

#include "base/layout.h"
#include "base/model_shape.h"

namespace tunepar {

// Model FLOPs per optimizer step (no recomputation), generalised to an MLP width f:
// 3 passes x (L (2 s (4h^2 + 2hf) + 4 s^2 h) + 2 s h V) per sequence. With f = 4h this is
// 72 B L s h^2 (1 + s/(6h) + V/(12 h L)) (Korthikanti et al. 2022 eq. 7).
double ModelFlopsPerStep(const ModelShape& model);

// FLOPs the hardware executes per step, including recomputation (full: one more forward pass
// of the layers, Narayanan et al. eq. 3; selective: the attention core's forward again,
// 4 B L s^2 h. Korthikanti et al.'s eq. 8 counts 12 B L s^2 h for it; we count what runs).
double HardwareFlopsPerStep(const ModelShape& model, Recompute recompute);

// Model TFLOP/s per GPU of a step that took `step_time_s` on `gpus` devices.
double ModelTflopsPerGpu(const ModelShape& model, double step_time_s, int gpus);

}  // namespace tunepar
