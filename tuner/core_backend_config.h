// Setting up the `local` and `slurm` backends from the command line and the environment: where
// tunepar-core is, how many ranks this machine or allocation holds, the allocation's first node,
// and the checks that make a wrong setup one clear error before any trial runs.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "runner/core_backend.h"
#include "runner/hardware_profile.h"

namespace tunepar {

struct CoreFlags {
  std::string core;  // tunepar-core; "" = next to the tunepar binary, then $PATH
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
// kConfig with one line when the setup cannot work).
Result<runner::CoreBackendOptions> ResolveCoreOptions(const CoreFlags& flags, runner::Launcher launcher,
                                                      const runner::HardwareProfile& hardware, int world,
                                                      double timeout_s);

// The tunepar-core binary: `given`, else next to this executable, else on $PATH.
Result<std::string> FindCoreBinary(const std::string& given);

}  // namespace tunepar
