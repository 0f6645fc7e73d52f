#include "tuner/output/text_table.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace tunepar {

namespace {

struct CodePointRange {
  char32_t first, last;
};

// Unicode's East Asian Width W and F ranges (UAX #11), merged where they touch.
constexpr CodePointRange kWide[] = {
    {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},   {0x23E9, 0x23EC},   {0x23F0, 0x23F0},
    {0x23F3, 0x23F3},   {0x25FD, 0x25FE},   {0x2614, 0x2615},   {0x2648, 0x2653},   {0x267F, 0x267F},
    {0x2693, 0x2693},   {0x26A1, 0x26A1},   {0x26AA, 0x26AB},   {0x26BD, 0x26BE},   {0x26C4, 0x26C5},
    {0x26CE, 0x26CE},   {0x26D4, 0x26D4},   {0x26EA, 0x26EA},   {0x26F2, 0x26F3},   {0x26F5, 0x26F5},
    {0x26FA, 0x26FA},   {0x26FD, 0x26FD},   {0x2705, 0x2705},   {0x270A, 0x270B},   {0x2728, 0x2728},
    {0x274C, 0x274C},   {0x274E, 0x274E},   {0x2753, 0x2755},   {0x2757, 0x2757},   {0x2795, 0x2797},
    {0x27B0, 0x27B0},   {0x27BF, 0x27BF},   {0x2B1B, 0x2B1C},   {0x2B50, 0x2B50},   {0x2B55, 0x2B55},
    {0x2E80, 0x303E},   {0x3041, 0x33FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},
    {0xA960, 0xA97F},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},   {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},
    {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x16FE0, 0x16FE4}, {0x17000, 0x18CFF}, {0x1B000, 0x1B2FF},
    {0x1F004, 0x1F004}, {0x1F0CF, 0x1F0CF}, {0x1F18E, 0x1F18E}, {0x1F191, 0x1F19A}, {0x1F200, 0x1F251},
    {0x1F260, 0x1F265}, {0x1F300, 0x1F64F}, {0x1F680, 0x1F6FF}, {0x1F7E0, 0x1F7EB}, {0x1F90C, 0x1F9FF},
    {0x1FA70, 0x1FAFF}, {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD},
};

// Combining marks and zero-width characters: drawn over or between their neighbours.
constexpr CodePointRange kZeroWidth[] = {
    {0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x0610, 0x061A}, {0x064B, 0x065F},
    {0x0E31, 0x0E31}, {0x0E34, 0x0E3A}, {0x0E47, 0x0E4E}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF},
    {0x200B, 0x200F}, {0x2028, 0x202E}, {0x2060, 0x2064}, {0x20D0, 0x20FF}, {0x302A, 0x302F},
    {0x3099, 0x309A}, {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF}, {0xE0100, 0xE01EF},
};

template <size_t N>
bool InRanges(char32_t c, const CodePointRange (&ranges)[N]) {
  for (const CodePointRange& r : ranges)
    if (c >= r.first && c <= r.last) return true;
  return false;
}

// The code point that starts at s[i] and its length in bytes; a byte that starts no valid
// sequence reads as itself, one byte long.
std::pair<char32_t, size_t> DecodeUtf8(std::string_view s, size_t i) {
  const unsigned char lead = static_cast<unsigned char>(s[i]);
  const size_t length = lead < 0x80           ? 1
                        : (lead >> 5) == 0x6  ? 2
                        : (lead >> 4) == 0xE  ? 3
                        : (lead >> 3) == 0x1E ? 4
                                              : 0;
  if (length <= 1 || i + length > s.size()) return {lead, 1};
  char32_t c = lead & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    const unsigned char next = static_cast<unsigned char>(s[i + k]);
    if ((next >> 6) != 0x2) return {lead, 1};
    c = (c << 6) | (next & 0x3F);
  }
  return {c, length};
}

}  // namespace

size_t DisplayWidth(std::string_view utf8) {
  size_t width = 0;
  for (size_t i = 0; i < utf8.size();) {
    const auto [c, length] = DecodeUtf8(utf8, i);
    i += length;
    if (length > 1 && InRanges(c, kZeroWidth)) continue;
    width += length > 1 && InRanges(c, kWide) ? 2 : 1;
  }
  return width;
}

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
    width[c] = DisplayWidth(headers_[c]);
    for (const auto& row : rows_) width[c] = std::max(width[c], DisplayWidth(row[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) out += "  ";
      const size_t pad = width[c] - DisplayWidth(cells[c]);
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

std::string ParametersText(double total, double active) {
  if (active == total) return HumanCount(total) + " parameters";
  return fmt::format("{} parameters, {} active", HumanCount(total), HumanCount(active));
}

std::string Counted(int64_t n, const std::string& noun) {
  return WithCommas(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string Fixed(double value, int digits) {
  if (std::isnan(value)) return "-";
  return fmt::format("{:.{}f}", value, digits);
}

std::string GigabytesText(double bytes) {
  if (std::isnan(bytes)) return "-";
  if (bytes == 0 || std::abs(bytes) >= 1e9) return fmt::format("{:.1f}", bytes / 1e9);
  if (std::abs(bytes) >= 1e6) return fmt::format("{:.1f} MB", bytes / 1e6);
  if (std::abs(bytes) >= 1e3) return fmt::format("{:.1f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

std::string TflopsText(double value) {
  if (std::isnan(value)) return "-";
  if (value == 0 || std::abs(value) >= 1) return fmt::format("{:.1f}", value);
  return fmt::format("{:.2g}", value);
}

}  // namespace tunepar
