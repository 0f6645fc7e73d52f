// Where a result came from: the tunepar version and the git revision it was built from.
#pragma once

#include <string>
#include <string_view>

namespace tunepar {

std::string_view Version();      // e.g. "0.1.0"
std::string_view GitRevision();  // short hash, "-dirty" when built from a modified tree
std::string HostName();          // this machine's host name
std::string UtcNow();            // ISO 8601, seconds, e.g. "2026-11-21T23:44:29Z"

}  // namespace tunepar
