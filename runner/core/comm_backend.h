// What each backend gives the comm layer (comm.h): host memory the device copies to and from
// fastest (page-locked on a GPU, plain on the CPU), and NCCL/RCCL communicators (the GPU
// builds: comm_gpu.cc; the CPU build has none: comm_cpu.cc). The shared core compiles without
// any GPU header, so NCCL's types stay behind NcclGroup.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "runner/core/ops.h"
#include "runner/core/real.h"

namespace tunepar::core {

enum class ReduceOp { kSum, kMax };

// Throw DeviceError (ops.h) when the host cannot give the memory.
void* PinnedAllocate(size_t bytes);
void PinnedFree(void* p);

// One NCCL/RCCL communicator over the ranks of an MPI group (group rank = NCCL rank). Every call
// is enqueued on the compute stream, after the kernels that wrote its input (an all-reduce on
// the stream it is given); errors throw DeviceError with NCCL's message.
class NcclGroup {
 public:
  virtual ~NcclGroup() = default;
  virtual void AllReduce(real* data, int64_t n, ReduceOp op, Stream stream) = 0;
  // recv (count) = the sum over ranks of send[rank count, (rank + 1) count).
  virtual void ReduceScatter(const real* send, real* recv, int64_t count) = 0;
  // In place: rank r's block is data[r count, (r + 1) count); of reals, or of 16-bit numbers; on
  // `stream` (ZeRO-3's prefetched gathers run on the communication stream).
  virtual void AllGather(real* data, int64_t count, Stream stream) = 0;
  virtual void AllGather16(uint16_t* data, int64_t count, Stream stream) = 0;
  // Sends and receives between GroupStart and GroupEnd progress together (no rendezvous order).
  virtual void GroupStart() = 0;
  virtual void GroupEnd() = 0;
  // Point-to-point moves bytes (reals or 16-bit numbers, bit for bit).
  virtual void Send(const void* data, size_t bytes, int peer) = 0;
  virtual void Recv(void* data, size_t bytes, int peer) = 0;
};

// Collective over `group`: its rank 0 makes the unique id and MPI broadcasts it; the
// communicator is initialised without blocking and given up after `timeout_s` seconds. Fails
// with NCCL's message (or, on the CPU build, because there is no NCCL).
Result<std::unique_ptr<NcclGroup>> CreateNcclGroup(MPI_Comm group, double timeout_s);

// "NCCL 2.28.3" / "RCCL 2.18.3"; "" when the build has none.
std::string NcclVersion();

}  // namespace tunepar::core
