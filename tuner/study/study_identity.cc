#include "tuner/study/study_identity.h"

#include <algorithm>
#include <array>
#include <deque>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "base/knobs.h"
#include "base/model_shape.h"
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

std::span<const LateInput> LateInputs() {
  // Per knob added to the table after issue 30 (KnobRow::in_every_key false): its list in the
  // space at [neutral], and it pinned at its neutral value. Built again when the table grows.
  static std::vector<LateInput> rows;
  static std::deque<std::string> texts;  // what the rows' string_views point at
  static int built_for = -1;
  if (built_for != NumKnobs()) {
    rows.clear();
    for (Knob k : Knobs()) {
      const KnobRow& row = RowOf(k);
      if (row.in_every_key || row.neutral < 0) continue;
      const std::string& space_key = texts.emplace_back(fmt::format("knobs.{}", row.name));
      const std::string& space_neutral = texts.emplace_back(fmt::format("[{}]", KnobTomlItem(k, row.neutral)));
      const std::string& pinned_neutral = texts.emplace_back(std::to_string(row.neutral));
      rows.push_back({StudyInput::kSpace, space_key, space_neutral});
      rows.push_back({StudyInput::kPinnedKnobs, row.key_prefix, row.kind == KnobKind::kChoice
                                                                    ? std::string_view(row.choices[row.neutral])
                                                                    : std::string_view(pinned_neutral)});
    }
    // Per field of the model's shape added by issue 33 with a constant neutral value: writing it
    // (mlp = "gelu", linear_biases = true, ...) says what leaving it out says.
    for (const ShapeRow& row : ShapeRows())
      if (!row.neutral.empty()) rows.push_back({StudyInput::kModel, row.name, row.neutral});
    built_for = NumKnobs();
  }
  return rows;
}

namespace {

// The dotted key's parent table and last part in `table` (nullptr when a part is missing or
// not a table).
std::pair<toml::table*, std::string> ParentOf(toml::table& table, std::string_view key) {
  toml::table* parent = &table;
  size_t start = 0;
  for (size_t dot = key.find('.'); dot != std::string_view::npos; start = dot + 1, dot = key.find('.', start)) {
    parent = (*parent)[key.substr(start, dot - start)].as_table();
    if (parent == nullptr) return {nullptr, ""};
  }
  return {parent, std::string(key.substr(start))};
}

// Drops each late input of `input` whose value is its neutral one, and the tables that held only
// such inputs.
void DropNeutral(toml::table& table, StudyInput input, std::span<const LateInput> late) {
  for (const LateInput& field : late) {
    if (field.input != input) continue;
    auto [parent, name] = ParentOf(table, field.key);
    if (parent == nullptr || !parent->contains(name)) continue;
    toml::table value, neutral = toml::parse(fmt::format("v = {}", field.neutral));
    value.insert("v", *parent->get(name));
    if (value != neutral) continue;
    parent->erase(name);
    for (std::string_view key = field.key; parent != nullptr && parent->empty() && parent != &table;) {
      key = key.substr(0, key.rfind('.'));
      auto [above, part] = ParentOf(table, key);
      if (above != nullptr) above->erase(part);
      parent = above;
    }
  }
}

toml::table CanonicalTable(std::string_view text) {
  toml::table table = toml::parse(text);
  table.erase("description");
  StripDocumentation(table);
  CanonicalLaunch(table);
  return table;
}

std::string Serialise(const toml::table& table) {
  std::ostringstream out;
  out << table;
  return out.str();
}

// Drops each late backend setting at its neutral value (a JSON object's dotted key), and the
// pinned knobs it names (core.knobs) as CanonicalPinnedKnobs does.
void DropNeutral(nlohmann::json& settings, std::span<const LateInput> late) {
  for (const LateInput& field : late) {
    if (field.input != StudyInput::kBackendSettings) continue;
    nlohmann::json* parent = &settings;
    std::string_view key = field.key;
    for (size_t dot = key.find('.'); parent != nullptr && dot != std::string_view::npos; dot = key.find('.')) {
      const std::string part(key.substr(0, dot));
      parent = parent->is_object() && parent->contains(part) ? &(*parent)[part] : nullptr;
      key = key.substr(dot + 1);
    }
    const std::string name(key);
    if (parent == nullptr || !parent->is_object() || !parent->contains(name)) continue;
    if ((*parent)[name] == nlohmann::json::parse(field.neutral)) parent->erase(name);
  }
  if (settings.is_object() && settings.contains("core") && settings["core"].is_object() &&
      settings["core"].contains("knobs") && settings["core"]["knobs"].is_string())
    settings["core"]["knobs"] = CanonicalPinnedKnobs(settings["core"]["knobs"].get<std::string>(), late);
}

// The backend settings as the id sees them: today's text as it is, unless a late input at its
// neutral value is left out.
std::string CanonicalSettings(const std::string& settings, std::span<const LateInput> late) {
  if (late.empty()) return settings;
  nlohmann::json j = nlohmann::json::parse(settings, nullptr, false);
  if (j.is_discarded()) return settings;
  const nlohmann::json before = j;
  DropNeutral(j, late);
  return j == before ? settings : j.dump();
}

}  // namespace

