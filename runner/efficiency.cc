#include "runner/efficiency.h"

#include <fmt/format.h>

#include "runner/hardware_profile.h"

namespace tunepar::runner {

Result<Efficiency> Efficiency::FromProfile(const HardwareProfile& profile) {
  Efficiency e;
  for (const EfficiencyParameter& p : EfficiencyParameters()) {
    auto it = profile.efficiency.find(std::string(p.name));
    if (it == profile.efficiency.end()) {
      return ConfigError(fmt::format(
          "hardware profile '{}': [efficiency] is missing '{}' ({}), which the performance model needs",
          profile.name, p.name, p.meaning));
    }
    e[p.key] = it->second.value;
  }
  return e;
}

}  // namespace tunepar::runner
