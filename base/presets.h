// Config presets: the files under configs/, embedded into the binary at build time, and the
// lookup of a --model/--hardware/--space argument (a preset name or a path to a TOML file).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tunepar {

struct EmbeddedPreset {
  std::string_view kind;  // "models", "hardware" or "spaces" (the folder under configs/)
  std::string_view name;  // file name without .toml
  std::string_view path;  // configs/<kind>/<name>.toml
  std::string_view text;
};

const std::vector<EmbeddedPreset>& EmbeddedPresets();  // generated: embedded_presets.cc

struct ConfigText {
  std::string name;    // the preset name, or the file's stem
  std::string origin;  // "preset <name>" or the file path, for messages
  std::string text;
};

// `kind` is "models", "hardware" or "spaces". An argument containing '/' or ending in ".toml"
// is a path; anything else is a preset name.
Result<ConfigText> ResolveConfig(std::string_view kind, const std::string& name_or_path);

std::vector<std::string> PresetNames(std::string_view kind);

}  // namespace tunepar
