// Mapping between records and rows: the only place that knows the column lists.
#pragma once

#include <vector>

#include "base/status.h"
#include "store/records.h"
#include "store/sqlite.h"

namespace tunepar::store {

Status InsertStudy(Database& db, const StudyRecord& study);                 // INSERT OR IGNORE
Status UpsertTrials(Database& db, const std::vector<TrialRecord>& trials);  // one transaction
Result<std::vector<StudyRecord>> SelectStudies(Database& db);
// All trials, or those of one study when `study_id` is not empty; ordered by (node, number).
Result<std::vector<TrialRecord>> SelectTrials(Database& db, const std::string& study_id);

}  // namespace tunepar::store
