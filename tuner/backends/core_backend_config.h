// Setting up the `local` and `slurm` backends from the command line and the environment: which
// tunepar-core build the hardware profile's devices need and where it is, how many ranks this
// machine or allocation holds, the allocation's first node, and the checks that make a wrong
// setup one clear error before any trial runs.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "runner/core_backend.h"
#include "runner/hardware_profile.h"

namespace tunepar {

struct CoreFlags {
  std::string core;  // a tunepar-core build; "" = the profile's (FindCoreBinary)
  int steps = 5;     // measured steps per trial
  int warmup = 2;    // warm-up steps per trial
  std::string slice = "never";
  int max_ranks = 0;             // local: ranks a trial may use (0 = 4 x cores)
  int threads = 0;               // per rank (0 = automatic)
  std::vector<std::string> env;  // KEY=VALUE
};

// The backend `tunepar search` uses when none is given: `slurm` inside an allocation
// ($SLURM_JOB_ID set), else `model`; `why` says which and why.
std::string AutomaticBackend(std::string* why);

// Resolves the options of the local or slurm backend for `world` ranks (kInvalidArgument or
// kConfig with one line when the setup cannot work); `core_said`, when given, gets which
// tunepar-core the trials run (CoreBinary::said).
Result<runner::CoreBackendOptions> ResolveCoreOptions(const CoreFlags& flags, runner::Launcher launcher,
                                                      const runner::HardwareProfile& hardware, int world,
                                                      double timeout_s, std::string* core_said = nullptr);

// The tunepar-core build a profile's devices need: the NVIDIA build (cuda) or the AMD build (hip)
// for GPUs, else the CPU build. The vendor is what the profile already says: the variable that
// gives each rank its device (launch.visible_devices_env: CUDA_VISIBLE_DEVICES for NVIDIA,
// ROCR_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES for AMD), else the device's name ("NVIDIA ...",
// "AMD MI...", "AMD Instinct ..."); a profile that names neither runs the CPU build. `why` says
// which of them decided.
core::CoreBuild CoreBuildFor(const runner::HardwareProfile& hardware, std::string* why);

// --core's help, the same in search, calibrate and launch-script.
inline constexpr const char* kCoreOptionHelp =
    "tunepar-core binary (default: the hardware profile's build next to tunepar, else on $PATH: tunepar-core-cuda "
    "for NVIDIA, tunepar-core-hip for AMD, tunepar-core for CPUs)";

struct CoreBinary {
  std::string path;                               // the executable
  core::CoreBuild build = core::CoreBuild::kCpu;  // the profile's (a --core binary stands in for it)
  // For the user: "tunepar-core-cuda beside tunepar (the NVIDIA build, for dgx-h100: its ...)"; a
  // binary from $PATH or --core by its path.
  std::string said;
};
// The tunepar-core binary for the profile: `given` (--core), else its build's binary
// (tunepar-core, tunepar-core-cuda or tunepar-core-hip) next to this executable, else on $PATH;
// kInvalidArgument naming what to build otherwise.
Result<CoreBinary> FindCoreBinary(const runner::HardwareProfile& hardware, const std::string& given);

}  // namespace tunepar
