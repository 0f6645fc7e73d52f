// What tunepar-core writes to its log that the runner reads back: the mark of its teardown
// stages (lifecycle.h), which a reader looking for the core's last word skips, and the line that
// says every rank has joined MPI, before which a run that dies died in its launch.
#pragma once

#include <string_view>

namespace tunepar::core {

// "tunepar-core: rank 0: teardown +0.003 s: MPI finalized; exiting"
inline constexpr std::string_view kTeardownMarker = ": teardown +";

// "tunepar-core: every rank joined MPI (4 ranks)", said by rank 0 when the environment holds
// kSayJoinedVariable=1 (the local and slurm backends ask for it). No rank has read its options
// before it: a run that dies before it died in the launcher or in MPI's start-up, never in the
// layout it was given.
inline constexpr std::string_view kJoinedLine = "tunepar-core: every rank joined MPI";
inline constexpr const char* kSayJoinedVariable = "TUNEPAR_CORE_SAY_JOINED";

}  // namespace tunepar::core
