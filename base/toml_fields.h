// Strict reading of TOML tables for tunepar's config files: every key is known, typed and
// range-checked, and every error is one line naming the file, the line, the key and what is
// wrong, e.g. "my-model.toml:4:9: key 'heads': must divide hidden (6144 % 50 != 0)".
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "base/status.h"

namespace tunepar {

// Parses TOML text; `source` names where it came from (a path or "preset gpt-1t").
Result<toml::table> ParseToml(std::string_view text, std::string_view source);

class TomlFields {
 public:
  // `prefix` is the dotted path of `table` in the document ("" for the root, "device." ...).
  TomlFields(const toml::table& table, std::string_view source, std::string prefix = "");

  // Each reader marks `key` as known. A missing optional key leaves *out unchanged.
  Status Int(std::string_view key, int64_t* out, bool required = true);
  Status PositiveInt(std::string_view key, int* out, bool required = true);
  Status Number(std::string_view key, double* out, bool required = true);
  Status String(std::string_view key, std::string* out, bool required = true);
  Status Bool(std::string_view key, bool* out, bool required = true);
  // The config's `name`: the key when present (never empty), else the file's stem (a file of the
  // user's own needs no name key); with no stem either, the key is required.
  Status Name(std::string* out, std::string_view file_stem);
  Status Table(std::string_view key, const toml::table** out, bool required = true);

  // Returns the node for `key` (nullptr when absent) and marks the key as known.
  const toml::node* Take(std::string_view key);

  // An error about `key` (or the table itself when key is empty), located in the file.
  Status Error(std::string_view key, std::string_view what) const;
  // An error about an element inside the value of `key` (an array item, say).
  Status ErrorAt(const toml::node& node, std::string_view key, std::string_view what) const;

  // Fails on the first key that no reader asked for, listing the keys that are allowed.
  Status RejectUnknownKeys() const;

  std::string_view source() const { return source_; }
  std::string Path(std::string_view key) const { return prefix_ + std::string(key); }

 private:
  const toml::table& table_;
  std::string source_;
  std::string prefix_;
  std::set<std::string, std::less<>> known_;
};

std::string_view TomlTypeName(const toml::node& node);

}  // namespace tunepar
