#include "base/toml_fields.h"

#include <limits>

#include <fmt/format.h>

namespace tunepar {

Result<toml::table> ParseToml(std::string_view text, std::string_view source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return ConfigError(fmt::format("{}:{}:{}: malformed TOML: {}", source, e.source().begin.line,
                                   e.source().begin.column, e.description()));
  }
}

std::string_view TomlTypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: return "a date/time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

TomlFields::TomlFields(const toml::table& table, std::string_view source, std::string prefix)
    : table_(table), source_(source), prefix_(std::move(prefix)) {}

const toml::node* TomlFields::Take(std::string_view key) {
  known_.emplace(key);
  return table_.get(key);
}

Status TomlFields::Error(std::string_view key, std::string_view what) const {
  const toml::node* node = key.empty() ? nullptr : table_.get(key);
  if (node != nullptr) return ErrorAt(*node, key, what);
  if (key.empty()) {
    std::string where = prefix_.empty() ? "" : fmt::format(" [{}]", prefix_.substr(0, prefix_.size() - 1));
    return ConfigError(fmt::format("{}:{} {}", source_, where, what));
  }
  return ConfigError(fmt::format("{}: key '{}': {}", source_, Path(key), what));
}

Status TomlFields::ErrorAt(const toml::node& node, std::string_view key, std::string_view what) const {
  const toml::source_region& where = node.source();
  if (where.begin.line == 0) return ConfigError(fmt::format("{}: key '{}': {}", source_, Path(key), what));
  return ConfigError(
      fmt::format("{}:{}:{}: key '{}': {}", source_, where.begin.line, where.begin.column, Path(key), what));
}

Status TomlFields::Int(std::string_view key, int64_t* out, bool required) {
  const toml::node* node = Take(key);
  if (node == nullptr) return required ? Error(key, "missing (an integer is required)") : Status::Ok();
  if (!node->is_integer()) return Error(key, fmt::format("must be an integer, not {}", TomlTypeName(*node)));
  *out = node->as_integer()->get();
  return Status::Ok();
}

Status TomlFields::PositiveInt(std::string_view key, int* out, bool required) {
  int64_t value = 0;
  const bool present = table_.get(key) != nullptr;
  TUNEPAR_RETURN_IF_ERROR(Int(key, &value, required));
  if (!present) return Status::Ok();
  if (value < 1) return Error(key, fmt::format("must be a positive integer, got {}", value));
  if (value > std::numeric_limits<int>::max()) return Error(key, fmt::format("is too large ({})", value));
  *out = static_cast<int>(value);
  return Status::Ok();
}

Status TomlFields::Number(std::string_view key, double* out, bool required) {
  const toml::node* node = Take(key);
  if (node == nullptr) return required ? Error(key, "missing (a number is required)") : Status::Ok();
  if (!node->is_number()) return Error(key, fmt::format("must be a number, not {}", TomlTypeName(*node)));
  *out = node->value<double>().value();
  return Status::Ok();
}

Status TomlFields::String(std::string_view key, std::string* out, bool required) {
  const toml::node* node = Take(key);
  if (node == nullptr) return required ? Error(key, "missing (a string is required)") : Status::Ok();
  if (!node->is_string()) return Error(key, fmt::format("must be a string, not {}", TomlTypeName(*node)));
  *out = node->as_string()->get();
  return Status::Ok();
}

Status TomlFields::Name(std::string* out, std::string_view file_stem) {
  const toml::node* node = Take("name");
  if (node == nullptr) {
    if (file_stem.empty()) return Error("name", "missing (a string is required)");
    *out = std::string(file_stem);
    return Status::Ok();
  }
  if (!node->is_string()) return Error("name", fmt::format("must be a string, not {}", TomlTypeName(*node)));
  *out = node->as_string()->get();
  if (out->empty()) return Error("name", "must not be empty");
  return Status::Ok();
}

Status TomlFields::Bool(std::string_view key, bool* out, bool required) {
  const toml::node* node = Take(key);
  if (node == nullptr) return required ? Error(key, "missing (true or false is required)") : Status::Ok();
  if (!node->is_boolean())
    return Error(key, fmt::format("must be true or false, not {}", TomlTypeName(*node)));
  *out = node->as_boolean()->get();
  return Status::Ok();
}

Status TomlFields::Table(std::string_view key, const toml::table** out, bool required) {
  const toml::node* node = Take(key);
  if (node == nullptr) return required ? Error(key, "missing (a table is required)") : Status::Ok();
  if (!node->is_table()) return Error(key, fmt::format("must be a table, not {}", TomlTypeName(*node)));
  *out = node->as_table();
  return Status::Ok();
}

Status TomlFields::RejectUnknownKeys() const {
  for (auto&& [key, node] : table_) {
    if (known_.count(key.str()) != 0) continue;
    std::string allowed;
    for (const std::string& k : known_) allowed += (allowed.empty() ? "" : ", ") + k;
    return ErrorAt(node, key.str(), fmt::format("unknown key (allowed here: {})", allowed));
  }
  return Status::Ok();
}

}  // namespace tunepar
