#include "base/layout_rules.h"

#include "base/pipeline_split.h"

namespace tunepar {

namespace {

using C = Constraint;
using L = Layout;
using Q = LayoutQuery;

bool TpOutsideNode(const Q& q, const L& l) {
  const int g = q.gpus_per_node;
  return !(l.tp <= g ? g % l.tp == 0 : q.space->tp_cross_node && l.tp % g == 0);
}

bool InterleaveWithout(const L& l) { return l.virtual_stages > 1; }

// The uneven rule has no split (fewer layers than stages), or its split is the even one (the
// layout with uneven_stages off runs it).
bool UnevenSplitMissing(const Q& q, const L& l) {
  if (!l.uneven_stages || l.pp == 1) return false;
  const StageSplit split = UnevenSplit(*q.model, l.pp);
  return split.layers.empty() || split.Even();
}

// The table, in check order (the order of Constraint).
const std::array<ConstraintRow, kNumConstraints> kRows = {{
    {C::kTpWithinNode, "tp_within_node", "tp fits in one node (divides GPUs per node)", Knob::kTp, TpOutsideNode},
    {C::kTpDividesHeads, "tp_divides_heads", "tp divides heads", Knob::kTp,
     [](const Q& q, const L& l) { return q.model->heads % l.tp != 0; }},
    {C::kTpFitsKvHeads, "tp_fits_kv_heads",
     "tp divides kv heads, or kv heads divide tp", Knob::kTp,
     [](const Q& q, const L& l) {
       const int g = q.model->KvHeads();
       return g % l.tp != 0 && l.tp % g != 0;
     }},
    {C::kTpDividesFfn, "tp_divides_ffn", "tp divides the MLP width", Knob::kTp,
     [](const Q& q, const L& l) { return q.model->MlpWidth() % l.tp != 0; }},
    {C::kTpPpDivideWorld, "tp_pp_divide_world", "tp * cp * pp divides the world size", Knob::kPp,
     [](const Q& q, const L& l) { return q.world % (l.tp * l.cp * l.pp) != 0; }},
    {C::kCpSplitsSequence, "cp_splits_sequence", "the sequence splits into 2 * cp equal chunks", Knob::kCp,
     [](const Q& q, const L& l) { return l.cp > 1 && q.model->seq_len % (2 * l.cp) != 0; }},
    {C::kEpNeedsExperts, "ep_needs_experts", "expert parallelism (ep > 1) needs a model with experts", Knob::kEp,
     [](const Q& q, const L& l) { return l.ep > 1 && q.model->experts == 0; }},
    {C::kEpDividesExperts, "ep_divides_experts", "ep divides the experts", Knob::kEp,
     [](const Q& q, const L& l) { return q.model->experts > 0 && q.model->experts % l.ep != 0; }},
    {C::kEpDividesDpCp, "ep_divides_dp_cp", "ep divides dp * cp (the expert-parallel ranks are data-parallel ones)",
     Knob::kPp, [](const Q& q, const L& l) { return l.ep > 1 && (q.world / (l.tp * l.pp)) % l.ep != 0; }},
    {C::kPpDividesLayers, "pp_divides_layers", "pp divides layers (unless uneven_stages)", Knob::kUnevenStages,
     [](const Q& q, const L& l) { return !l.uneven_stages && q.model->layers % l.pp != 0; }},
    {C::kUnevenNeedsPp, "uneven_needs_pp", "uneven stages need pp > 1", Knob::kUnevenStages,
     [](const Q&, const L& l) { return l.uneven_stages && l.pp == 1; }, true},
    {C::kUnevenStagesSplit, "uneven_stages_split",
     "uneven stages: the first/last-stage rule splits the layers (a layer per stage) other than evenly",
     Knob::kUnevenStages, UnevenSplitMissing},
    {C::kBatchDivisible, "batch_divisible", "micro_batch * dp divides the global batch", Knob::kMicroBatch,
     [](const Q& q, const L& l) { return q.model->global_batch % (static_cast<int64_t>(l.micro_batch) * l.dp) != 0; }},
    {C::kInterleaveNeedsPp, "interleave_needs_pp", "virtual stages > 1 need pp > 1", Knob::kVirtualStages,
     [](const Q&, const L& l) { return InterleaveWithout(l) && l.pp == 1; }, true},
    {C::kInterleaveLayers, "interleave_layers", "pp * virtual stages divides layers", Knob::kVirtualStages,
     [](const Q& q, const L& l) { return InterleaveWithout(l) && q.model->layers % l.ModelChunks() != 0; }},
    {C::kInterleaveMicroBatches, "interleave_micro_batches", "interleaving needs pp | micro-batch count",
     Knob::kVirtualStages, [](const Q&, const L& l) { return InterleaveWithout(l) && l.num_micro_batches % l.pp != 0; }},
    {C::kUnevenWithoutInterleave, "uneven_without_interleave", "uneven stages run without interleaving (virtual stages 1)",
     Knob::kVirtualStages, [](const Q&, const L& l) { return InterleaveWithout(l) && l.uneven_stages; }},
    {C::kFlashNeeds16Bit, "flash_needs_16bit", "flash attention needs fp16 or bf16", Knob::kFlashAttention,
     [](const Q&, const L& l) { return l.flash_attention && l.precision == Precision::kFp32; }, true},
    {C::kCpNeedsFlash, "cp_needs_flash", "context parallelism needs flash attention (per K/V chunk)",
     Knob::kFlashAttention, [](const Q&, const L& l) { return l.cp > 1 && !l.flash_attention; }},
    {C::kZeroNeedsDp, "zero_needs_dp", "ZeRO (any stage above 0) needs dp * cp > 1", Knob::kZero,
     [](const Q&, const L& l) { return l.zero >= 1 && l.ZeroGroup() == 1; }, true},
    {C::kSeqParallelNeedsTp, "seq_parallel_needs_tp", "sequence parallelism needs tp > 1", Knob::kSeqParallel,
     [](const Q&, const L& l) { return l.seq_parallel && l.tp == 1; }, true},
    {C::kSeqParallelSplitsSequence, "seq_parallel_splits_sequence", "sequence parallelism splits the sequence evenly over tp",
     Knob::kSeqParallel,
     [](const Q& q, const L& l) { return l.seq_parallel && q.model->seq_len % (l.tp * l.cp) != 0; }},
    {C::kDpReplicateNeedsZero, "dp_replicate_needs_zero", "hybrid sharding (dp_replicate > 1) needs ZeRO 1-3",
     Knob::kDpReplicate, [](const Q&, const L& l) { return l.dp_replicate > 1 && l.zero == 0; }, true},
    {C::kDpReplicateDividesDp, "dp_replicate_divides_dp", "dp_replicate divides dp", Knob::kDpReplicate,
     [](const Q&, const L& l) { return l.dp % l.dp_replicate != 0; }},
    {C::kDpReplicateLeavesShards, "dp_replicate_leaves_shards", "hybrid sharding leaves shard groups of 2 or more ranks",
     Knob::kDpReplicate, [](const Q&, const L& l) { return l.dp_replicate > 1 && l.ZeroGroup() < 2; }},
    {C::kFp8NeedsPeak, "fp8_needs_peak", "fp8 needs hardware with an FP8 peak (peak_tflops_fp8)", Knob::kPrecision,
     [](const Q& q, const L& l) { return l.precision == Precision::kFp8 && !q.fp8_peak; }},
    // A rule may read any knob: decided at the one set last (the innermost of the enumeration).
    {C::kProgramRunsCombination, "program_runs_combination",
     "the program runs the combination (its command config's or space's [[rules]])", Knob::kDpReplicate,
     [](const Q& q, const L& l) { return q.space != nullptr && BrokenRule(q.space->rules, l) != nullptr; }},
}};

}  // namespace

const std::array<ConstraintRow, kNumConstraints>& ConstraintRows() { return kRows; }

std::string_view ConstraintId(Constraint c) { return kRows[static_cast<int>(c)].id; }

std::string ConstraintRule(Constraint c) { return std::string(kRows[static_cast<int>(c)].rule); }

Layout CanonicalLayout(Layout l) {
  const LayoutQuery none;
  for (const ConstraintRow& row : kRows) {
    if (row.twin && row.fails(none, l)) l = WithKnob(std::move(l), row.decided_at, NeutralKnobCode(row.decided_at));
  }
  return l;
}

}  // namespace tunepar
