// Why a trial was run, as its record says (a field, a store column and a JSON key): the first
// measurement of its layout in the study, a confirmation (the layout measured again before the
// best is named), a re-run of a trial whose node's tuner is gone (naming that node), a trial
// whose outcome was read again from its log (search --reclassify), or a trial forgotten
// (`tunepar forget`: kept in its node's shard, counted nowhere).
#pragma once

#include <string_view>

#include "base/status.h"

namespace tunepar {

enum class TrialRole { kFirst, kConfirmation, kRerun, kReclassified, kForgotten };

std::string_view ToString(TrialRole role);  // "first", "confirmation", "rerun", "reclassified", "forgotten"
Result<TrialRole> ParseTrialRole(std::string_view text);

}  // namespace tunepar
