// The process exit codes of `tunepar`, documented in docs/json-and-exit-codes.md ("Exit codes").
#pragma once

#include "base/status.h"

namespace tunepar {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;       // a bug: please report it
inline constexpr int kExitUsage = 2;          // bad command line or option value
inline constexpr int kExitConfig = 3;         // unknown preset, unreadable/malformed/invalid config
inline constexpr int kExitNoLegalLayout = 4;  // the constraints leave no layout for the world size
inline constexpr int kExitStore = 5;          // the store cannot be created, written or read
inline constexpr int kExitSchemaTooNew = 6;   // a shard written by a newer tunepar
inline constexpr int kExitNotFound = 7;       // no such study
inline constexpr int kExitTrialsFailed = 8;   // every trial failed the same way (see the message)
inline constexpr int kExitDamaged = 9;        // a damaged shard was skipped (named): the output is partial
inline constexpr int kExitCalibrationFailed = 10;  // the fit failed (the message says why); nothing written
inline constexpr int kExitInterrupted = 130;  // SIGINT (128 + the signal; 143 for SIGTERM)

inline int ExitCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument: return kExitUsage;
    case StatusCode::kConfig: return kExitConfig;
    case StatusCode::kNoLegalLayout: return kExitNoLegalLayout;
    case StatusCode::kStore: return kExitStore;
    case StatusCode::kSchemaTooNew: return kExitSchemaTooNew;
    case StatusCode::kNotFound: return kExitNotFound;
    case StatusCode::kTrialsFailed: return kExitTrialsFailed;
    case StatusCode::kDamaged: return kExitDamaged;
    case StatusCode::kInterrupted: return kExitInterrupted;
    case StatusCode::kFitFailed: return kExitCalibrationFailed;
    case StatusCode::kInternal: return kExitInternal;
  }
  return kExitInternal;
}

}  // namespace tunepar
