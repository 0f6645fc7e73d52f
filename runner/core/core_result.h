// The facts about each rank that go into tunepar-core's result (its format: result_format.h),
// and the writing of the result.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/core/memory.h"
#include "runner/core/parallel.h"
#include "runner/core/result_format.h"

namespace tunepar::core {

// This process's CPU affinity: the CPU list ("0-3,8") and its size.
std::string AffinityList();
int AffinityCount();

// Every rank's placement, at world rank 0 (empty elsewhere). Collective.
// `cpu_binding`: how the rank's CPUs were chosen (core_main.cc BindNearDevice).
std::vector<RankPlacement> GatherPlacement(const ProcessGrid& grid, const std::string& device, int threads,
                                           const std::string& cpu_binding);

// Peak memory per category, the maximum over ranks, at world rank 0. Collective.
MemoryPeaks GatherMemory(const ProcessGrid& grid, const TrackingAllocator& allocator);

// One rank's memory (the rank that ran out).
MemoryPeaks MemoryOf(const TrackingAllocator& allocator);

std::map<std::string, std::string> Versions();

// Writes the result to `path` atomically (a temporary file renamed), or to stdout when empty.
Status WriteResult(const std::string& path, const CoreResult& result);

// For a rank that fails alone (out of memory): true for the first rank to claim the result
// file (an exclusive lock file next to it), so only one failure report is written.
bool ClaimResult(const std::string& path);

}  // namespace tunepar::core
