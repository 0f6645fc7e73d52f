#include "runner/core/comm.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <utility>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <fmt/format.h>

#include "runner/core/ops.h"
#include "runner/core/waiting.h"

namespace tunepar::core {
namespace {

constexpr int64_t kMaxCount = int64_t{1} << 30;  // MPI counts are ints
constexpr double kNcclInitTimeoutSeconds = 300;

struct QueuedSend {
  const void* data;
  size_t bytes;
  int peer;
};

// A ring transfer (DeviceIsendBytes / DeviceIrecvBytes) waiting, with nccl, for the first Wait
// of one of those queued with it.
struct QueuedTransfer {
  void* data;
  size_t bytes;
  int peer, tag;
  bool send;
  MPI_Comm group;
};

struct CommState {
  CommMode mode = CommMode::kMpi;
  MPI_Comm world = MPI_COMM_WORLD;
  std::map<MPI_Comm, std::unique_ptr<NcclGroup>> nccl;  // by the MPI group it spans
  std::vector<QueuedSend> queued;                       // nccl sends waiting for the next receive
  int64_t sends_issued = 0, sends_queued = 0;
  std::vector<QueuedTransfer> transfers;  // nccl ring transfers waiting to be issued together
  int64_t transfers_issued = 0, transfers_queued = 0;
};

CommState& State() {
  static CommState state;
  return state;
}

// Free staging blocks by size.
std::multimap<size_t, void*>& StagingPool() {
  static std::multimap<size_t, void*> pool;
  return pool;
}

int GroupSize(MPI_Comm group) {
  int size = 1;
  if (group != MPI_COMM_NULL) MPI_Comm_size(group, &size);
  return size;
}

NcclGroup& NcclOf(MPI_Comm group) {
  auto it = State().nccl.find(group);
  if (it == State().nccl.end()) throw std::logic_error("no NCCL communicator for this group (SetUpComm)");
  return *it->second;
}

MPI_Op MpiOp(ReduceOp op) {
  return op == ReduceOp::kSum ? MPI_SUM : MPI_MAX;
}

int MpiCount(int64_t n) {
  if (n > kMaxCount) throw std::length_error(fmt::format("{} values in one MPI message: more than an int counts", n));
  return static_cast<int>(n);
}

// In place over host-visible memory (host memory, a staging copy, or a GPU-aware MPI's device
// memory), in chunks MPI's int counts can hold.
void MpiAllReduce(real* data, int64_t n, ReduceOp op, MPI_Comm group) {
  for (int64_t done = 0; done < n; done += kMaxCount) {
    const int count = static_cast<int>(std::min(kMaxCount, n - done));
    Allreduce(MPI_IN_PLACE, data + done, count, MpiReal(), MpiOp(op), group);
  }
}

// In place over host-visible memory; `type`: the element (reals, or 16-bit numbers).
void MpiAllGather(void* data, int64_t count, MPI_Datatype type, MPI_Comm group) {
  Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, MpiCount(count), type, group);
}

// DeviceAllGather over `element_bytes`-byte elements (MPI `type`); `nccl` runs the NCCL call.
template <typename NcclCall>
void AllGatherElements(void* data, int64_t count, size_t element_bytes, MPI_Datatype type, MPI_Comm group,
                       NcclCall nccl) {
  const int size = GroupSize(group);
  if (size == 1) return;
  switch (State().mode) {
    case CommMode::kMpiDirect: Synchronize(); [[fallthrough]];
    case CommMode::kMpi: MpiAllGather(data, count, type, group); return;
    case CommMode::kMpiStaged: {
      const size_t bytes = static_cast<size_t>(count) * size * element_bytes;
      HostStaging host(bytes);
      Download(host.data(), data, bytes);
      MpiAllGather(host.data(), count, type, group);
      Upload(data, host.data(), bytes);
      return;
    }
    case CommMode::kNccl: nccl(NcclOf(group)); return;
  }
}

// Issues the queued NCCL sends, and the receive of `bytes` from world rank `from` into `into`
// when it is not null, as one group on the compute stream (after the kernels that wrote the
// sends, before those that read the receive).
void IssueNcclGroup(void* into = nullptr, size_t bytes = 0, int from = 0) {
  CommState& s = State();
  NcclGroup& world = NcclOf(s.world);
  world.GroupStart();
  for (const QueuedSend& q : s.queued) world.Send(q.data, q.bytes, q.peer);
  if (into != nullptr) world.Recv(into, bytes, from);
  world.GroupEnd();
  s.sends_issued = s.sends_queued;
  s.queued.clear();
}

// Issues the queued ring transfers on the compute stream, one NCCL group per communicator: after
// the kernels queued so far, before those queued later. NCCL pairs a peer's sends and receives in
// the order they are issued and has no tags, so within a group they go in order of tag (stable):
// two ranks that queue matching transfers between the same two Waits then pair them right, as
// MPI's tags would.
void IssueQueuedTransfers() {
  CommState& s = State();
  std::vector<QueuedTransfer> queued = std::move(s.transfers);
  s.transfers.clear();
  std::stable_sort(queued.begin(), queued.end(),
                   [](const QueuedTransfer& a, const QueuedTransfer& b) { return a.tag < b.tag; });
  std::vector<MPI_Comm> groups;
  for (const QueuedTransfer& q : queued) {
    if (std::find(groups.begin(), groups.end(), q.group) == groups.end()) groups.push_back(q.group);
  }
  for (MPI_Comm group : groups) {
    NcclGroup& nccl = NcclOf(group);
    nccl.GroupStart();
    for (const QueuedTransfer& q : queued) {
      if (q.group != group) continue;
      if (q.send) {
        nccl.Send(q.data, q.bytes, q.peer);
      } else {
        nccl.Recv(q.data, q.bytes, q.peer);
      }
    }
    nccl.GroupEnd();
  }
  s.transfers_issued = s.transfers_queued;
}

// What the MPI library says about device pointers: Open MPI's MPIX_Query_{cuda,rocm}_support,
// MPICH 4's MPIX_GPU_query_support; Cray MPICH (MPICH 3.4 underneath) when told to by
// MPICH_GPU_SUPPORT_ENABLED=1.
bool MpiTakesDevicePointers(std::string_view backend) {
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  if (backend == "cuda") return MPIX_Query_cuda_support() == 1;
#endif
#if defined(OMPI_HAVE_MPI_EXT_ROCM) && OMPI_HAVE_MPI_EXT_ROCM
  if (backend == "hip") return MPIX_Query_rocm_support() == 1;
#endif
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40000000
  int supported = 0;
  MPIX_GPU_query_support(backend == "cuda" ? MPIX_GPU_SUPPORT_CUDA : MPIX_GPU_SUPPORT_HIP, &supported);
  if (supported) return true;
#endif
#if defined(MPICH_VERSION)
  const char* cray = std::getenv("MPICH_GPU_SUPPORT_ENABLED");
  if (cray != nullptr && std::string_view(cray) == "1") return true;
#endif
  (void)backend;
  return false;
}

}  // namespace

