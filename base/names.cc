#include "base/names.h"

#include <fmt/format.h>

namespace tunepar {

namespace {

bool IsNameCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

}  // namespace

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength || name.front() == '.' || name.front() == '-') return false;
  for (char c : name)
    if (!IsNameCharacter(c)) return false;
  return true;
}

Status CheckName(std::string_view what, std::string_view name, StatusCode code) {
  if (IsValidName(name)) return Status::Ok();
  return {code, fmt::format("{} '{}' is not a valid name (1 to {} ASCII letters, digits, '.', '_' and '-', starting "
                            "with a letter, a digit or '_')",
                            what, OneLine(name), kMaxNameLength)};
}

std::string ToValidName(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxNameLength)) out += IsNameCharacter(c) ? c : '_';
  if (out.empty()) return "_";
  if (out.front() == '.' || out.front() == '-') out.front() = '_';
  return out;
}

std::string OneLine(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace tunepar
