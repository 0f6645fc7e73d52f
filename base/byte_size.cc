#include "base/byte_size.h"

#include <cctype>
#include <cstdlib>
#include <string>
#include <utility>

namespace tunepar {

std::optional<double> ParseByteSize(std::string_view text) {
  const std::string s(text);
  const char* begin = s.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  if (end == begin || !(value > 0)) return std::nullopt;
  std::string unit;
  for (const char* c = end; *c != '\0'; ++c) {
    if (!std::isspace(static_cast<unsigned char>(*c))) unit += static_cast<char>(std::tolower(*c));
  }
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},        {"b", 1},           {"kb", 1e3},        {"mb", 1e6},        {"gb", 1e9},
      {"tb", 1e12},   {"kib", 1024.0},    {"mib", 1 << 20},   {"gib", 1 << 30},   {"tib", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) return value * scale;
  }
  return std::nullopt;
}

}  // namespace tunepar
