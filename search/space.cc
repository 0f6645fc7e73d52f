#include "search/space.h"

#include <fmt/format.h>

namespace tunepar::search {

std::string_view ConstraintId(Constraint c) {
  switch (c) {
    case Constraint::kTpWithinNode: return "tp_within_node";
    case Constraint::kTpDividesHeads: return "tp_divides_heads";
    case Constraint::kTpDividesFfn: return "tp_divides_ffn";
    case Constraint::kTpPpDivideWorld: return "tp_pp_divide_world";
    case Constraint::kPpDividesLayers: return "pp_divides_layers";
    case Constraint::kBatchDivisible: return "batch_divisible";
    case Constraint::kInterleaveNeedsPp: return "interleave_needs_pp";
    case Constraint::kInterleaveLayers: return "interleave_layers";
    case Constraint::kInterleaveMicroBatches: return "interleave_micro_batches";
    case Constraint::kFlashNeeds16Bit: return "flash_needs_16bit";
    case Constraint::kZeroNeedsDp: return "zero_needs_dp";
    case Constraint::kSeqParallelNeedsTp: return "seq_parallel_needs_tp";
  }
  return "?";
}

std::string ConstraintRule(Constraint c) {
  switch (c) {
    case Constraint::kTpWithinNode: return "tp fits in one node (divides GPUs per node)";
    case Constraint::kTpDividesHeads: return "tp divides heads";
    case Constraint::kTpDividesFfn: return "tp divides the MLP width";
    case Constraint::kTpPpDivideWorld: return "tp * pp divides the world size";
    case Constraint::kPpDividesLayers: return "pp divides layers";
    case Constraint::kBatchDivisible: return "micro_batch * dp divides the global batch";
    case Constraint::kInterleaveNeedsPp: return "virtual stages > 1 need pp > 1";
    case Constraint::kInterleaveLayers: return "pp * virtual stages divides layers";
    case Constraint::kInterleaveMicroBatches: return "interleaving needs pp | micro-batch count";
    case Constraint::kFlashNeeds16Bit: return "flash attention needs fp16 or bf16";
    case Constraint::kZeroNeedsDp: return "ZeRO-1 needs dp > 1";
    case Constraint::kSeqParallelNeedsTp: return "sequence parallelism needs tp > 1";
  }
  return "?";
}

namespace {

// Nested loops over the knobs, outermost first; a constraint is checked at the first level
// where it can be decided, and a failure there excludes every combination of the inner knobs
// at once (so counting stays exact without visiting them).
class Enumerator {
 public:
  Enumerator(const SpaceQuery& q, SpaceEnumeration* out)
      : q_(q),
        m_(*q.model),
        s_(*q.space),
        out_(out),
        tp_values_(s_.tp.For(q.world)),
        pp_values_(s_.pp.For(q.world)) {}

  void Run() {
    const int64_t per_tp = static_cast<int64_t>(pp_values_.size()) * PerPp();
    out_->candidates = static_cast<int64_t>(tp_values_.size()) * per_tp;
    for (int tp : tp_values_) {
      if (!TpFitsNode(tp)) {
        Exclude(Constraint::kTpWithinNode, per_tp);
        continue;
      }
      if (m_.heads % tp != 0) {
        Exclude(Constraint::kTpDividesHeads, per_tp);
        continue;
      }
      if (m_.ffn_hidden % tp != 0) {
        Exclude(Constraint::kTpDividesFfn, per_tp);
        continue;
      }
      for (int pp : pp_values_) VisitPp(tp, pp);
    }
  }

 private:
  int64_t PerVpp() const {
    return static_cast<int64_t>(s_.precision.size()) * s_.flash_attention.size() * s_.zero.size() *
           s_.recompute.size() * s_.seq_parallel.size();
  }
  int64_t PerMbs() const { return static_cast<int64_t>(s_.virtual_stages.size()) * PerVpp(); }
  int64_t PerPp() const { return static_cast<int64_t>(s_.micro_batch.size()) * PerMbs(); }

  void Exclude(Constraint c, int64_t n) { out_->excluded[static_cast<int>(c)] += n; }

  bool TpFitsNode(int tp) const {
    const int g = q_.gpus_per_node;
    if (tp <= g) return g % tp == 0;
    return s_.tp_cross_node && tp % g == 0;
  }

