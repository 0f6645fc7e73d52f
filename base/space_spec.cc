#include "base/space_spec.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "base/toml_fields.h"

namespace tunepar {

std::vector<int> SizeCandidates::For(int world) const {
  if (!divisors_of_world) return values;
  std::vector<int> divisors;
  for (int d = 1; d <= world; ++d) {
    if (world % d == 0) divisors.push_back(d);
  }
  return divisors;
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

std::function<Status(const toml::node&, bool*)> BoolItem(TomlFields& f, std::string_view key) {
  return [&f, key](const toml::node& item, bool* out) {
    if (!item.is_boolean())
      return f.ErrorAt(item, key, fmt::format("items must be true or false, not {}", TomlTypeName(item)));
    *out = item.as_boolean()->get();
    return Status::Ok();
  };
}

template <typename Enum>
std::function<Status(const toml::node&, Enum*)> EnumItem(TomlFields& f, std::string_view key,
                                                         Result<Enum> (*parse)(std::string_view)) {
  return [&f, key, parse](const toml::node& item, Enum* out) {
    if (!item.is_string())
      return f.ErrorAt(item, key, fmt::format("items must be strings, not {}", TomlTypeName(item)));
    Result<Enum> value = parse(item.as_string()->get());
    if (!value.ok()) return f.ErrorAt(item, key, value.status().message());
    *out = *value;
    return Status::Ok();
  };
}

Status ReadSizes(TomlFields& f, std::string_view key, SizeCandidates* out) {
  const toml::node* node = f.Take(key);
  if (node == nullptr) return Status::Ok();
  if (node->is_string()) {
    if (node->as_string()->get() != "divisors")
      return f.Error(key, "must be \"divisors\" or a list of positive integers");
    *out = SizeCandidates{true, {}};
    return Status::Ok();
  }
  std::vector<int> values;
  TUNEPAR_RETURN_IF_ERROR(ReadList<int>(f, key, &values, IntItem(f, key, 1, 1 << 24)));
  *out = SizeCandidates{false, std::move(values)};
  return Status::Ok();
}

}  // namespace

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
  TUNEPAR_RETURN_IF_ERROR(root.RejectUnknownKeys());

  TomlFields k(*knobs, source, "knobs.");
  TUNEPAR_RETURN_IF_ERROR(ReadSizes(k, "tp", &s.tp));
  TUNEPAR_RETURN_IF_ERROR(ReadSizes(k, "pp", &s.pp));
  if (k.Take("micro_batch") == nullptr)
    return k.Error("micro_batch", "missing (a list of positive integers is required)");
  TUNEPAR_RETURN_IF_ERROR(
      ReadList<int>(k, "micro_batch", &s.micro_batch, IntItem(k, "micro_batch", 1, 1 << 20)));
  TUNEPAR_RETURN_IF_ERROR(
      ReadList<Precision>(k, "precision", &s.precision, EnumItem<Precision>(k, "precision", ParsePrecision)));
  TUNEPAR_RETURN_IF_ERROR(ReadList<int>(k, "zero", &s.zero, IntItem(k, "zero", 0, 1)));
  TUNEPAR_RETURN_IF_ERROR(
      ReadList<Recompute>(k, "recompute", &s.recompute, EnumItem<Recompute>(k, "recompute", ParseRecompute)));
  TUNEPAR_RETURN_IF_ERROR(ReadList<bool>(k, "seq_parallel", &s.seq_parallel, BoolItem(k, "seq_parallel")));
  TUNEPAR_RETURN_IF_ERROR(
      ReadList<int>(k, "virtual_stages", &s.virtual_stages, IntItem(k, "virtual_stages", 1, 1024)));
  TUNEPAR_RETURN_IF_ERROR(
      ReadList<bool>(k, "flash_attention", &s.flash_attention, BoolItem(k, "flash_attention")));
  TUNEPAR_RETURN_IF_ERROR(k.RejectUnknownKeys());

  if (constraints != nullptr) {
    TomlFields c(*constraints, source, "constraints.");
    TUNEPAR_RETURN_IF_ERROR(c.Bool("tp_cross_node", &s.tp_cross_node, false));
    TUNEPAR_RETURN_IF_ERROR(c.RejectUnknownKeys());
  }
  return s;
}

}  // namespace tunepar
