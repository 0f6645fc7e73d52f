// Trials between the backends, the store and the search: a trial's record is made in one place
// (its identity, the model's prediction, the placement and this tuner's provenance) and takes
// the backend's result there; stored records become the search's history.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runner/performance_model.h"
#include "runner/trial_result.h"
#include "search/proposer.h"
#include "store/records.h"

namespace tunepar {

// Which trial a record is: its study, node, number and attempt, and the layout.
struct TrialIdentity {
  std::string study_id;
  std::string node_id;
  int64_t number = 0;
  int attempt = 1;
  Layout layout;
  int measurement = 1;    // the layout's k-th measurement in the study (claims.h)
  std::string rerun_of;   // another node's trial this re-runs (its tuner is gone): that node's id
  bool enqueued = false;  // a layout the user asked for (search --enqueue), not a proposal
  // Proposed past the predicted memory limit (search::Proposal::probe), or this node's own
  // probe run again after an interruption: its record's role is probe.
  bool probe = false;
};

// A new record of a trial that has not run yet (status queued): its identity, the performance
// model's prediction of the layout, the placement the prediction assumed (ranks per node, 0:
// one per device) and this process's provenance.
store::TrialRecord NewTrialRecord(const TrialIdentity& identity, const runner::Prediction& predicted,
                                  int ranks_per_node);

// The record once the backend's result is in: status, metrics, details, message, log, where it
// ran and when.
store::TrialRecord WithResult(store::TrialRecord record, const runner::TrialResult& result);

// What the search minimised for a trial (its step time unless a custom metric), if it ran.
std::optional<double> ObjectiveOf(const store::TrialRecord& trial);

// The finished trials (and, as tried but unmeasured, those still running) as the proposer's
// history, in the order given. An outcome is a probe (search::Outcome::probe, what the proposer
// counts against --max-probes) when its trial's role is probe, or when it re-runs another node's
// probe (a gone node's trial of the same layout, which may itself still read as running).
std::vector<search::Outcome> History(const std::vector<store::TrialRecord>& trials);

// What the search's line of a finished trial adds to its status for the trial's role: " (again)"
// for a confirmation, " (probe: past the predicted memory limit)" for a probe, else "".
std::string RoleMark(const store::TrialRecord& trial);

// `message` as the trial's role begins it, for people: "confirmation: ..." (a layout measured
// again before naming the best), "re-run of a trial of node X (...); ..." (another node's trial,
// its tuner gone; X is rerun_of); unchanged for the other roles. Made from the role and rerun_of,
// never read back: what a trial is, readers take from its role (base/trial_role.h).
std::string WithRoleMark(const store::TrialRecord& trial, const std::string& message);

// A trial whose tuner is gone stays `running` in its node's shard: no other node writes there.
// When another node re-ran it (a row of that node with the same layout, role kRerun, naming
// the gone node), readers show it as interrupted, naming the re-run.
void SettleTakenOverTrials(std::vector<store::TrialRecord>& trials);

}  // namespace tunepar
