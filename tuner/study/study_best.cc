#include "tuner/study/study_best.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "tuner/study/trial_records.h"

namespace tunepar {

namespace {

// After OOMs and no ok trial: the performance model's fastest layout among those the OOM
// evidence does not condemn: predicted to fit, not tried yet, and predicted to need less memory
// than every layout that went OOM (the model's memory ranks layouts far better than it prices
// them: a layout it says needs as much as one that ran out is not offered).
std::optional<Layout> BelowTheOoms(const StudyContext& context, const std::vector<store::TrialRecord>& trials) {
  double least_oom = INFINITY;
  std::set<std::string> tried;
  for (const store::TrialRecord& t : trials) {
    if (IsFinished(t.status)) tried.insert(LayoutKey(t.layout));
    if (t.status == TrialStatus::kOom) least_oom = std::min(least_oom, context.Predict(t.layout).memory_bytes);
  }
  std::optional<Layout> best;
  double best_step = 0;
  for (const Layout& l : context.space.legal) {
    if (tried.count(LayoutKey(l)) > 0) continue;
    const runner::Prediction p = context.Predict(l);
    if (!p.fits || !(p.memory_bytes < least_oom)) continue;
    if (!best || p.step_time_s < best_step) best = l, best_step = p.step_time_s;
  }
  return best;
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
  for (const store::TrialRecord& t : trials) b.failed_trials += IsFinished(t.status) ? 1 : 0;
  if (b.oom_trials > 0) {
    b.layout = BelowTheOoms(context, trials);
    if (b.layout) b.basis = StudyBest::Basis::kBelowOoms;
    return b;
  }
  if (b.failed_trials > 0) return b;  // crashes or timeouts only: nothing says what is fast or fits
  b.layout = context.ModelBest();
  if (b.layout) b.basis = StudyBest::Basis::kModel;
  return b;
}

std::string StudyBest::BasisName() const {
  switch (basis) {
    case Basis::kMeasured: return "measured";
    case Basis::kPredicted: return "predicted";
    case Basis::kBelowOoms: return "below-ooms";
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
    case Basis::kBelowOoms:
      return fmt::format(
          "not measured: no trial finished ok yet, so the performance model's fastest untried layout predicted to "
          "need less memory than each of the {} layout{} that went OOM",
          oom_trials, oom_trials == 1 ? "" : "s");
    case Basis::kModel:
      return "not measured: no trial finished yet, so the performance model's fastest layout predicted to fit";
    case Basis::kNone:
      if (oom_trials == 0 && failed_trials > 0) {
        return fmt::format(
            "no layout to recommend: {} failed without running out of memory (a crash or timeout says nothing of "
            "which layout is fast or fits)",
            failed_trials == 1 ? "the one finished trial" : fmt::format("all {} finished trials", failed_trials));
      }
      return "no trial has finished ok yet, and no layout is likely to fit";
  }
  return "";
}

}  // namespace tunepar
