#include "search/space.h"

#include <algorithm>
#include <optional>

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

// The constraints, each decided at the outermost knob that settles it (nullopt: passed). The
// enumeration and CheckLegal both ask these, so they agree by construction.
std::optional<Constraint> TpConstraint(const SpaceQuery& q, int tp) {
  const int g = q.gpus_per_node;
  const bool fits_node = tp <= g ? g % tp == 0 : q.space->tp_cross_node && tp % g == 0;
  if (!fits_node) return Constraint::kTpWithinNode;
  if (q.model->heads % tp != 0) return Constraint::kTpDividesHeads;
  if (q.model->MlpWidth() % tp != 0) return Constraint::kTpDividesFfn;
  return std::nullopt;
}

std::optional<Constraint> PpConstraint(const SpaceQuery& q, int tp, int pp) {
  if (q.world % (tp * pp) != 0) return Constraint::kTpPpDivideWorld;
  if (q.model->layers % pp != 0) return Constraint::kPpDividesLayers;
  return std::nullopt;
}

std::optional<Constraint> BatchConstraint(const SpaceQuery& q, int dp, int mbs) {
  if (q.model->global_batch % (static_cast<int64_t>(mbs) * dp) != 0) return Constraint::kBatchDivisible;
  return std::nullopt;
}

// `l` has tp, pp, dp, micro_batch and num_micro_batches set.
std::optional<Constraint> InterleaveConstraint(const SpaceQuery& q, const Layout& l, int vpp) {
  if (vpp == 1) return std::nullopt;
  if (l.pp == 1) return Constraint::kInterleaveNeedsPp;
  if (q.model->layers % (l.pp * vpp) != 0) return Constraint::kInterleaveLayers;
  if (l.num_micro_batches % l.pp != 0) return Constraint::kInterleaveMicroBatches;
  return std::nullopt;
}

std::optional<Constraint> FlashConstraint(Precision precision, bool flash) {
  if (flash && precision == Precision::kFp32) return Constraint::kFlashNeeds16Bit;
  return std::nullopt;
}

std::optional<Constraint> ZeroConstraint(int dp, int zero) {
  if (zero == 1 && dp == 1) return Constraint::kZeroNeedsDp;
  return std::nullopt;
}

std::optional<Constraint> SeqParallelConstraint(int tp, bool sp) {
  if (sp && tp == 1) return Constraint::kSeqParallelNeedsTp;
  return std::nullopt;
}

}  // namespace

