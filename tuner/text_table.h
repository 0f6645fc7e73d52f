// Plain-text tables for terminal output: right-aligned numbers, left-aligned text.
#pragma once

#include <cstdint>
#include <string>
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

std::string WithCommas(int64_t n);            // 40128 -> "40,128"
std::string Fixed(double value, int digits);  // fixed-point, "-" for NaN
std::string HumanCount(double n);
// TFLOP/s per GPU: one decimal from 1 up; below, two significant digits, so that a small run (a
// CPU, a tiny model: 0.0042) does not read 0.0. "-" for NaN.
std::string TflopsText(double value);
// (1, "trial") -> "1 trial", (13770, "trial") -> "13,770 trials" (nouns whose plural adds an s)
std::string Counted(int64_t n, const std::string& noun);             // 1.01e12 -> "1.01T", 2.21e10 -> "22.1B", 118528 -> "118.5K"

}  // namespace tunepar