std::string CanonicalToml(std::string_view text) {
  try {
    return Serialise(CanonicalTable(text));
  } catch (const toml::parse_error&) {
    return std::string(text);  // unreachable for validated configs; hashing the text is still stable
  }
}

std::string CanonicalToml(std::string_view text, StudyInput input, std::span<const LateInput> late) {
  try {
    toml::table table = CanonicalTable(text);
    DropNeutral(table, input, late);
    return Serialise(table);
  } catch (const toml::parse_error&) {
    return std::string(text);
  }
}

std::string CanonicalPinnedKnobs(std::string_view pinned, std::span<const LateInput> late) {
  std::vector<std::string> kept;
  bool dropped = false;
  std::istringstream words{std::string(pinned)};
  for (std::string word; words >> word;) {
    const bool neutral = std::any_of(late.begin(), late.end(), [&](const LateInput& field) {
      return field.input == StudyInput::kPinnedKnobs && word == fmt::format("{}{}", field.key, field.neutral);
    });
    if (neutral) dropped = true;
    else kept.push_back(word);
  }
  return dropped ? fmt::format("{}", fmt::join(kept, " ")) : std::string(pinned);
}

std::string StudyId(const store::StudyRecord& s, std::span<const LateInput> late, std::string_view salt) {
  const std::string input = fmt::format(
      "tunepar-study-v1\nmodel\n{}\nhardware\n{}\nspace\n{}\nworld {}\nobjective {}\nbackend {}\n{}",
      CanonicalToml(s.model_toml, StudyInput::kModel, late), CanonicalToml(s.hardware_toml, StudyInput::kHardware, late),
      CanonicalToml(s.space_toml, StudyInput::kSpace, late), s.world, s.objective, s.backend,
      CanonicalSettings(s.backend_settings, late));
  // A fresh study of the same inputs (--new) differs by its salt; unsalted ids stay as they were.
  const std::string salted = salt.empty() ? input : fmt::format("{}\nsalt {}", input, salt);
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : salted) hash = (hash ^ c) * 1099511628211ULL;
  return fmt::format("{:016x}", hash);
}

std::string StudyId(const Problem& p, const StudySettings& s) {
  store::StudyRecord inputs;
  inputs.model_toml = p.model_text.text;
  inputs.hardware_toml = p.hardware_text.text;
  inputs.space_toml = p.space_text.text;
  inputs.world = s.world;
  inputs.objective = s.objective;
  inputs.backend = s.backend;
  inputs.backend_settings = s.backend_settings;
  return StudyId(inputs, LateInputs(), s.salt);
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

// The model, hardware and space of two studies, side by side.
using ConfigPair = std::tuple<StudyInput, const std::string*, const std::string*>;
std::array<ConfigPair, 3> Configs(const store::StudyRecord& a, const store::StudyRecord& b) {
  return {ConfigPair{StudyInput::kModel, &a.model_toml, &b.model_toml},
          ConfigPair{StudyInput::kHardware, &a.hardware_toml, &b.hardware_toml},
          ConfigPair{StudyInput::kSpace, &a.space_toml, &b.space_toml}};
}

}  // namespace

bool SameInputsOtherBuild(const store::StudyRecord& s, const store::StudyRecord& proposed,
                          std::span<const LateInput> late) {
  if (CanonicalPinnedKnobs(s.pinned_knobs, late) == CanonicalPinnedKnobs(proposed.pinned_knobs, late) ||
      s.world != proposed.world || s.objective != proposed.objective || s.backend != proposed.backend)
    return false;
  for (const auto& [input, stored, now] : Configs(s, proposed))
    if (CanonicalToml(*stored, input, late) != CanonicalToml(*now, input, late)) return false;
  return SettingsBesidesBuild(CanonicalSettings(s.backend_settings, late)) ==
         SettingsBesidesBuild(CanonicalSettings(proposed.backend_settings, late));
}

const store::StudyRecord* SameInputsOtherBuild(const std::vector<store::StudyRecord>& studies,
                                               const store::StudyRecord& proposed) {
  for (const store::StudyRecord& s : studies)
    if (SameInputsOtherBuild(s, proposed)) return &s;
  return nullptr;
}

std::optional<std::vector<StudyInput>> ConfigsThatDiffer(const store::StudyRecord& s,
                                                         const store::StudyRecord& proposed) {
  if (s.world != proposed.world || s.objective != proposed.objective || s.backend != proposed.backend ||
      SettingsBesidesBuild(CanonicalSettings(s.backend_settings, LateInputs())) !=
          SettingsBesidesBuild(CanonicalSettings(proposed.backend_settings, LateInputs())))
    return std::nullopt;
  std::vector<StudyInput> differ;
  for (const auto& [input, stored, now] : Configs(s, proposed))
    if (CanonicalToml(*stored, input) != CanonicalToml(*now, input)) differ.push_back(input);
  return differ;
}

}  // namespace tunepar
