#include "tuner/study_identity.h"

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "base/provenance.h"

namespace tunepar {

namespace {

// Drops what documents a value without changing it: descriptions, and the origin and source of
// hardware numbers ({ value = ..., origin = ..., source = ... }).
void StripDocumentation(toml::table& table) {
  if (table.contains("value")) {
    table.erase("origin");
    table.erase("source");
  }
  for (auto&& [key, node] : table) {
    if (toml::table* child = node.as_table()) StripDocumentation(*child);
  }
}

// A hardware profile's launch settings that only launch scripts read (runner/hardware_profile.h,
// LaunchSettings): no trial runs differently with them, so a study does not either, and the
// studies made before they existed keep their ids.
constexpr const char* kLaunchScriptOnly[] = {"device_files", "requires_account", "requires_partition", "modules",
                                             "mpi_plugins",  "net_plugin",       "container",        "mem_per_gpu"};

// [launch]: without the launch-script settings, and each environment setting as its value
// (`NAME = { value = "1", source = "..." }` reads as `NAME = "1"`, as profiles wrote it before
// settings carried their source).
void CanonicalLaunch(toml::table& profile) {
  toml::table* launch = profile["launch"].as_table();
  if (launch == nullptr) return;
  for (const char* key : kLaunchScriptOnly) launch->erase(key);
  toml::table* env = (*launch)["env"].as_table();
  if (env == nullptr) return;
  std::vector<std::pair<std::string, std::string>> plain;
  for (auto&& [name, setting] : *env) {
    const toml::table* documented = setting.as_table();
    if (documented == nullptr || documented->size() != 1) continue;
    if (const toml::value<std::string>* value = documented->get_as<std::string>("value"))
      plain.emplace_back(std::string(name.str()), value->get());
  }
  for (const auto& [name, value] : plain) env->insert_or_assign(name, value);
}

}  // namespace

std::string CanonicalToml(std::string_view text) {
  try {
    toml::table table = toml::parse(text);
    table.erase("description");
    StripDocumentation(table);
    CanonicalLaunch(table);
    std::ostringstream out;
    out << table;
    return out.str();
  } catch (const toml::parse_error&) {
    return std::string(text);  // unreachable for validated configs; hashing the text is still stable
  }
}

std::string StudyId(const Problem& p, const StudySettings& s) {
  const std::string input = fmt::format(
      "tunepar-study-v1\nmodel\n{}\nhardware\n{}\nspace\n{}\nworld {}\nobjective {}\nbackend {}\n{}",
      CanonicalToml(p.model_text.text), CanonicalToml(p.hardware_text.text), CanonicalToml(p.space_text.text),
      s.world, s.objective, s.backend, s.backend_settings);
  // A fresh study of the same inputs (--new) differs by its salt; unsalted ids stay as they were.
  const std::string salted = s.salt.empty() ? input : input + "\nsalt " + s.salt;
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : salted) hash = (hash ^ c) * 1099511628211ULL;
  return fmt::format("{:016x}", hash);
}

std::string DefaultStudyName(const Problem& p, const StudySettings& s, std::string_view id) {
  return fmt::format("{}-w{}-{}{}", p.model.name, s.world, id.substr(0, 8),
                     s.salt.empty() ? "" : "-" + s.salt);
}

store::StudyRecord MakeStudyRecord(const Problem& p, const StudySettings& s, std::string id, std::string name,
                                   std::string node_id) {
  store::StudyRecord r;
  r.id = std::move(id);
  r.name = std::move(name);
  r.world = s.world;
  r.model_name = p.model.name;
  r.hardware_name = p.hardware.name;
  r.space_name = p.space.name;
  r.model_toml = p.model_text.text;
  r.hardware_toml = p.hardware_text.text;
  r.space_toml = p.space_text.text;
  r.objective = s.objective;
  r.backend = s.backend;
  r.backend_settings = s.backend_settings;
  r.created_at = UtcNow();
  r.created_by = std::move(node_id);
  r.seed = s.seed;
  r.acquisition = s.acquisition;
  r.pinned_knobs = s.pinned_knobs;
  return r;
}

namespace {

// The backend settings without what the program's build can run (core.knobs, the pinned knobs):
// two studies equal in these and in their inputs differ only by the build they ran on.
std::string SettingsBesidesBuild(const std::string& settings) {
  nlohmann::json j = nlohmann::json::parse(settings, nullptr, false);
  if (!j.is_object() || !j.contains("core") || !j["core"].is_object()) return settings;
  j["core"].erase("knobs");
  return j.dump();
}

}  // namespace

bool SameInputsOtherBuild(const store::StudyRecord& s, const store::StudyRecord& proposed) {
  if (s.pinned_knobs == proposed.pinned_knobs || s.world != proposed.world || s.objective != proposed.objective ||
      s.backend != proposed.backend)
    return false;
  if (CanonicalToml(s.model_toml) != CanonicalToml(proposed.model_toml) ||
      CanonicalToml(s.hardware_toml) != CanonicalToml(proposed.hardware_toml) ||
      CanonicalToml(s.space_toml) != CanonicalToml(proposed.space_toml))
    return false;
  return SettingsBesidesBuild(s.backend_settings) == SettingsBesidesBuild(proposed.backend_settings);
}

const store::StudyRecord* SameInputsOtherBuild(const std::vector<store::StudyRecord>& studies,
                                               const store::StudyRecord& proposed) {
  for (const store::StudyRecord& s : studies)
    if (SameInputsOtherBuild(s, proposed)) return &s;
  return nullptr;
}

}  // namespace tunepar
