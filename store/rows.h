// Mapping between records and rows: the only place that knows the column lists.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "store/records.h"
#include "store/sqlite.h"

namespace tunepar::store {

Status InsertStudy(Database& db, const StudyRecord& study);                 // INSERT OR IGNORE
Status UpsertTrials(Database& db, const std::vector<TrialRecord>& trials);  // one transaction
Result<std::vector<StudyRecord>> SelectStudies(Database& db);
// A trial row a read leaves out: its checksum does not match its content, or, its checksum
// intact, it holds a value this tunepar cannot read (a layout key naming a knob it does not know,
// written by a newer tunepar, or a key changed together with its checksum).
struct DamagedTrial {
  TrialRecord trial;       // as far as it reads; its values may be the changed ones
  std::string unreadable;  // the value that does not read, "layout_key 'tp4-...'"; "" for a bad checksum
};

// All trials, or those of one study when `study_id` is not empty; ordered by (node, number). A
// trial's layout is read from its `layout_key`. A damaged row (DamagedTrial) fails the read,
// unless `damaged` is given: then that row is left out and added to `damaged` as it reads.
Result<std::vector<TrialRecord>> SelectTrials(Database& db, const std::string& study_id,
                                              std::vector<DamagedTrial>* damaged = nullptr);
// The first study or trial row whose checksum does not match its content, in words ("" when
// every row matches), e.g. "bad checksum in trial 3 of study 0123abcd (node n0) and 2 other rows".
// A shard of an older schema (>= kFirstChecksummedVersion) is checked against the columns its
// checksums cover, so a node's shards are checked before its writer migrates them.
Result<std::string> FindBadChecksums(Database& db);

}  // namespace tunepar::store
