#include "runner/core/memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "runner/core/ops.h"

namespace tunepar::core {

std::string_view ToString(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::kWeights: return "weights";
    case MemoryCategory::kGradients: return "gradients";
    case MemoryCategory::kOptimizer: return "optimizer";
    case MemoryCategory::kActivations: return "activations";
    case MemoryCategory::kCommBuffers: return "comm_buffers";
    case MemoryCategory::kWorkspace: return "workspace";
    case MemoryCategory::kGatheredWeights: return "gathered_weights";
  }
  return "?";
}

OutOfMemory::OutOfMemory(MemoryCategory category, double requested, double in_use, double cap,
                         const std::string& why_cap)
    : std::runtime_error(
          fmt::format("out of memory: {:.1f} MB more ({}) with {:.1f} MB in use exceeds the {:.1f} MB cap{}",
                      requested / 1e6, ToString(category), in_use / 1e6, cap / 1e6,
                      why_cap.empty() ? "" : " (" + why_cap + ")")),
      category_(category) {}

DeviceShare ShareOfDevice(double cap_bytes, double device_bytes, int ranks_on_device, const std::string& device) {
  if (device_bytes <= 0) return {cap_bytes, ""};
  const int sharing = std::max(1, ranks_on_device);
  const double share = device_bytes / sharing;
  if (cap_bytes > 0 && cap_bytes <= share) return {cap_bytes, ""};
  if (sharing == 1) return {share, fmt::format("{}'s {:.1f} GB", device, device_bytes / 1e9)};
  return {share, fmt::format("{} ranks share {} ({:.1f} GB): {:.1f} GB each", sharing, device, device_bytes / 1e9,
                             share / 1e9)};
}

real* TrackingAllocator::Allocate(MemoryCategory category, size_t values, double bytes_per_value, bool zeroed,
                                  size_t held_bytes) {
  const double bytes = static_cast<double>(values) * bytes_per_value;
  if (cap_ > 0 && in_use_ + bytes > cap_) throw OutOfMemory(category, bytes, in_use_, cap_, why_cap_);
  auto* p = static_cast<real*>(DeviceAllocate(values * held_bytes, zeroed));
  if (p == nullptr) {
    throw OutOfMemory(category, fmt::format("out of memory on the device: no room for {:.1f} MB more ({}) with {:.1f} MB "
                                            "in use, {}",
                                            bytes / 1e6, ToString(category), in_use_ / 1e6,
                                            cap_ > 0 ? fmt::format("below the {:.1f} MB cap", cap_ / 1e6) : "no cap set"));
  }
  const int c = static_cast<int>(category);
  in_use_ += bytes;
  by_category_[c] += bytes;
  peak_ = std::max(peak_, in_use_);
  peak_by_category_[c] = std::max(peak_by_category_[c], by_category_[c]);
  const double held = static_cast<double>(values * held_bytes);
  held_ += held;
  held_peak_ = std::max(held_peak_, held_);
  blocks_.push_back({p, category, bytes, held});
  return p;
}

void TrackingAllocator::Free(real* p) {
  for (size_t i = blocks_.size(); i-- > 0;) {
    if (blocks_[i].p == p) {
      in_use_ -= blocks_[i].bytes;
      held_ -= blocks_[i].held;
      by_category_[static_cast<int>(blocks_[i].category)] -= blocks_[i].bytes;
      DeviceFree(p);
      blocks_[i] = blocks_.back();
      blocks_.pop_back();
      return;
    }
  }
}

}  // namespace tunepar::core
