// Compares the backward pass with central finite differences of the loss, at a few elements of
// every tensor (one rank). Meaningful in the fp64 build (tunepar-core-fp64), where the
// difference quotient is accurate to about 1e-11; in fp32 rounding limits it to about 1e-2.
#pragma once

#include <nlohmann/json.hpp>

#include "runner/core/trainer.h"

namespace tunepar::core {

// {"points", "max_rel_error", "worst": "h0.qkv.w[17]", "analytic", "numeric", "step"}
nlohmann::json CheckGradients(Trainer& trainer, int points_per_tensor, uint64_t seed);

}  // namespace tunepar::core