std::string MpiLibrary() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string name(text, static_cast<size_t>(length));
  if (const size_t cut = name.find_first_of(",\n"); cut != std::string::npos) name.resize(cut);
  return name;
}

std::string_view ToString(CommMode mode) {
  switch (mode) {
    case CommMode::kMpi: return "mpi";
    case CommMode::kMpiStaged: return "mpi-staged";
    case CommMode::kMpiDirect: return "mpi-direct";
    case CommMode::kNccl: return "nccl";
  }
  return "?";
}

Result<CommMode> ParseCommMode(std::string_view name) {
  for (CommMode mode : {CommMode::kMpi, CommMode::kMpiStaged, CommMode::kMpiDirect, CommMode::kNccl}) {
    if (name == ToString(mode)) return mode;
  }
  return InvalidArgument(fmt::format("--comm {}: expected nccl, mpi-staged, mpi-direct or mpi", name));
}

CommMode DefaultCommMode(std::string_view backend) {
  return backend == "cpu" ? CommMode::kMpi : CommMode::kNccl;
}

CommMode CommForPlacement(CommMode mode, bool given, std::string_view backend, int most_ranks_on_a_node, int devices) {
  if (given || mode != CommMode::kNccl || backend == "cpu" || devices <= 0) return mode;
  return most_ranks_on_a_node > devices ? CommMode::kMpiStaged : mode;
}

