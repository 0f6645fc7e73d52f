#include "tuner/study/problem.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "base/knobs.h"
#include "base/names.h"
#include "base/toml_fields.h"

namespace tunepar {

namespace {

// "tp = [1]; precision = [\"fp32\"]" from TOML lines, for a one-line origin.
std::string Flatten(const std::string& lines) {
  std::string out;
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    out += (out.empty() ? "" : "; ") + line;
  }
  return out;
}

// The declared rules (a command config's) after the space's own, each once (a study's stored
// space, which holds them already, takes them again unchanged).
Status AddRules(const toml::node& declared, toml::table* space, const std::string& origin) {
  if (!space->contains("rules")) space->insert("rules", toml::array{});
  toml::array* rules = (*space)["rules"].as_array();
  if (rules == nullptr || declared.as_array() == nullptr)
    return ConfigError(fmt::format("{}: rules must be an array of tables ([[rules]])", origin));
  for (const toml::node& rule : *declared.as_array()) {
    const bool held = std::any_of(rules->begin(), rules->end(), [&](const toml::node& r) {
      return r.is_table() && rule.is_table() && *r.as_table() == *rule.as_table();
    });
    if (!held) rules->push_back(rule);
  }
  return Status::Ok();
}

// `lines` without the line declaring `knob` (TOML refuses a key twice; a later declaration
// replaces an earlier one). Every declaration is one `key = value` line (ReadKnobs, KnobRulesToml).
std::string WithoutDeclaration(const std::string& lines, Knob knob) {
  const std::string prefix = fmt::format("{} =", KnobName(knob));
  std::string kept;
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) kept += line + "\n";
  }
  return kept;
}

}  // namespace

Result<ConfigText> WithDeclaredKnobs(ConfigText space, const std::string& knobs) {
  if (knobs.empty()) return space;
  Result<toml::table> declared = ParseToml(knobs, "the declared knobs");
  if (!declared.ok()) return declared.status();
  Result<toml::table> doc = ParseToml(space.text, space.origin);
  if (!doc.ok()) return doc.status();
  if (!doc->contains("knobs")) doc->insert("knobs", toml::table{});
  toml::table* table = (*doc)["knobs"].as_table();
  if (table == nullptr) return ConfigError(fmt::format("{}: knobs must be a table", space.origin));
  for (auto&& [key, value] : *declared) {
    if (key.str() == "rules") TUNEPAR_RETURN_IF_ERROR(AddRules(value, &*doc, space.origin));
    else table->insert_or_assign(key, value);
  }
  std::ostringstream text;
  text << *doc;
  space.text = text.str();
  space.origin += " with the declared knobs (" + Flatten(knobs) + ")";
  return space;
}

Result<Problem> LoadProblem(const std::string& model, const std::string& hardware, const std::string& space,
                            const std::string& knobs) {
  Result<ConfigText> m = ResolveConfig("models", model);
  if (!m.ok()) return m.status();
  Result<ConfigText> h = ResolveConfig("hardware", hardware);
  if (!h.ok()) return h.status();
  Result<ConfigText> s = ResolveConfig("spaces", space);
  if (!s.ok()) return s.status();
  Result<ConfigText> declared = WithDeclaredKnobs(std::move(*s), knobs);
  if (!declared.ok()) return declared.status();
  return ParseProblem(std::move(*m), std::move(*h), std::move(*declared));
}

Result<std::string> KnobDeclarations(const std::string& declared, const std::vector<std::string>& fixes) {
  std::string lines = declared;
  for (const std::string& fix : fixes) {
    const size_t eq = fix.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == fix.size())
      return InvalidArgument(fmt::format("--fix '{}' is not KNOB=VALUE (e.g. --fix tp=1, --fix precision=bf16)", fix));
    Result<Knob> knob = ParseKnobName(fix.substr(0, eq));
    if (!knob.ok()) return knob.status().WithContext("--fix " + fix);
    std::vector<std::string> items;
    std::istringstream values(fix.substr(eq + 1));
    for (std::string value; std::getline(values, value, ',');) {
      Result<int> code = ParseKnobValue(*knob, value);
      if (!code.ok()) return code.status().WithContext("--fix " + fix);
      items.push_back(KnobTomlItem(*knob, *code));
    }
    lines = WithoutDeclaration(lines, *knob) + fmt::format("{} = [{}]\n", KnobName(*knob), fmt::join(items, ", "));
  }
  return lines;
}

Result<Problem> ParseProblem(ConfigText model, ConfigText hardware, ConfigText space) {
  Problem p;
  p.model_text = std::move(model);
  p.hardware_text = std::move(hardware);
  p.space_text = std::move(space);

  Result<ModelShape> shape = ParseModelShape(p.model_text.text, p.model_text.origin, p.model_text.name);
  if (!shape.ok()) return shape.status();
  Result<runner::HardwareProfile> profile =
      runner::ParseHardwareProfile(p.hardware_text.text, p.hardware_text.origin, p.hardware_text.name);
  if (!profile.ok()) return profile.status();
  Result<SpaceSpec> spec = ParseSpaceSpec(p.space_text.text, p.space_text.origin, p.space_text.name);
  if (!spec.ok()) return spec.status();
  p.space = ForModel(std::move(*spec), ModelExtent{shape->experts, shape->seq_len});
  p.model = std::move(*shape);
  p.hardware = std::move(*profile);
  return p;
}

Status CheckConfigNames(const Problem& problem) {
  const std::pair<const ConfigText*, const std::string*> named[] = {{&problem.model_text, &problem.model.name},
                                                                     {&problem.hardware_text, &problem.hardware.name},
                                                                     {&problem.space_text, &problem.space.name}};
  for (const auto& [config, name] : named) {
    if (Status s = CheckName("name", *name, StatusCode::kConfig); !s.ok()) return s.WithContext(config->origin);
  }
  return Status::Ok();
}

Status CheckWorld(int64_t world, const runner::HardwareProfile& hw) {
  if (world < 1)
    return InvalidArgument(fmt::format("--world must be a positive number of GPUs, got {}", world));
  if (world > (1 << 24)) return InvalidArgument(fmt::format("--world {} is beyond any machine", world));
  if (world > hw.gpus_per_node && world % hw.gpus_per_node != 0) {
    return InvalidArgument(fmt::format(
        "--world {} does not fill whole nodes of {} GPUs ({}); use a multiple of {} (or at most {})", world,
        hw.gpus_per_node, hw.name, hw.gpus_per_node, hw.gpus_per_node));
  }
  return Status::Ok();
}

Status CheckHardwareRunsPrecisions(const Problem& p, int world) {
  const std::vector<int> offered = p.space.Values(Knob::kPrecision, world);
  const bool only_fp8 =
      !offered.empty() && std::all_of(offered.begin(), offered.end(),
                                      [](int code) { return code == static_cast<int>(Precision::kFp8); });
  if (!only_fp8 || p.hardware.HasFp8()) return Status::Ok();
  return InvalidArgument(fmt::format("precision fp8 on {}: {} (rule {}); use a profile with peak_tflops_fp8",
                                     p.hardware.name, ConstraintRule(Constraint::kFp8NeedsPeak),
                                     ConstraintId(Constraint::kFp8NeedsPeak)));
}

search::SpaceQuery MakeSpaceQuery(const Problem& p, int world) {
  return search::SpaceQuery{world, p.hardware.gpus_per_node, &p.model, &p.space, p.hardware.HasFp8()};
}

}  // namespace tunepar
