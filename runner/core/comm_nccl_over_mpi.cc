// A test build's NCCL (comm_backend.h): a stand-in whose communicators move host memory with MPI.
// It is not NCCL and does no device work; it exists so that the CPU tests run the comm layer's
// nccl code paths (the pipeline's sends issued together with the next receive, the bucket sum on
// the communication stream, ZeRO's in-place all-gather) over oversubscribed ranks, which a
// machine without GPUs cannot otherwise do. Linked only into tunepar-core-nccl-over-mpi (tests).
#include <mpi.h>

#include <climits>
#include <vector>

#include <fmt/format.h>

#include "runner/core/comm_backend.h"
#include "runner/core/ops.h"
#include "runner/core/parallel.h"

namespace tunepar::core {

namespace {

int Count(int64_t n) {
  if (n > (int64_t{1} << 30)) throw DeviceError(fmt::format("{} values: more than the stand-in sends at once", n));
  return static_cast<int>(n);
}

int ByteCount(size_t bytes) {
  if (bytes > static_cast<size_t>(INT_MAX)) throw DeviceError(fmt::format("{} bytes: more than the stand-in sends at once", bytes));
  return static_cast<int>(bytes);
}

// NCCL's semantics on MPI: collectives in place as NCCL's are; sends and receives between
// GroupStart and GroupEnd progress together (non-blocking, completed at GroupEnd), as NCCL's
// group calls do, so a pairing that would deadlock without the group shows as a hang here too.
class MpiCommunicator : public NcclGroup {
 public:
  explicit MpiCommunicator(MPI_Comm group) {
    MPI_Comm_dup(group, &comm_);  // its own traffic, as an NCCL communicator has
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  void AllReduce(real* data, int64_t n, ReduceOp op, Stream) override {
    MPI_Allreduce(MPI_IN_PLACE, data, Count(n), MpiReal(), op == ReduceOp::kSum ? MPI_SUM : MPI_MAX, comm_);
  }
  void ReduceScatter(const real* send, real* recv, int64_t count) override {
    MPI_Reduce_scatter_block(send, recv, Count(count), MpiReal(), MPI_SUM, comm_);
  }
  void AllGather(real* data, int64_t count, Stream) override {
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, Count(count), MpiReal(), comm_);
  }
  void AllGather16(uint16_t* data, int64_t count, Stream) override {
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, Count(count), MPI_UINT16_T, comm_);
  }
  void GroupStart() override { in_group_ = true; }
  void GroupEnd() override {
    in_group_ = false;
    MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE);
    pending_.clear();
  }
  void Send(const void* data, size_t bytes, int peer) override {
    pending_.emplace_back();
    MPI_Isend(data, ByteCount(bytes), MPI_BYTE, peer, 0, comm_, &pending_.back());
    if (!in_group_) GroupEnd();
  }
  void Recv(void* data, size_t bytes, int peer) override {
    pending_.emplace_back();
    MPI_Irecv(data, ByteCount(bytes), MPI_BYTE, peer, 0, comm_, &pending_.back());
    if (!in_group_) GroupEnd();
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool in_group_ = false;
  std::vector<MPI_Request> pending_;
};

}  // namespace

Result<std::unique_ptr<NcclGroup>> CreateNcclGroup(MPI_Comm group, double) {
  return std::unique_ptr<NcclGroup>(std::make_unique<MpiCommunicator>(group));
}

std::string NcclVersion() {
  return "NCCL stand-in over MPI (tests)";
}

}  // namespace tunepar::core
