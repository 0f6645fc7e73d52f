#include "tuner/backends/command_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/knobs.h"
#include "base/model_shape.h"
#include "base/space_spec.h"
#include "base/toml_fields.h"

namespace tunepar {

namespace {

// The [knobs] table: the values the program supports, as TOML lines for LoadProblem.
Status ReadKnobs(TomlFields& f, std::string* knobs) {
  const toml::table* table = nullptr;
  TUNEPAR_RETURN_IF_ERROR(f.Table("knobs", &table, false));
  if (table == nullptr) return Status::Ok();
  toml::table declared;
  for (auto&& [key, value] : *table) {
    const std::string name(key.str());
    Result<Knob> knob = ParseKnobName(name);
    if (!knob.ok() || KnobName(*knob) != name)
      return f.ErrorAt(value, "knobs." + name, fmt::format("is no knob ({})", KnobNamesExpected()));
    if (!value.is_array()) return f.ErrorAt(value, "knobs." + name, "must be a list of values, e.g. [1, 2]");
    declared.insert(key, value);
  }
  std::ostringstream text;
  text << declared << "\n";
  *knobs = text.str();
  return Status::Ok();
}

// One [shape] value as the field's placeholder gives it: a choice's name, 1/0 for a switch, else
// the integer; empty when it is no value of the field.
std::string ShapeValueText(const ShapeRow& row, const toml::node& item) {
  if (row.is_switch) return item.is_boolean() ? (item.as_boolean()->get() ? "1" : "0") : "";
  if (!row.choices.empty()) {
    const auto* name = item.as_string();
    return name != nullptr && ShapeChoiceIndex(row, name->get()) >= 0 ? name->get() : "";
  }
  const auto* number = item.as_integer();
  return number != nullptr && number->get() >= row.min ? std::to_string(number->get()) : "";
}

std::string ShapeValuesExpected(const ShapeRow& row) {
  if (row.is_switch) return "true or false";
  if (!row.choices.empty()) return fmt::format("{}", fmt::join(row.choices, ", "));
  return fmt::format("integers of at least {}", row.min);
}

// The [shape] table: the values of shape fields the program can train (no ALiBi in Megatron-LM).
Status ReadShape(TomlFields& f, std::vector<runner::ShapeValues>* shape) {
  const toml::table* table = nullptr;
  TUNEPAR_RETURN_IF_ERROR(f.Table("shape", &table, false));
  if (table == nullptr) return Status::Ok();
  for (auto&& [key, value] : *table) {
    const std::string name(key.str());
    const auto row = std::find_if(ShapeRows().begin(), ShapeRows().end(),
                                  [&](const ShapeRow& r) { return r.name == name; });
    if (row == ShapeRows().end()) {
      std::vector<std::string_view> fields;
      for (const ShapeRow& r : ShapeRows()) fields.push_back(r.name);
      return f.ErrorAt(value, "shape." + name, fmt::format("is no shape field ({})", fmt::join(fields, ", ")));
    }
    if (!value.is_array() || value.as_array()->empty())
      return f.ErrorAt(value, "shape." + name, "must be a non-empty list of values, e.g. [\"learned\", \"rotary\"]");
    runner::ShapeValues allowed{name, {}};
    for (const toml::node& item : *value.as_array()) {
      const std::string text = ShapeValueText(*row, item);
      if (text.empty())
        return f.ErrorAt(item, "shape." + name, fmt::format("values must be {}", ShapeValuesExpected(*row)));
      allowed.values.push_back(text);
    }
    shape->push_back(std::move(allowed));
  }
  return Status::Ok();
}

Status ReadFile(const std::string& path, runner::CommandBackendOptions* o, std::string* metric, std::string* knobs) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ConfigError(fmt::format("cannot read command config '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  Result<toml::table> doc = ParseToml(text.str(), path);
  if (!doc.ok()) return doc.status();
  TomlFields f(*doc, path);
  TUNEPAR_RETURN_IF_ERROR(f.String("command", &o->command, false));
  TUNEPAR_RETURN_IF_ERROR(f.String("metric", metric, false));
  TUNEPAR_RETURN_IF_ERROR(f.String("metric_regex", &o->metric_regex, false));
  TUNEPAR_RETURN_IF_ERROR(f.String("metric_json", &o->metric_json, false));
  TUNEPAR_RETURN_IF_ERROR(f.String("memory_regex", &o->memory_regex, false));
  TUNEPAR_RETURN_IF_ERROR(f.String("memory_json", &o->memory_json, false));
  TUNEPAR_RETURN_IF_ERROR(f.Number("timeout_s", &o->timeout_s, false));
  TUNEPAR_RETURN_IF_ERROR(f.String("workdir", &o->workdir, false));
  TUNEPAR_RETURN_IF_ERROR(f.Bool("reads_layout_env", &o->reads_layout_env, false));
  TUNEPAR_RETURN_IF_ERROR(ReadKnobs(f, knobs));
  std::vector<KnobRule> rules;
  TUNEPAR_RETURN_IF_ERROR(ReadKnobRules(f, &rules));
  *knobs += KnobRulesToml(rules);
  TUNEPAR_RETURN_IF_ERROR(ReadShape(f, &o->shape));
  o->source = fmt::format("command config {}", std::filesystem::path(path).filename().string());
  if (const toml::node* patterns = f.Take("oom_patterns")) {
    if (!patterns->is_array()) return f.Error("oom_patterns", "must be an array of regular expressions");
    o->oom_patterns.clear();
    for (const toml::node& p : *patterns->as_array()) {
      if (!p.is_string()) return f.ErrorAt(p, "oom_patterns", "items must be strings");
      o->oom_patterns.push_back(p.as_string()->get());
    }
  }
  const toml::table* env = nullptr;
  TUNEPAR_RETURN_IF_ERROR(f.Table("env", &env, false));
  if (env != nullptr) {
    for (auto&& [k, v] : *env) {
      if (!v.is_string()) return f.ErrorAt(v, "env." + std::string(k.str()), "values must be strings");
      o->env.emplace_back(std::string(k.str()), v.as_string()->get());
    }
  }
  return f.RejectUnknownKeys();
}

}  // namespace

Result<runner::CommandBackendOptions> ResolveCommandOptions(const CommandFlags& flags, std::string* knobs) {
  runner::CommandBackendOptions o;
  std::string metric = "step_time_s";
  std::string declared;
  // A config's [knobs] and metric describe its own command: another command with them is a mix
  // no one meant.
  if (!flags.config_file.empty() && !flags.command.empty()) {
    return InvalidArgument(fmt::format(
        "give the command in one place: --command would replace the command of --command-config {} (whose [knobs] "
        "and metric describe its own); drop one of them",
        flags.config_file));
  }
  if (!flags.config_file.empty()) TUNEPAR_RETURN_IF_ERROR(ReadFile(flags.config_file, &o, &metric, &declared));
  if (knobs != nullptr) *knobs = declared;
  if (flags.reads_layout_env) o.reads_layout_env = true;
  if (!flags.command.empty()) o.command = flags.command;
  if (!flags.metric.empty()) metric = flags.metric;
  if (!flags.metric_regex.empty()) {
    o.metric_regex = flags.metric_regex;
    o.metric_json.clear();
  }
  if (!flags.metric_json.empty()) {
    o.metric_json = flags.metric_json;
    o.metric_regex.clear();
  }
  if (!flags.memory_regex.empty()) {
    o.memory_regex = flags.memory_regex;
    o.memory_json.clear();
  }
  if (!flags.memory_json.empty()) {
    o.memory_json = flags.memory_json;
    o.memory_regex.clear();
  }
  for (const std::string& p : flags.oom_patterns) o.oom_patterns.push_back(p);
  for (const std::string& kv : flags.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return InvalidArgument(fmt::format("--env '{}' is not KEY=VALUE", kv));
    o.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (flags.timeout_s > 0) o.timeout_s = flags.timeout_s;
  if (!flags.workdir.empty()) o.workdir = flags.workdir;
  Result<runner::MetricKind> kind = runner::ParseMetricKind(metric);
  if (!kind.ok()) return kind.status().WithContext("--metric");
  o.metric = *kind;
  TUNEPAR_RETURN_IF_ERROR(runner::ValidateCommandOptions(o));
  return o;
}

namespace {

// Ok when `layout` breaks none of the rules `declared` holds; else the rule, and the program's why.
Status CheckDeclaredRules(const Layout& layout, const toml::table& declared, const std::string& program) {
  TomlFields f(declared, program);
  std::vector<KnobRule> rules;
  TUNEPAR_RETURN_IF_ERROR(ReadKnobRules(f, &rules));
  const KnobRule* broken = BrokenRule(rules, layout);
  if (broken == nullptr) return Status::Ok();
  return InvalidArgument(fmt::format("{} does not run layout {}: {} (its [[rules]]: {})", program, LayoutKey(layout),
                                     broken->Text(), broken->why));
}

}  // namespace

Status CheckDeclaredKnobs(const Layout& layout, const std::string& knobs, const std::string& program) {
  if (knobs.empty()) return Status::Ok();
  Result<toml::table> declared = ParseToml(knobs, program + " [knobs]");
  if (!declared.ok()) return declared.status();
  TUNEPAR_RETURN_IF_ERROR(CheckDeclaredRules(layout, *declared, program));
  for (auto&& [key, values] : *declared) {
    Result<Knob> knob = ParseKnobName(key.str());
    const toml::array* list = values.as_array();
    if (!knob.ok() || list == nullptr) continue;  // ResolveCommandOptions has refused these already
    std::vector<std::string> runs;
    bool among = false;
    for (const toml::node& item : *list) {
      std::string text;
      if (const auto* s = item.as_string()) text = s->get();
      if (const auto* i = item.as_integer()) text = std::to_string(i->get());
      if (const auto* b = item.as_boolean()) text = b->get() ? "on" : "off";
      Result<int> code = ParseKnobValue(*knob, text);
      if (!code.ok()) continue;
      runs.push_back(KnobValueText(*knob, *code));
      among = among || *code == KnobCode(*knob, layout);
    }
    if (!among) {
      return InvalidArgument(fmt::format("{} runs {} {} only (its [knobs]); layout {} has {} {}", program,
                                         KnobName(*knob), fmt::join(runs, ", "), LayoutKey(layout), KnobName(*knob),
                                         KnobValue(*knob, layout)));
    }
  }
  return Status::Ok();
}

}  // namespace tunepar
