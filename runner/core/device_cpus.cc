#include "runner/core/device_cpus.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <regex>

namespace tunepar::core {

std::vector<int> ParseCpuList(const std::string& text) {
  static const std::regex kList(R"(\s*(\d+(-\d+)?)(,\d+(-\d+)?)*\s*)");
  if (!std::regex_match(text, kList)) return {};
  std::vector<int> cpus;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const size_t dash = item.find('-');
    const int first = std::stoi(item.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
    for (int cpu = first; cpu <= last && cpu - first < 65536; ++cpu) cpus.push_back(cpu);
    start = end + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string CpuListText(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size(); ++i) {
    size_t last = i;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (last > i) {
      out += '-';
      out += std::to_string(cpus[last]);
    }
    i = last;
  }
  return out;
}

std::vector<int> CpusNearPciDevice(const std::string& sysfs_root, const std::string& bus_id) {
  std::string bus = bus_id;
  std::transform(bus.begin(), bus.end(), bus.begin(), [](unsigned char c) { return std::tolower(c); });
  // A bus id as the CUDA runtime writes it may carry an 8-digit domain ("00000000:3b:00.0");
  // sysfs names the device with a 4-digit one.
  if (bus.size() > 12 && bus.find(':') == 8) bus = bus.substr(4);
  if (bus.empty() || bus.find('/') != std::string::npos) return {};
  std::ifstream in(sysfs_root + "/bus/pci/devices/" + bus + "/local_cpulist");
  std::string text;
  if (!std::getline(in, text)) return {};
  return ParseCpuList(text);
}

std::vector<int> ShareOfNearCpus(const std::vector<std::vector<int>>& near, int local_rank,
                                 const std::vector<int>& allowed) {
  if (local_rank < 0 || local_rank >= static_cast<int>(near.size())) return {};
  const std::vector<int>& mine = near[local_rank];
  if (mine.empty()) return {};
  int position = 0, sharing = 0;
  for (int r = 0; r < static_cast<int>(near.size()); ++r) {
    if (near[r] != mine) continue;
    if (r < local_rank) ++position;
    ++sharing;
  }
  const size_t n = mine.size();
  const size_t first = n * position / sharing;
  const size_t last = std::max(first + 1, n * (position + 1) / sharing);  // at least one CPU each
  std::vector<int> share(mine.begin() + std::min(first, n - 1), mine.begin() + std::min(last, n));
  if (allowed.empty()) return share;
  std::vector<int> kept;
  std::set_intersection(share.begin(), share.end(), allowed.begin(), allowed.end(), std::back_inserter(kept));
  return kept;
}

}  // namespace tunepar::core