Status CheckCommMode(CommMode mode, std::string_view backend) {
  const bool gpu = backend != "cpu";
  if (mode == CommMode::kNccl && NcclVersion().empty())
    return InvalidArgument(fmt::format("--comm nccl: the {} build has no NCCL (use mpi or mpi-staged)", backend));
  if (!gpu && mode == CommMode::kMpiDirect)
    return InvalidArgument("--comm mpi-direct: the cpu build has no device memory (use mpi)");
  if (gpu && mode == CommMode::kMpi)
    return InvalidArgument(fmt::format(
        "--comm mpi: the {} build's buffers are device memory (use nccl, mpi-staged or mpi-direct)", backend));
  if (mode == CommMode::kMpiDirect && !MpiTakesDevicePointers(backend)) {
    return InvalidArgument(fmt::format("--comm mpi-direct: this MPI ({}) is not {}-aware (use mpi-staged)",
                                       MpiLibrary(), backend == "cuda" ? "CUDA" : "ROCm"));
  }
  return Status::Ok();
}

void SetUpComm(CommMode mode, const ProcessGrid& grid, bool world_group) {
  CommState& s = State();
  s.mode = mode;
  s.world = grid.world;
  if (mode != CommMode::kNccl) return;
  // Every rank creates its groups in this order, so no two groups wait for each other.
  std::vector<MPI_Comm> groups = {grid.tp_comm, grid.cp_comm, grid.dp_comm, grid.shard_comm, grid.replicate_comm, grid.embedding_comm};
  if (world_group) groups.push_back(grid.world);
  for (MPI_Comm group : groups) {
    if (group == MPI_COMM_NULL || s.nccl.count(group) > 0) continue;
    if (GroupSize(group) == 1 && group != grid.world) continue;
    Result<std::unique_ptr<NcclGroup>> made = CreateNcclGroup(group, kNcclInitTimeoutSeconds);
    if (!made.ok()) throw DeviceError(made.status().message());
    s.nccl[group] = std::move(*made);
  }
}

void TearDownComm() {
  State().queued.clear();
  State().transfers.clear();
  State().nccl.clear();
  for (auto& [bytes, memory] : StagingPool()) PinnedFree(memory);
  StagingPool().clear();
}

CommMode CurrentCommMode() {
  return State().mode;
}

void DeviceAllReduce(real* data, int64_t n, ReduceOp op, MPI_Comm group) {
  // One rank has nothing to add, unless it has an NCCL communicator (the smoke test's world).
  if (n == 0 || (GroupSize(group) == 1 && State().nccl.count(group) == 0)) return;
  switch (State().mode) {
    case CommMode::kMpiDirect: Synchronize(); [[fallthrough]];
    case CommMode::kMpi: MpiAllReduce(data, n, op, group); return;
    case CommMode::kMpiStaged: {
      HostStaging host(static_cast<size_t>(n) * sizeof(real));
      Download(host.data(), data, static_cast<size_t>(n) * sizeof(real));
      MpiAllReduce(host.data(), n, op, group);
      Upload(data, host.data(), static_cast<size_t>(n) * sizeof(real));
      return;
    }
    case CommMode::kNccl: NcclOf(group).AllReduce(data, n, op, Stream::kCompute); return;
  }
}

