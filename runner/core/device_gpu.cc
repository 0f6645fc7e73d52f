// The GPU build's device (ops.h, "Backend" and "Streams and events"): which devices there are and
// binding to one, device memory through a caching allocator under the TrackingAllocator,
// uploads (page-locked staging, so the host need not wait) and downloads, events on the streams,
// and the ops' scratch. Written against HIP's names (nvcc through device_alias.h).
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runner/core/gpu_runtime.h"
#include "runner/core/ops.h"

namespace tunepar::core {

namespace {

using gpu::Check;
using gpu::ComputeStream;

// Freed device blocks kept by size and handed out again (a framework's caching allocator), so
// micro-batches after the first allocate nothing from the driver. Every user of a freed block ran
// on the compute stream (the communication stream only sums the gradients, which live as long as
// the run), so a block freed and reused is ordered after the work that used it.
class CachingAllocator {
 public:
  void* Allocate(size_t bytes) {
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      return p;
    }
    void* p = nullptr;
    if (hipMalloc(&p, bytes) != hipSuccess) {
      (void)hipGetLastError();  // clear it, release the cache, and try once more
      Release();
      if (hipMalloc(&p, bytes) != hipSuccess) {
        (void)hipGetLastError();
        return nullptr;
      }
    }
    size_[p] = bytes;
    return p;
  }
  void Free(void* p) { free_[size_.at(p)].push_back(p); }

 private:
  void Release() {
    Check(hipStreamSynchronize(ComputeStream()), "hipStreamSynchronize (release)");
    for (auto& [bytes, blocks] : free_) {
      for (void* p : blocks) {
        Check(hipFree(p), "hipFree");
        size_.erase(p);
      }
      blocks.clear();
    }
  }
  std::map<size_t, std::vector<void*>> free_;
  std::map<void*, size_t> size_;
};

CachingAllocator& Allocator() {
  static CachingAllocator allocator;
  return allocator;
}

}  // namespace

std::string BackendName() {
#if defined(__CUDACC__)
  return "cuda";
#else
  return "hip";
#endif
}

std::string BackendVersion() {
  int version = 0;
  if (hipRuntimeGetVersion(&version) != hipSuccess) version = 0;
  return BackendName() + " runtime " + std::to_string(version);
}

int DeviceCount() {
  int count = 0;
  if (hipGetDeviceCount(&count) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return count;
}

std::string DevicePciBusId(int index) {
  char bus_id[64] = {};
  if (hipDeviceGetPCIBusId(bus_id, sizeof(bus_id), index) != hipSuccess) {
    (void)hipGetLastError();
    return "";
  }
  return bus_id;
}

double MemoryOfDevice(int index) {
  hipDeviceProp_t props;
  Check(hipGetDeviceProperties(&props, index), "hipGetDeviceProperties");
  return static_cast<double>(props.totalGlobalMem);
}

std::string UseDevice(int index) {
  Check(hipSetDevice(index), "hipSetDevice");
  hipDeviceProp_t props;
  Check(hipGetDeviceProperties(&props, index), "hipGetDeviceProperties");
  return BackendName() + ":" + std::to_string(index) + " " + props.name;
}

void* DeviceAllocate(size_t bytes, bool zeroed) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  void* p = Allocator().Allocate(rounded);
  if (!zeroed) return p;
  gpu::ProfiledRegion profiled("memset (allocation)");
  if (p != nullptr) Check(hipMemsetAsync(p, 0, rounded, ComputeStream()), "hipMemsetAsync");
  return p;
}

