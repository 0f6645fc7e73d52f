#include "runner/core/comm_smoke.h"

#include <climits>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/provenance.h"
#include "runner/core/ops.h"

namespace tunepar::core {
namespace {

constexpr int64_t kValues = int64_t{1} << 16;  // 256 KiB in fp32: past NCCL's small-message path
constexpr int kDescription = 256;              // bytes of a device's description, gathered per node

// Rank r contributes (r + 1) (i % 7 + 1) at i: the sum is W (W + 1) / 2 (i % 7 + 1).
real Contribution(int rank, int64_t i) {
  return static_cast<real>((rank + 1) * (i % 7 + 1));
}

// The first wrong element's description, or "" when the sum is right.
std::string CheckSum(const std::vector<real>& sum, int world) {
  for (int64_t i = 0; i < kValues; ++i) {
    const double expected = 0.5 * world * (world + 1) * static_cast<double>(i % 7 + 1);
    if (static_cast<double>(sum[i]) != expected)
      return fmt::format("element {} of the sum is {}, expected {}", i, static_cast<double>(sum[i]), expected);
  }
  return "";
}

// "node gpu01: cuda:0 NVIDIA H100, cuda:1 NVIDIA H100" at the node's first rank ("" elsewhere).
std::string NodeDevices(const ProcessGrid& grid, const std::string& device) {
  std::vector<char> mine(kDescription, '\0'), all;
  device.copy(mine.data(), kDescription - 1);
  if (grid.local_rank == 0) all.resize(static_cast<size_t>(kDescription) * grid.local_size);
  MPI_Gather(mine.data(), kDescription, MPI_CHAR, all.data(), kDescription, MPI_CHAR, 0, grid.node_comm);
  if (grid.local_rank != 0) return "";
  std::string line = "node " + HostName() + ":";
  for (int r = 0; r < grid.local_size; ++r) line += (r == 0 ? " " : ", ") + std::string(&all[r * kDescription]);
  return line;
}

}  // namespace

SmokeOutcome RunSmokeTest(CommMode mode, const ProcessGrid& grid, int devices) {
  std::string device, wrong;
  try {
    device = UseDevice(grid.local_rank % devices);
    SetUpComm(mode, grid, true);
    std::vector<real> host(kValues);
    for (int64_t i = 0; i < kValues; ++i) host[i] = Contribution(grid.rank, i);
    real* data = static_cast<real*>(DeviceAllocate(kValues * sizeof(real)));
    if (data == nullptr) throw DeviceError(fmt::format("{}: out of memory for {} values", device, kValues));
    Upload(data, host.data(), host.size() * sizeof(real));
    DeviceAllReduce(data, kValues, ReduceOp::kSum, grid.world);
    Download(host.data(), data, host.size() * sizeof(real));
    DeviceFree(data);
    wrong = CheckSum(host, grid.world_size);
  } catch (const DeviceError& e) {
    std::cerr << fmt::format("tunepar-core: smoke failed: rank {} on {} ({}), comm {}: {}\n", grid.rank, HostName(),
                             device.empty() ? "no device bound" : device, ToString(mode), e.what());
    return SmokeOutcome::kDeviceFailed;
  }
  int mine = wrong.empty() ? INT_MAX : grid.rank, first_wrong = INT_MAX;
  MPI_Allreduce(&mine, &first_wrong, 1, MPI_INT, MPI_MIN, grid.world);
  if (first_wrong != INT_MAX) {
    if (grid.rank == first_wrong) {
      std::cerr << fmt::format("tunepar-core: smoke failed: rank {} on {} ({}), comm {}: {}\n", grid.rank,
                               HostName(), device, ToString(mode), wrong);
    }
    return SmokeOutcome::kWrongSum;
  }
  const std::string node = NodeDevices(grid, device);
  if (!node.empty()) {
    std::cout << fmt::format("tunepar-core: smoke ok: {} ranks, comm {}, {}\n", grid.world_size, ToString(mode), node)
              << std::flush;
  }
  return SmokeOutcome::kOk;
}

}  // namespace tunepar::core