void DeviceReduceScatter(const real* send, real* recv, int64_t count, MPI_Comm group) {
  const int size = GroupSize(group);
  switch (State().mode) {
    case CommMode::kMpiDirect: Synchronize(); [[fallthrough]];
    case CommMode::kMpi:
      ReduceScatterBlock(send, recv, MpiCount(count), MpiReal(), MPI_SUM, group);
      return;
    case CommMode::kMpiStaged: {
      const size_t bytes = static_cast<size_t>(count) * sizeof(real);
      HostStaging host_send(bytes * size), host_recv(bytes);
      Download(host_send.data(), send, bytes * size);
      ReduceScatterBlock(host_send.data(), host_recv.data(), MpiCount(count), MpiReal(), MPI_SUM, group);
      Upload(recv, host_recv.data(), bytes);
      return;
    }
    case CommMode::kNccl: NcclOf(group).ReduceScatter(send, recv, count); return;
  }
}

void DeviceAllGather(real* data, int64_t count, MPI_Comm group) {
  AllGatherElements(data, count, sizeof(real), MpiReal(), group,
                    [&](NcclGroup& nccl) { nccl.AllGather(data, count, Stream::kCompute); });
}

void DeviceAllGather16(uint16_t* data, int64_t count, MPI_Comm group) {
  AllGatherElements(data, count, sizeof(uint16_t), MPI_UINT16_T, group,
                    [&](NcclGroup& nccl) { nccl.AllGather16(data, count, Stream::kCompute); });
}

// ---- Page-locked staging memory, pooled by size (powers of two from 4 KiB).

HostStaging::HostStaging(size_t bytes) : bytes_(4096) {
  while (bytes_ < bytes) bytes_ *= 2;
  auto& pool = StagingPool();
  if (auto it = pool.find(bytes_); it != pool.end()) {
    memory_ = it->second;
    pool.erase(it);
  } else {
    memory_ = PinnedAllocate(bytes_);
  }
}

HostStaging::~HostStaging() {
  if (memory_ != nullptr) StagingPool().emplace(bytes_, memory_);
}

HostStaging::HostStaging(HostStaging&& other) noexcept
    : memory_(std::exchange(other.memory_, nullptr)), bytes_(other.bytes_) {}

HostStaging& HostStaging::operator=(HostStaging&& other) noexcept {
  if (this != &other) {
    if (memory_ != nullptr) StagingPool().emplace(bytes_, memory_);
    memory_ = std::exchange(other.memory_, nullptr);
    bytes_ = other.bytes_;
  }
  return *this;
}

// ---- Non-blocking transfers.

void CommRequest::Finish() {
  mpi_.clear();
  if (result_to_ != nullptr) Upload(result_to_, staging_.data(), result_bytes_);
  result_to_ = nullptr;
  staging_ = HostStaging();
}

bool CommRequest::Test() {
  if (on_comm_stream_) return done_.Done();
  if (nccl_send_ >= 0) {
    if (nccl_send_ >= State().sends_issued) return false;
    nccl_send_ = -1;
    return true;
  }
  if (mpi_.empty()) return true;
  if (nccl_transfer_ >= 0) {
    if (nccl_transfer_ >= State().transfers_issued) IssueQueuedTransfers();
    nccl_transfer_ = -1;
    return true;
  }
  int done = 0;
  MPI_Testall(static_cast<int>(mpi_.size()), mpi_.data(), &done, MPI_STATUSES_IGNORE);
  if (done) Finish();
  return done != 0;
}

void CommRequest::Wait() {
  if (on_comm_stream_) {
    done_.Await(Stream::kCompute);
    on_comm_stream_ = false;
    return;
  }
  if (nccl_send_ >= 0) {
    if (nccl_send_ >= State().sends_issued) IssueNcclGroup();
    nccl_send_ = -1;
    return;
  }
  if (nccl_transfer_ >= 0) {
    if (nccl_transfer_ >= State().transfers_issued) IssueQueuedTransfers();
    nccl_transfer_ = -1;
    return;
  }
  if (mpi_.empty()) return;
  CompleteAll(static_cast<int>(mpi_.size()), mpi_.data());
  Finish();
}

