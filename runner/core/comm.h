// How the training step moves device data between ranks. Every all-reduce, reduce-scatter,
// all-gather and pipeline transfer of device memory goes through here, in one of four modes
// (`--comm`); host scalars (loss sums, norms) stay plain MPI.
//   mpi         the CPU build: MPI on the buffers themselves (host memory).
//   mpi-staged  device -> page-locked host buffer -> MPI -> device: any MPI, and several ranks
//               sharing one GPU (which NCCL refuses). On the CPU the "device" is host memory,
//               so the same path runs in the CPU tests.
//   mpi-direct  device pointers to a GPU-aware MPI (checked: MPIX_Query_cuda_support /
//               MPIX_Query_rocm_support), after the device has finished writing them.
//   nccl        NCCL/RCCL (GPU builds; their default): one communicator per TP, DP and
//               embedding group and one over the world for the pipeline's point-to-point. Calls
//               are queued on the compute stream in order with the kernels (the host does not
//               wait), except the bucketed data-parallel sum, which runs on the communication
//               stream, overlapping the backward kernels queued after it (DeviceIallReduceSum).
// The mode is process-wide, like the wait mode (waiting.h): set once, after the ranks are bound
// to their devices. The MPI modes wait for the device's queued work before MPI reads device
// memory, and their calls return with the result in place; a caller times a call with a
// TimedScope (parallel.h), whose span on the compute stream holds the communication alone.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runner/core/comm_backend.h"
#include "runner/core/ops.h"
#include "runner/core/parallel.h"
#include "runner/core/real.h"

namespace tunepar::core {

enum class CommMode { kMpi, kMpiStaged, kMpiDirect, kNccl };
std::string_view ToString(CommMode mode);  // "mpi", "mpi-staged", "mpi-direct", "nccl"
Result<CommMode> ParseCommMode(std::string_view name);
// "Open MPI v4.1.4": the MPI library's own name, up to its first comma or line.
std::string MpiLibrary();
// nccl on the GPU builds, mpi on the CPU one.
CommMode DefaultCommMode(std::string_view backend);
// Whether this build (BackendName()) and this MPI can run `mode`: the CPU build has no NCCL and
// no device memory for mpi-direct; a GPU build cannot hand device memory to MPI as if it were
// host memory (mpi); mpi-direct needs an MPI that says it is GPU-aware. Needs MPI initialised.
Status CheckCommMode(CommMode mode, std::string_view backend);
// The mode a run uses given its placement: the build's default nccl becomes mpi-staged when a
// node runs more ranks than it has devices (NCCL refuses two ranks on one device; staging through
// host memory shares a device between ranks); a mode given with --comm (`given`) stays as asked.
CommMode CommForPlacement(CommMode mode, bool given, std::string_view backend, int most_ranks_on_a_node, int devices);

// Collective over the world: NCCL communicators (nccl) for each group of `grid` with more than
// one rank, and for the world when `world_group` (pipelines, the smoke test). Throws DeviceError
// when NCCL fails to start (its message).
void SetUpComm(CommMode mode, const ProcessGrid& grid, bool world_group);
void TearDownComm();
CommMode CurrentCommMode();

// In place over `group` (nothing when it has one rank or is MPI_COMM_NULL).
void DeviceAllReduce(real* data, int64_t n, ReduceOp op, MPI_Comm group);
// In-place sum (max) over `comm` of device data (nothing when the group has one member), timed
// into `phase` of the step (parallel.h).
void AllReduceSum(real* data, int64_t n, MPI_Comm comm, PhaseClock& clock, Phase phase);
void AllReduceMax(real* data, int64_t n, MPI_Comm comm, PhaseClock& clock, Phase phase);
// recv (count) = the sum over the group of send[rank count, (rank + 1) count).
void DeviceReduceScatter(const real* send, real* recv, int64_t count, MPI_Comm group);
// In place: rank r's block is data[r count, (r + 1) count).
void DeviceAllGather(real* data, int64_t count, MPI_Comm group);
// The same for 16-bit numbers (16-bit weights), moved bit for bit.
void DeviceAllGather16(uint16_t* data, int64_t count, MPI_Comm group);

// Page-locked host memory for staging, from a pool (page-locking costs milliseconds a call).
class HostStaging {
 public:
  HostStaging() = default;
  explicit HostStaging(size_t bytes);
  ~HostStaging();
  HostStaging(HostStaging&& other) noexcept;
  HostStaging& operator=(HostStaging&& other) noexcept;
  real* data() const { return static_cast<real*>(memory_); }

 private:
  void* memory_ = nullptr;
  size_t bytes_ = 0;
};

// A non-blocking transfer of device data. A send's buffer must stay unchanged until the request
// completes; a sum (DeviceIallReduceSum) is in the device buffer once it completes.
class CommRequest {
 public:
  CommRequest() = default;
  CommRequest(CommRequest&&) = default;
  CommRequest& operator=(CommRequest&&) = default;
  // Progresses the transfer; true once it is complete and its buffer may be reused (a nccl send:
  // once it is queued on the compute stream, so the buffer may be rewritten by work queued there).
  bool Test();
  void Wait();
  bool active() const { return !mpi_.empty() || nccl_send_ >= 0 || nccl_transfer_ >= 0 || on_comm_stream_; }

