// The models torchtitan trains, by the names it gives them: torchtitan selects a model with
// --model.name and --model.flavor and takes no dimensions, so a command template passes a shape
// to it by finding the flavour whose shape it is ({torchtitan_model}, {torchtitan_flavor}).
#pragma once

#include <optional>
#include <string>

#include "base/model_shape.h"

namespace tunepar::runner {

struct TorchtitanModel {
  std::string name;    // --model.name: "llama3"
  std::string flavor;  // --model.flavor: "8B"
};

// The torchtitan flavour with exactly this shape (every field but the sequence length and the
// global batch, which torchtitan takes as --training.seq_len and --training.global_batch_size);
// nullopt when there is none (a GPT, a ViT, a Llama 3 of another width).
std::optional<TorchtitanModel> TorchtitanModelOf(const ModelShape& m);

// The flavours known, for messages: "llama3 8B, 70B, 405B".
std::string TorchtitanModelsKnown();

}  // namespace tunepar::runner
