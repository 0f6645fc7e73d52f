#include "search/space.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tunepar::search {

namespace {

// The rules decided at `knob`, in check order.
std::vector<const ConstraintRow*> RulesAt(Knob knob) {
  std::vector<const ConstraintRow*> rules;
  for (const ConstraintRow& row : ConstraintRows()) {
    if (row.decided_at == knob) rules.push_back(&row);
  }
  return rules;
}

// The model's experts and sequence, which a space that omits ep or cp offers candidates by.
ModelExtent Extent(const SpaceQuery& q) {
  return q.model != nullptr ? ModelExtent{q.model->experts, q.model->seq_len} : ModelExtent{};
}

const ConstraintRow* FirstFailed(const std::vector<const ConstraintRow*>& rules, const SpaceQuery& q, const Layout& l) {
  for (const ConstraintRow* rule : rules) {
    if (rule->fails(q, l)) return rule;
  }
  return nullptr;
}

// The sizes that follow from the knobs once `knob` is set and its rules passed: dp from tp, cp and
// pp, the micro-batch count from micro_batch and dp.
void DeriveSizes(const SpaceQuery& q, Knob knob, Layout* l) {
  if (knob == Knob::kPp) l->dp = q.world / (l->tp * l->cp * l->pp);
  if (knob == Knob::kMicroBatch)
    l->num_micro_batches = static_cast<int>(q.model->global_batch / (static_cast<int64_t>(l->micro_batch) * l->dp));
}

// One knob's level of the nested enumeration.
struct Level {
  Knob knob;
  std::vector<int> codes;                    // the space's candidates
  std::vector<const ConstraintRow*> rules;   // decided here
  int64_t inner = 1;                         // combinations of the knobs nested inside
};

// Nested loops over the knobs, outermost first; a constraint is checked at the first level
// where it can be decided, and a failure there excludes every combination of the inner knobs
// at once (so counting stays exact without visiting them).
class Enumerator {
 public:
  Enumerator(const SpaceQuery& q, SpaceEnumeration* out) : q_(q), out_(out) {
    for (Knob k : KnobsInVisitOrder()) levels_.push_back({k, q.space->Values(k, q.world, Extent(q)), RulesAt(k)});
    for (int i = static_cast<int>(levels_.size()) - 2; i >= 0; --i)
      levels_[i].inner = levels_[i + 1].inner * static_cast<int64_t>(levels_[i + 1].codes.size());
  }

  void Run() {
    out_->candidates = levels_.empty() ? 0 : levels_[0].inner * static_cast<int64_t>(levels_[0].codes.size());
    Visit(0, Layout{});
  }

 private:
  void Visit(size_t depth, const Layout& l) {
    if (depth == levels_.size()) {
      out_->legal.push_back(l);
      return;
    }
    const Level& level = levels_[depth];
    for (int code : level.codes) {
      Layout next = WithKnob(l, level.knob, code);
      if (const ConstraintRow* failed = FirstFailed(level.rules, q_, next)) {
        out_->excluded[static_cast<int>(failed->constraint)] += level.inner;
        continue;
      }
      DeriveSizes(q_, level.knob, &next);
      Visit(depth + 1, next);
    }
  }

  const SpaceQuery& q_;
  SpaceEnumeration* out_;
  std::vector<Level> levels_;
};

bool Among(const std::vector<int>& values, int value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// Why `l` is not legal, in the enumeration's order ("" when it is): the constraint it fails,
// or that its derived sizes (dp, the micro-batch count) do not match the world and the batch.
std::string WhyIllegal(const SpaceQuery& q, const Layout& l) {
  auto failing = [&](Constraint c) {
    const KnobRule* rule = c == Constraint::kProgramRunsCombination ? BrokenRule(q.space->rules, l) : nullptr;
    const std::string which = rule == nullptr ? "" : fmt::format(": {} ({})", rule->Text(), rule->why);
    return fmt::format("it fails '{}' ({}){}", ConstraintRule(c), ConstraintId(c), which);
  };
  bool positive = l.dp >= 1 && l.num_micro_batches >= 1;
  for (Knob k : Knobs()) positive = positive && (RowOf(k).kind != KnobKind::kSize || KnobCode(k, l) >= 1);
  if (!positive) return "its sizes must be positive";
  for (Knob k : KnobsInVisitOrder()) {
    if (const ConstraintRow* failed = FirstFailed(RulesAt(k), q, l)) return failing(failed->constraint);
    if (k == Knob::kPp && l.World() != q.world)
      return fmt::format("tp x pp x dp = {} is not the world {}", l.World(), q.world);
    if (k == Knob::kMicroBatch && l.GlobalBatch() != q.model->global_batch) {
      return fmt::format("micro_batch x micro-batches x dp = {} is not the global batch {}", l.GlobalBatch(),
                         q.model->global_batch);
    }
  }
  return "";
}

// The space's rules some of its candidates could break (every `when` knob has a listed value
// among the space's, some `then` knob a value outside), as "zero 3 needs pp 1 (why)"; "; "-joined.
std::string RulesInPlay(const SpaceQuery& q) {
  auto any_value = [&](Knob k, auto&& pred) {
    const std::vector<int> values = q.space->Values(k, q.world, Extent(q));
    return std::any_of(values.begin(), values.end(), pred);
  };
  std::vector<std::string> rules;
  for (const KnobRule& rule : q.space->rules) {
    const bool applies = std::all_of(rule.when.begin(), rule.when.end(), [&](const auto& side) {
      return any_value(side.first, [&](int v) { return Among(side.second, v); });
    });
    const bool excludes = std::any_of(rule.then.begin(), rule.then.end(), [&](const auto& side) {
      return any_value(side.first, [&](int v) { return !Among(side.second, v); });
    });
    if (applies && excludes) rules.push_back(fmt::format("{} ({})", rule.Text(), rule.why));
  }
  return fmt::format("{}", fmt::join(rules, "; "));
}

}  // namespace

std::string ValueOutsideSpace(const SpaceQuery& q, const Layout& l) {
  for (Knob k : KnobsInVisitOrder()) {
    if (!Among(q.space->Values(k, q.world, Extent(q)), KnobCode(k, l))) return fmt::format("{} {}", KnobName(k), KnobValue(k, l));
  }
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
  const Constraint failed = static_cast<Constraint>(last);
  const std::string rules = failed == Constraint::kProgramRunsCombination ? ": " + RulesInPlay(query) : "";
  return fmt::format(
      "no legal layout for world {} with model {} and space {}: the last candidates failed '{}'{} "
      "(excluded per constraint: {} of {} candidates)",
      query.world, query.model->name, query.space->name, ConstraintRule(failed), rules, detail, e.candidates);
}

}  // namespace tunepar::search
