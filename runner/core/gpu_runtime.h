// What the GPU build's sources share (host side): checked runtime calls, the compute stream every
// kernel and library call runs on (and the communication stream of nccl's data-parallel bucket
// sums), and reusable scratch. Included by device code only.
#pragma once

#include <cstddef>
#include <string>

#include "runner/core/device_alias.h"
#include "runner/core/ops.h"

namespace tunepar::core::gpu {

// Throws DeviceError ("<what>: <the runtime's message>") unless `error` is success.
void Check(hipError_t error, const char* what);
// After a kernel launch: a bad launch configuration shows here, not at the next sync.
void CheckLaunch(const char* kernel);

// The stream the core's kernels and GEMMs run on (created on first use, after UseDevice), the
// one the overlapping collectives run on, and ops.h's names for them.
hipStream_t ComputeStream();
hipStream_t CommStream();
hipStream_t StreamOf(Stream stream);

// Device scratch reused across calls, one slot per purpose (not tracked: workspace a real
// framework keeps outside its tensors too, e.g. cuBLAS's). Grows, never shrinks; no device-wide
// wait mid-step when it grows.
// kOpScratch is the first of ops.h's OpScratch slots, kSixteenBit the first of its Scratch16
// slots (OpScratch16).
// kGemmA, kGemmB: Gemm's 16-bit copies of fp32 operands; kGemmSums, kGemmBias: Gemm16Bias's fp32
// sums (without cublasLt) and its bias as 16-bit numbers (cublasLt's epilogue reads the output's
// type); kGemmWorkspace: cublasLt's workspace (fixed size, allocated once).
enum class ScratchSlot {
  kReduction,
  kGemmA,
  kGemmB,
  kGemmSums,
  kGemmBias,
  kGemmWorkspace,
  kOpScratch,
  kSixteenBit = kOpScratch + kOpScratchSlots,
  kCount = kSixteenBit + static_cast<int>(Scratch16::kCount)
};
void* Scratch(ScratchSlot slot, size_t bytes);
// An outgrown slot's old buffer is freed once neither stream has work queued (hipFree waits for
// the whole device, a collective on the communication stream maybe for peers): here, when both
// are idle (Synchronize calls it).
void FreeRetiredScratchWhenIdle();

// TUNEPAR_CORE_PROFILE=1: every kernel, GEMM and device copy is bracketed by events on the compute
// stream, and at exit a table of GPU milliseconds per name goes to stderr (largest first). Off,
// a region costs one branch.
class ProfiledRegion {
 public:
  explicit ProfiledRegion(const char* name);
  ~ProfiledRegion();
  ProfiledRegion(const ProfiledRegion&) = delete;
  ProfiledRegion& operator=(const ProfiledRegion&) = delete;

 private:
  const char* name_;
  hipEvent_t start_ = nullptr;
};

}  // namespace tunepar::core::gpu
