// The GPU backends' side of the comm layer (comm_backend.h): page-locked staging memory and
// NCCL/RCCL communicators (RCCL has NCCL's API and names). Communicators are non-blocking
// (ncclConfig_t.blocking = 0): initialisation is polled against a timeout, so a peer that never
// arrives ends the trial as a crash instead of a hang, and every call is settled (its
// ncclInProgress polled away) before it returns.
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "runner/core/comm_backend.h"
#include "runner/core/gpu_runtime.h"
#include "runner/core/gpu_vendor.h"

namespace tunepar::core {

void* PinnedAllocate(size_t bytes) {
  void* p = nullptr;
  gpu::Check(hipHostMalloc(&p, bytes, hipHostMallocDefault), "hipHostMalloc (staging)");
  return p;
}

void PinnedFree(void* p) {
  (void)hipHostFree(p);
}

namespace {

ncclDataType_t NcclReal() {
  return sizeof(real) == 8 ? ncclDouble : ncclFloat;
}

// Polls a non-blocking communicator until `result` is no longer ncclInProgress (giving up, and
// aborting the communicator, after `timeout_s` when positive); throws NCCL's message on error.
void Settle(ncclComm_t comm, ncclResult_t result, const char* what, double timeout_s = 0) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  while (result == ncclInProgress) {
    if (timeout_s > 0 && std::chrono::duration<double>(Clock::now() - start).count() > timeout_s) {
      (void)ncclCommAbort(comm);
      throw DeviceError(fmt::format("{}: no answer from the other ranks after {:.0f} s", what, timeout_s));
    }
    if (timeout_s > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (ncclCommGetAsyncError(comm, &result) != ncclSuccess) break;
  }
  if (result != ncclSuccess) {
    const char* detail = ncclGetLastError(comm);
    throw DeviceError(fmt::format("{}: {}{}{}", what, ncclGetErrorString(result),
                                  detail != nullptr && *detail != '\0' ? ": " : "", detail != nullptr ? detail : ""));
  }
}

class NcclCommunicator : public NcclGroup {
 public:
  NcclCommunicator(ncclComm_t comm, int rank) : comm_(comm), rank_(rank) {}
  ~NcclCommunicator() override {
    ncclResult_t state = ncclCommFinalize(comm_);
    while (state == ncclInProgress) {
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
    }
    (void)ncclCommDestroy(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  void AllReduce(real* data, int64_t n, ReduceOp op, Stream stream) override {
    Settle(comm_,
           ncclAllReduce(data, data, static_cast<size_t>(n), NcclReal(), op == ReduceOp::kSum ? ncclSum : ncclMax,
                         comm_, gpu::StreamOf(stream)),
           "ncclAllReduce");
  }
  void ReduceScatter(const real* send, real* recv, int64_t count) override {
    Settle(comm_,
           ncclReduceScatter(send, recv, static_cast<size_t>(count), NcclReal(), ncclSum, comm_, gpu::ComputeStream()),
           "ncclReduceScatter");
  }
  void AllGather(real* data, int64_t count, Stream stream) override {
    Settle(comm_,
           ncclAllGather(data + rank_ * count, data, static_cast<size_t>(count), NcclReal(), comm_,
                         gpu::StreamOf(stream)),
           "ncclAllGather");
  }
  void AllGather16(uint16_t* data, int64_t count, Stream stream) override {
    Settle(comm_,
           ncclAllGather(data + rank_ * count, data, static_cast<size_t>(count) * 2, ncclInt8, comm_,
                         gpu::StreamOf(stream)),
           "ncclAllGather");
  }
  void GroupStart() override { Settle(comm_, ncclGroupStart(), "ncclGroupStart"); }
  void GroupEnd() override { Settle(comm_, ncclGroupEnd(), "ncclGroupEnd"); }
  void Send(const void* data, size_t bytes, int peer) override {
    Settle(comm_, ncclSend(data, bytes, ncclInt8, peer, comm_, gpu::ComputeStream()), "ncclSend");
  }
  void Recv(void* data, size_t bytes, int peer) override {
    Settle(comm_, ncclRecv(data, bytes, ncclInt8, peer, comm_, gpu::ComputeStream()), "ncclRecv");
  }

 private:
  ncclComm_t comm_;
  int rank_;
};

}  // namespace

Result<std::unique_ptr<NcclGroup>> CreateNcclGroup(MPI_Comm group, double timeout_s) {
  int rank = 0, size = 1;
  MPI_Comm_rank(group, &rank);
  MPI_Comm_size(group, &size);
  ncclUniqueId id{};
  ncclResult_t made = ncclSuccess;
  if (rank == 0) made = ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group);
  if (made != ncclSuccess) return InternalError(fmt::format("ncclGetUniqueId: {}", ncclGetErrorString(made)));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  try {
    Settle(comm, started, "ncclCommInitRank", timeout_s);
  } catch (const DeviceError& e) {
    return InternalError(e.what());
  }
  return std::unique_ptr<NcclGroup>(std::make_unique<NcclCommunicator>(comm, rank));
}

std::string NcclVersion() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return "";
  // Since 2.9: major 10000 + minor 100 + patch.
#if defined(__HIPCC__)
  const char* name = "RCCL";
#else
  const char* name = "NCCL";
#endif
  return fmt::format("{} {}.{}.{}", name, version / 10000, version / 100 % 100, version % 100);
}

}  // namespace tunepar::core
