#include "tuner/backends/core_backend_config.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

namespace tunepar {

namespace fs = std::filesystem;

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// The first line a shell command prints ("" when it fails).
std::string FirstLine(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return "";
  char buffer[512] = {};
  std::string line = fgets(buffer, sizeof(buffer), p) != nullptr ? buffer : "";
  pclose(p);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

bool OnPath(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0;
  return !FirstLine("command -v " + program + " 2>/dev/null").empty();
}

std::string_view BuildVendor(core::CoreBuild build) {
  switch (build) {
    case core::CoreBuild::kCpu: return "CPU";
    case core::CoreBuild::kCuda: return "NVIDIA";
    case core::CoreBuild::kHip: return "AMD";
  }
  return "CPU";
}

// What builds the binary of `build` (runner/core/CMakeLists.txt).
std::string_view HowToBuild(core::CoreBuild build) {
  switch (build) {
    case core::CoreBuild::kCpu: return "cmake --build build";
    case core::CoreBuild::kCuda: return "cmake builds it where it finds nvcc with cuBLAS and NCCL";
    case core::CoreBuild::kHip: return "cmake builds it where it finds hipcc with hipBLAS and RCCL, e.g. a site's ROCm";
  }
  return "";
}

// The binary of `build` next to this executable, else on $PATH ("" when neither); `where` says
// which ("tunepar-core beside tunepar", "/opt/bin/tunepar-core from $PATH").
std::string BuiltBinary(core::CoreBuild build, std::string* where) {
  const std::string name(core::BinaryName(build));
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path next = self.parent_path() / name;
    *where = name + " beside tunepar";
    if (access(next.c_str(), X_OK) == 0) return next.string();
  }
  const std::string found = FirstLine("command -v " + name + " 2>/dev/null");
  *where = found + " from $PATH";
  return found;
}

}  // namespace

std::string AutomaticBackend(std::string* why) {
  const std::string job = Env("SLURM_JOB_ID");
  if (!job.empty()) {
    *why = fmt::format("no --backend given: slurm, inside Slurm job {} ({} node{}); each trial is a job step",
                       job, Env("SLURM_JOB_NUM_NODES").empty() ? "?" : Env("SLURM_JOB_NUM_NODES"),
                       Env("SLURM_JOB_NUM_NODES") == "1" ? "" : "s");
    return "slurm";
  }
  *why =
      "no --backend given: model, outside a Slurm allocation (a dry run; --backend local measures with "
      "tunepar-core on this machine)";
  return "model";
}

core::CoreBuild CoreBuildFor(const runner::HardwareProfile& hw, std::string* why) {
  const std::string& env = hw.launch.visible_devices_env;
  if (env == "CUDA_VISIBLE_DEVICES" || env == "ROCR_VISIBLE_DEVICES" || env == "HIP_VISIBLE_DEVICES") {
    *why = fmt::format("its launch.visible_devices_env is {}", env);
    return env == "CUDA_VISIBLE_DEVICES" ? core::CoreBuild::kCuda : core::CoreBuild::kHip;
  }
  const std::string& device = hw.device_name;
  const bool nvidia = device.find("NVIDIA") != std::string::npos;
  const bool amd = device.find("AMD MI") != std::string::npos || device.find("AMD Instinct") != std::string::npos;
  *why = nvidia || amd ? fmt::format("its device is '{}'", device)
                       : fmt::format("its device '{}' and launch.visible_devices_env name no GPU vendor", device);
  return nvidia ? core::CoreBuild::kCuda : amd ? core::CoreBuild::kHip : core::CoreBuild::kCpu;
}

