#include "base/crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

namespace tunepar {

void CrashPoint(std::string_view moment) {
  static const char* const kWanted = std::getenv("TUNEPAR_CRASH_AT");
  if (kWanted == nullptr || *kWanted == '\0') return;
  const std::string_view wanted(kWanted);
  const size_t colon = wanted.find(':');
  if (wanted.substr(0, colon) != moment) return;
  static std::map<std::string, int, std::less<>> reached;
  const int times = ++reached[std::string(moment)];
  const int at = colon == std::string_view::npos ? 1 : std::atoi(std::string(wanted.substr(colon + 1)).c_str());
  if (times == at) kill(getpid(), SIGKILL);
}

}  // namespace tunepar
