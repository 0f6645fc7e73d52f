// Self-contained SVG charts for `tunepar report --svg DIR`: readable on screen and on paper
// (titles, axis labels with units, ticks, a grid), no scripts or external fonts.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tunepar {

struct BarChart {
  std::string title, subtitle, x_label;
  std::vector<std::string> labels;      // one bar each, drawn top to bottom
  std::vector<double> values;           // non-negative
  std::vector<std::string> value_text;  // printed at the end of each bar
};
std::string RenderBarChart(const BarChart& chart);

// One dot per point at (category, y); categories are drawn in order along the x axis.
struct StripChart {
  std::string title, subtitle, x_label, y_label;
  std::vector<std::string> categories;
  std::vector<std::pair<int, double>> points;  // (category index, y)
};
std::string RenderStripChart(const StripChart& chart);

// Lines over x, plus optional horizontal reference lines.
struct LineChart {
  std::string title, subtitle, x_label, y_label;
  std::vector<double> x, y;                                // the series (drawn as steps: best so far)
  std::vector<std::pair<double, double>> markers;          // measured points (x, y), drawn as dots
  std::vector<std::pair<double, std::string>> references;  // horizontal lines with a label
};
std::string RenderLineChart(const LineChart& chart);

// Predicted against measured, with the line y = x.
struct ScatterChart {
  std::string title, subtitle, x_label, y_label;
  std::vector<double> x, y;
};
std::string RenderScatterChart(const ScatterChart& chart);

// "Ticks" for an axis: round numbers covering [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, int target = 6);

}  // namespace tunepar
