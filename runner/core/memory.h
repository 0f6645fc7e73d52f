// Every allocation of the core goes through the TrackingAllocator: it counts bytes per category
// (as a framework's GPU holds them: 2 bytes per value in 16-bit storage; the weights, the saved
// activations, the residual stream and the pipeline's transfers are real 16-bit numbers, while
// the backward pass's workspace and the row-parallel partial sums are fp32 on the 16-bit grid:
// held_peak() tells), keeps the peaks, and refuses an allocation that would exceed the
// device-memory cap by throwing OutOfMemory: the trial then ends as `oom`, with the peaks, not as
// a crash.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runner/core/real.h"

namespace tunepar::core {

// kGatheredWeights: ZeRO-3's whole weights of the units gathered at once (the one computing and
// the one prefetched), as the performance model's gathered_weights. Context parallelism
// (context_parallel.h) counts each rank's T / cp tokens in kActivations (everything there scales
// with them: exactly 1 / cp of cp 1's), its ring's two K/V blocks (storage width) and the
// backward's three dK/dV blocks (fp32) in kCommBuffers, and the fp32 output / dQ sum in kWorkspace.
enum class MemoryCategory {
  kWeights,
  kGradients,
  kOptimizer,
  kActivations,
  kCommBuffers,
  kWorkspace,
  kGatheredWeights
};
inline constexpr int kNumMemoryCategories = 7;
std::string_view ToString(MemoryCategory c);

class OutOfMemory : public std::runtime_error {
 public:
  // Over the cap (`why_cap`: what set it, when not the --memory-cap itself).
  OutOfMemory(MemoryCategory category, double requested, double in_use, double cap, const std::string& why_cap = "");
  // The device itself had no room (below the cap, or a library's or scratch allocation).
  OutOfMemory(MemoryCategory category, const std::string& message) : std::runtime_error(message), category_(category) {}
  MemoryCategory category() const { return category_; }

 private:
  MemoryCategory category_;
};

// A rank's memory cap on a device it may share: the cap asked for (<= 0: none), within the
// device's memory (0: unknown, the CPU's host) divided among the ranks placed on it (mpi-staged
// runs several ranks on one GPU: each gets its share, not the whole device). `why` says how the
// cap came about when the device bounds it ("" otherwise).
struct DeviceShare {
  double cap_bytes = 0;
  std::string why;
};
DeviceShare ShareOfDevice(double cap_bytes, double device_bytes, int ranks_on_device, const std::string& device);

class TrackingAllocator {
 public:
  explicit TrackingAllocator(double cap_bytes, std::string why_cap = "")  // cap <= 0: unlimited
      : cap_(cap_bytes), why_cap_(std::move(why_cap)) {}

  // `values` values of `held_bytes` each on the device (a real's, or 2 for 16-bit numbers),
  // counted as values x bytes_per_value in `category`; zeroed unless `zeroed` is false (ops.h's
  // DeviceAllocate).
  real* Allocate(MemoryCategory category, size_t values, double bytes_per_value, bool zeroed = true,
                 size_t held_bytes = sizeof(real));
  void Free(real* p);

  double in_use() const { return in_use_; }
  double peak() const { return peak_; }
  // The bytes the device actually holds for the buffers (the count above, except where 16-bit
  // values are still held in reals), and their peak.
  double held_peak() const { return held_peak_; }
  double cap() const { return cap_; }
  const std::string& why_cap() const { return why_cap_; }
  void set_cap(double cap_bytes) { cap_ = cap_bytes; }
  const std::array<double, kNumMemoryCategories>& peak_by_category() const { return peak_by_category_; }
  const std::array<double, kNumMemoryCategories>& in_use_by_category() const { return by_category_; }

 private:
  struct Block {
    real* p;
    MemoryCategory category;
    double bytes, held;
  };
  double cap_;
  std::string why_cap_;
  double in_use_ = 0, peak_ = 0, held_ = 0, held_peak_ = 0;
  std::array<double, kNumMemoryCategories> by_category_{}, peak_by_category_{};
  std::vector<Block> blocks_;
};

// An owned buffer of reals (or of 16-bit numbers: SixteenBit) from a TrackingAllocator.
class Buffer {
 public:
  Buffer() = default;
  Buffer(TrackingAllocator& a, MemoryCategory category, size_t values, double bytes_per_value, bool zeroed = true)
      : allocator_(&a), data_(a.Allocate(category, values, bytes_per_value, zeroed)), size_(values) {}
  // `values` 16-bit numbers (fp16 or bf16 bits), two bytes each on the device as in the count;
  // not zeroed. Read and written through bits16().
  static Buffer SixteenBit(TrackingAllocator& a, MemoryCategory category, size_t values) {
    Buffer b;
    b.allocator_ = &a;
    b.data_ = a.Allocate(category, values, 2.0, false, sizeof(uint16_t));
    b.size_ = values;
    return b;
  }
  ~Buffer() { Reset(); }
  Buffer(Buffer&& o) noexcept : allocator_(o.allocator_), data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      Reset();
      allocator_ = o.allocator_;
      data_ = o.data_;
      size_ = o.size_;
      o.data_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  real* data() { return data_; }
  const real* data() const { return data_; }
  size_t size() const { return size_; }
  uint16_t* bits16() { return reinterpret_cast<uint16_t*>(data_); }
  const uint16_t* bits16() const { return reinterpret_cast<const uint16_t*>(data_); }
  // Token ids share the allocator: a buffer of n reals holds n ints (sizeof(int) <= sizeof(real)).
  int* as_ints() { return reinterpret_cast<int*>(data_); }
  const int* as_ints() const { return reinterpret_cast<const int*>(data_); }
  void Reset() {
    if (data_ != nullptr) allocator_->Free(data_);
    data_ = nullptr;
    size_ = 0;
  }

 private:
  TrackingAllocator* allocator_ = nullptr;
  real* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tunepar::core
