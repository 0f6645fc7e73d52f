// The options every problem-level command shares: --world, --model, --hardware, --space.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace tunepar {

struct ProblemOptions {
  int64_t world = 0;
  std::string model = "gpt-1t";
  std::string hardware = "frontier-mi250x";
  std::string space = "default";

  void AddTo(CLI::App* cmd) {
    // World is read as a signed number so that 0 and negatives reach our own clear message.
    cmd->add_option("--world,-w", world, "Number of GPUs (GCDs on MI250X)")
        ->required()
        ->allow_extra_args(false);
    cmd->add_option("--model,-m", model, "Model preset or TOML path")->capture_default_str();
    cmd->add_option("--hardware", hardware, "Hardware preset or TOML path")->capture_default_str();
    cmd->add_option("--space", space, "Search-space preset or TOML path")->capture_default_str();
  }
};

}  // namespace tunepar
