// The sbatch script for a chosen layout: resources from the layout and the hardware profile,
// the communication environment, MASTER_ADDR/PORT, a per-rank setup (rank variables, device by
// local rank, kernel caches on node-local disk), a smoke test on local rank 0 of each node, an
// affinity report per rank, and the training command under srun with the profile's CPU masks
// (launch_environment.h: the same launch the slurm backend measures with).
#pragma once

#include <string>

#include "runner/hardware_profile.h"
#include "base/layout.h"
#include "base/model_shape.h"

namespace tunepar::runner {

struct LaunchScriptRequest {
  ModelShape model;
  HardwareProfile hardware;
  Layout layout;
  std::string training_command;  // run by every rank, after the rank setup
  std::string model_toml;        // non-empty: written next to the job as $TUNEPAR_MODEL (tunepar-core)
  std::string job_name = "tunepar";
  std::string time = "01:00:00";  // #SBATCH --time
  std::string partition;          // "" = the site's default
  std::string account;            // "" = the user's default
  std::string header;             // comment lines: where the layout comes from
};

std::string LaunchScript(const LaunchScriptRequest& request);

}  // namespace tunepar::runner
