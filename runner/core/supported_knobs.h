// What tunepar-core runs of a layout: tensor, pipeline (1F1B) and data parallelism, ZeRO-1,
// micro-batches, precision and recomputation; neither sequence parallelism, interleaved stages
// nor (yet) flash attention. The one statement of it, per build: the core's option parser checks
// layouts against its own build's, and the local and slurm backends restrict their studies to
// the build they launch.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "base/knob_support.h"

namespace tunepar::core {

// The builds of tunepar-core: one program (same flags, same result.json) with another ops
// backend (ops.h: BackendName() is "cpu", "cuda" or "hip").
enum class CoreBuild { kCpu, kCuda, kHip };

// The executable of each build (runner/core/CMakeLists.txt names the targets alike).
inline std::string_view BinaryName(CoreBuild build) {
  switch (build) {
    case CoreBuild::kCpu: return "tunepar-core";
    case CoreBuild::kCuda: return "tunepar-core-cuda";
    case CoreBuild::kHip: return "tunepar-core-hip";
  }
  return "tunepar-core";
}

// The build whose ops backend is `backend_name` (ops.h BackendName()); none for another name.
inline std::optional<CoreBuild> CoreBuildNamed(std::string_view backend_name) {
  if (backend_name == "cpu") return CoreBuild::kCpu;
  if (backend_name == "cuda") return CoreBuild::kCuda;
  if (backend_name == "hip") return CoreBuild::kHip;
  return std::nullopt;
}

// fa1 needs a fused attention kernel, which no build has yet: a GPU build that gains one
// returns {0, 1} here (its studies then get new ids, as a new capability should).
inline std::vector<int> FlashAttentionValues(CoreBuild /*build*/) { return {0}; }

// sp0 vpp1, and fa0 unless the build has a fused attention: the knobs it does not implement, fixed off.
inline KnobSupport SupportedKnobs(CoreBuild build) {
  KnobSupport support;
  support.Of(Knob::kSeqParallel) = {0};
  support.Of(Knob::kVirtualStages) = {1};
  support.Of(Knob::kFlashAttention) = FlashAttentionValues(build);
  return support;
}

}  // namespace tunepar::core
