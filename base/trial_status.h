// The outcome classes of a trial. Failures are data: an OOM tells the search where memory ends.
#pragma once

#include <string_view>

#include "base/status.h"

namespace tunepar {

enum class TrialStatus {
  kQueued,       // proposed, not started
  kRunning,      // started; holds a lease that its runner renews
  kOk,           // finished with a measurement (or a model prediction that fits)
  kOom,          // ran out of device memory (measured, or predicted not to fit)
  kTimeout,      // killed after the trial's time limit
  kCrash,        // failed for another reason
  kInvalid,      // could not be launched as asked (bad placement, bad template, ...)
  kInterrupted,  // stopped by the user, a signal or a lost node; re-run on resume
};

std::string_view ToString(TrialStatus status);  // "queued", "running", "ok", ...
Result<TrialStatus> ParseTrialStatus(std::string_view text);
// A finished trial is never re-run: ok, oom, timeout, crash, invalid.
bool IsFinished(TrialStatus status);

}  // namespace tunepar
