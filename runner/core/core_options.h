// The command line of tunepar-core: the model (a TOML preset or file, the same the tuner
// reads), the layout (flags, a layout key, or a JSON trial file), the run and the test hooks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/layout.h"
#include "base/model_shape.h"
#include "runner/core/comm.h"

namespace tunepar::core {

enum class Fault { kNone, kCrash, kHang, kOom, kDevice, kTeardownHang };

struct CoreOptions {
  ModelShape model;
  std::string model_origin;
  Layout layout;        // dp from the world size when not given
  std::string hardware;         // preset or file: its memory_gb caps each rank ("" none)
  double memory_cap_bytes = 0;  // --memory-cap, else the hardware's, else 0 (no cap)
  int steps = 5;                // measured steps
  int warmup = 2;               // steps run before measuring
  int threads = 0;              // per rank; 0: the CPUs of the rank's affinity mask, shared
  // Which CPUs a rank runs on: auto (near its device, device_cpus.h, when the launcher did not
  // bind it) | near-device | as-launched.
  std::string cpu_bind = "auto";
  std::string wait = "auto";    // how ranks wait for MPI: auto | spin | sleep (runner/core/waiting.h)
  CommMode comm = CommMode::kMpi;  // how device data moves (comm.h); default: the build's
  bool comm_given = false;         // --comm was given (else the placement may choose: CommForPlacement)
  bool smoke = false;              // one checked all-reduce over every rank's device, then exit
  double lr = 3e-4;
  uint64_t seed = 1234;
  std::string data;        // a text file (byte tokens); "" synthetic
  std::string output;      // JSON result; "" stdout
  std::string dump;        // directory for gradients/weights dumps (tests)
  int gradient_check = 0;  // samples per tensor (one rank)
  Fault fault = Fault::kNone;
  int fault_rank = 0;
  int fault_step = 1;  // the step at which the fault fires
  bool quiet = false;
};

// Parses argv for a job of `world_size` ranks. On --help, fills `help` (and returns an error
// the caller ignores when `help` is set).
Result<CoreOptions> ParseCoreOptions(int argc, char** argv, int world_size, std::string* help);

std::string_view ToString(Fault fault);

}  // namespace tunepar::core
