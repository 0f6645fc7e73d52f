#include "runner/core/waiting.h"

#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace tunepar::core {
namespace {

std::atomic<WaitMode> mode{WaitMode::kSpin};

// Test for this long before the first nap: short waits (a neighbour a few microseconds late)
// stay as fast as spinning.
constexpr auto kSpinBeforeSleeping = std::chrono::microseconds(20);
// Naps grow from the first to the longest: a long wait costs little CPU, and a wait that ends
// during a nap is noticed within the longest nap.
constexpr auto kFirstNap = std::chrono::microseconds(2);
constexpr auto kLongestNap = std::chrono::microseconds(50);

}  // namespace

std::string_view ToString(WaitMode m) {
  return m == WaitMode::kSpin ? "spin" : "sleep";
}

void SetWaitMode(WaitMode m) {
  // Naps of a few microseconds need a timer slack below the default 50 us.
  if (m == WaitMode::kSleep) prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  mode.store(m);
}

WaitMode CurrentWaitMode() {
  return mode.load();
}

WaitMode AutomaticWaitMode(int ranks_on_node) {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  const int online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  // A rank bound to its own CPUs has them to itself; an unbound rank shares the node's.
  if (cpus < online) return WaitMode::kSpin;
  return ranks_on_node > online ? WaitMode::kSleep : WaitMode::kSpin;
}

void CompleteAll(int count, MPI_Request* requests) {
  if (CurrentWaitMode() == WaitMode::kSpin) {
    MPI_Waitall(count, requests, MPI_STATUSES_IGNORE);
    return;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto nap = kFirstNap;
  for (;;) {
    int done = 0;
    MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
    if (done) return;
    if (Clock::now() - start < kSpinBeforeSleeping) continue;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, kLongestNap);
  }
}

void Complete(MPI_Request* request) {
  CompleteAll(1, request);
}

void Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (CurrentWaitMode() == WaitMode::kSpin) {
    MPI_Allreduce(send, recv, count, type, op, comm);
    return;
  }
  MPI_Request r;
  MPI_Iallreduce(send, recv, count, type, op, comm, &r);
  Complete(&r);
}

void Reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  if (CurrentWaitMode() == WaitMode::kSpin) {
    MPI_Reduce(send, recv, count, type, op, root, comm);
    return;
  }
  MPI_Request r;
  MPI_Ireduce(send, recv, count, type, op, root, comm, &r);
  Complete(&r);
}

void ReduceScatterBlock(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (CurrentWaitMode() == WaitMode::kSpin) {
    MPI_Reduce_scatter_block(send, recv, count, type, op, comm);
    return;
  }
  MPI_Request r;
  MPI_Ireduce_scatter_block(send, recv, count, type, op, comm, &r);
  Complete(&r);
}

void Allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
               MPI_Datatype recv_type, MPI_Comm comm) {
  if (CurrentWaitMode() == WaitMode::kSpin) {
    MPI_Allgather(send, send_count, send_type, recv, recv_count, recv_type, comm);
    return;
  }
  MPI_Request r;
  MPI_Iallgather(send, send_count, send_type, recv, recv_count, recv_type, comm, &r);
  Complete(&r);
}

void Recv(void* buffer, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm) {
  if (CurrentWaitMode() == WaitMode::kSpin) {
    MPI_Recv(buffer, count, type, source, tag, comm, MPI_STATUS_IGNORE);
    return;
  }
  MPI_Request r;
  MPI_Irecv(buffer, count, type, source, tag, comm, &r);
  Complete(&r);
}

void Barrier(MPI_Comm comm) {
  if (CurrentWaitMode() == WaitMode::kSpin) {
    MPI_Barrier(comm);
    return;
  }
  MPI_Request r;
  MPI_Ibarrier(comm, &r);
  Complete(&r);
}

}  // namespace tunepar::core
