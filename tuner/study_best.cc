#include "tuner/study_best.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "tuner/trial_records.h"

namespace tunepar {

namespace {

// Every memory component of `a` is at least `b`'s.
bool NeedsNoLessMemory(const runner::Prediction& a, const runner::Prediction& b) {
  const runner::MemoryBreakdown& m = a.memory;
  const runner::MemoryBreakdown& n = b.memory;
  return m.weights >= n.weights && m.gradients >= n.gradients && m.optimizer_states >= n.optimizer_states &&
         m.activations >= n.activations && m.comm_buffers >= n.comm_buffers;
}

// The surrogate's fastest layout likely to fit that needs less memory than every OOM trial's
// layout in some component.
std::optional<Layout> SurrogateBest(const StudyContext& context, const search::Proposer& proposer,
                                    const std::vector<search::Outcome>& history,
                                    const std::vector<store::TrialRecord>& trials) {
  std::vector<runner::Prediction> oom;
  for (const store::TrialRecord& t : trials)
    if (t.status == TrialStatus::kOom) oom.push_back(context.Predict(t.layout));
  const search::Surrogate s = proposer.Posterior(history);
  int best = -1;
  for (size_t i = 0; i < context.space.legal.size(); ++i) {
    if (!(s.feasibility[i] >= 0.5) || !std::isfinite(s.log_step_time[i])) continue;
    if (best >= 0 && s.log_step_time[i] >= s.log_step_time[best]) continue;
    const runner::Prediction p = context.Predict(context.space.legal[i]);
    bool dominates_an_oom = false;
    for (const runner::Prediction& o : oom) dominates_an_oom = dominates_an_oom || NeedsNoLessMemory(p, o);
    if (!dominates_an_oom) best = static_cast<int>(i);
  }
  if (best < 0) return std::nullopt;
  return context.space.legal[best];
}

}  // namespace

const store::TrialRecord* FastestTrialOf(const std::vector<store::TrialRecord>& trials, const Layout& layout) {
  const store::TrialRecord* fastest = nullptr;
  for (const store::TrialRecord& t : trials) {
    const std::optional<double> v = t.layout == layout ? ObjectiveOf(t) : std::nullopt;
    if (v && (fastest == nullptr || *v < *ObjectiveOf(*fastest))) fastest = &t;
  }
  return fastest;
}

const store::TrialRecord* FastestOkTrial(const std::vector<store::TrialRecord>& trials) {
  const store::TrialRecord* best = nullptr;
  for (const store::TrialRecord& t : trials) {
    const std::optional<double> v = ObjectiveOf(t);
    if (v && (best == nullptr || *v < *ObjectiveOf(*best))) best = &t;
  }
  return best;
}

std::vector<const store::TrialRecord*> BestLayouts(const StudyBest& study_best,
                                                   const std::vector<store::TrialRecord>& trials, int top) {
  std::map<std::string, const store::TrialRecord*> fastest;
  for (const store::TrialRecord& t : trials) {
    if (t.status != TrialStatus::kOk || !ObjectiveOf(t)) continue;
    const store::TrialRecord*& f = fastest[LayoutKey(t.layout)];
    if (f == nullptr || *ObjectiveOf(t) < *ObjectiveOf(*f)) f = &t;
  }
  std::vector<const store::TrialRecord*> ranked;
  for (const auto& [key, t] : fastest) {
    if (study_best.trial == nullptr || !(t->layout == study_best.trial->layout)) ranked.push_back(t);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const store::TrialRecord* a, const store::TrialRecord* b) {
                     return *ObjectiveOf(*a) < *ObjectiveOf(*b);
                   });
  if (study_best.trial != nullptr) ranked.insert(ranked.begin(), study_best.trial);
  if (ranked.size() > static_cast<size_t>(std::max(top, 0))) ranked.resize(std::max(top, 0));
  return ranked;
}

StudyBest BestOfStudy(const StudyContext& context, const std::vector<store::TrialRecord>& trials) {
  StudyBest b;
  for (const store::TrialRecord& t : trials) b.oom_trials += t.status == TrialStatus::kOom;
  if (context.study.backend == "model") {  // predictions are exact: no surrogate between them
    b.trial = FastestOkTrial(trials);
    if (b.trial != nullptr) b.basis = StudyBest::Basis::kPredicted, b.layout = b.trial->layout;
    return b;
  }
  const search::Proposer proposer(context.space.legal, context.Prior(), context.proposer_options);
  const std::vector<search::Outcome> history = History(trials);
  b.standing = proposer.Stand(history, 0.9);
  if (b.standing.best) {
    b.basis = StudyBest::Basis::kMeasured;
    b.layout = b.standing.best;
    b.trial = FastestTrialOf(trials, *b.layout);
    return b;
  }
  const bool any_finished =
      std::any_of(trials.begin(), trials.end(), [](const store::TrialRecord& t) { return IsFinished(t.status); });
  if (any_finished) {
    b.layout = SurrogateBest(context, proposer, history, trials);
    if (b.layout) b.basis = StudyBest::Basis::kSurrogate;
    return b;
  }
  b.layout = context.ModelBest();
  if (b.layout) b.basis = StudyBest::Basis::kModel;
  return b;
}

std::string StudyBest::BasisName() const {
  switch (basis) {
    case Basis::kMeasured: return "measured";
    case Basis::kPredicted: return "predicted";
    case Basis::kSurrogate: return "surrogate";
    case Basis::kModel: return "model";
    case Basis::kNone: return "none";
  }
  return "none";
}

std::string StudyBest::Header() const {
  switch (basis) {
    case Basis::kMeasured:
      return fmt::format("the measured layout with the lowest posterior mean step time ({} measurement{} of it)",
                         standing.measurements, standing.measurements == 1 ? "" : "s");
    case Basis::kPredicted: return "the fastest layout the performance model predicts to fit (a dry run)";
    case Basis::kSurrogate:
      return fmt::format(
          "not measured: no trial finished ok yet, so the surrogate's fastest layout likely to fit after {} OOM "
          "trial{}",
          oom_trials, oom_trials == 1 ? "" : "s");
    case Basis::kModel:
      return "not measured: no trial finished yet, so the performance model's fastest layout predicted to fit";
    case Basis::kNone: return "no layout is likely to fit";
  }
  return "";
}

}  // namespace tunepar
