#include "base/presets.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace tunepar {

namespace {

std::string_view KindNoun(std::string_view kind) {
  if (kind == "models") return "model";
  if (kind == "spaces") return "space";
  return "hardware";
}

}  // namespace

std::vector<std::string> PresetNames(std::string_view kind) {
  std::vector<std::string> names;
  for (const EmbeddedPreset& p : EmbeddedPresets()) {
    if (p.kind == kind) names.emplace_back(p.name);
  }
  return names;
}

Result<ConfigText> ResolveConfig(std::string_view kind, const std::string& arg) {
  const bool is_path =
      arg.find('/') != std::string::npos || (arg.size() > 5 && arg.compare(arg.size() - 5, 5, ".toml") == 0);
  if (!is_path) {
    for (const EmbeddedPreset& p : EmbeddedPresets()) {
      if (p.kind == kind && p.name == arg) {
        return ConfigText{arg, fmt::format("preset {} ({})", arg, p.path), std::string(p.text)};
      }
    }
    return ConfigError(fmt::format("unknown {} preset '{}' (available: {}; or give a path to a .toml file)",
                                   KindNoun(kind), arg, fmt::join(PresetNames(kind), ", ")));
  }
  std::ifstream in(arg, std::ios::binary);
  std::error_code ec;
  if (!in || std::filesystem::is_directory(arg, ec)) {
    return ConfigError(
        fmt::format("cannot read {} config '{}': {}", KindNoun(kind), arg,
                    std::filesystem::exists(arg, ec) ? "not a readable file" : "no such file"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ConfigText{std::filesystem::path(arg).stem().string(), arg, text.str()};
}

}  // namespace tunepar