Result<CoreBinary> FindCoreBinary(const runner::HardwareProfile& hw, const std::string& given) {
  std::string why;
  CoreBinary binary;
  binary.build = CoreBuildFor(hw, &why);
  const std::string build = fmt::format("the {} build, for {}", BuildVendor(binary.build), hw.name);
  if (!given.empty()) {
    if (access(given.c_str(), X_OK) != 0)
      return InvalidArgument(fmt::format("--core {}: no such executable", given));
    binary.path = fs::absolute(given).string();
    binary.said = fmt::format("{} (--core, in place of {}: {})", binary.path, core::BinaryName(binary.build), build);
    return binary;
  }
  std::string where;
  binary.path = BuiltBinary(binary.build, &where);
  if (binary.path.empty()) {
    return InvalidArgument(fmt::format("{} ({}) not found next to tunepar or on $PATH: {}, or give --core PATH",
                                       core::BinaryName(binary.build), build, HowToBuild(binary.build)));
  }
  binary.said = fmt::format("{} ({}: {})", where, build, why);
  return binary;
}

Result<runner::CoreBackendOptions> ResolveCoreOptions(const CoreFlags& flags, runner::Launcher launcher,
                                                      const runner::HardwareProfile& hw, int world,
                                                      double timeout_s, std::string* core_said) {
  runner::CoreBackendOptions o;
  o.launcher = launcher;
  if (flags.steps < 1 || flags.warmup < 0) return InvalidArgument("--steps must be >= 1 and --warmup >= 0");
  o.steps = flags.steps;
  o.warmup = flags.warmup;
  o.threads = flags.threads;
  if (timeout_s > 0) o.timeout_s = timeout_s;
  Result<runner::SliceMode> slice = runner::ParseSliceMode(flags.slice);
  if (!slice.ok()) return slice.status();
  o.slice = *slice;
  for (const std::string& kv : flags.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return InvalidArgument(fmt::format("--env '{}' is not KEY=VALUE", kv));
    o.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  Result<CoreBinary> core = FindCoreBinary(hw, flags.core);
  if (!core.ok()) return core.status();
  o.core_binary = core->path;
  o.build = core->build;
  if (core_said != nullptr) *core_said = core->said;
  o.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  if (launcher == runner::Launcher::kLocal) {
    if (!OnPath(o.mpirun))
      return InvalidArgument("mpirun not found: the local backend launches trials with mpirun");
    o.capacity = flags.max_ranks > 0 ? flags.max_ranks : 4 * o.cores;
    if (world > o.capacity && o.slice == runner::SliceMode::kNever) {
      return InvalidArgument(
          fmt::format("world {} exceeds the {} ranks a local trial may use (--max-ranks): raise "
                      "it, or measure slices with --slice auto",
                      world, o.capacity));
    }
    return o;
  }

  if (Env("SLURM_JOB_ID").empty()) {
    return InvalidArgument(
        "--backend slurm runs trials as job steps: run tunepar inside an allocation "
        "(salloc or sbatch)");
  }
  if (!OnPath(o.srun)) return InvalidArgument("srun not found: the slurm backend launches trials with srun");
  if (hw.launch.cpu_masks.empty()) {
    return ConfigError(
        fmt::format("hardware profile {} has no [launch] cpu_masks: the slurm backend binds each "
                    "rank to its device's CPUs and needs the map",
                    hw.name));
  }
  const int nodes = std::atoi(Env("SLURM_JOB_NUM_NODES").c_str());
  if (nodes < 1) return InvalidArgument("SLURM_JOB_NUM_NODES is not set: is this a Slurm allocation?");
  o.capacity = nodes * hw.gpus_per_node;
  if (world > o.capacity && o.slice == runner::SliceMode::kNever) {
    const int needed = (world + hw.gpus_per_node - 1) / hw.gpus_per_node;
    return InvalidArgument(
        fmt::format("the allocation has {} node{} ({} ranks of {}), world {} needs {}: allocate "
                    "{} nodes, or measure slices with --slice auto",
                    nodes, nodes == 1 ? "" : "s", o.capacity, hw.name, world, needed, needed));
  }
  o.master_addr = FirstLine("scontrol show hostnames \"$SLURM_JOB_NODELIST\" 2>/dev/null");
  if (o.master_addr.empty()) o.master_addr = Env("SLURMD_NODENAME");
  return o;
}

}  // namespace tunepar
