#include "tuner/text_table.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tunepar {

void TextTable::AddColumn(std::string header, Align align) {
  headers_.push_back(std::move(header));
  aligns_.push_back(align);
}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render() const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    width[c] = headers_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) out += "  ";
      const size_t pad = width[c] - cells[c].size();
      if (aligns_[c] == Align::kRight)
        out += std::string(pad, ' ') + cells[c];
      else
        out += cells[c] + (c + 1 < cells.size() ? std::string(pad, ' ') : "");
    }
    return out + "\n";
  };
  std::string out = line(headers_);
  size_t total = 0;
  for (size_t w : width) total += w;
  out += std::string(total + 2 * (width.empty() ? 0 : width.size() - 1), '-') + "\n";
  for (const auto& row : rows_) out += line(row);
  return out;
}

std::string WithCommas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string HumanCount(double n) {
  if (n >= 1e12) return fmt::format("{:.2f}T", n / 1e12);
  if (n >= 1e9) return fmt::format("{:.1f}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f}K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

std::string Counted(int64_t n, const std::string& noun) {
  return WithCommas(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string Fixed(double value, int digits) {
  if (std::isnan(value)) return "-";
  return fmt::format("{:.{}f}", value, digits);
}

std::string TflopsText(double value) {
  if (std::isnan(value)) return "-";
  if (value == 0 || std::abs(value) >= 1) return fmt::format("{:.1f}", value);
  return fmt::format("{:.2g}", value);
}

}  // namespace tunepar
