// What "best" means, in one place, for the search's summary, `report` and `launch-script`:
//
//   measured    the measured layout with the lowest posterior mean step time (search::Standing:
//               a lucky repeat never makes a layout best), shown by its fastest ok trial;
//   predicted   a dry run (model backend): the ok prediction with the lowest step time;
//   below-ooms  no ok trial yet, some OOM: the performance model's fastest untried layout that it
//               predicts to fit and to need less memory than every layout that went OOM (not
//               measured);
//   model       no finished trial: the performance model's fastest layout predicted to fit;
//   none        nothing to recommend: every trial failed without an OOM (crashes, timeouts say
//               nothing of speed or memory), or nothing is below the OOMs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/layout.h"
#include "search/proposer.h"
#include "store/records.h"
#include "tuner/study/study_context.h"

namespace tunepar {

struct StudyBest {
  enum class Basis { kMeasured, kPredicted, kBelowOoms, kModel, kNone };
  Basis basis = Basis::kNone;
  std::optional<Layout> layout;
  const store::TrialRecord* trial = nullptr;  // measured, predicted: its fastest ok trial
  search::Standing standing;                  // measured: the surrogate's view of it
  int oom_trials = 0;                         // the OOM evidence a below-ooms choice respects
  int failed_trials = 0;                      // finished trials, none ok (when no layout is measured)

  bool measured() const { return basis == Basis::kMeasured || basis == Basis::kPredicted; }
  // What the layout is, as a phrase for headers: "the measured layout with the lowest posterior
  // mean step time (3 measurements of it)", "not measured: no trial finished ok yet, so the
  // surrogate's fastest layout likely to fit after 5 OOM trials", ...
  std::string Header() const;
  // "measured" / "predicted" / "below-ooms" / "model" / "none", for JSON.
  std::string BasisName() const;
};

// `trials`: the study's trials (the returned pointer points into them).
StudyBest BestOfStudy(const StudyContext& context, const std::vector<store::TrialRecord>& trials);

// The ok trial with the lowest objective, of any layout: the best single measurement (nullptr
// when none is ok).
const store::TrialRecord* FastestOkTrial(const std::vector<store::TrialRecord>& trials);

// The fastest ok trial of `layout` (nullptr when it has none).
const store::TrialRecord* FastestTrialOf(const std::vector<store::TrialRecord>& trials, const Layout& layout);

// The best layouts, one row each, best first: the study's best (`study_best`, of the same
// `trials`) leads, then the fastest ok trial of every other layout by the objective; at most
// `top`, fewer only when fewer layouts have an ok trial. A layout measured again (a
// confirmation, a re-run) is still one row.
std::vector<const store::TrialRecord*> BestLayouts(const StudyBest& study_best,
                                                   const std::vector<store::TrialRecord>& trials, int top);

}  // namespace tunepar
