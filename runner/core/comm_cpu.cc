// The CPU build has no NCCL (comm_backend.h; its staging memory: staging_cpu.cc).
#include "runner/core/comm_backend.h"

namespace tunepar::core {

Result<std::unique_ptr<NcclGroup>> CreateNcclGroup(MPI_Comm, double) {
  return InvalidArgument("the cpu build has no NCCL");
}

std::string NcclVersion() {
  return "";
}

}  // namespace tunepar::core
