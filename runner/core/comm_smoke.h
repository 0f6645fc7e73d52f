// `tunepar-core --smoke`: the launch script's check before training, that every node's devices
// and the chosen comm (a missing NCCL network plugin, a broken device, a non-GPU-aware MPI)
// can run one collective. The sum of a known vector over every rank's device is checked
// exactly (small integers: exact in fp32 for any job size that fits in memory).
#pragma once

#include "runner/core/comm.h"
#include "runner/core/parallel.h"

namespace tunepar::core {

enum class SmokeOutcome { kOk, kWrongSum, kDeviceFailed };

// Collective over the world: binds this rank to device local_rank % devices, sets up `mode`,
// all-reduces. Prints, on success, one line per node on stdout (its first rank:
// "tunepar-core: smoke ok: 4 ranks, comm nccl, node gpu01: cuda:0 NVIDIA H100, ..."); on a
// wrong sum, one line on stderr from the lowest failing rank; on a device or NCCL error, one
// line on stderr from each rank that saw it (kDeviceFailed: the caller ends the job, since
// other ranks may wait for this one).
SmokeOutcome RunSmokeTest(CommMode mode, const ProcessGrid& grid, int devices);

}  // namespace tunepar::core
