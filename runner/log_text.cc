#include "runner/log_text.h"

#include <fstream>
#include <regex>
#include <vector>

namespace tunepar::runner {

namespace {

// A prefix that launchers put before each line of a rank's output: "[rank0]: ", "[default0]:".
const std::string kRankPrefix = R"(^\s*(?:\[[^\]]*\]:?\s*)*)";

bool IsLauncherReport(const std::string& line) {
  // torchrun's (torch.distributed.elastic) own lines: its error class, its logger lines, and the
  // root-cause block's rules and fields.
  static const std::regex kLauncher(
      R"(torch[./]distributed[./]elastic|ChildFailedError|^\s*(?:=+|-+)\s*$|^\s*(?:Root Cause|Failures:|Other Failures:|<NO_OTHER_FAILURES>|\[\d+\]:\s*$))"
      R"(|^\s*(?:time|host|rank|exitcode|error_file|traceback)\s*:)");
  return std::regex_search(line, kLauncher);
}

bool IsException(const std::string& line) {
  static const std::regex kException(kRankPrefix +
                                     R"((?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt)(?::.*)?$)");
  return std::regex_search(line, kException);
}

bool SpeaksOfAnError(const std::string& line) {
  static const std::regex kError(
      R"(\b(?:error|errors|fatal|abort(?:ed)?|fault|failed|failure|refused|not supported|unsupported|cannot|can't|invalid|denied|not found)\b)",
      std::regex::icase);
  return std::regex_search(line, kError);
}

bool HasWords(const std::string& line) {
  static const std::regex kWord("[A-Za-z]{2,}");
  return std::regex_search(line, kWord);
}

}  // namespace

std::string LastLine(const std::string& path, std::string_view skip) {
  std::ifstream in(path, std::ios::binary);
  std::string line, last;
  while (std::getline(in, line)) {
    if (Trim(line).empty() || (!skip.empty() && line.find(skip) != std::string::npos)) continue;
    last = Trim(line);
  }
  return last;
}

std::string ErrorLine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line, last, exception, error, worded;
  while (std::getline(in, line)) {
    line = Trim(line);
    if (line.empty()) continue;
    last = line;
    if (IsLauncherReport(line)) continue;
    if (IsException(line)) exception = line;
    if (SpeaksOfAnError(line)) error = line;
    if (HasWords(line)) worded = line;
  }
  for (const std::string* found : {&exception, &error, &worded}) {
    if (!found->empty()) return *found;
  }
  return last;
}

}  // namespace tunepar::runner
