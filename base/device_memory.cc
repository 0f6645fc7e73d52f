#include "base/device_memory.h"

#include <cmath>

#include <fmt/format.h>

#include "base/toml_fields.h"

namespace tunepar {

Result<double> DeviceMemoryBytes(std::string_view hardware_toml, std::string_view source) {
  Result<toml::table> doc = ParseToml(hardware_toml, source);
  if (!doc.ok()) return doc.status();
  TomlFields root(*doc, source);
  const toml::table* device = nullptr;
  TUNEPAR_RETURN_IF_ERROR(root.Table("device", &device));
  TomlFields d(*device, source, "device.");
  const toml::table* memory = nullptr;
  TUNEPAR_RETURN_IF_ERROR(d.Table("memory_gb", &memory));
  TomlFields m(*memory, source, "device.memory_gb.");
  double gb = 0;
  TUNEPAR_RETURN_IF_ERROR(m.Number("value", &gb));
  if (!std::isfinite(gb) || gb <= 0) return m.Error("value", fmt::format("must be a positive number, got {}", gb));
  return gb * kBytesPerGb;
}

}  // namespace tunepar
