// Self-contained SVG charts for `tunepar report --svg DIR`: readable on screen and on paper
// (titles, axis labels with units, ticks, a grid, a legend where dots differ), no scripts or
// external fonts. Every mark lies inside the view box; a log axis shows only positive values.
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
  // Values up to `floor` are noise: the band [0, floor] is shaded, a dashed line marks the floor
  // (labelled `floor_label`), and the bars under it are grey. 0: no floor.
  double floor = 0;
  std::string floor_label;
};
std::string RenderBarChart(const BarChart& chart);

// One dot per point at (category, y); categories are drawn in order along the x axis.
struct StripChart {
  std::string title, subtitle, x_label, y_label;
  std::vector<std::string> categories;
  std::vector<std::pair<int, double>> points;  // (category index, y)
};
std::string RenderStripChart(const StripChart& chart);

enum class MarkerShape { kDot, kRing, kCross, kTriangle };

// Points drawn alike and named once in the legend (with their count).
struct MarkerSet {
  std::string label;
  MarkerShape shape = MarkerShape::kDot;
  std::string color = "#2b6cb0";
  std::vector<std::pair<double, double>> points;  // (x, y)
};

// A step line over x (the best so far), dots, and horizontal reference lines.
struct LineChart {
  std::string title, subtitle, x_label, y_label;
  std::vector<double> x, y;  // the series, drawn as steps
  std::string line_label;    // the series in the legend ("" : not listed)
  std::vector<MarkerSet> markers;
  // Points with no y value (a trial that ran out of memory or failed): drawn at their x in a lane
  // under the plot's values, labelled `lane_label`; their y is ignored.
  std::vector<MarkerSet> lane;
  std::string lane_label = "no value";
  std::vector<std::pair<double, std::string>> references;  // horizontal lines with a label
  bool integer_x = false;  // x counts things: whole-number ticks only, 0.5 of margin on each side
  std::string empty_note;  // written across the plot when there is no y value to draw
};
std::string RenderLineChart(const LineChart& chart);

// Dots on linear or log axes, optionally with the line y = x and a band around it.
struct ScatterChart {
  std::string title, subtitle, x_label, y_label;
  std::vector<MarkerSet> series;  // on a log axis, points with a non-positive value are skipped
  bool log_x = false, log_y = false;
  bool identity = false;     // the line y = x ("predicted = measured")
  double identity_band = 0;  // > 0: shaded where y is within x (1 +- band)
  std::string identity_band_label;
  std::vector<std::pair<double, std::string>> verticals;  // vertical reference lines with a label
};
std::string RenderScatterChart(const ScatterChart& chart);

// "Ticks" for an axis: round numbers covering [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, int target = 6);
// Whole-number ticks within [lo, hi] (at least one; steps of 1, 2, 5, 10, ...).
std::vector<double> IntegerTicks(double lo, double hi, int target = 8);
// Ticks for a log axis over [lo, hi] (0 < lo <= hi): powers of ten, or 1-2-5 (then 1-9) times
// powers of ten where the range holds too few; at least two, reaching just past the range.
std::vector<double> LogTicks(double lo, double hi);

}  // namespace tunepar
