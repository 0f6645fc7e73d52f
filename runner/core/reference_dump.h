// tunepar-core's --dump DIR (a test hook): what another run of the same model needs to repeat
// this one exactly, as JSON files in DIR. tests/core_test.cc compares layouts with the
// single-rank run through the tensors; tests/torch_reference/ repeats the single-rank run in
// PyTorch from the initial weights and the batches.
//   initial_weights.json  {name: [values]} before the first step (global tensors)
//   gradients.json        {name: [values]} of the first step's batch at the initial weights
//   weights.json          {name: [values]} after the last step
//   batches.json          {"samples": [step][sample][T + 1 tokens]}: inputs are tokens 0..T-1,
//                         targets 1..T (data.h)
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "runner/core/data.h"

namespace tunepar::core {

void WriteDump(const std::string& dir, const std::string& name, const nlohmann::json& content);

// The samples of steps [0, steps): step s trains on the data's samples [s GBS, (s + 1) GBS)
// whatever the layout (data.h).
nlohmann::json StepBatches(const TokenSource& data, int steps, int64_t global_batch, int T);

}  // namespace tunepar::core
