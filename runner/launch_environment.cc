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

std::string KernelCacheSetup(const HardwareProfile& hw) {
  if (hw.launch.kernel_cache_dir.empty()) return "";
  // MIOpen's databases on node-local disk: a shared filesystem serialises every rank's access.
  return fmt::format("export MIOPEN_USER_DB_PATH=\"{}\"\n", hw.launch.kernel_cache_dir) +
         "export MIOPEN_CUSTOM_CACHE_DIR=\"$MIOPEN_USER_DB_PATH\"\n"
         "mkdir -p \"$MIOPEN_USER_DB_PATH\"\n";
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
  return s + KernelCacheSetup(hw);
}

std::vector<std::pair<std::string, std::string>> ProfileEnvironment(const HardwareProfile& hw) {
  std::vector<std::pair<std::string, std::string>> env;
  for (const EnvSetting& e : hw.launch.env) env.emplace_back(e.name, e.value);
  return env;
}

std::vector<std::string> SrunOptions(const HardwareProfile& hw, int nodes, int tasks, const std::string& mpi_plugin) {
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
  const std::string& mpi = mpi_plugin.empty() ? hw.launch.mpi : mpi_plugin;
  if (!mpi.empty()) o.push_back("--mpi=" + mpi);
  o.push_back("--kill-on-bad-exit=1");
  return o;
}

std::string NormalizedMask(const std::string& hex_mask) {
  std::string digits;
  for (size_t i = hex_mask.rfind("0x", 0) == 0 ? 2 : 0; i < hex_mask.size(); ++i) {
    const char c = hex_mask[i];
    if (c == ',') continue;
    digits += (c >= 'A' && c <= 'F') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  const size_t first = digits.find_first_not_of('0');
  return first == std::string::npos ? "0" : digits.substr(first);
}

std::string UnionOfMasks(const HardwareProfile& hw) {
  if (hw.launch.cpu_masks.empty()) return "";
  std::string digits;  // least significant first
  for (const std::string& m : hw.launch.cpu_masks) {
    const std::string n = NormalizedMask(m);
    if (digits.size() < n.size()) digits.resize(n.size(), '0');
    for (size_t i = 0; i < n.size(); ++i) {
      const auto value = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
      const int v = value(digits[i]) | value(n[n.size() - 1 - i]);
      digits[i] = "0123456789abcdef"[v];
    }
  }
  return "0x" + std::string(digits.rbegin(), digits.rend());
}

std::vector<std::string> NodeLauncherSrunOptions(const HardwareProfile& hw, int nodes, const std::string& mpi_plugin) {
  std::vector<std::string> o = {
      fmt::format("--nodes={}", nodes),
      fmt::format("--ntasks={}", nodes),
      "--ntasks-per-node=1",
      fmt::format("--cpus-per-task={}", hw.launch.cpus_per_task * hw.gpus_per_node),
  };
  if (!hw.launch.cpu_masks.empty()) o.push_back("--cpu-bind=mask_cpu:" + UnionOfMasks(hw));
  if (!hw.launch.visible_devices_env.empty()) o.push_back(fmt::format("--gpus-per-node={}", hw.gpus_per_node));
  const std::string& mpi = mpi_plugin.empty() ? hw.launch.mpi : mpi_plugin;
  if (!mpi.empty()) o.push_back("--mpi=" + mpi);
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
