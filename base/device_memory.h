// A device's memory as a hardware profile gives it (device.memory_gb, GB of 1e9 bytes): all that
// tunepar-core needs of a profile, to cap each rank. The full profile is runner/hardware_profile.h.
#pragma once

#include <string_view>

#include "base/status.h"

namespace tunepar {

inline constexpr double kBytesPerGb = 1e9;

// device.memory_gb.value of a hardware TOML, in bytes; one line naming the file and the key
// when it is missing or not a positive number.
Result<double> DeviceMemoryBytes(std::string_view hardware_toml, std::string_view source);

}  // namespace tunepar
