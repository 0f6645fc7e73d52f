// The performance model's efficiency parameters as read from a hardware profile's [efficiency]
// table: one value per EfficiencyKey (the table of names, ranges and meanings is
// efficiency_parameters.h, which the profile's parser checks keys against).
#pragma once

#include <array>

#include "base/status.h"
#include "runner/efficiency_parameters.h"

namespace tunepar::runner {

struct HardwareProfile;

class Efficiency {
 public:
  // Reads every parameter from the profile's [efficiency] table; a missing one is an error
  // that names the profile and the key.
  static Result<Efficiency> FromProfile(const HardwareProfile& profile);

  double operator[](EfficiencyKey k) const { return values_[static_cast<int>(k)]; }
  double& operator[](EfficiencyKey k) { return values_[static_cast<int>(k)]; }

 private:
  std::array<double, kNumEfficiencyKeys> values_{};
};

}  // namespace tunepar::runner
