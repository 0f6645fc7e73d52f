#include "runner/core/core_result.h"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include <sched.h>

#include "base/provenance.h"
#include "runner/core/comm.h"
#include "runner/core/ops.h"

namespace tunepar::core {

std::string AffinityList() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return "?";
  std::string out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    if (!out.empty()) out += ",";
    out += last == cpu ? std::to_string(cpu) : std::to_string(cpu) + "-" + std::to_string(last);
    cpu = last;
  }
  return out;
}

int AffinityCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}

std::vector<RankPlacement> GatherPlacement(const ProcessGrid& grid, const std::string& device, int threads,
                                           const std::string& cpu_binding) {
  RankPlacement mine;
  mine.rank = grid.rank;
  mine.host = HostName();
  mine.local_rank = grid.local_rank;
  mine.cpus = AffinityList();
  mine.cpu_binding = cpu_binding;
  mine.device = device;
  mine.threads = threads;
  mine.tp_rank = grid.tp_rank;
  mine.pp_rank = grid.pp_rank;
  mine.dp_rank = grid.dp_rank;
  // Under Slurm: the job step that ran this rank.
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* step = std::getenv("SLURM_STEP_ID");
  if (job != nullptr && step != nullptr) mine.slurm_step = std::string(job) + "." + step;
  const std::string text = ToJson(mine).dump();
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(grid.world_size), offsets(grid.world_size);
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, grid.world);
  int total = 0;
  for (int r = 0; r < grid.world_size; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(grid.rank == 0 ? static_cast<size_t>(total) : 0, '\0');
  MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
              grid.world);
  std::vector<RankPlacement> out;
  if (grid.rank != 0) return out;
  for (int r = 0; r < grid.world_size; ++r) {
    // Written by this same binary a moment ago: it reads back.
    Result<RankPlacement> placement =
        PlacementFromJson(nlohmann::json::parse(all.substr(offsets[r], lengths[r]), nullptr, false));
    if (placement.ok()) out.push_back(*placement);
  }
  return out;
}

MemoryPeaks MemoryOf(const TrackingAllocator& a) {
  MemoryPeaks m;
  for (int c = 0; c < kNumMemoryCategories; ++c)
    m.peak_by_category[std::string(ToString(static_cast<MemoryCategory>(c)))] = a.peak_by_category()[c];
  if (a.cap() > 0) m.cap_bytes = a.cap();
  m.peak_bytes = a.peak();
  m.held_peak_bytes = a.held_peak();
  m.cap_why = a.why_cap();  // the device's share bounds the cap
  return m;
}

MemoryPeaks GatherMemory(const ProcessGrid& grid, const TrackingAllocator& a) {
  std::vector<double> local(kNumMemoryCategories + 2), max(kNumMemoryCategories + 2);
  for (int c = 0; c < kNumMemoryCategories; ++c) local[c] = a.peak_by_category()[c];
  local[kNumMemoryCategories] = a.peak();
  local[kNumMemoryCategories + 1] = a.held_peak();
  MPI_Reduce(local.data(), max.data(), static_cast<int>(local.size()), MPI_DOUBLE, MPI_MAX, 0, grid.world);
  MemoryPeaks m;
  for (int c = 0; c < kNumMemoryCategories; ++c)
    m.peak_by_category[std::string(ToString(static_cast<MemoryCategory>(c)))] = max[c];
  if (a.cap() > 0) m.cap_bytes = a.cap();
  m.peak_bytes = max[kNumMemoryCategories];
  m.held_peak_bytes = max[kNumMemoryCategories + 1];
  m.cap_why = a.why_cap();  // the device's share bounds the cap
  return m;
}

std::map<std::string, std::string> Versions() {
  std::map<std::string, std::string> versions = {{"tunepar", std::string(Version())},
                                                 {"git", std::string(GitRevision())},
                                                 {"mpi", MpiLibrary()},
                                                 {"backend", std::string(BackendName())},
                                                 {"backend_version", BackendVersion()},
                                                 {"compiler", __VERSION__},
                                                 {"arithmetic", sizeof(real) == 8 ? "fp64" : "fp32"}};
  if (const std::string nccl = NcclVersion(); !nccl.empty()) versions["nccl"] = nccl;
  return versions;
}

Status WriteResult(const std::string& path, const CoreResult& result) {
  const nlohmann::json j = ToJson(result);
  if (path.empty()) {
    std::cout << j.dump(2) << std::endl;
    return Status::Ok();
  }
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(temporary);
    out << j.dump(2) << "\n";
    if (!out) return InvalidArgument("cannot write the result to " + path);
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) return InvalidArgument("cannot write the result to " + path + ": " + error.message());
  return Status::Ok();
}

bool ClaimResult(const std::string& path) {
  if (path.empty()) return true;
  const int fd = open((path + ".lock").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  if (fd < 0) return false;
  close(fd);
  return true;
}

}  // namespace tunepar::core
