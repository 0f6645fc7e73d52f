// The options every problem-level command shares: --world, --model, --hardware, --space, --fix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tuner/study/problem.h"

namespace tunepar {

struct ProblemOptions {
  int64_t world = 0;
  std::string model = "gpt-1t";
  std::string hardware = "frontier-mi250x";
  std::string space = "default";
  std::vector<std::string> fix;  // KNOB=VALUE[,VALUE...]: the values of a knob, replacing the space's
  CLI::Option* hardware_option = nullptr;  // set by AddTo

  // Whether --hardware was given (a backend may choose another default than the embedded one).
  bool HardwareGiven() const { return hardware_option != nullptr && hardware_option->count() > 0; }

  // The problem these options name, the --fix values applied after `declared` (a command
  // config's [knobs], as TOML lines).
  Result<Problem> Load(const std::string& declared = "") const {
    Result<std::string> knobs = KnobDeclarations(declared, fix);
    if (!knobs.ok()) return knobs.status();
    return LoadProblem(model, hardware, space, *knobs);
  }

  void AddTo(CLI::App* cmd) {
    // World is read as a signed number so that 0 and negatives reach our own clear message.
    cmd->add_option("--world,-w", world, "Number of GPUs (GCDs on MI250X)")
        ->required()
        ->allow_extra_args(false);
    cmd->add_option("--model,-m", model, "Model preset or TOML path")->capture_default_str();
    hardware_option = cmd->add_option("--hardware", hardware,
                                      "Hardware preset or TOML path (search --backend local: local-cpu)")
                          ->capture_default_str();
    cmd->add_option("--space", space, "Search-space preset or TOML path")->capture_default_str();
    cmd->add_option("--fix", fix,
                    "KNOB=VALUE[,VALUE...]: only these values of a knob, e.g. --fix tp=1 --fix precision=fp32,bf16 "
                    "(repeatable; replaces the space's list)");
  }
};

}  // namespace tunepar
