// What tunepar-core runs of a layout: tensor, pipeline (1F1B) and data parallelism, ZeRO-1,
// micro-batches, precision and recomputation; neither sequence parallelism, interleaved stages
// nor flash attention. The one statement of it: the core's option parser checks layouts against
// it, and the local and slurm backends restrict their studies to it.
#pragma once

#include "base/knob_support.h"

namespace tunepar::core {

// sp0 vpp1 fa0: the knobs it does not implement, fixed off.
inline KnobSupport SupportedKnobs() {
  KnobSupport support;
  support.Of(Knob::kSeqParallel) = {0};
  support.Of(Knob::kVirtualStages) = {1};
  support.Of(Knob::kFlashAttention) = {0};
  return support;
}

}  // namespace tunepar::core
