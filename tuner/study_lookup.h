// Finding a study in a store by what a user types: its name, its id, or a unique id prefix.
#pragma once

#include <string>

#include "base/status.h"
#include "store/store_reader.h"

namespace tunepar {

// kNotFound (naming the store) when nothing matches; kInvalidArgument for an ambiguous prefix.
Result<store::StudyRecord> FindStudy(const store::StoreView& view, const std::string& store_dir,
                                     const std::string& name_or_id);

}  // namespace tunepar
