// How the ranks of a job are placed and configured, from the hardware profile's [launch] table
// (design.md "Launch hygiene"): one rank per GCD/GPU, the device chosen from the local rank,
// the CPU mask of that GPU's NUMA domain, RANK/LOCAL_RANK/WORLD_SIZE and MASTER_ADDR/PORT from
// Slurm, the RCCL/libfabric settings, MIOpen's caches on node-local disk. Used by the slurm
// backend and by `tunepar launch-script`, so a measured trial and the emitted script launch the
// same way.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "runner/hardware_profile.h"

namespace tunepar::runner {

// The CPUs of a hex mask ("0xfe" -> {1..7}).
Result<std::vector<int>> CpusOfMask(const std::string& hex_mask);
// The CPUs of a list like "0-3,8" (as tunepar-core reports them).
Result<std::vector<int>> CpusOfList(const std::string& list);

// The bash lines a rank runs before the program (`exec "$@"` follows): rank variables from
// Slurm (or Open MPI), device visibility by local rank, the kernel cache directory.
std::string RankSetup(const HardwareProfile& hardware);
// The kernel cache lines of RankSetup alone (MIOpen's databases on node-local disk), for a
// node-level launcher's task, whose workers set their own rank variables.
std::string KernelCacheSetup(const HardwareProfile& hardware);

// The profile's environment (communication and runtime settings), in its order.
std::vector<std::pair<std::string, std::string>> ProfileEnvironment(const HardwareProfile& hardware);

// srun's options for `tasks` ranks over `nodes` nodes: tasks per node, CPUs per task, the CPU
// masks by local rank, the MPI plugin, and GPUs per node when the profile has GPUs.
// `mpi_plugin` replaces the profile's launch.mpi when given (a launch script follows the MPI
// its program links).
std::vector<std::string> SrunOptions(const HardwareProfile& hardware, int nodes, int tasks,
                                     const std::string& mpi_plugin = "");
// srun's options for a node-level launcher (torchrun): one task per node holding the node's
// CPUs (the union of the profile's masks) and all its devices; the launcher starts the workers.
std::vector<std::string> NodeLauncherSrunOptions(const HardwareProfile& hardware, int nodes,
                                                 const std::string& mpi_plugin);
// The union of the profile's CPU masks, in hex ("0x3" for "0x1", "0x2"); "" when it has none.
std::string UnionOfMasks(const HardwareProfile& hardware);
// A hex mask as /proc/<pid>/status shows it without commas: lower case, no 0x, no leading zeros.
std::string NormalizedMask(const std::string& hex_mask);

// Checks one rank's placement as tunepar-core reports it (its CPU list) against the profile's
// mask for its local rank; "" when it matches or the profile has no masks, else why not.
std::string CheckPlacement(const HardwareProfile& hardware, int rank, int local_rank,
                           const std::string& cpus);

// Quotes a word for a POSIX shell.
std::string ShellQuote(const std::string& word);

}  // namespace tunepar::runner
