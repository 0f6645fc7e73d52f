// Reading a trial's log: trimmed lines, shortened for messages, and the line that says why a
// program failed.
#pragma once

#include <string>
#include <string_view>

namespace tunepar::runner {

inline std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  const size_t start = s.find_first_not_of(' ');
  return start == std::string::npos ? "" : s.substr(start);
}

inline std::string Shorten(const std::string& s, size_t n = 160) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

// The last non-empty line of the file at `path` that does not contain `skip` (when given; e.g.
// the core's teardown stages, core/lifecycle.h), "" when there is none.
std::string LastLine(const std::string& path, std::string_view skip = {});

// Why the program whose output is at `path` failed, as it said it ("" when the output is empty).
// The last line is often not it: a launcher writes its own report after the program's error
// (torchrun: a block of "=====" and "-----" rules, "Root Cause", "exitcode : 1", and a
// ChildFailedError), and every such report reads the same whatever the program said. So, in
// order: the last exception line (`ValueError: ...`, also after a "[rank0]:" prefix) that is not
// the launcher's own; else the last line that speaks of an error ("error", "failed", "not
// supported", "cannot", ...) outside the launcher's report; else the last line with words in it
// outside the report; else the last line.
std::string ErrorLine(const std::string& path);

}  // namespace tunepar::runner
