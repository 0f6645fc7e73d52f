// What tunepar-core runs of a layout: tensor, pipeline (1F1B) and data parallelism, ZeRO-1,
// micro-batches, precision, recomputation and (CPU and CUDA builds) fused attention, sequence
// parallelism, ZeRO-2, ZeRO-3 (FSDP), hybrid sharding (dp_replicate) and uneven pipeline stages
// (base/pipeline_split.h); not interleaved stages. The one statement of it, per build: the core's option parser checks
// layouts against its own build's, and the local and slurm backends restrict their studies to
// the build they launch.
#pragma once

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "base/knob_support.h"
#include "base/model_shape.h"
#include "base/status.h"

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

// fa1 needs a fused attention kernel (flash_attention.h): the CPU build has its twin, the CUDA
// build its kernels (32-lane warps). The HIP build keeps fa0 until a kernel is written and
// measured for AMD's 64-wide waves (flash_attention_gpu.cc compiles none under hipcc). A build
// that gains fa1 gives its studies new ids, as a new capability should.
inline std::vector<int> FlashAttentionValues(CoreBuild build) {
  if (build == CoreBuild::kHip) return {0};
  return {0, 1};
}

// Sequence parallelism (block.h) is plain device code around the TP collectives: the CPU build
// runs it, and the CUDA build (its all-gather and reduce-scatter are NCCL's, as ZeRO-1's). The
// HIP build keeps sp0 until it is measured on an AMD GPU (nothing HIP-specific links here).
// A build that gains sp1 gives its studies new ids, as a new capability should.
inline std::vector<int> SequenceParallelValues(CoreBuild build) {
  if (build == CoreBuild::kHip) return {0};
  return {0, 1};
}

// ZeRO-2 and 3 and hybrid sharding (sharding.h) are device code around the shard group's
// reduce-scatter and all-gather (NCCL's in the CUDA build, as ZeRO-1's; ZeRO-3's prefetched
// gathers on the communication stream): the CPU and CUDA builds run them. The HIP build keeps
// zero 0-1 and dp_replicate 1 until they are measured on an AMD GPU. A build that gains them
// gives its studies new ids, as a new capability should.
inline std::vector<int> ZeroValues(CoreBuild build) {
  if (build == CoreBuild::kHip) return {0, 1};
  return {0, 1, 2, 3};
}
inline std::vector<int> DpReplicateValues(CoreBuild build) {
  if (build == CoreBuild::kHip) return {1};
  return {};  // every value
}

// Context parallelism (context_parallel.h): ring attention on the fused kernel's blocks. The CPU
// and CUDA builds run every cp (CUDA: flash_attention_gpu.cc's block kernels, the ring over NCCL
// or MPI; compiled, not yet measured on a GPU). The HIP build compiles no flash kernel (64-wide
// waves), so it keeps cp 1. A build that gains cp gives its studies new ids, as a new capability
// should.
inline std::vector<int> ContextParallelValues(CoreBuild build) {
  if (build == CoreBuild::kHip) return {1};
  return {};  // every value
}

// vpp1, and sp0 / fa0 / zero0-1 / dpr1 unless the build runs them: the knobs it does not
// implement, fixed off (a knob whose every value runs has no entry, as KnobSupport says: "vpp1"
// for the CPU and CUDA builds, "zero0 zero1 sp0 vpp1 fa0 dpr1 cp1" for the HIP
// build).
inline KnobSupport SupportedKnobs(CoreBuild build) {
  KnobSupport support;
  if (const std::vector<int> zero = ZeroValues(build); zero.size() < 4) support.Of(Knob::kZero) = zero;
  if (const std::vector<int> dpr = DpReplicateValues(build); !dpr.empty()) support.Of(Knob::kDpReplicate) = dpr;
  if (const std::vector<int> sp = SequenceParallelValues(build); sp.size() == 1) support.Of(Knob::kSeqParallel) = sp;
  support.Of(Knob::kVirtualStages) = {1};
  if (const std::vector<int> fa = FlashAttentionValues(build); fa.size() == 1) support.Of(Knob::kFlashAttention) = fa;
  if (const std::vector<int> cp = ContextParallelValues(build); !cp.empty()) support.Of(Knob::kCp) = cp;
  return support;
}

// The models it trains: language models (a ViT's patch input is not built) with learned, rotary
// or no positions (ALiBi is not implemented). The local and slurm backends refuse another model
// when a study starts; the core's option parser refuses it too.
inline Status SupportsModel(const ModelShape& m) {
  if (!m.HasVocabulary()) {
    return ConfigError(fmt::format("tunepar-core trains language models; model {} has no vocabulary (a ViT): "
                                   "use the model or command backend", m.name));
  }
  if (m.positions == Positions::kAlibi)
    return ConfigError(fmt::format("model {}: ALiBi positions are not implemented in tunepar-core", m.name));
  if (m.experts > 0) {
    return ConfigError(fmt::format("model {} has {} experts: tunepar-core has no MoE layer yet (issue 36); use the "
                                   "model or command backend",
                                   m.name, m.experts));
  }
  return Status::Ok();
}

// The knobs of `build` for `model`: with grouped-query attention also the tp sizes it splits the
// K/V heads over (tp divides them: K/V heads replicated over tp > kv_heads are not implemented);
// with experts, ep 1 (no MoE layer: SupportsModel refuses such a model before a trial runs). A
// dense multi-head model adds nothing, so its studies keep their ids (a dense model's ep is 1 anyway).
inline KnobSupport SupportedKnobs(CoreBuild build, const ModelShape& model) {
  KnobSupport support = SupportedKnobs(build);
  if (model.experts > 0) support.Of(Knob::kEp) = {1};
  if (model.KvHeads() == model.heads) return support;
  for (int tp = 1; tp <= model.KvHeads(); ++tp)
    if (model.KvHeads() % tp == 0) support.Of(Knob::kTp).push_back(tp);
  return support;
}

// ... and of a space offering `precisions`: the core has no FP8 GEMMs, so fp8 is left out where
// the space offers it (a space without it keeps its support, and its studies their ids).
inline KnobSupport SupportedKnobs(CoreBuild build, const ModelShape& model, const std::vector<int>& precisions) {
  KnobSupport support = SupportedKnobs(build, model);
  if (std::find(precisions.begin(), precisions.end(), static_cast<int>(Precision::kFp8)) == precisions.end())
    return support;
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16})
    support.Of(Knob::kPrecision).push_back(static_cast<int>(p));
  return support;
}

}  // namespace tunepar::core
