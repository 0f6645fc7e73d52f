#include "base/trial_role.h"

#include <fmt/format.h>

namespace tunepar {

namespace {
constexpr TrialRole kAll[] = {TrialRole::kFirst,        TrialRole::kConfirmation, TrialRole::kRerun,
                              TrialRole::kReclassified, TrialRole::kForgotten,    TrialRole::kProbe};
}

std::string_view ToString(TrialRole role) {
  switch (role) {
    case TrialRole::kFirst: return "first";
    case TrialRole::kConfirmation: return "confirmation";
    case TrialRole::kRerun: return "rerun";
    case TrialRole::kReclassified: return "reclassified";
    case TrialRole::kForgotten: return "forgotten";
    case TrialRole::kProbe: return "probe";
  }
  return "?";
}

Result<TrialRole> ParseTrialRole(std::string_view text) {
  for (TrialRole r : kAll) {
    if (ToString(r) == text) return r;
  }
  return InvalidArgument(fmt::format("unknown trial role '{}'", text));
}

}  // namespace tunepar
