// The GPU build's runtime (gpu_runtime.h), host side: checked runtime calls, the compute stream
// every kernel and library call runs on and the communication stream of nccl's data-parallel
// bucket sums, the profile of GPU time per kernel (TUNEPAR_CORE_PROFILE=1), and the device
// scratch reused across calls. Written against HIP's names (nvcc through device_alias.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runner/core/gpu_runtime.h"
#include "runner/core/memory.h"

namespace tunepar::core {

namespace gpu {

void Check(hipError_t error, const char* what) {
  if (error != hipSuccess) throw DeviceError(fmt::format("{}: {}", what, hipGetErrorString(error)));
}

void CheckLaunch(const char* kernel) {
  Check(hipGetLastError(), kernel);
}

hipStream_t ComputeStream() {
  static hipStream_t stream = [] {
    hipStream_t s;
    Check(hipStreamCreateWithFlags(&s, hipStreamNonBlocking), "hipStreamCreate (compute)");
    return s;
  }();
  return stream;
}

// At the device's highest priority, so a collective starts ahead of queued GEMMs (as PyTorch's
// and Megatron's communication streams do).
hipStream_t CommStream() {
  static hipStream_t stream = [] {
    int lowest = 0, highest = 0;
    Check(hipDeviceGetStreamPriorityRange(&lowest, &highest), "hipDeviceGetStreamPriorityRange");
    hipStream_t s;
    Check(hipStreamCreateWithPriority(&s, hipStreamNonBlocking, highest), "hipStreamCreate (communication)");
    return s;
  }();
  return stream;
}

hipStream_t StreamOf(Stream stream) {
  return stream == Stream::kComm ? CommStream() : ComputeStream();
}

namespace {

struct TimedRegion {
  const char* name;
  hipEvent_t start, stop;
};

bool Profiling() {
  static const bool on = [] {
    const char* v = std::getenv("TUNEPAR_CORE_PROFILE");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

std::vector<TimedRegion>& Regions() {
  static std::vector<TimedRegion> regions;
  return regions;
}

// At exit: GPU milliseconds per region name, largest first.
void PrintProfile() {
  std::map<std::string, std::pair<double, int>> total;
  double all = 0;
  for (const TimedRegion& r : Regions()) {
    float ms = 0;
    if (hipEventSynchronize(r.stop) != hipSuccess || hipEventElapsedTime(&ms, r.start, r.stop) != hipSuccess) continue;
    total[r.name].first += ms;
    total[r.name].second += 1;
    all += ms;
  }
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [name, t] : total) rows.push_back({t.first, name});
  std::sort(rows.rbegin(), rows.rend());
  std::fprintf(stderr, "tunepar-core: GPU time per kernel (TUNEPAR_CORE_PROFILE), %.1f ms in all\n", all);
  for (const auto& [ms, name] : rows) {
    std::fprintf(stderr, "  %10.2f ms %5.1f%% %8d x  %s\n", ms, 100 * ms / all, total[name].second, name.c_str());
  }
}

}  // namespace

ProfiledRegion::ProfiledRegion(const char* name) : name_(name) {
  if (!Profiling()) return;
  // The core ends a run with quick_exit (core_main.cc EndRank), other exits with exit.
  static const bool registered = [] { return std::atexit(PrintProfile) == 0 && std::at_quick_exit(PrintProfile) == 0; }();
  (void)registered;
  Check(hipEventCreate(&start_), "hipEventCreate (profile)");
  Check(hipEventRecord(start_, ComputeStream()), "hipEventRecord (profile)");
}

ProfiledRegion::~ProfiledRegion() {
  if (start_ == nullptr) return;
  hipEvent_t stop;
  if (hipEventCreate(&stop) != hipSuccess || hipEventRecord(stop, ComputeStream()) != hipSuccess) return;
  Regions().push_back({name_, start_, stop});
}

namespace {

// Outgrown scratch buffers, until FreeRetiredScratchWhenIdle (gpu_runtime.h) finds both streams
// idle: at the latest at the step's closing Synchronize, after which the compute stream has
// awaited the communication stream's sums.
std::vector<void*>& RetiredScratch() {
  static std::vector<void*> retired;
  return retired;
}

bool StreamIdle(hipStream_t stream) {
  const hipError_t state = hipStreamQuery(stream);
  if (state == hipErrorNotReady) {
    (void)hipGetLastError();  // "not ready" is an answer, not the next launch's error
    return false;
  }
  Check(state, "hipStreamQuery");
  return true;
}

}  // namespace

void FreeRetiredScratchWhenIdle() {
  std::vector<void*>& retired = RetiredScratch();
  if (retired.empty() || !StreamIdle(ComputeStream()) || !StreamIdle(CommStream())) return;
  for (void* p : retired) Check(hipFree(p), "hipFree (scratch)");
  retired.clear();
}

void* Scratch(ScratchSlot slot, size_t bytes) {
  static void* buffers[static_cast<int>(ScratchSlot::kCount)] = {};
  static size_t sizes[static_cast<int>(ScratchSlot::kCount)] = {};
  const int i = static_cast<int>(slot);
  if (bytes > sizes[i]) {
    // Work queued on the compute stream may still read the old buffer: it is retired, not freed.
    if (buffers[i] != nullptr) RetiredScratch().push_back(buffers[i]);
    FreeRetiredScratchWhenIdle();
    if (hipMalloc(&buffers[i], bytes) != hipSuccess) {
      (void)hipGetLastError();
      buffers[i] = nullptr;
      sizes[i] = 0;
      throw OutOfMemory(MemoryCategory::kWorkspace,
                        fmt::format("out of memory on the device: no room for {:.1f} MB of scratch", bytes / 1e6));
    }
    sizes[i] = bytes;
  }
  return buffers[i];
}

}  // namespace gpu

}  // namespace tunepar::core
