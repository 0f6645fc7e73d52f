#include "runner/launch_environment.h"

#include <algorithm>

#include <fmt/format.h>

namespace tunepar::runner {

Result<std::vector<int>> CpusOfMask(const std::string& hex_mask) {
  if (hex_mask.rfind("0x", 0) != 0 || hex_mask.size() < 3)
    return InvalidArgument("not a hex mask: " + hex_mask);
  std::vector<int> cpus;
  int bit = 0;
  for (size_t i = hex_mask.size(); i-- > 2;) {
    const char c = hex_mask[i];
    int v = 0;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v = c - 'A' + 10;
    else
      return InvalidArgument("not a hex mask: " + hex_mask);
    for (int b = 0; b < 4; ++b, ++bit) {
      if (v & (1 << b)) cpus.push_back(bit);
    }
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

Result<std::vector<int>> CpusOfList(const std::string& list) {
  std::vector<int> cpus;
  size_t at = 0;
  while (at < list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string part = list.substr(at, end - at);
    const size_t dash = part.find('-');
    try {
      const int lo = std::stoi(part.substr(0, dash));
      const int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    } catch (...) {
      return InvalidArgument("not a CPU list: " + list);
    }
    at = end + 1;
  }
  return cpus;
}

std::string ShellQuote(const std::string& word) {
  if (!word.empty() &&
      word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
          std::string::npos) {
    return word;
  }
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string RankSetup(const HardwareProfile& hw) {
  std::string s;
  s += "export RANK=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-0}}\n";
  s += "export LOCAL_RANK=${SLURM_LOCALID:-${OMPI_COMM_WORLD_LOCAL_RANK:-0}}\n";
  s += "export WORLD_SIZE=${SLURM_NTASKS:-${OMPI_COMM_WORLD_SIZE:-1}}\n";
  if (!hw.launch.visible_devices_env.empty()) {
    s += fmt::format("export {}=$LOCAL_RANK  # one device per rank, chosen by local rank\n",
                     hw.launch.visible_devices_env);
  }
  if (!hw.launch.kernel_cache_dir.empty()) {
    // MIOpen's databases on node-local disk: a shared filesystem serialises every rank's access.
    s += fmt::format("export MIOPEN_USER_DB_PATH=\"{}\"\n", hw.launch.kernel_cache_dir);
    s += "export MIOPEN_CUSTOM_CACHE_DIR=\"$MIOPEN_USER_DB_PATH\"\n";
    s += "mkdir -p \"$MIOPEN_USER_DB_PATH\"\n";
  }
  return s;
}

std::vector<std::pair<std::string, std::string>> ProfileEnvironment(const HardwareProfile& hw) {
  return hw.launch.env;
}

std::vector<std::string> SrunOptions(const HardwareProfile& hw, int nodes, int tasks) {
  std::vector<std::string> o = {
      fmt::format("--nodes={}", nodes),
      fmt::format("--ntasks={}", tasks),
      fmt::format("--ntasks-per-node={}", std::min(tasks, hw.gpus_per_node)),
      fmt::format("--cpus-per-task={}", hw.launch.cpus_per_task),
  };
  if (!hw.launch.cpu_masks.empty()) {
    std::string masks;
    for (const std::string& m : hw.launch.cpu_masks) masks += (masks.empty() ? "" : ",") + m;
    o.push_back("--cpu-bind=mask_cpu:" + masks);
  }
  if (!hw.launch.visible_devices_env.empty())
    o.push_back(fmt::format("--gpus-per-node={}", hw.gpus_per_node));
  if (!hw.launch.mpi.empty()) o.push_back("--mpi=" + hw.launch.mpi);
  o.push_back("--kill-on-bad-exit=1");
  return o;
}

std::string CheckPlacement(const HardwareProfile& hw, int rank, int local_rank, const std::string& cpus) {
  if (hw.launch.cpu_masks.empty()) return "";
  if (local_rank < 0 || local_rank >= static_cast<int>(hw.launch.cpu_masks.size())) {
    return fmt::format("rank {} has local rank {}, but {} has {} devices per node", rank, local_rank, hw.name,
                       hw.launch.cpu_masks.size());
  }
  const std::string& mask = hw.launch.cpu_masks[local_rank];
  Result<std::vector<int>> want = CpusOfMask(mask);
  Result<std::vector<int>> have = CpusOfList(cpus);
  if (!want.ok() || !have.ok()) return fmt::format("rank {}: cannot read its CPU set '{}'", rank, cpus);
  if (*want == *have) return "";
  return fmt::format(
      "rank {} (local rank {}) runs on CPUs {}, but {} maps local rank {} to {}: check --cpu-bind", rank,
      local_rank, cpus, hw.name, local_rank, mask);
}

}  // namespace tunepar::runner