  void VisitPp(int tp, int pp) {
    if (q_.world % (tp * pp) != 0) {
      Exclude(Constraint::kTpPpDivideWorld, PerPp());
      return;
    }
    if (m_.layers % pp != 0) {
      Exclude(Constraint::kPpDividesLayers, PerPp());
      return;
    }
    const int dp = q_.world / (tp * pp);
    for (int mbs : s_.micro_batch) {
      const int64_t per_step = static_cast<int64_t>(mbs) * dp;
      if (m_.global_batch % per_step != 0) {
        Exclude(Constraint::kBatchDivisible, PerMbs());
        continue;
      }
      Layout base;
      base.tp = tp;
      base.pp = pp;
      base.dp = dp;
      base.micro_batch = mbs;
      base.num_micro_batches = static_cast<int>(m_.global_batch / per_step);
      for (int vpp : s_.virtual_stages) VisitVpp(base, vpp);
    }
  }

  void VisitVpp(Layout l, int vpp) {
    if (vpp > 1) {
      if (l.pp == 1) {
        Exclude(Constraint::kInterleaveNeedsPp, PerVpp());
        return;
      }
      if (m_.layers % (l.pp * vpp) != 0) {
        Exclude(Constraint::kInterleaveLayers, PerVpp());
        return;
      }
      if (l.num_micro_batches % l.pp != 0) {
        Exclude(Constraint::kInterleaveMicroBatches, PerVpp());
        return;
      }
    }
    l.virtual_stages = vpp;
    const int64_t per_flash =
        static_cast<int64_t>(s_.zero.size()) * s_.recompute.size() * s_.seq_parallel.size();
    const int64_t per_zero = static_cast<int64_t>(s_.recompute.size()) * s_.seq_parallel.size();
    for (Precision precision : s_.precision) {
      l.precision = precision;
      for (bool flash : s_.flash_attention) {
        if (flash && precision == Precision::kFp32) {
          Exclude(Constraint::kFlashNeeds16Bit, per_flash);
          continue;
        }
        l.flash_attention = flash;
        for (int zero : s_.zero) {
          if (zero == 1 && l.dp == 1) {
            Exclude(Constraint::kZeroNeedsDp, per_zero);
            continue;
          }
          l.zero = zero;
          for (Recompute recompute : s_.recompute) {
            l.recompute = recompute;
            for (bool sp : s_.seq_parallel) {
              if (sp && l.tp == 1) {
                Exclude(Constraint::kSeqParallelNeedsTp, 1);
                continue;
              }
              l.seq_parallel = sp;
              out_->legal.push_back(l);
            }
          }
        }
      }
    }
  }

  const SpaceQuery& q_;
  const ModelShape& m_;
  const SpaceSpec& s_;
  SpaceEnumeration* out_;
  std::vector<int> tp_values_;
  std::vector<int> pp_values_;
};

}  // namespace

Result<SpaceEnumeration> EnumerateSpace(const SpaceQuery& query) {
  if (query.world < 1) return InvalidArgument(fmt::format("world size must be >= 1, got {}", query.world));
  if (query.gpus_per_node < 1)
    return InvalidArgument(fmt::format("GPUs per node must be >= 1, got {}", query.gpus_per_node));
  if (query.model == nullptr || query.space == nullptr)
    return InternalError("space query without model or space");
  SpaceEnumeration out;
  Enumerator(query, &out).Run();
  return out;
}

std::string ExplainEmpty(const SpaceQuery& query, const SpaceEnumeration& e) {
  // The constraint that removed the last survivors is the last one (in check order) with a
  // non-zero count: everything that passed the earlier checks failed there or later.
  int last = -1;
  for (int c = 0; c < kNumConstraints; ++c) {
    if (e.excluded[c] > 0) last = c;
  }
  if (last < 0) return fmt::format("the space has no candidates for world {}", query.world);
  std::string detail;
  for (int c = 0; c < kNumConstraints; ++c) {
    if (e.excluded[c] == 0) continue;
    detail += fmt::format("{}{} {}", detail.empty() ? "" : ", ", ConstraintId(static_cast<Constraint>(c)),
                          e.excluded[c]);
  }
  return fmt::format(
      "no legal layout for world {} with model {} and space {}: the last candidates failed '{}' "
      "(excluded per constraint: {} of {} candidates)",
      query.world, query.model->name, query.space->name, ConstraintRule(static_cast<Constraint>(last)),
      detail, e.candidates);
}

}  // namespace tunepar::search
