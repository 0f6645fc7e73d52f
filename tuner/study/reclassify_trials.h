// `tunepar search --reclassify`: the failed trials of a study read again from their logs with the
// command backend as it is now configured (its OOM patterns, its metric), for when the first
// reading was wrong: a pattern was missing (PyTorch's CPU "can't allocate memory" was read as a
// crash), or the metric regex was. Nothing is lost: a trial whose outcome changes is recorded
// with the new one, and its earlier status and message are kept in its details
// ("reclassified_from", a list, oldest first); the others are left as they are.
#pragma once

#include "base/status.h"
#include "runner/command_backend.h"
#include "tuner/study/global_options.h"
#include "tuner/study/study_session.h"

namespace tunepar {

// This node's crashed, out-of-memory and invalid trials (a trial is written only by the node
// that ran it), each with a log and a recorded exit, classified again; one line per changed
// trial and a summary on stdout (nothing with --json). Returns how many changed.
Result<int> ReclassifyFailedTrials(const GlobalOptions& global, StudySession& session,
                                   const runner::CommandBackend& backend);

}  // namespace tunepar
