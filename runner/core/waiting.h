// How a rank waits for MPI. MPI's own blocking calls spin on the CPU: the lowest latency when
// every rank has a core. When ranks outnumber the cores (oversubscribed runs on a workstation),
// a spinning rank takes the core from the very rank it waits for, and the scheduler cannot move
// the working rank to a core whose spinners look busy: the same layout then measures once at
// one speed and once at half of it. In sleep mode a rank tests its request for a few
// microseconds and then sleeps in short naps, so the cores go to ranks with work.
//
// The wrappers below are the blocking MPI calls of the training step; each runs the blocking
// call in spin mode and the non-blocking one plus Complete() in sleep mode.
#pragma once

#include <mpi.h>

#include <string_view>

namespace tunepar::core {

enum class WaitMode { kSpin, kSleep };
std::string_view ToString(WaitMode mode);  // "spin", "sleep"

// Process-wide; set once before the first step.
void SetWaitMode(WaitMode mode);
WaitMode CurrentWaitMode();

// Sleep mode when this node's ranks outnumber the CPUs the process may run on.
WaitMode AutomaticWaitMode(int ranks_on_node);

void Complete(MPI_Request* request);
void CompleteAll(int count, MPI_Request* requests);

void Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
void Reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm);
void ReduceScatterBlock(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
void Allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
               MPI_Datatype recv_type, MPI_Comm comm);
void Recv(void* buffer, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm);
void Barrier(MPI_Comm comm);

}  // namespace tunepar::core