void DeviceFree(void* p) {
  Allocator().Free(p);
}
void Upload(void* device, const void* host, size_t bytes) {
  Check(hipMemcpyAsync(device, host, bytes, hipMemcpyHostToDevice, ComputeStream()), "hipMemcpy (upload)");
  Check(hipStreamSynchronize(ComputeStream()), "hipStreamSynchronize (upload)");
}
namespace {
// Page-locked host buffers UploadAsync copies from, each free again once the copy out of it has
// run on the compute stream (its event). At most kMaxStaging; past that the oldest is waited for.
struct UploadStaging {
  void* host = nullptr;
  size_t bytes = 0;
  hipEvent_t copied = nullptr;
};
constexpr size_t kMaxStaging = 64;
std::deque<UploadStaging>& StagingPool() {
  static std::deque<UploadStaging> pool;
  return pool;
}
bool CopyHasRun(const UploadStaging& s) {
  const hipError_t state = hipEventQuery(s.copied);
  if (state == hipErrorNotReady) {
    (void)hipGetLastError();  // "not ready" is an answer, not the next launch's error
    return false;
  }
  Check(state, "hipEventQuery (upload staging)");
  return true;
}
// A staging buffer of at least `bytes` whose last copy has run, moved to the back of the pool (so
// the pool stays in the order of use, the front the least recently used): a free one, else a new
// one, else (the pool full) the front one, waited for; grown if it is too small.
UploadStaging& FreeStaging(size_t bytes) {
  std::deque<UploadStaging>& pool = StagingPool();
  auto chosen = pool.end();
  for (auto it = pool.begin(); it != pool.end() && chosen == pool.end(); ++it) {
    if (it->bytes >= bytes && CopyHasRun(*it)) chosen = it;
  }
  if (chosen == pool.end() && pool.size() >= kMaxStaging) {
    chosen = pool.begin();
    Check(hipEventSynchronize(chosen->copied), "hipEventSynchronize (upload staging)");
  }
  if (chosen != pool.end()) {
    const UploadStaging reused = *chosen;
    pool.erase(chosen);
    pool.push_back(reused);
  } else {
    hipEvent_t copied = nullptr;
    Check(hipEventCreateWithFlags(&copied, hipEventDisableTiming), "hipEventCreate (upload staging)");
    pool.push_back({nullptr, 0, copied});
  }
  UploadStaging& s = pool.back();
  if (s.bytes < bytes) {
    if (s.host != nullptr) Check(hipHostFree(s.host), "hipHostFree (upload staging)");
    s.host = nullptr;
    s.bytes = 0;
    Check(hipHostMalloc(&s.host, bytes, hipHostMallocDefault), "hipHostMalloc (upload staging)");
    s.bytes = bytes;
  }
  return s;
}
}  // namespace

void UploadAsync(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  UploadStaging& s = FreeStaging(bytes);
  std::memcpy(s.host, host, bytes);
  Check(hipMemcpyAsync(device, s.host, bytes, hipMemcpyHostToDevice, ComputeStream()), "hipMemcpy (upload)");
  Check(hipEventRecord(s.copied, ComputeStream()), "hipEventRecord (upload staging)");
}

void Download(void* host, const void* device, size_t bytes) {
  Check(hipMemcpyAsync(host, device, bytes, hipMemcpyDeviceToHost, ComputeStream()), "hipMemcpy (download)");
  Check(hipStreamSynchronize(ComputeStream()), "hipStreamSynchronize (download)");
}
void Synchronize() {
  Check(hipStreamSynchronize(ComputeStream()), "hipStreamSynchronize");
  gpu::FreeRetiredScratchWhenIdle();
}

namespace {
hipEvent_t AsEvent(void* event) {
  return static_cast<hipEvent_t>(event);
}
}  // namespace

DeviceEvent::~DeviceEvent() {
  if (event_ != nullptr) (void)hipEventDestroy(AsEvent(event_));
}
DeviceEvent::DeviceEvent(DeviceEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
DeviceEvent& DeviceEvent::operator=(DeviceEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) (void)hipEventDestroy(AsEvent(event_));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}
void DeviceEvent::Record(Stream stream) {
  if (event_ == nullptr) {
    hipEvent_t event;
    Check(hipEventCreate(&event), "hipEventCreate");
    event_ = event;
  }
  Check(hipEventRecord(AsEvent(event_), gpu::StreamOf(stream)), "hipEventRecord");
}
bool DeviceEvent::Done() const {
  if (event_ == nullptr) return true;
  const hipError_t state = hipEventQuery(AsEvent(event_));
  if (state == hipErrorNotReady) {
    (void)hipGetLastError();  // "not ready" is an answer, not the next launch's error
    return false;
  }
  Check(state, "hipEventQuery");
  return true;
}
void DeviceEvent::Await(Stream stream) const {
  if (event_ != nullptr) Check(hipStreamWaitEvent(gpu::StreamOf(stream), AsEvent(event_), 0), "hipStreamWaitEvent");
}
double SecondsBetween(const DeviceEvent& from, const DeviceEvent& to) {
  if (from.event_ == nullptr || to.event_ == nullptr) return 0;
  Check(hipEventSynchronize(AsEvent(to.event_)), "hipEventSynchronize");
  Check(hipEventSynchronize(AsEvent(from.event_)), "hipEventSynchronize");
  float ms = 0;
  Check(hipEventElapsedTime(&ms, AsEvent(from.event_), AsEvent(to.event_)), "hipEventElapsedTime");
  return ms / 1e3;
}
real* OpScratch(size_t values, int slot) {
  const auto at = static_cast<gpu::ScratchSlot>(static_cast<int>(gpu::ScratchSlot::kOpScratch) + slot);
  return static_cast<real*>(gpu::Scratch(at, values * sizeof(real)));
}
void SetThreads(int) {}

uint16_t* OpScratch16(Scratch16 slot, size_t values) {
  const auto at = static_cast<gpu::ScratchSlot>(static_cast<int>(gpu::ScratchSlot::kSixteenBit) + static_cast<int>(slot));
  return static_cast<uint16_t*>(gpu::Scratch(at, values * sizeof(uint16_t)));
}

}  // namespace tunepar::core