 private:
  friend CommRequest DeviceSend(const real*, int64_t, int, int, MPI_Comm);
  friend CommRequest DeviceSend(const uint16_t*, int64_t, int, int, MPI_Comm);
  friend CommRequest DeviceIallReduceSum(real*, int64_t, MPI_Comm);
  friend CommRequest DeviceIallGather(real*, int64_t, MPI_Comm);
  friend CommRequest DeviceIallGather16(uint16_t*, int64_t, MPI_Comm);
  friend CommRequest DeviceIsendBytes(const void*, size_t, int, int, MPI_Comm);
  friend CommRequest DeviceIrecvBytes(void*, size_t, int, int, MPI_Comm);
  // In place over `group`: the all-gather of `count` elements of `element_bytes` per rank.
  static CommRequest IallGather(void* data, int64_t count, size_t element_bytes, MPI_Datatype type, MPI_Comm group);
  // A send of n elements of `element_bytes` (MPI `type`).
  static CommRequest Send(const void* data, int64_t n, size_t element_bytes, MPI_Datatype type, int peer, int tag,
                          MPI_Comm world);
  // nccl: a ring transfer queued until the first Wait (or Test) of one queued with it.
  static CommRequest QueueTransfer(void* data, size_t bytes, int peer, int tag, bool send, MPI_Comm group);
  void Finish();

  std::vector<MPI_Request> mpi_;
  HostStaging staging_;        // mpi-staged: the host copy in flight
  void* result_to_ = nullptr;  // mpi-staged sum or gather: where the result goes when it arrives
  size_t result_bytes_ = 0;
  int64_t nccl_send_ = -1;  // nccl: the send's number, while it waits for the next receive
  int64_t nccl_transfer_ = -1;  // nccl: a ring transfer's number, while it is queued
  // nccl sum: on the communication stream, after `ready_` (the compute stream's work that wrote
  // the data), finished at `done_`.
  bool on_comm_stream_ = false;
  DeviceEvent ready_, done_;
};

// To world rank `peer` (the world's communicator; `tag` orders MPI's messages). With nccl the
// send is issued together with this rank's next receive (or its Wait): two neighbours that send
// to each other before receiving would otherwise wait for each other forever.
CommRequest DeviceSend(const real* data, int64_t n, int peer, int tag, MPI_Comm world);
void DeviceRecv(real* data, int64_t n, int peer, int tag, MPI_Comm world);
// The same for 16-bit numbers (with 16-bit storage, the pipeline's activations and their
// gradients), moved bit for bit.
CommRequest DeviceSend(const uint16_t* data, int64_t n, int peer, int tag, MPI_Comm world);
void DeviceRecv(uint16_t* data, int64_t n, int peer, int tag, MPI_Comm world);
// With nccl, issues the sends queued so far now, as a group of their own, instead of with this
// rank's next receive: for a pipeline stage's warm-up forward passes, which no receive of this
// rank follows until its first backward pass (on the first stage), so the next stage would wait
// for all of them. Safe from the crossing DeviceSend avoids: during a stage's warm-up the stage
// it sends to sends nothing back. Nothing to do in the MPI modes (their sends are under way).
void IssueQueuedSends();
// The bucketed data-parallel sum: started now, in place when complete. With nccl it runs on the
// communication stream once the compute stream's queued work is done, and Wait makes the compute
// stream's later work wait for it (the host does not wait); the buffer must not be written in
// between (a bucket's gradients are final when it starts).
CommRequest DeviceIallReduceSum(real* data, int64_t n, MPI_Comm group);
// ZeRO-3's prefetch: DeviceAllGather started now (rank r's block is data[r count, (r + 1) count)),
// in place when complete. With nccl it runs on the communication stream once the compute stream's
// queued work is done, and Wait makes the compute stream's later work wait for it; the buffer is
// not read before Wait. Of reals, or of 16-bit numbers.
CommRequest DeviceIallGather(real* data, int64_t count, MPI_Comm group);
CommRequest DeviceIallGather16(uint16_t* data, int64_t count, MPI_Comm group);

// Context parallelism's ring (context_parallel.h): a send and a receive of `bytes` of device data
// to and from rank `peer` of `group`, started now; the receive's data is in place once it
// completes. With nccl (over group's communicator, SetUpComm's cp group) they are queued, and the
// first Wait (or Test) of any queued one issues them all as one NCCL group on the compute stream,
// after the kernels queued before that Wait (no overlap with them yet), in order of tag: ranks
// must queue matching transfers between the same two Waits (the ring's steps do), as NCCL pairs
// a peer's sends and receives in order and has no tags.
CommRequest DeviceIsendBytes(const void* data, size_t bytes, int peer, int tag, MPI_Comm group);
CommRequest DeviceIrecvBytes(void* data, size_t bytes, int peer, int tag, MPI_Comm group);

}  // namespace tunepar::core
