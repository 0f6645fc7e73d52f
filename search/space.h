// The legal-layout space: every layout of a search space that can run a model on a world size.
//
// Candidates are the Cartesian product of the knob values (tp and pp as listed or every divisor
// of the world; dp and the micro-batch count follow from them). Each candidate is checked
// against the constraints in the order below and counted against the FIRST one it fails, so
// the exclusion counts add up to candidates - legal.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/layout.h"
#include "base/model_shape.h"
#include "base/space_spec.h"

namespace tunepar::search {

enum class Constraint {
  kTpWithinNode,            // tp <= GPUs per node and divides it (unless crossing is allowed)
  kTpDividesHeads,          // heads split evenly over tp
  kTpDividesFfn,            // the MLP width splits evenly over tp
  kTpPpDivideWorld,         // tp * pp * dp = world
  kPpDividesLayers,         // layers split evenly over pipeline stages
  kBatchDivisible,          // global batch = micro_batch * num_micro_batches * dp
  kInterleaveNeedsPp,       // virtual stages > 1 need pp > 1
  kInterleaveLayers,        // layers split evenly over pp * virtual stages
  kInterleaveMicroBatches,  // interleaving needs num_micro_batches % pp == 0
  kFlashNeeds16Bit,         // flash attention kernels exist for fp16/bf16 only
  kZeroNeedsDp,             // ZeRO-1 with dp = 1 is the same layout as ZeRO-0
  kSeqParallelNeedsTp,      // sequence parallelism with tp = 1 is the same as without
};
inline constexpr int kNumConstraints = 12;

std::string_view ConstraintId(Constraint c);  // e.g. "tp_divides_heads"
std::string ConstraintRule(Constraint c);     // e.g. "tp divides heads"

struct SpaceQuery {
  int world = 0;
  int gpus_per_node = 0;
  const ModelShape* model = nullptr;
  const SpaceSpec* space = nullptr;
};

struct SpaceEnumeration {
  std::vector<Layout> legal;  // in enumeration order (tp, pp, mbs, vpp, precision, flash, ...)
  int64_t candidates = 0;
  std::array<int64_t, kNumConstraints> excluded{};  // indexed by Constraint

  int64_t Excluded(Constraint c) const { return excluded[static_cast<int>(c)]; }
};

// Fails only on a malformed query (world or gpus_per_node < 1); an empty legal set is a
// valid result that ExplainEmpty() describes.
Result<SpaceEnumeration> EnumerateSpace(const SpaceQuery& query);

// Ok when `layout` is one of the legal layouts EnumerateSpace lists for the query; else one line
// naming the first constraint it fails (as ConstraintRule says it), or the knob value the space
// does not list.
Status CheckLegal(const SpaceQuery& query, const Layout& layout);

// The first knob of `layout` whose value the space does not list, e.g. "micro_batch 32" ("" when
// every value is among the space's).
std::string ValueOutsideSpace(const SpaceQuery& query, const Layout& layout);

// The layout that runs the same as `layout` once every knob that cannot act there is at its
// neutral value: ZeRO-1 over one data-parallel rank shards nothing (zero 0), sequence
// parallelism without tensor parallelism splits nothing (off), interleaving without pipeline
// stages has nothing to interleave (1 virtual stage), and the fused attention kernel, which
// exists for 16-bit storage only, leaves an fp32 layout on the unfused path (off). These are the
// constraints kZeroNeedsDp, kSeqParallelNeedsTp, kInterleaveNeedsPp and kFlashNeeds16Bit read
// as physics: a layout they exclude is another layout's twin. `layout.dp` must be set.
Layout CanonicalLayout(Layout layout);

// Which constraints emptied the set, e.g. "global batch 3072 is not divisible by
// micro_batch * dp for any candidate (excluded 64 of 480; before it ...)".
std::string ExplainEmpty(const SpaceQuery& query, const SpaceEnumeration& enumeration);

}  // namespace tunepar::search
