// Plain-text tables for terminal output: right-aligned numbers, left-aligned text, columns
// aligned by the width a terminal shows (DisplayWidth), not by bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tunepar {

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  void AddColumn(std::string header, Align align = Align::kRight);
  void AddRow(std::vector<std::string> cells);
  std::string Render() const;  // header, a rule, then the rows; ends with a newline
  bool empty() const { return rows_.empty(); }

 private:
  std::vector<std::string> headers_;
  std::vector<Align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

// The columns a terminal gives `utf8`: one per code point, two for an East Asian wide or
// fullwidth character (CJK, Hangul, fullwidth forms, most emoji), none for a combining mark or a
// zero-width character. A byte that is not valid UTF-8 counts one column.
size_t DisplayWidth(std::string_view utf8);

std::string WithCommas(int64_t n);            // 40128 -> "40,128"
std::string Fixed(double value, int digits);  // fixed-point, "-" for NaN
std::string HumanCount(double n);
// A model's size in summaries: "1.01T parameters", a MoE model's "46.7B parameters, 12.9B active".
std::string ParametersText(double total, double active);
// TFLOP/s per GPU: one decimal from 1 up; below, two significant digits, so that a small run (a
// CPU, a tiny model: 0.0042) does not read 0.0. "-" for NaN.
std::string TflopsText(double value);
// Bytes in a column headed GB: one decimal of GB from 1 GB up (62.9); below, the size in its own
// unit (1.3 MB, 512.0 kB, 900 B), so that a small program's memory does not read 0.0. "-" for NaN.
std::string GigabytesText(double bytes);
// (1, "trial") -> "1 trial", (13770, "trial") -> "13,770 trials" (nouns whose plural adds an s)
std::string Counted(int64_t n, const std::string& noun);             // 1.01e12 -> "1.01T", 2.21e10 -> "22.1B", 118528 -> "118.5K"

}  // namespace tunepar
