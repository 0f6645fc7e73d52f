// Reading a trial's log: trimmed lines, shortened for messages.
#pragma once

#include <string>

namespace tunepar::runner {

inline std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  const size_t start = s.find_first_not_of(' ');
  return start == std::string::npos ? "" : s.substr(start);
}

inline std::string Shorten(const std::string& s, size_t n = 160) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

// The last non-empty line of the file at `path` ("" when there is none).
std::string LastLine(const std::string& path);

}  // namespace tunepar::runner
