// What tunepar-core runs of a layout: tensor, pipeline (1F1B) and data parallelism, ZeRO-1,
// micro-batches, precision and recomputation; neither sequence parallelism, interleaved stages
// nor flash attention. The one statement of it: the core's option parser checks layouts against
// it, and the local and slurm backends restrict their studies to it.
#pragma once

#include "base/knob_support.h"

namespace tunepar::core {

inline constexpr KnobSupport kSupportedKnobs{.seq_parallel = false, .interleaving = false, .flash_attention = false};

}  // namespace tunepar::core
