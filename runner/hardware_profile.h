// A hardware profile: the machine a job runs on, as the performance model and the launchers
// need it. Every number says where it comes from (published, measured, fitted or assumed).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/device_memory.h"
#include "base/status.h"
#include "base/layout.h"

namespace tunepar::runner {

enum class NumberOrigin {
  kPublished,  // a vendor or facility figure (spec sheet, user guide, paper)
  kMeasured,   // measured directly on the machine (a GEMM or bandwidth probe)
  kFitted,     // fitted to measured training runs (tunepar calibrate)
  kAssumed,    // an engineering estimate awaiting measurement or fit
};
std::string_view ToString(NumberOrigin origin);

struct ProfileNumber {
  double value = 0.0;
  NumberOrigin origin = NumberOrigin::kAssumed;
  std::string source;  // where the figure comes from, or the fit that produced it
};

// One environment variable a profile sets, with where the setting comes from (a seed, a guide).
struct EnvSetting {
  std::string name, value;
  std::string source;  // "" only in profiles written before sources were asked for (stored studies)
};

// The network plugin RCCL/NCCL needs to use the fast network (aws-ofi-rccl on Slingshot): without
// it the library falls back to TCP sockets silently. Checked on every node by launch scripts.
struct NetPlugin {
  std::string name;                    // e.g. "aws-ofi-rccl"; "" = no check
  std::vector<std::string> libraries;  // file names, one of which must be on LD_LIBRARY_PATH
  std::string source;
};

// How ranks run inside a container image (launch-script --container IMAGE).
struct ContainerSettings {
  std::string runtime = "singularity";  // or apptainer
  std::vector<std::string> binds;       // host paths the image needs (--bind SRC[:DST])
  std::string hook;                     // run inside the image before the program (e.g. $WITH_CONDA)
  std::string source;                   // where the binds and the hook come from
};

// The memory a job asks per device (#SBATCH --mem-per-gpu): on LUMI a job without it gets the
// partition's small default share of a node's memory (seed 001 asks --mem-per-gpu=60G).
struct MemoryRequest {
  std::string per_gpu;  // Slurm's size form ("60G"); "" = no request (the site's default)
  std::string source;
};

struct LaunchSettings {
  std::string visible_devices_env;     // e.g. ROCR_VISIBLE_DEVICES, set to the local rank
  std::vector<std::string> cpu_masks;  // per local rank (hex), from the GPU-to-NUMA map
  int cpus_per_task = 1;
  std::string mpi = "pmix";  // srun --mpi=... for tunepar-core as built here (Open MPI): the slurm backend
  // srun's MPI plugin by the MPI a program links ("open-mpi" -> "pmix", "cray-mpich" -> "cray_shasta").
  std::map<std::string, std::string> mpi_plugins;
  std::vector<EnvSetting> env;  // communication/runtime settings
  std::string kernel_cache_dir;  // per-node local cache (MIOpen), "" when not needed
  // One file per device of a node (e.g. "/dev/dri/renderD*"): what the launch script's node check
  // counts and opens. "" = the node check counts the visible-devices list Slurm gives.
  std::string device_files;
  bool requires_account = false;    // the site refuses jobs without --account (LUMI, Frontier)
  bool requires_partition = false;  // the site has no default partition (LUMI)
  std::vector<std::string> modules;  // `module load` lines of a launch script, in order
  MemoryRequest memory;
  NetPlugin net_plugin;
  ContainerSettings container;
};

// How the fitted efficiency parameters were obtained (written by tunepar calibrate).
struct CalibrationRecord {
  std::string data;  // the measured runs: a file or a study
  std::string date;
  int runs = 0;
  std::vector<std::string> fitted;  // parameter names
  double mean_abs_error_pct = 0;    // step time, over the runs
  double max_abs_error_pct = 0;
};

struct HardwareProfile {
  std::string name;
  std::string description;

  std::string device_name;
  ProfileNumber peak_tflops_fp32;  // dense matrix peak per device
  ProfileNumber peak_tflops_fp16;
  ProfileNumber peak_tflops_bf16;
  ProfileNumber peak_tflops_fp8;  // 0 (absent): no FP8 matrix unit, the precision fp8 is excluded
  ProfileNumber memory_gb;  // device memory, GB (1e9 bytes)
  ProfileNumber memory_bandwidth_gbs;

  int gpus_per_node = 0;
  ProfileNumber intra_node_bandwidth_gbs;  // per direction, between devices of one node
  int gpus_per_package = 1;                // devices sharing a package (MI250X: 2 GCDs)
  ProfileNumber package_bandwidth_gbs;     // per direction inside a package (when > 1 per package)
  ProfileNumber nics_per_node;
  ProfileNumber nic_bandwidth_gbs;  // per NIC, per direction

  // Efficiency parameters of the performance model (kFitted or kAssumed), by name.
  std::map<std::string, ProfileNumber> efficiency;

  LaunchSettings launch;
  std::optional<CalibrationRecord> calibration;

  double PeakFlops(Precision precision) const;  // FLOP/s per device (fp8: of its FP8 GEMMs)
  bool HasFp8() const { return peak_tflops_fp8.value > 0; }
  double MemoryBytes() const { return memory_gb.value * kBytesPerGb; }
};

// Parses and validates a hardware TOML (see configs/hardware/*.toml for the format); without a
// `name` key the profile is named after `file_stem` (a user's own file).
Result<HardwareProfile> ParseHardwareProfile(std::string_view toml_text, std::string_view source,
                                             std::string_view file_stem = {});

}  // namespace tunepar::runner