Layout CanonicalLayout(Layout l) {
  if (ZeroConstraint(l.dp, l.zero)) l.zero = 0;
  if (SeqParallelConstraint(l.tp, l.seq_parallel)) l.seq_parallel = false;
  if (l.pp == 1) l.virtual_stages = 1;
  if (FlashConstraint(l.precision, l.flash_attention)) l.flash_attention = false;
  return l;
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
      if (const std::optional<Constraint> failed = TpConstraint(q_, tp)) {
        Exclude(*failed, per_tp);
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

  void VisitPp(int tp, int pp) {
    if (const std::optional<Constraint> failed = PpConstraint(q_, tp, pp)) {
      Exclude(*failed, PerPp());
      return;
    }
    const int dp = q_.world / (tp * pp);
    for (int mbs : s_.micro_batch) {
      if (const std::optional<Constraint> failed = BatchConstraint(q_, dp, mbs)) {
        Exclude(*failed, PerMbs());
        continue;
      }
      Layout base;
      base.tp = tp;
      base.pp = pp;
      base.dp = dp;
      base.micro_batch = mbs;
      base.num_micro_batches = static_cast<int>(m_.global_batch / (static_cast<int64_t>(mbs) * dp));
      for (int vpp : s_.virtual_stages) VisitVpp(base, vpp);
    }
  }

  void VisitVpp(Layout l, int vpp) {
    if (const std::optional<Constraint> failed = InterleaveConstraint(q_, l, vpp)) {
      Exclude(*failed, PerVpp());
      return;
    }
    l.virtual_stages = vpp;
    const int64_t per_flash =
        static_cast<int64_t>(s_.zero.size()) * s_.recompute.size() * s_.seq_parallel.size();
    for (Precision precision : s_.precision) {
      l.precision = precision;
      for (bool flash : s_.flash_attention) {
        if (const std::optional<Constraint> failed = FlashConstraint(precision, flash)) {
          Exclude(*failed, per_flash);
          continue;
        }
        l.flash_attention = flash;
        VisitZero(l);
      }
    }
  }

  void VisitZero(Layout l) {
    const int64_t per_zero = static_cast<int64_t>(s_.recompute.size()) * s_.seq_parallel.size();
    for (int zero : s_.zero) {
      if (const std::optional<Constraint> failed = ZeroConstraint(l.dp, zero)) {
        Exclude(*failed, per_zero);
        continue;
      }
      l.zero = zero;
      for (Recompute recompute : s_.recompute) {
        l.recompute = recompute;
        for (bool sp : s_.seq_parallel) {
          if (const std::optional<Constraint> failed = SeqParallelConstraint(l.tp, sp)) {
            Exclude(*failed, 1);
            continue;
          }
          l.seq_parallel = sp;
          out_->legal.push_back(l);
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

template <typename T>
bool Among(const std::vector<T>& values, T value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// Why `l` is not legal, in the enumeration's order ("" when it is): the constraint it fails,
// or that its derived sizes (dp, the micro-batch count) do not match the world and the batch.
std::string WhyIllegal(const SpaceQuery& q, const Layout& l) {
  auto failing = [](Constraint c) { return fmt::format("it fails '{}' ({})", ConstraintRule(c), ConstraintId(c)); };
  if (l.tp < 1 || l.pp < 1 || l.dp < 1 || l.micro_batch < 1 || l.num_micro_batches < 1 || l.virtual_stages < 1)
    return "its sizes must be positive";
  if (auto failed = TpConstraint(q, l.tp)) return failing(*failed);
  if (auto failed = PpConstraint(q, l.tp, l.pp)) return failing(*failed);
  if (l.World() != q.world) return fmt::format("tp x pp x dp = {} is not the world {}", l.World(), q.world);
  if (auto failed = BatchConstraint(q, l.dp, l.micro_batch)) return failing(*failed);
  if (l.GlobalBatch() != q.model->global_batch) {
    return fmt::format("micro_batch x micro-batches x dp = {} is not the global batch {}", l.GlobalBatch(),
                       q.model->global_batch);
  }
  if (auto failed = InterleaveConstraint(q, l, l.virtual_stages)) return failing(*failed);
  if (auto failed = FlashConstraint(l.precision, l.flash_attention)) return failing(*failed);
  if (auto failed = ZeroConstraint(l.dp, l.zero)) return failing(*failed);
  if (auto failed = SeqParallelConstraint(l.tp, l.seq_parallel)) return failing(*failed);
  return "";
}

}  // namespace

std::string ValueOutsideSpace(const SpaceQuery& q, const Layout& l) {
  const SpaceSpec& s = *q.space;
  if (!Among(s.tp.For(q.world), l.tp)) return fmt::format("tp {}", l.tp);
  if (!Among(s.pp.For(q.world), l.pp)) return fmt::format("pp {}", l.pp);
  if (!Among(s.micro_batch, l.micro_batch)) return fmt::format("micro_batch {}", l.micro_batch);
  if (!Among(s.virtual_stages, l.virtual_stages)) return fmt::format("virtual_stages {}", l.virtual_stages);
  if (!Among(s.precision, l.precision)) return fmt::format("precision {}", ToString(l.precision));
  if (!Among(s.flash_attention, l.flash_attention))
    return fmt::format("flash_attention {}", l.flash_attention ? "on" : "off");
  if (!Among(s.zero, l.zero)) return fmt::format("zero {}", l.zero);
  if (!Among(s.recompute, l.recompute)) return fmt::format("recompute {}", ToString(l.recompute));
  if (!Among(s.seq_parallel, l.seq_parallel))
    return fmt::format("seq_parallel {}", l.seq_parallel ? "on" : "off");
  return "";
}

Status CheckLegal(const SpaceQuery& query, const Layout& layout) {
  const std::string outside = ValueOutsideSpace(query, layout);
  if (!outside.empty()) {
    return InvalidArgument(fmt::format("layout {} is not in space {}: {} is not among its values", LayoutKey(layout),
                                       query.space->name, outside));
  }
  const std::string why = WhyIllegal(query, layout);
  if (why.empty()) return Status::Ok();
  return InvalidArgument(fmt::format("layout {} is not legal for model {} on world {}: {}", LayoutKey(layout),
                                     query.model->name, query.world, why));
}

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
