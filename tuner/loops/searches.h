// The two ways `tunepar search` runs: exhaustively with the performance model (exact and cheap
// there), or as a Bayesian search over a backend that measures.
#pragma once

#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "runner/backend.h"
#include "search/proposer.h"
#include "tuner/study/global_options.h"
#include "tuner/study/study_session.h"

namespace tunepar {

// Every legal layout not yet in the study, predicted and recorded in one transaction.
Status RunExhaustiveSearch(const GlobalOptions& global, StudySession& session, int top);

// The object `tunepar search --json` prints: the same keys for every backend
// (schemas/search.schema.json). `best` lists the best layouts, best first, one trial each;
// what only a measuring search knows (best_estimate, model_best.measured, ...) is null or 0
// for the model backend. The caller sets evaluated_now and stopped_because.
nlohmann::json SearchJson(const GlobalOptions& global, const StudySession& session,
                          const std::vector<store::TrialRecord>& trials,
                          const std::vector<const store::TrialRecord*>& best);

// How long and how a Bayesian search runs (what it proposes, from the seed and the acquisition,
// is the study's: StudyContext::proposer_options).
struct BayesianSearchOptions {
  int budget = 20;           // finished trials in the study (all nodes)
  double time_budget_s = 0;  // 0: none
  int batch = 1;             // trials proposed, and run, at a time
  std::optional<std::pair<double, double>> early_stop;  // (gain, probability)
  double lease_s = 120;                                 // a running trial's lease, renewed every lease/4
  int failures_to_abort = 3;  // this many identical failures and no success end the run
  int top = 10;
  // Confirmation trials: in the last `confirmations` trials of the budget (-1: a fifth of it),
  // and whenever the search would otherwise end early (the early stop, or no untried layout
  // left), a leading layout is measured again while the best is less than `confidence` likely
  // to be faster than every other measured layout. They count in the budget.
  int confirmations = -1;
  double confidence = 0.9;
  // --enqueue: layouts measured first, before any proposal (legal in the study; counted in the
  // budget), each once: one the study has measured already is not run again.
  std::vector<Layout> enqueued;
  // Probes: trials spent on layouts the memory model calls unlikely to fit, when they promise
  // enough (search::ProposerOptions::max_probes; 0: none). A cap on the study's probes, counted
  // from its trials' roles like the budget from its finished trials; not part of the study.
  int max_probes = search::ProposerOptions{}.max_probes;
  int ConfirmationReserve() const { return confirmations >= 0 ? confirmations : budget / 5; }
};

// Proposes, runs and records trials until the budget, the time budget, the early stop, the end
// of the space, or a stop signal. Resumes the study: this node's trials left running by a dead
// tuner become `interrupted` (their processes killed) and are re-run first.
Status RunBayesianSearch(const GlobalOptions& global, StudySession& session, runner::Backend& backend,
                         const BayesianSearchOptions& options);

}  // namespace tunepar
