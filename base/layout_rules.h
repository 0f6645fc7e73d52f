// The legality rules of layouts, as named predicates over a layout and what it runs on (the
// world, GPUs per node, the model, the space's options). Each rule is decided at one knob: the
// one, in the enumeration's nesting (KnobRow::visit_rank), after which everything it reads is
// set. The enumeration of a space (search/space.h) checks a rule as soon as its knob is set, and
// CheckLegal asks the same rules in the same order, so they agree by construction.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "base/knobs.h"
#include "base/layout.h"
#include "base/model_shape.h"
#include "base/space_spec.h"

namespace tunepar {

struct LayoutQuery {
  int world = 0;
  int gpus_per_node = 0;
  const ModelShape* model = nullptr;
  const SpaceSpec* space = nullptr;
  bool fp8_peak = false;  // the hardware has an FP8 matrix peak (its profile's peak_tflops_fp8)
};

// In check order.
enum class Constraint {
  kTpWithinNode,            // tp <= GPUs per node and divides it (unless crossing is allowed)
  kTpDividesHeads,          // heads split evenly over tp
  kTpFitsKvHeads,           // tp divides the K/V heads, or they divide tp (each replicated on tp / g ranks)
  kTpDividesFfn,            // the MLP width splits evenly over tp
  kTpPpDivideWorld,         // tp * cp * pp * dp = world
  kCpSplitsSequence,        // the sequence splits into 2 cp equal chunks (the causal load balance)
  kEpNeedsExperts,          // expert parallelism splits experts: a dense model has none
  kEpDividesExperts,        // each ep rank holds experts / ep whole experts
  kEpDividesDpCp,           // the ep group is carved from the dp x cp ranks (Megatron-Core, etp = tp)
  kPpDividesLayers,         // layers split evenly over pipeline stages (without uneven_stages)
  kUnevenNeedsPp,           // uneven stages with one stage are the even split
  kUnevenStagesSplit,       // the uneven rule finds a split (every stage a layer), not the even one
  kBatchDivisible,          // global batch = micro_batch * num_micro_batches * dp
  kInterleaveNeedsPp,       // virtual stages > 1 need pp > 1
  kInterleaveLayers,        // layers split evenly over pp * virtual stages
  kInterleaveMicroBatches,  // interleaving needs num_micro_batches % pp == 0
  kUnevenWithoutInterleave, // uneven stages run without interleaving (virtual_stages 1)
  kFlashNeeds16Bit,         // flash attention kernels exist for fp16/bf16 only
  kCpNeedsFlash,            // context parallelism runs the fused attention kernel on each K/V chunk
  kZeroNeedsDp,             // ZeRO-1 with dp = 1 is the same layout as ZeRO-0
  kSeqParallelNeedsTp,      // sequence parallelism with tp = 1 is the same as without
  kSeqParallelSplitsSequence,  // sequence parallelism splits the sequence evenly over tp
  kDpReplicateNeedsZero,       // hybrid sharding without ZeRO replicates what is replicated anyway
  kDpReplicateDividesDp,       // dp splits into dp_replicate equal shard groups
  kDpReplicateLeavesShards,    // a shard group of one rank shards nothing: that layout is ZeRO-0's
  kFp8NeedsPeak,               // fp8 GEMMs need hardware with an FP8 peak (H100: yes; A100, MI250X: no)
  kProgramRunsCombination,     // the space's [[rules]] (a command config's): combinations the program refuses
};
inline constexpr int kNumConstraints = 27;

struct ConstraintRow {
  Constraint constraint;
  std::string_view id;    // "tp_divides_heads"
  std::string_view rule;  // "tp divides heads"
  Knob decided_at;        // checked once this knob is set (and the derived sizes before it)
  // True when the layout breaks the rule. dp is set once pp is; the micro-batch count once
  // micro_batch is.
  bool (*fails)(const LayoutQuery& query, const Layout& layout);
  // A twin rule: a layout that breaks it runs the same as the one with `decided_at` at its
  // neutral value (its predicate reads the layout only).
  bool twin = false;
};

const std::array<ConstraintRow, kNumConstraints>& ConstraintRows();
std::string_view ConstraintId(Constraint c);  // e.g. "tp_divides_heads"
std::string ConstraintRule(Constraint c);     // e.g. "tp divides heads"

// The layout that runs the same as `layout` once every knob that cannot act there is at its
// neutral value: the twin rules read as physics (ZeRO-1 over one data-parallel rank shards
// nothing, sequence parallelism without tensor parallelism splits nothing, interleaving without
// pipeline stages has nothing to interleave, the fused attention kernel exists for 16-bit storage
// only). A layout they exclude is another layout's twin. `layout.dp` must be set.
Layout CanonicalLayout(Layout layout);

}  // namespace tunepar
