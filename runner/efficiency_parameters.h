// The performance model's efficiency parameters as a table: what a hardware profile's
// [efficiency] table may hold (names, physical ranges, meanings). Peaks and link speeds are
// published; how close real kernels and collectives get to them is fitted to measured runs
// (tunepar calibrate) or, until measured, assumed. The table is vocabulary that both the
// profile's parser (hardware_profile.h: which keys are known) and the values read from a profile
// (efficiency.h) use, so it sits below both of them.
#pragma once

#include <array>
#include <string_view>

namespace tunepar::runner {

enum class EfficiencyKey {
  kGemmEfficiency,       // fraction of dense peak a large GEMM reaches
  kGemmHalfSize,         // GEMM dimension d0 of the shape roll-off e / (1 + d0/M + d0/N + d0/K)
  kFlashEfficiency,      // fraction of dense peak reached by fused (flash) attention
  kMemoryEfficiency,     // fraction of device memory bandwidth reached by element-wise kernels
  kKernelOverheadUs,     // fixed launch/synchronisation cost per layer per forward pass, us
  kLinkEfficiency,       // fraction of intra-node link bandwidth a collective reaches
  kLinkLatencyUs,        // latency per collective step inside a node, us
  kNetworkEfficiency,    // fraction of NIC bandwidth collectives and p2p reach across nodes
  kNetworkLatencyUs,     // latency per collective step or message across nodes, us
  kDpOverlap,            // fraction of the last backward pass that hides the DP gradient reduction
  kMemoryOverheadGb,     // framework context, communication library buffers, allocator reserve
  kMemoryFragmentation,  // extra fraction of activation memory lost to fragmentation
};
inline constexpr int kNumEfficiencyKeys = 12;

struct EfficiencyParameter {
  EfficiencyKey key;
  std::string_view name;  // the key in [efficiency]
  double lo, hi;          // physical range; the calibration fit stays inside it
  std::string_view meaning;
};

// Every parameter, in EfficiencyKey order.
const std::array<EfficiencyParameter, kNumEfficiencyKeys>& EfficiencyParameters();
const EfficiencyParameter* FindEfficiencyParameter(std::string_view name);

}  // namespace tunepar::runner
