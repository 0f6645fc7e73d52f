#include "tuner/core_backend_config.h"

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

Result<std::string> FindCoreBinary(const std::string& given) {
  if (!given.empty()) {
    if (access(given.c_str(), X_OK) != 0)
      return InvalidArgument(fmt::format("--core {}: no such executable", given));
    return fs::absolute(given).string();
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path next = self.parent_path() / "tunepar-core";
    if (access(next.c_str(), X_OK) == 0) return next.string();
  }
  const std::string found = FirstLine("command -v tunepar-core 2>/dev/null");
  if (!found.empty()) return found;
  return InvalidArgument(
      "tunepar-core not found next to tunepar or on $PATH: build it (cmake --build build) or give --core "
      "PATH");
}

Result<runner::CoreBackendOptions> ResolveCoreOptions(const CoreFlags& flags, runner::Launcher launcher,
                                                      const runner::HardwareProfile& hw, int world,
                                                      double timeout_s) {
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
  Result<std::string> core = FindCoreBinary(flags.core);
  if (!core.ok()) return core.status();
  o.core_binary = *core;
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
