// What tunepar-core writes to its log that the runner reads back: the mark of its teardown
// stages (lifecycle.h), which a reader looking for the core's last word skips.
#pragma once

#include <string_view>

namespace tunepar::core {

// "tunepar-core: rank 0: teardown +0.003 s: MPI finalized; exiting"
inline constexpr std::string_view kTeardownMarker = ": teardown +";

}  // namespace tunepar::core
