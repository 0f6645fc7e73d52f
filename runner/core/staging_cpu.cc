// The CPU backend's staging memory for the comm layer (comm_backend.h): plain host memory (there
// is no device to page-lock for).
#include <cstdlib>

#include <fmt/format.h>

#include "runner/core/comm_backend.h"
#include "runner/core/ops.h"

namespace tunepar::core {

void* PinnedAllocate(size_t bytes) {
  void* p = std::malloc(bytes);
  if (p == nullptr) throw DeviceError(fmt::format("no host memory for a {}-byte staging buffer", bytes));
  return p;
}

void PinnedFree(void* p) {
  std::free(p);
}

}  // namespace tunepar::core
