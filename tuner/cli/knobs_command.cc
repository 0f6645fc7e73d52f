// `tunepar knobs`: the knob table (base/knobs.h), one row per knob, with the rules that involve it,
// and the model's shape table (base/model_shape.h).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/knobs.h"
#include "base/layout_rules.h"
#include "base/model_shape.h"
#include "tuner/cli/commands.h"
#include "tuner/output/text_table.h"

namespace tunepar {

namespace {

std::string_view KindName(KnobKind kind) {
  switch (kind) {
    case KnobKind::kSize: return "size";
    case KnobKind::kSwitch: return "switch";
    case KnobKind::kChoice: return "choice";
    case KnobKind::kStage: return "stage";
  }
  return "?";
}

// "fp32, fp16, bf16", "on, off", "0..1", ">= 1 (divisors)"
std::string Domain(Knob knob) {
  const KnobRow& row = RowOf(knob);
  switch (row.kind) {
    case KnobKind::kChoice: return fmt::format("{}", fmt::join(row.choices, ", "));
    case KnobKind::kSwitch: return "off, on";
    case KnobKind::kStage: return fmt::format("{}..{}", row.min, row.max);
    case KnobKind::kSize: break;
  }
  return fmt::format(">= {}", row.min);
}

std::string SpaceDefault(Knob knob) {
  const KnobCandidates& c = RowOf(knob).space_default;
  if (c.divisors_of_world) return "divisors";
  if (c.divisors_of_experts) return "divisors of the model's experts";
  if (c.sequence_splits) return fmt::format("powers of two keeping >= {} tokens a rank", kMinTokensPerContextRank);
  std::vector<std::string> values;
  for (int code : c.codes) values.push_back(KnobValueText(knob, code));
  return fmt::format("{}{}", fmt::join(values, ","), RowOf(knob).space_requires ? " (required)" : "");
}

std::vector<std::string> Spellings(Knob knob) {
  const KnobRow& row = RowOf(knob);
  std::vector<std::string> names = {std::string(row.name)};
  names.insert(names.end(), row.aliases.begin(), row.aliases.end());
  return names;
}

std::vector<std::string> RulesOf(Knob knob) {
  std::vector<std::string> ids;
  for (const ConstraintRow& rule : ConstraintRows()) {
    if (rule.decided_at == knob) ids.emplace_back(rule.id);
  }
  return ids;
}

nlohmann::json KnobJson(Knob knob) {
  const KnobRow& row = RowOf(knob);
  std::vector<std::string> aliases(row.aliases.begin(), row.aliases.end());
  const int neutral = NeutralKnobCode(knob);
  return {{"name", row.name},
          {"aliases", aliases},
          {"predict_flag", row.flag},
          {"placeholders", Spellings(knob)},
          {"key_fragment", KnobFragment(knob, neutral >= 0 ? neutral : row.space_default.For(1).front())},
          {"kind", KindName(row.kind)},
          {"values", Domain(knob)},
          {"neutral", neutral >= 0 ? nlohmann::json(KnobValueText(knob, neutral)) : nlohmann::json()},
          {"space_default", SpaceDefault(knob)},
          {"in_every_key", row.in_every_key},
          {"rules", RulesOf(knob)},
          {"help", row.help}};
}

std::string ShapeKind(const ShapeRow& row) {
  if (row.is_switch) return "switch";
  if (!row.choices.empty()) return "choice";
  return row.min == 0 ? "non-negative integer" : "positive integer";
}

nlohmann::json ShapeJson(const ShapeRow& row) {
  nlohmann::json j = {{"name", row.name},
                      {"symbol", row.symbol},
                      {"required", row.required},
                      {"kind", ShapeKind(row)},
                      {"help", row.help}};
  if (!row.choices.empty()) j["choices"] = row.choices;
  return j;
}

TextTable ShapeTable() {
  TextTable t;
  for (const char* column : {"shape field", "symbol", "kind", "in a model file", "meaning"})
    t.AddColumn(column, TextTable::Align::kLeft);
  for (const ShapeRow& row : ShapeRows()) {
    t.AddRow({std::string(row.name), row.symbol.empty() ? "-" : std::string(row.symbol),
              row.choices.empty() ? ShapeKind(row) : fmt::format("{}", fmt::join(row.choices, " | ")), row.required ? "required" : "optional",
              std::string(row.help)});
  }
  return t;
}

Status RunKnobs(const GlobalOptions& global) {
  if (global.json) {
    nlohmann::json out = {{"knobs", nlohmann::json::array()}, {"shape_fields", nlohmann::json::array()}};
    for (Knob k : Knobs()) out["knobs"].push_back(KnobJson(k));
    for (const ShapeRow& row : ShapeRows()) out["shape_fields"].push_back(ShapeJson(row));
    fmt::print("{}\n", out.dump(2));
    return Status::Ok();
  }
  TextTable t;
  for (const char* column : {"knob", "also", "predict", "kind", "values", "neutral", "space default", "rules decided here"})
    t.AddColumn(column, TextTable::Align::kLeft);
  for (Knob k : Knobs()) {
    const KnobRow& row = RowOf(k);
    const int neutral = NeutralKnobCode(k);
    const std::vector<std::string> rules = RulesOf(k);
    t.AddRow({std::string(row.name), fmt::format("{}", fmt::join(row.aliases, ",")), std::string(row.flag),
              std::string(KindName(row.kind)), Domain(k), neutral >= 0 ? KnobValueText(k, neutral) : "-",
              SpaceDefault(k), rules.empty() ? "-" : fmt::format("{}", fmt::join(rules, ", "))});
  }
  fmt::print("{}", t.Render());
  Layout example;
  example.tp = 4;
  example.pp = 2;
  example.micro_batch = 1;
  example.num_micro_batches = 8;
  fmt::print(
      "\nEach knob is a list under [knobs] in a space file (by its name), a --fix KNOB=VALUE (name or alias), a\n"
      "{{NAME}} placeholder of a command template (name or alias; switches give 1/0), a predict option and a\n"
      "column of show, export and the store. Layout keys carry every knob (e.g. {}); a knob\n"
      "added later appears in a key only away from its neutral value.\n",
      LayoutKey(example));
  fmt::print("\nThe model's shape (keys of a model file, columns of a measured-runs CSV, command placeholders):\n{}",
             ShapeTable().Render());
  return Status::Ok();
}

}  // namespace

void AddKnobsCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  CLI::App* cmd = app.add_subcommand("knobs", "List the layout knobs (names, values, neutral values, rules) and the model shape fields");
  cmd->callback([&global, result] { *result = RunKnobs(global); });
}

}  // namespace tunepar
