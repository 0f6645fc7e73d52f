// Finding a study in a store by what a user types (its name, its id, or a unique id prefix), and
// what the commands that read the store answer when damaged shards were skipped.
#pragma once

#include <string>

#include "base/status.h"
#include "store/store_reader.h"

namespace tunepar {

// kNotFound (naming the store) when nothing matches; kInvalidArgument for an ambiguous prefix.
Result<store::StudyRecord> FindStudy(const store::StoreView& view, const std::string& store_dir,
                                     const std::string& name_or_id);

// A reader command's outcome (list, show, export, report) given the shards its read skipped,
// each already named in a warning: `status` itself when none was skipped or `allow_damaged`
// (--allow-damaged); else kDamaged (exit code 9), so that a script never takes a partial
// result for a whole one. A study not found may be in a skipped shard: kDamaged too.
Status WithDamagedShards(const store::StoreView& view, bool allow_damaged, Status status);

}  // namespace tunepar
