#include "base/space_spec.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/toml_fields.h"

namespace tunepar {

const KnobCandidates& SpaceSpec::Of(Knob knob) const {
  const size_t i = static_cast<size_t>(knob);
  return i < knobs.size() ? knobs[i] : RowOf(knob).space_default;
}

KnobCandidates& SpaceSpec::Of(Knob knob) {
  for (size_t i = knobs.size(); i <= static_cast<size_t>(knob); ++i)
    knobs.push_back(RowOf(static_cast<Knob>(i)).space_default);
  return knobs[static_cast<size_t>(knob)];
}

namespace {

// Reads `key` as a non-empty array whose items `parse_item` converts; rejects duplicates.
template <typename T>
Status ReadList(TomlFields& f, std::string_view key, std::vector<T>* out,
                const std::function<Status(const toml::node&, T*)>& parse_item) {
  const toml::node* node = f.Take(key);
  if (node == nullptr) return Status::Ok();
  const toml::array* array = node->as_array();
  if (array == nullptr) return f.Error(key, fmt::format("must be an array, not {}", TomlTypeName(*node)));
  if (array->empty()) return f.Error(key, "must list at least one value");
  std::vector<T> values;
  for (const toml::node& item : *array) {
    T value{};
    TUNEPAR_RETURN_IF_ERROR(parse_item(item, &value));
    if (std::find(values.begin(), values.end(), value) != values.end())
      return f.ErrorAt(item, key, "lists the same value twice");
    values.push_back(value);
  }
  *out = std::move(values);
  return Status::Ok();
}

std::function<Status(const toml::node&, int*)> IntItem(TomlFields& f, std::string_view key, int min,
                                                       int max) {
  return [&f, key, min, max](const toml::node& item, int* out) {
    if (!item.is_integer())
      return f.ErrorAt(item, key, fmt::format("items must be integers, not {}", TomlTypeName(item)));
    int64_t v = item.as_integer()->get();
    if (v < min || v > max)
      return f.ErrorAt(item, key, fmt::format("item {} is out of range [{}, {}]", v, min, max));
    *out = static_cast<int>(v);
    return Status::Ok();
  };
}

std::function<Status(const toml::node&, int*)> ChoiceItem(TomlFields& f, Knob knob) {
  return [&f, knob](const toml::node& item, int* out) {
    const std::string_view key = KnobName(knob);
    if (!item.is_string())
      return f.ErrorAt(item, key, fmt::format("items must be strings, not {}", TomlTypeName(item)));
    Result<int> value = ParseKnobValue(knob, item.as_string()->get());
    if (!value.ok()) return f.ErrorAt(item, key, value.status().message());
    *out = *value;
    return Status::Ok();
  };
}

std::function<Status(const toml::node&, int*)> SwitchItem(TomlFields& f, std::string_view key) {
  return [&f, key](const toml::node& item, int* out) {
    if (!item.is_boolean())
      return f.ErrorAt(item, key, fmt::format("items must be true or false, not {}", TomlTypeName(item)));
    *out = item.as_boolean()->get() ? 1 : 0;
    return Status::Ok();
  };
}

std::function<Status(const toml::node&, int*)> ItemOf(TomlFields& f, Knob knob) {
  const KnobRow& row = RowOf(knob);
  switch (row.kind) {
    case KnobKind::kChoice: return ChoiceItem(f, knob);
    case KnobKind::kSwitch: return SwitchItem(f, row.name);
    case KnobKind::kSize:
    case KnobKind::kStage: break;
  }
  return IntItem(f, row.name, row.min, row.max);
}

// The knob's list under [knobs] (or "divisors", for sizes that may say so); absent: the default.
Status ReadKnob(TomlFields& f, Knob knob, KnobCandidates* out) {
  const KnobRow& row = RowOf(knob);
  const std::string_view key = row.name;
  const toml::node* node = f.Take(key);
  if (node == nullptr && row.space_requires)
    return f.Error(key, "missing (a list of positive integers is required)");
  if (node != nullptr && row.space_divisors && node->is_string()) {
    if (node->as_string()->get() != "divisors")
      return f.Error(key, "must be \"divisors\" or a list of positive integers");
    *out = KnobCandidates{true, {}};
    return Status::Ok();
  }
  std::vector<int> codes;
  TUNEPAR_RETURN_IF_ERROR(ReadList<int>(f, key, &codes, ItemOf(f, knob)));
  if (node != nullptr) *out = KnobCandidates{false, std::move(codes)};
  return Status::Ok();
}

// One side of a rule (`when` or `then`): a table of knob lists, as under [knobs].
Status ReadRuleSide(TomlFields& rule, std::string_view side, std::vector<std::pair<Knob, std::vector<int>>>* out) {
  const toml::table* table = nullptr;
  TUNEPAR_RETURN_IF_ERROR(rule.Table(side, &table));
  if (table->empty()) return rule.Error(side, "must list at least one knob, e.g. { pp = [1] }");
  TomlFields knobs(*table, rule.source(), rule.Path(side) + ".");
  for (auto&& [key, value] : *table) {
    const std::string name(key.str());
    Result<Knob> knob = ParseKnobName(name);
    if (!knob.ok() || KnobName(*knob) != name)
      return knobs.ErrorAt(value, name, fmt::format("is no knob ({})", KnobNamesExpected()));
    std::vector<int> codes;
    TUNEPAR_RETURN_IF_ERROR(ReadList<int>(knobs, name, &codes, ItemOf(knobs, *knob)));
    out->emplace_back(*knob, std::move(codes));
  }
  return Status::Ok();
}

// "zero 2 or 3": a rule side's values of one knob.
std::string SideText(const std::pair<Knob, std::vector<int>>& knob_values) {
  std::vector<std::string> values;
  for (int code : knob_values.second) values.push_back(KnobValueText(knob_values.first, code));
  return fmt::format("{} {}", KnobName(knob_values.first), fmt::join(values, " or "));
}

std::string SideToml(const std::vector<std::pair<Knob, std::vector<int>>>& side) {
  std::vector<std::string> lists;
  for (const auto& [knob, codes] : side) {
    std::vector<std::string> items;
    for (int code : codes) items.push_back(KnobTomlItem(knob, code));
    lists.push_back(fmt::format("{} = [{}]", KnobName(knob), fmt::join(items, ", ")));
  }
  return fmt::format("{{ {} }}", fmt::join(lists, ", "));
}

bool Holds(const std::pair<Knob, std::vector<int>>& knob_values, const Layout& l) {
  const std::vector<int>& codes = knob_values.second;
  return std::find(codes.begin(), codes.end(), KnobCode(knob_values.first, l)) != codes.end();
}

}  // namespace

bool KnobRule::BrokenBy(const Layout& l) const {
  auto holds = [&](const auto& knob_values) { return Holds(knob_values, l); };
  return std::all_of(when.begin(), when.end(), holds) && !std::all_of(then.begin(), then.end(), holds);
}

std::string KnobRule::Text() const {
  std::vector<std::string> conditions, needs;
  for (const auto& knob_values : when) conditions.push_back(SideText(knob_values));
  for (const auto& knob_values : then) needs.push_back(SideText(knob_values));
  return fmt::format("{} needs {}", fmt::join(conditions, " with "), fmt::join(needs, " and "));
}

Status ReadKnobRules(TomlFields& f, std::vector<KnobRule>* rules) {
  const toml::node* node = f.Take("rules");
  if (node == nullptr) return Status::Ok();
  const toml::array* array = node->as_array();
  if (array == nullptr || (!array->empty() && !array->is_array_of_tables()))
    return f.Error("rules", "must be an array of tables: [[rules]] with when = { KNOB = [...] }, then and why");
  for (size_t i = 0; i < array->size(); ++i) {
    TomlFields rule(*array->get(i)->as_table(), f.source(), fmt::format("{}[{}].", f.Path("rules"), i + 1));
    KnobRule read;
    TUNEPAR_RETURN_IF_ERROR(ReadRuleSide(rule, "when", &read.when));
    TUNEPAR_RETURN_IF_ERROR(ReadRuleSide(rule, "then", &read.then));
    TUNEPAR_RETURN_IF_ERROR(rule.String("why", &read.why));
    if (read.why.empty()) return rule.Error("why", "must say why the combination cannot run");
    TUNEPAR_RETURN_IF_ERROR(rule.RejectUnknownKeys());
    rules->push_back(std::move(read));
  }
  return Status::Ok();
}

std::string KnobRulesToml(const std::vector<KnobRule>& rules) {
  if (rules.empty()) return "";
  std::vector<std::string> tables;
  for (const KnobRule& rule : rules) {
    std::ostringstream why;
    why << toml::value<std::string>(rule.why);
    tables.push_back(
        fmt::format("{{ when = {}, then = {}, why = {} }}", SideToml(rule.when), SideToml(rule.then), why.str()));
  }
  return fmt::format("rules = [{}]\n", fmt::join(tables, ", "));
}

const KnobRule* BrokenRule(const std::vector<KnobRule>& rules, const Layout& layout) {
  for (const KnobRule& rule : rules) {
    if (rule.BrokenBy(layout)) return &rule;
  }
  return nullptr;
}

Result<SpaceSpec> ParseSpaceSpec(std::string_view toml_text, std::string_view source, std::string_view file_stem) {
  Result<toml::table> doc = ParseToml(toml_text, source);
  if (!doc.ok()) return doc.status();
  TomlFields root(*doc, source);
  SpaceSpec s;
  TUNEPAR_RETURN_IF_ERROR(root.Name(&s.name, file_stem));
  TUNEPAR_RETURN_IF_ERROR(root.String("description", &s.description, false));
  const toml::table* knobs = nullptr;
  const toml::table* constraints = nullptr;
  TUNEPAR_RETURN_IF_ERROR(root.Table("knobs", &knobs));
  TUNEPAR_RETURN_IF_ERROR(root.Table("constraints", &constraints, false));
  TUNEPAR_RETURN_IF_ERROR(ReadKnobRules(root, &s.rules));
  TUNEPAR_RETURN_IF_ERROR(root.RejectUnknownKeys());

  TomlFields k(*knobs, source, "knobs.");
  for (Knob knob : Knobs()) TUNEPAR_RETURN_IF_ERROR(ReadKnob(k, knob, &s.Of(knob)));
  TUNEPAR_RETURN_IF_ERROR(k.RejectUnknownKeys());

  if (constraints != nullptr) {
    TomlFields c(*constraints, source, "constraints.");
    TUNEPAR_RETURN_IF_ERROR(c.Bool("tp_cross_node", &s.tp_cross_node, false));
    TUNEPAR_RETURN_IF_ERROR(c.RejectUnknownKeys());
  }
  return s;
}

SpaceSpec ForModel(SpaceSpec space, ModelExtent model) {
  for (Knob k : Knobs()) {
    KnobCandidates& c = space.Of(k);
    if (c.divisors_of_experts || c.sequence_splits) c = KnobCandidates{false, c.For(0, model)};
  }
  return space;
}

}  // namespace tunepar
