// Named moments at which a test can kill tunepar with SIGKILL, to check what a resumed search
// does after a crash exactly there. $TUNEPAR_CRASH_AT names the moment ("claim", "start",
// "record", "publish": bayesian_search.cc) and, after a colon, which time it is reached ("record:2":
// the second time; default the first). Unset, as in every normal run, CrashPoint does nothing.
#pragma once

#include <string_view>

namespace tunepar {

void CrashPoint(std::string_view moment);

}  // namespace tunepar
