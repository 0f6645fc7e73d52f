// The JSON result of a tunepar-core run, and the facts about each rank that go into it.
//
//   {"status": "ok" | "oom" | "diverged" | "no_device" | "invalid" | "crash", "error": one line,
//    "layout": KEY, "comm": "nccl" | "mpi-staged" | "mpi-direct" | "mpi", "world": N,
//    "step_time_s": median, "tokens_per_s", "tflops_per_gpu", "loss": [...],
//    "phases": {"compute": {"max", "mean"}, "tp_comm", "pp_wait", "dp_comm", "optimizer"},
//    "memory": {"cap_bytes", "peak_bytes", "held_peak_bytes", "peak_by_category": {...}},
//    "placement": [{"rank", "host", "local_rank", "cpus", "device", "threads"}], "versions": {...}}
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "runner/core/memory.h"
#include "runner/core/parallel.h"

namespace tunepar::core {

// This process's CPU affinity: the CPU list ("0-3,8") and its size.
std::string AffinityList();
int AffinityCount();

// Every rank's placement, at world rank 0 (null elsewhere). Collective.
// `cpu_binding`: how the rank's CPUs were chosen (core_main.cc BindNearDevice).
nlohmann::json GatherPlacement(const ProcessGrid& grid, const std::string& device, int threads,
                               const std::string& cpu_binding);

// Peak memory per category, the maximum over ranks, at world rank 0. Collective.
nlohmann::json GatherMemory(const ProcessGrid& grid, const TrackingAllocator& allocator);

// One rank's memory (the rank that ran out).
nlohmann::json MemoryOf(const TrackingAllocator& allocator);

nlohmann::json Versions();

// Writes the result to `path` atomically (a temporary file renamed), or to stdout when empty.
Status WriteResult(const std::string& path, const nlohmann::json& result);

// For a rank that fails alone (out of memory): true for the first rank to claim the result
// file (an exclusive lock file next to it), so only one failure report is written.
bool ClaimResult(const std::string& path);

}  // namespace tunepar::core
