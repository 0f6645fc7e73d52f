#include "base/trial_status.h"

#include <fmt/format.h>

namespace tunepar {

namespace {
constexpr TrialStatus kAll[] = {TrialStatus::kQueued,  TrialStatus::kRunning,    TrialStatus::kOk,
                                TrialStatus::kOom,     TrialStatus::kTimeout,    TrialStatus::kCrash,
                                TrialStatus::kInvalid, TrialStatus::kInterrupted};
}

std::string_view ToString(TrialStatus status) {
  switch (status) {
    case TrialStatus::kQueued: return "queued";
    case TrialStatus::kRunning: return "running";
    case TrialStatus::kOk: return "ok";
    case TrialStatus::kOom: return "oom";
    case TrialStatus::kTimeout: return "timeout";
    case TrialStatus::kCrash: return "crash";
    case TrialStatus::kInvalid: return "invalid";
    case TrialStatus::kInterrupted: return "interrupted";
  }
  return "?";
}

Result<TrialStatus> ParseTrialStatus(std::string_view text) {
  for (TrialStatus s : kAll) {
    if (ToString(s) == text) return s;
  }
  return InvalidArgument(fmt::format("unknown trial status '{}'", text));
}

bool IsFinished(TrialStatus status) {
  switch (status) {
    case TrialStatus::kOk:
    case TrialStatus::kOom:
    case TrialStatus::kTimeout:
    case TrialStatus::kCrash:
    case TrialStatus::kInvalid: return true;
    default: return false;
  }
}

}  // namespace tunepar
