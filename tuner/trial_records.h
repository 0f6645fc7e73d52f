// Trials between the backends, the store and the search: a TrialResult becomes a stored
// TrialRecord; stored records become the search's history.
#pragma once

#include <string>
#include <vector>

#include "runner/performance_model.h"
#include "runner/trial_result.h"
#include "search/proposer.h"
#include "store/records.h"

namespace tunepar {

// The record of a finished trial: the backend's result, the performance model's prediction of
// the same layout, and this process's provenance.
store::TrialRecord ToRecord(const std::string& study_id, const std::string& node_id, int64_t number,
                            const search::Layout& layout, const runner::TrialResult& result,
                            const runner::Prediction& predicted);

// What the search minimised for a trial (its step time unless a custom metric), if it ran.
std::optional<double> ObjectiveOf(const store::TrialRecord& trial);

// The finished trials (and, as tried but unmeasured, those still running) as the proposer's
// history, in the order given.
std::vector<search::Outcome> History(const std::vector<store::TrialRecord>& trials);

}  // namespace tunepar
