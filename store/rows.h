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
// All trials, or those of one study when `study_id` is not empty; ordered by (node, number). A
// row whose checksum does not match its content fails the read, unless `damaged` is given: then
// that row is left out and added to `damaged` as it reads (its values may be the changed ones).
Result<std::vector<TrialRecord>> SelectTrials(Database& db, const std::string& study_id,
                                              std::vector<TrialRecord>* damaged = nullptr);
// The first study or trial row whose checksum does not match its content, in words ("" when
// every row matches), e.g. "bad checksum in trial 3 of study 0123abcd (node n0) and 2 other rows".
Result<std::string> FindBadChecksums(Database& db);

}  // namespace tunepar::store
