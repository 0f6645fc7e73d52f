// The CPU backend's side of the comm layer (comm_backend.h): staging buffers are plain host
// memory, and there is no NCCL.
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

Result<std::unique_ptr<NcclGroup>> CreateNcclGroup(MPI_Comm, double) {
  return InvalidArgument("the cpu build has no NCCL");
}

std::string NcclVersion() {
  return "";
}

}  // namespace tunepar::core
