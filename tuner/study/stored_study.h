// A study read back from the store by what a user types: its context (placed as its trials ran,
// study_context.h) and every trial of it. report, launch-script and calibrate --from read a
// study this way.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "store/records.h"
#include "tuner/study/study_context.h"

namespace tunepar {

struct StoredStudy {
  StudyContext context;
  std::vector<store::TrialRecord> trials;  // ordered by (node, number)
};

// `name` is the study's name, its id or a unique id prefix; "" means the store's only study
// (when the store has none, `hint` says what else to do). Unreadable shards are warned about
// and skipped. kNotFound when nothing matches, kInvalidArgument when a name must be given.
Result<StoredStudy> ReadStoredStudy(const std::string& store_dir, const std::string& name,
                                    const std::string& hint = "");

}  // namespace tunepar