CommRequest CommRequest::Send(const void* data, int64_t n, size_t element_bytes, MPI_Datatype type, int peer,
                              int tag, MPI_Comm world) {
  CommRequest r;
  const void* from = data;
  const size_t bytes = static_cast<size_t>(n) * element_bytes;
  switch (State().mode) {
    case CommMode::kNccl:
      State().queued.push_back({data, bytes, peer});
      r.nccl_send_ = State().sends_queued++;
      return r;
    case CommMode::kMpiStaged:
      r.staging_ = HostStaging(bytes);
      Download(r.staging_.data(), data, bytes);
      from = r.staging_.data();
      break;
    case CommMode::kMpiDirect: Synchronize(); break;
    case CommMode::kMpi: break;
  }
  r.mpi_.emplace_back();
  MPI_Isend(from, MpiCount(n), type, peer, tag, world, &r.mpi_.back());
  return r;
}

CommRequest DeviceSend(const real* data, int64_t n, int peer, int tag, MPI_Comm world) {
  return CommRequest::Send(data, n, sizeof(real), MpiReal(), peer, tag, world);
}

CommRequest DeviceSend(const uint16_t* data, int64_t n, int peer, int tag, MPI_Comm world) {
  return CommRequest::Send(data, n, sizeof(uint16_t), MPI_UINT16_T, peer, tag, world);
}

namespace {

// A receive of n elements of `element_bytes` (MPI `type`) into device memory.
void RecvElements(void* data, int64_t n, size_t element_bytes, MPI_Datatype type, int peer, int tag,
                  MPI_Comm world) {
  const size_t bytes = static_cast<size_t>(n) * element_bytes;
  switch (State().mode) {
    case CommMode::kNccl: IssueNcclGroup(data, bytes, peer); return;
    case CommMode::kMpiStaged: {
      HostStaging host(bytes);
      Recv(host.data(), MpiCount(n), type, peer, tag, world);
      Upload(data, host.data(), bytes);
      return;
    }
    case CommMode::kMpiDirect: Synchronize(); [[fallthrough]];
    case CommMode::kMpi: Recv(data, MpiCount(n), type, peer, tag, world); return;
  }
}

}  // namespace

void DeviceRecv(real* data, int64_t n, int peer, int tag, MPI_Comm world) {
  RecvElements(data, n, sizeof(real), MpiReal(), peer, tag, world);
}

void DeviceRecv(uint16_t* data, int64_t n, int peer, int tag, MPI_Comm world) {
  RecvElements(data, n, sizeof(uint16_t), MPI_UINT16_T, peer, tag, world);
}

CommRequest CommRequest::QueueTransfer(void* data, size_t bytes, int peer, int tag, bool send, MPI_Comm group) {
  CommRequest r;
  State().transfers.push_back({data, bytes, peer, tag, send, group});
  r.nccl_transfer_ = State().transfers_queued++;
  return r;
}

CommRequest DeviceIsendBytes(const void* data, size_t bytes, int peer, int tag, MPI_Comm group) {
  if (State().mode == CommMode::kNccl)
    return CommRequest::QueueTransfer(const_cast<void*>(data), bytes, peer, tag, true, group);
  return CommRequest::Send(data, static_cast<int64_t>(bytes), 1, MPI_BYTE, peer, tag, group);
}

CommRequest DeviceIrecvBytes(void* data, size_t bytes, int peer, int tag, MPI_Comm group) {
  CommRequest r;
  void* into = data;
  switch (State().mode) {
    case CommMode::kNccl: return CommRequest::QueueTransfer(data, bytes, peer, tag, false, group);
    case CommMode::kMpiStaged:
      r.staging_ = HostStaging(bytes);
      r.result_to_ = data;
      r.result_bytes_ = bytes;
      into = r.staging_.data();
      break;
    case CommMode::kMpiDirect: Synchronize(); break;
    case CommMode::kMpi: break;
  }
  r.mpi_.emplace_back();
  MPI_Irecv(into, MpiCount(static_cast<int64_t>(bytes)), MPI_BYTE, peer, tag, group, &r.mpi_.back());
  return r;
}

void IssueQueuedSends() {
  if (State().mode == CommMode::kNccl && !State().queued.empty()) IssueNcclGroup();
}

