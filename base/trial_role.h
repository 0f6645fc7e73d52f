// Why a trial was run, as its record says (a field, a store column and a JSON key): the first
// measurement of its layout in the study, a confirmation (the layout measured again before the
// best is named), a re-run of a trial whose node's tuner is gone (naming that node), a trial
// whose outcome was read again from its log (search --reclassify), a trial forgotten
// (`tunepar forget`: kept in its node's shard, counted nowhere), or a probe: the first
// measurement of a layout that the search proposed past the predicted memory limit (its memory
// model called it unlikely to fit, but it promised enough to be worth the risk; the search
// spends at most `search --max-probes` of them, counted from these roles). A probe stays a probe
// when its node runs it again after an interruption, or reads it again from its log.
#pragma once

#include <string_view>

#include "base/status.h"

namespace tunepar {

enum class TrialRole { kFirst, kConfirmation, kRerun, kReclassified, kForgotten, kProbe };

// "first", "confirmation", "rerun", "reclassified", "forgotten", "probe"
std::string_view ToString(TrialRole role);
Result<TrialRole> ParseTrialRole(std::string_view text);

}  // namespace tunepar
