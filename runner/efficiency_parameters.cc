#include "runner/efficiency_parameters.h"

namespace tunepar::runner {

const std::array<EfficiencyParameter, kNumEfficiencyKeys>& EfficiencyParameters() {
  using K = EfficiencyKey;
  static const std::array<EfficiencyParameter, kNumEfficiencyKeys> params = {{
      {K::kGemmEfficiency, "gemm_efficiency", 0.05, 1.0, "fraction of dense peak a large GEMM reaches"},
      {K::kGemmHalfSize, "gemm_half_size", 1.0, 2048.0,
       "GEMM roll-off d0: efficiency e / (1 + d0/M + d0/N + d0/K)"},
      {K::kFlashEfficiency, "flash_efficiency", 0.05, 1.0,
       "fraction of dense peak reached by flash attention"},
      {K::kMemoryEfficiency, "memory_efficiency", 0.05, 1.0,
       "fraction of memory bandwidth reached by element-wise kernels"},
      {K::kKernelOverheadUs, "kernel_overhead_us", 0.0, 10000.0,
       "fixed cost per layer per forward pass (kernel launches, synchronisation), us"},
      {K::kLinkEfficiency, "link_efficiency", 0.05, 1.0,
       "fraction of intra-node link bandwidth a collective reaches"},
      {K::kLinkLatencyUs, "link_latency_us", 0.0, 1000.0, "latency per collective step inside a node, us"},
      {K::kNetworkEfficiency, "network_efficiency", 0.05, 1.0,
       "fraction of NIC bandwidth collectives and p2p reach across nodes"},
      {K::kNetworkLatencyUs, "network_latency_us", 0.0, 1000.0,
       "latency per collective step or message across nodes, us"},
      {K::kDpOverlap, "dp_overlap", 0.0, 1.0,
       "fraction of the last backward pass that hides the DP gradient reduction"},
      {K::kMemoryOverheadGb, "memory_overhead_gb", 0.0, 64.0,
       "framework context, communication buffers and allocator reserve, GB"},
      {K::kMemoryFragmentation, "memory_fragmentation", 0.0, 1.0,
       "extra fraction of activation memory lost to fragmentation"},
  }};
  return params;
}

const EfficiencyParameter* FindEfficiencyParameter(std::string_view name) {
  for (const EfficiencyParameter& p : EfficiencyParameters()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace tunepar::runner