CommRequest DeviceIallReduceSum(real* data, int64_t n, MPI_Comm group) {
  CommRequest r;
  real* on = data;
  switch (State().mode) {
    case CommMode::kNccl:
      if (n == 0 || GroupSize(group) == 1) return r;
      r.ready_.Record(Stream::kCompute);
      r.ready_.Await(Stream::kComm);
      NcclOf(group).AllReduce(data, n, ReduceOp::kSum, Stream::kComm);
      r.done_.Record(Stream::kComm);
      r.on_comm_stream_ = true;
      return r;
    case CommMode::kMpiStaged:
      r.staging_ = HostStaging(static_cast<size_t>(n) * sizeof(real));
      Download(r.staging_.data(), data, static_cast<size_t>(n) * sizeof(real));
      r.result_to_ = data;
      r.result_bytes_ = static_cast<size_t>(n) * sizeof(real);
      on = r.staging_.data();
      break;
    case CommMode::kMpiDirect: Synchronize(); break;
    case CommMode::kMpi: break;
  }
  for (int64_t at = 0; at < n; at += kMaxCount) {
    r.mpi_.emplace_back();
    const int count = static_cast<int>(std::min(kMaxCount, n - at));
    MPI_Iallreduce(MPI_IN_PLACE, on + at, count, MpiReal(), MPI_SUM, group, &r.mpi_.back());
  }
  return r;
}

CommRequest CommRequest::IallGather(void* data, int64_t count, size_t element_bytes, MPI_Datatype type,
                                    MPI_Comm group) {
  CommRequest r;
  const int size = GroupSize(group);
  if (count == 0 || size == 1) return r;
  void* on = data;
  const size_t bytes = static_cast<size_t>(count) * size * element_bytes;
  switch (State().mode) {
    case CommMode::kNccl:
      r.ready_.Record(Stream::kCompute);
      r.ready_.Await(Stream::kComm);
      if (element_bytes == sizeof(real)) {
        NcclOf(group).AllGather(static_cast<real*>(data), count, Stream::kComm);
      } else {
        NcclOf(group).AllGather16(static_cast<uint16_t*>(data), count, Stream::kComm);
      }
      r.done_.Record(Stream::kComm);
      r.on_comm_stream_ = true;
      return r;
    case CommMode::kMpiStaged:
      r.staging_ = HostStaging(bytes);
      Download(r.staging_.data(), data, bytes);
      r.result_to_ = data;
      r.result_bytes_ = bytes;
      on = r.staging_.data();
      break;
    case CommMode::kMpiDirect: Synchronize(); break;
    case CommMode::kMpi: break;
  }
  r.mpi_.emplace_back();
  MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, on, MpiCount(count), type, group, &r.mpi_.back());
  return r;
}

CommRequest DeviceIallGather(real* data, int64_t count, MPI_Comm group) {
  return CommRequest::IallGather(data, count, sizeof(real), MpiReal(), group);
}

CommRequest DeviceIallGather16(uint16_t* data, int64_t count, MPI_Comm group) {
  return CommRequest::IallGather(data, count, sizeof(uint16_t), MPI_UINT16_T, group);
}

namespace {

void TimedAllReduce(real* data, int64_t n, ReduceOp op, MPI_Comm comm, PhaseClock& clock, Phase phase) {
  if (comm == MPI_COMM_NULL || n == 0) return;
  int size = 1;
  MPI_Comm_size(comm, &size);
  if (size == 1) return;
  TimedScope timed(clock, phase);
  DeviceAllReduce(data, n, op, comm);
}

}  // namespace

void AllReduceSum(real* data, int64_t n, MPI_Comm comm, PhaseClock& clock, Phase phase) {
  TimedAllReduce(data, n, ReduceOp::kSum, comm, clock, phase);
}

void AllReduceMax(real* data, int64_t n, MPI_Comm comm, PhaseClock& clock, Phase phase) {
  TimedAllReduce(data, n, ReduceOp::kMax, comm, clock, phase);
}

}  // namespace tunepar::core
