#include "tuner/output/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace tunepar {

namespace {

constexpr double kWidth = 800, kHeight = 500;
constexpr const char* kFont = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";
constexpr const char* kBlue = "#2b6cb0";
constexpr const char* kRed = "#c53030";
constexpr const char* kGrey = "#a0aec0";
constexpr double kCharWidth = 6.6;  // of 12 px text, to wrap and place it
constexpr double kLaneHeight = 26;  // LineChart::lane

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Number(double v) {
  const double a = std::abs(v);
  if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:.3g}k", v / 1e3);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 1 || a == 0) return fmt::format("{:.3g}", v);
  return fmt::format("{:.2g}", v);
}

// The plot area in pixels and the data range it shows (log10 of it on a log axis).
struct Frame {
  double left, right, top, bottom;
  double x0, x1, y0, y1;
  bool log_x = false, log_y = false;
  double X(double x) const {
    const double t = log_x ? std::log10(x) : x, t0 = log_x ? std::log10(x0) : x0,
                 t1 = log_x ? std::log10(x1) : x1;
    return left + (t - t0) / (t1 - t0) * (right - left);
  }
  double Y(double y) const {
    const double t = log_y ? std::log10(y) : y, t0 = log_y ? std::log10(y0) : y0,
                 t1 = log_y ? std::log10(y1) : y1;
    return bottom - (t - t0) / (t1 - t0) * (bottom - top);
  }
};

// Words of `text` in lines of at most `width` characters.
std::vector<std::string> Wrap(const std::string& text, size_t width) {
  std::vector<std::string> lines;
  std::string line;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(at, end - at);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    at = end + 1;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

// The opening of the SVG with the title and the subtitle (wrapped); *bottom: where they end.
std::string Open(const std::string& title, const std::string& subtitle, double* bottom) {
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" {2}>\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      kWidth, kHeight, kFont);
  s += fmt::format(
      "<text x=\"{}\" y=\"30\" font-size=\"20\" font-weight=\"bold\" text-anchor=\"middle\">{}</text>\n",
      kWidth / 2, Escape(title));
  const std::vector<std::string> lines = Wrap(subtitle, static_cast<size_t>((kWidth - 40) / kCharWidth));
  for (size_t i = 0; i < lines.size(); ++i) {
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#444\" text-anchor=\"middle\">{}</text>\n",
        kWidth / 2, 50 + 15 * i, Escape(lines[i]));
  }
  *bottom = lines.empty() ? 36 : 54 + 15 * (lines.size() - 1);
  return s;
}

std::string Marker(MarkerShape shape, const std::string& color, double x, double y) {
  switch (shape) {
    case MarkerShape::kDot:
      return fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.75\"/>\n", x, y, color);
    case MarkerShape::kRing:
      return fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"white\" stroke=\"{}\" stroke-width=\"2\"/>\n",
          x, y, color);
    case MarkerShape::kCross:
      return fmt::format(
          "<path d=\"M {:.1f} {:.1f} L {:.1f} {:.1f} M {:.1f} {:.1f} L {:.1f} {:.1f}\" stroke=\"{}\" "
          "stroke-width=\"2\"/>\n",
          x - 4, y - 4, x + 4, y + 4, x - 4, y + 4, x + 4, y - 4, color);
    case MarkerShape::kTriangle:
      return fmt::format("<polygon points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\" fill=\"{}\"/>\n", x,
                         y - 5, x - 4.5, y + 3.5, x + 4.5, y + 3.5, color);
  }
  return "";
}

// Legend entries, centred in rows under the subtitle from `y`; *bottom: where they end.
struct LegendEntry {
  std::string label;
  MarkerShape shape = MarkerShape::kDot;
  std::string color;
  enum class Sample { kMarker, kLine, kBand } sample = Sample::kMarker;
};
std::string Legend(const std::vector<LegendEntry>& entries, double y, double* bottom) {
  std::vector<std::vector<const LegendEntry*>> rows(1);
  std::vector<double> widths(1, 0);
  for (const LegendEntry& e : entries) {
    const double w = 30 + kCharWidth * static_cast<double>(e.label.size()) + 18;
    if (widths.back() > 0 && widths.back() + w > kWidth - 40) rows.emplace_back(), widths.push_back(0);
    rows.back().push_back(&e);
    widths.back() += w;
  }
  std::string s;
  for (size_t r = 0; r < rows.size(); ++r) {
    double x = (kWidth - widths[r]) / 2;
    const double row_y = y + 16 * static_cast<double>(r);
    for (const LegendEntry* e : rows[r]) {
      if (e->sample == LegendEntry::Sample::kLine) {
        s += fmt::format(
            "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
            "stroke-width=\"2.5\"/>\n",
            x, row_y - 4, x + 22, row_y - 4, e->color);
      } else if (e->sample == LegendEntry::Sample::kBand) {
        s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"22\" height=\"10\" fill=\"{}\"/>\n", x,
                         row_y - 9, e->color);
      } else {
        s += Marker(e->shape, e->color, x + 11, row_y - 4);
      }
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\">{}</text>\n", x + 28, row_y,
                       Escape(e->label));
      x += 30 + kCharWidth * static_cast<double>(e->label.size()) + 18;
    }
  }
  *bottom = entries.empty() ? y - 16 : y + 16 * static_cast<double>(rows.size() - 1);
  return s;
}

// Grid, ticks and axis labels; the frame's box reaches down to `plot_bottom` (below f.bottom
// when a lane is drawn under the values).
std::string Axes(const Frame& f, const std::vector<double>& xticks, const std::vector<double>& yticks,
                 const std::string& x_label, const std::string& y_label, double plot_bottom) {
  std::string s;
  for (double t : yticks) {
    const double y = f.Y(t);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n",
                     f.left, y, f.right, y);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"end\">{}</text>\n",
                     f.left - 6, y + 4, Number(t));
  }
  for (double t : xticks) {
    const double x = f.X(t);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>\n", x,
                     f.top, x, plot_bottom);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n", x,
                     plot_bottom + 18, Number(t));
  }
  s += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#333\"/>\n",
      f.left, f.top, f.right - f.left, plot_bottom - f.top);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"14\" text-anchor=\"middle\">{}</text>\n",
                   (f.left + f.right) / 2, kHeight - 14, Escape(x_label));
  s += fmt::format(
      "<text x=\"18\" y=\"{:.1f}\" font-size=\"14\" text-anchor=\"middle\" transform=\"rotate(-90 18 "
      "{:.1f})\">{}</text>\n",
      (f.top + plot_bottom) / 2, (f.top + plot_bottom) / 2, Escape(y_label));
  return s;
}

// The finite values' range (positive ones only for a log axis); [0, 1] when there is none, and
// widened around a single value.
std::pair<double, double> Range(const std::vector<double>& v, bool include_zero, bool log = false) {
  double lo = INFINITY, hi = -INFINITY;
  for (double x : v) {
    if (!std::isfinite(x) || (log && x <= 0)) continue;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  if (!std::isfinite(lo)) return log ? std::pair(1.0, 10.0) : std::pair(0.0, 1.0);
  if (include_zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  if (log) return hi / lo < 1.2 ? std::pair(lo / 1.1, hi * 1.1) : std::pair(lo, hi);
  if (hi - lo < 1e-12) {
    const double pad = std::max(std::abs(hi) * 0.1, 1e-9);
    lo -= pad;
    hi += pad;
  }
  return {lo, hi};
}

// [lo, hi] widened by `fraction` of its span on each side (of its logarithm on a log axis).
std::pair<double, double> Padded(std::pair<double, double> r, double fraction, bool log) {
  if (!log) {
    const double pad = fraction * (r.second - r.first);
    return {r.first >= 0 ? std::max(0.0, r.first - pad) : r.first - pad, r.second + pad};
  }
  const double factor = std::pow(r.second / r.first, fraction);
  return {r.first / factor, r.second * factor};
}

// An axis: its ticks and the data range the frame shows (the ticks' for a linear axis).
struct Axis {
  std::vector<double> ticks;
  double lo, hi;
};
Axis MakeAxis(std::pair<double, double> range, bool log) {
  if (!log) {
    std::vector<double> t = NiceTicks(range.first, range.second);
    return {t, t.front(), t.back()};
  }
  // Out to the next power of ten when it is within half a decade, so that the ends are labelled.
  const double below = std::pow(10.0, std::floor(std::log10(range.first))),
               above = std::pow(10.0, std::ceil(std::log10(range.second)));
  if (range.first / below < std::sqrt(10.0)) range.first = below;
  if (above / range.second < std::sqrt(10.0)) range.second = above;
  std::vector<double> t = LogTicks(range.first, range.second);
  return {t, std::min(range.first, t.front()), std::max(range.second, t.back())};
}

std::string ClipToFrame(const Frame& f) {
  return fmt::format(
      "<clipPath id=\"plot\"><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
      "height=\"{:.1f}\"/></clipPath>\n",
      f.left, f.top, f.right - f.left, f.bottom - f.top);
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  }
  // From the largest round number at or below lo to the smallest at or above hi.
  std::vector<double> ticks;
  const double first = std::floor(lo / step + 1e-9) * step, last = std::ceil(hi / step - 1e-9) * step;
  for (double t = first; t <= last + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::vector<double> IntegerTicks(double lo, double hi, int target) {
  const double first = std::ceil(lo - 1e-9), last = std::floor(hi + 1e-9);
  if (last < first) return {std::round((lo + hi) / 2)};
  double step = 1;
  for (double magnitude = 1; (last - first) / step > target; magnitude *= 10) {
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
      step = m * magnitude;
      if ((last - first) / step <= target) break;
    }
  }
  std::vector<double> ticks;
  for (double t = std::ceil(first / step) * step; t <= last; t += step) ticks.push_back(t + 0.0);  // never -0
  if (ticks.empty()) ticks.push_back(first + 0.0);
  return ticks;
}

std::vector<double> LogTicks(double lo, double hi) {
  const int k0 = static_cast<int>(std::floor(std::log10(lo))),
            k1 = static_cast<int>(std::ceil(std::log10(hi)));
  auto series = [&](const std::vector<double>& mantissas) {
    std::vector<double> ticks;
    for (int k = k0; k <= k1; ++k) {
      for (double m : mantissas) {
        const double t = m * std::pow(10.0, k);
        if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push_back(t);
      }
    }
    return ticks;
  };
  std::vector<double> ticks = series({1});
  if (ticks.size() > 8) {
    // Every n-th power of ten, so that about 6 are labelled.
    const size_t n = (ticks.size() + 5) / 6;
    std::vector<double> thinned;
    for (size_t i = 0; i < ticks.size(); i += n) thinned.push_back(ticks[i]);
    return thinned;
  }
  if (ticks.size() >= 3) return ticks;
  ticks = series({1, 2, 5});
  if (ticks.size() >= 3) return ticks;
  const std::vector<double> nine = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  ticks = series(nine);
  if (ticks.size() >= 2) return ticks;
  // Too narrow a range for any two: the 1-9 values just below lo and just above hi.
  double below = 0, above = INFINITY;
  for (int k = k0 - 1; k <= k1 + 1; ++k) {
    for (double m : nine) {
      const double t = m * std::pow(10.0, k);
      if (t <= lo) below = std::max(below, t);
      if (t >= hi) above = std::min(above, t);
    }
  }
  ticks.insert(ticks.begin(), below);
  ticks.push_back(above);
  ticks.erase(std::unique(ticks.begin(), ticks.end()), ticks.end());
  return ticks;
}

std::string RenderBarChart(const BarChart& c) {
  double header = 0;
  std::string s = Open(c.title, c.subtitle, &header);
  double max_value = c.floor;
  for (double v : c.values) max_value = std::max(max_value, v);
  const std::vector<double> ticks = NiceTicks(0, std::max(1e-12, max_value) * 1.15);
  Frame f{.left = 170,
          .right = kWidth - 40,
          .top = header + (c.floor > 0 ? 30 : 20),
          .bottom = kHeight - 60,
          .x0 = 0,
          .x1 = ticks.back(),
          .y0 = 0,
          .y1 = 1};
  if (c.floor > 0) {
    // The noise band under the grid, its line and label over it.
    s +=
        fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#edf0f4\"/>\n",
                    f.left, f.top, f.X(c.floor) - f.left, f.bottom - f.top);
  }
  s += Axes(f, ticks, {}, c.x_label, "", f.bottom);
  if (c.floor > 0) {
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#4a5568\" "
        "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n",
        f.X(c.floor), f.top - 4, f.bottom);
    const bool right_half = f.X(c.floor) > (f.left + f.right) / 2;
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" fill=\"#4a5568\" text-anchor=\"{}\">{}</text>\n",
        f.X(c.floor), f.top - 8, right_half ? "end" : "start", Escape(c.floor_label));
  }
  const double band = (f.bottom - f.top) / std::max<size_t>(1, c.labels.size());
  for (size_t i = 0; i < c.labels.size(); ++i) {
    const double y = f.top + band * i + band * 0.15, h = band * 0.7;
    const double w = f.X(std::max(0.0, c.values[i])) - f.left;
    const bool noise = c.floor > 0 && c.values[i] <= c.floor;
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n",
                     f.left, y, w, h, noise ? kGrey : kBlue);
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"14\" text-anchor=\"end\" fill=\"{}\">{}</text>\n",
        f.left - 8, y + h / 2 + 5, noise ? "#718096" : "black", Escape(c.labels[i]));
    if (i < c.value_text.size()) {
      // Past the bar, or inside its end when the text would leave the view box; a halo keeps it
      // legible where it crosses the floor's line.
      const double end = f.left + w;
      const double text_width = kCharWidth * 1.1 * static_cast<double>(c.value_text[i].size());
      const bool inside = end + 6 + text_width > kWidth - 4;
      s += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"13\" text-anchor=\"{}\" fill=\"{}\"{}>{}</text>\n",
          inside ? end - 6 : end + 6, y + h / 2 + 5, inside ? "end" : "start",
          inside ? "white" : (noise ? "#718096" : "black"),
          inside ? "" : " stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\"",
          Escape(c.value_text[i]));
    }
  }
  return s + "</svg>\n";
}

std::string RenderStripChart(const StripChart& c) {
  double header = 0;
  std::string s = Open(c.title, c.subtitle, &header);
  std::vector<double> ys;
  for (const auto& p : c.points) ys.push_back(p.second);
  const auto [lo, hi] = Range(ys, true);
  const std::vector<double> ticks = NiceTicks(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo));
  const double n = static_cast<double>(std::max<size_t>(1, c.categories.size()));
  Frame f{.left = 90,
          .right = kWidth - 30,
          .top = std::max(85.0, header + 20),
          .bottom = kHeight - 60,
          .x0 = -0.5,
          .x1 = n - 0.5,
          .y0 = ticks.front(),
          .y1 = ticks.back()};
  s += Axes(f, {}, ticks, c.x_label, c.y_label, f.bottom);
  for (size_t i = 0; i < c.categories.size(); ++i) {
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"13\" text-anchor=\"middle\">{}</text>\n",
                     f.X(static_cast<double>(i)), f.bottom + 18, Escape(c.categories[i]));
  }
  s += fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#888\" stroke-dasharray=\"4 "
      "3\"/>\n",
      f.left, f.Y(0), f.right, f.Y(0));
  for (size_t k = 0; k < c.points.size(); ++k) {
    // A deterministic jitter spreads the dots of one category.
    const double jitter = (static_cast<double>((k * 7919) % 101) / 100.0 - 0.5) * 0.5;
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.6\"/>\n",
                     f.X(c.points[k].first + jitter), f.Y(c.points[k].second), kBlue);
  }
  return s + "</svg>\n";
}

namespace {

using Reference = std::pair<double, std::string>;

// The reference lines drawn, and those named in the legend instead: a reference far outside the
// data would flatten it.
void SplitReferences(const LineChart& c, double data_lo, double data_hi, bool has_values,
                     std::vector<Reference>* drawn, std::vector<Reference>* named) {
  for (const auto& r : c.references) {
    const double span = std::max(data_hi - data_lo, std::abs(data_hi) * 0.1);
    const bool far = has_values && (r.first > data_hi + 2 * span || r.first < data_lo - 2 * span);
    (far ? named : drawn)->push_back(r);
  }
}

std::vector<LegendEntry> LineLegend(const LineChart& c, const std::vector<Reference>& named, double x_last) {
  std::vector<LegendEntry> legend;
  if (!c.line_label.empty() && !c.x.empty() && x_last > c.x.front())
    legend.push_back({c.line_label, MarkerShape::kDot, kBlue, LegendEntry::Sample::kLine});
  for (const MarkerSet& m : c.markers)
    if (!m.points.empty()) legend.push_back({m.label, m.shape, m.color});
  for (const MarkerSet& m : c.lane)
    if (!m.points.empty()) legend.push_back({m.label, m.shape, m.color});
  for (const auto& [y, label] : named)
    legend.push_back({fmt::format("{}: {} (off the chart)", label, Number(y)), MarkerShape::kDot, kRed,
                      LegendEntry::Sample::kLine});
  return legend;
}

// The x ticks, and the frame's x range: whole numbers with half a step of margin (trials), or
// nice ticks from 0.
std::vector<double> LineXTicks(const LineChart& c, const std::vector<double>& xs, Frame* f) {
  if (c.integer_x) {
    const double first = xs.empty() ? 1.0 : std::floor(*std::min_element(xs.begin(), xs.end())),
                 last =
                     xs.empty() ? first : std::max(first, std::ceil(*std::max_element(xs.begin(), xs.end())));
    f->x0 = first - 0.5;
    f->x1 = last + 0.5;
    return IntegerTicks(first, last);
  }
  const auto [xlo, xhi] = Range(xs, false);
  std::vector<double> ticks = NiceTicks(std::min(xlo, 0.0), xhi);
  f->x0 = ticks.front();
  f->x1 = std::max(ticks.back(), xhi);
  return ticks;
}

// The lane under the plot where points without a y (OOM, failed trials) go, and the chart's note
// when it has no value at all.
std::string LaneAndNote(const LineChart& c, const Frame& f, bool lane, bool has_values) {
  std::string s;
  if (lane) {
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#f4f4f4\" "
        "stroke=\"#bbb\"/>\n",
        f.left, f.bottom, f.right - f.left, kLaneHeight);
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" fill=\"#555\" text-anchor=\"end\">{}</text>\n",
        f.left - 6, f.bottom + kLaneHeight / 2 + 4, Escape(c.lane_label));
  }
  if (!has_values && !c.empty_note.empty()) {
    // Above the middle, where a reference line (drawn at the middle) leaves it legible.
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"14\" fill=\"#555\" text-anchor=\"middle\">{}</text>\n",
        (f.left + f.right) / 2, f.top + 0.3 * (f.bottom - f.top), Escape(c.empty_note));
  }
  return s;
}

std::string ReferenceLines(const std::vector<Reference>& drawn, const Frame& f) {
  std::string s;
  for (const auto& [y, label] : drawn) {
    s += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-dasharray=\"6 "
        "4\"/>\n",
        f.left, f.Y(y), f.right, f.Y(y), kRed);
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" fill=\"{}\" text-anchor=\"end\">{}</text>\n",
        f.right - 6, f.Y(y) - 6, kRed, Escape(label));
  }
  return s;
}

// The step line (the best so far holds until the chart's last x) and every marker.
std::string StepLineAndMarkers(const LineChart& c, const Frame& f, double x_last) {
  std::string s;
  if (!c.x.empty()) {
    std::string path = fmt::format("M {:.1f} {:.1f}", f.X(c.x[0]), f.Y(c.y[0]));
    for (size_t i = 1; i < c.x.size(); ++i) {
      path += fmt::format(" L {:.1f} {:.1f} L {:.1f} {:.1f}", f.X(c.x[i]), f.Y(c.y[i - 1]), f.X(c.x[i]),
                          f.Y(c.y[i]));
    }
    if (x_last > c.x.back()) path += fmt::format(" L {:.1f} {:.1f}", f.X(x_last), f.Y(c.y.back()));
    s += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2.5\"/>\n", path, kBlue);
  }
  for (const MarkerSet& m : c.markers) {
    for (const auto& [x, y] : m.points) s += Marker(m.shape, m.color, f.X(x), f.Y(y));
  }
  for (const MarkerSet& m : c.lane) {
    for (const auto& p : m.points) s += Marker(m.shape, m.color, f.X(p.first), f.bottom + kLaneHeight / 2);
  }
  return s;
}

}  // namespace

std::string RenderLineChart(const LineChart& c) {
  double header = 0;
  std::string s = Open(c.title, c.subtitle, &header);
  std::vector<double> ys = c.y, xs = c.x;
  for (const MarkerSet& m : c.markers) {
    for (const auto& [x, y] : m.points) xs.push_back(x), ys.push_back(y);
  }
  for (const MarkerSet& m : c.lane) {
    for (const auto& p : m.points) xs.push_back(p.first);
  }
  const bool has_values = std::any_of(ys.begin(), ys.end(), [](double y) { return std::isfinite(y); });
  const auto [data_lo, data_hi] = Range(ys, false);
  std::vector<Reference> drawn, named;
  SplitReferences(c, data_lo, data_hi, has_values, &drawn, &named);
  for (const auto& r : drawn) ys.push_back(r.first);
  const bool has_y = has_values || !drawn.empty();
  const Axis y_axis = has_y ? MakeAxis(Padded(Range(ys, false), 0.06, false), false) : Axis{{}, 0, 1};

  const double x_last = xs.empty() ? 0.0 : *std::max_element(xs.begin(), xs.end());
  const std::vector<LegendEntry> legend = LineLegend(c, named, x_last);
  double legend_bottom = header;
  s += Legend(legend, header + 18, &legend_bottom);

  const bool lane =
      std::any_of(c.lane.begin(), c.lane.end(), [](const MarkerSet& m) { return !m.points.empty(); });
  const double plot_top = legend_bottom + (legend.empty() ? 20 : 16), plot_bottom = kHeight - 60;
  Frame f{.left = 90,
          .right = kWidth - 30,
          .top = std::max(plot_top, 85.0),
          .bottom = plot_bottom - (lane ? kLaneHeight : 0),
          .x0 = 0,
          .x1 = 1,
          .y0 = y_axis.lo,
          .y1 = y_axis.hi};
  const std::vector<double> x_ticks = LineXTicks(c, xs, &f);
  s += Axes(f, x_ticks, y_axis.ticks, c.x_label, c.y_label, plot_bottom);
  s += LaneAndNote(c, f, lane, has_values);
  s += ReferenceLines(drawn, f);
  s += StepLineAndMarkers(c, f, x_last);
  return s + "</svg>\n";
}

std::string RenderScatterChart(const ScatterChart& c) {
  double header = 0;
  std::string s = Open(c.title, c.subtitle, &header);
  std::vector<LegendEntry> legend;
  std::vector<double> xs, ys;
  for (const MarkerSet& m : c.series) {
    if (!m.points.empty()) legend.push_back({m.label, m.shape, m.color});
    for (const auto& [x, y] : m.points) xs.push_back(x), ys.push_back(y);
  }
  for (const auto& v : c.verticals) xs.push_back(v.first);
  if (c.identity_band > 0)
    legend.push_back({c.identity_band_label, MarkerShape::kDot, "#e2e8f0", LegendEntry::Sample::kBand});
  double legend_bottom = header;
  s += Legend(legend, header + 18, &legend_bottom);

  std::pair<double, double> x_range = Range(xs, false, c.log_x), y_range = Range(ys, false, c.log_y);
  if (c.identity) {
    // One range for both axes, so that y = x is the diagonal.
    x_range = y_range = {std::min(x_range.first, y_range.first), std::max(x_range.second, y_range.second)};
  }
  const Axis x_axis = MakeAxis(Padded(x_range, 0.05, c.log_x), c.log_x);
  const Axis y_axis =
      c.identity && c.log_x == c.log_y ? x_axis : MakeAxis(Padded(y_range, 0.05, c.log_y), c.log_y);
  Frame f{.left = 90,
          .right = kWidth - 30,
          .top = std::max(legend_bottom + (legend.empty() ? 20 : 16), 85.0),
          .bottom = kHeight - 60,
          .x0 = x_axis.lo,
          .x1 = x_axis.hi,
          .y0 = y_axis.lo,
          .y1 = y_axis.hi,
          .log_x = c.log_x,
          .log_y = c.log_y};
  s += ClipToFrame(f);
  if (c.identity && c.identity_band > 0) {
    const double lo = f.x0, hi = f.x1, up = 1 + c.identity_band, down = 1 - c.identity_band;
    s += fmt::format(
        "<polygon points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\" fill=\"#e2e8f0\" "
        "clip-path=\"url(#plot)\"/>\n",
        f.X(lo), f.Y(lo * up), f.X(hi), f.Y(hi * up), f.X(hi), f.Y(hi * down), f.X(lo), f.Y(lo * down));
  }
  s += Axes(f, x_axis.ticks, y_axis.ticks, c.x_label, c.y_label, f.bottom);
  if (c.identity) {
    const double lo = std::max(f.x0, f.y0), hi = std::min(f.x1, f.y1);
    s += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#888\" "
        "stroke-dasharray=\"4 3\" clip-path=\"url(#plot)\"/>\n",
        f.X(lo), f.Y(lo), f.X(hi), f.Y(hi));
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" fill=\"#666\" text-anchor=\"end\">predicted = "
        "measured</text>\n",
        f.X(hi) - 8, f.Y(hi) + 28);
  }
  for (const auto& [x, label] : c.verticals) {
    if ((c.log_x && x <= 0) || !std::isfinite(x)) continue;
    const double px = f.X(x);
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\" "
        "stroke-dasharray=\"6 4\"/>\n",
        px, f.top, f.bottom, kRed);
    const bool right_half = px > (f.left + f.right) / 2;
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" fill=\"{}\" text-anchor=\"{}\">{}</text>\n",
        right_half ? px - 5 : px + 5, f.top + 16, kRed, right_half ? "end" : "start", Escape(label));
  }
  for (const MarkerSet& m : c.series) {
    // One mark per pixel: thousands of layouts on one spot draw as one.
    std::set<std::pair<long, long>> drawn;
    for (const auto& [x, y] : m.points) {
      if (!std::isfinite(x) || !std::isfinite(y) || (c.log_x && x <= 0) || (c.log_y && y <= 0)) continue;
      const double px = f.X(x), py = f.Y(y);
      if (!drawn.emplace(std::lround(px), std::lround(py)).second) continue;
      s += Marker(m.shape, m.color, px, py);
    }
  }
  return s + "</svg>\n";
}

}  // namespace tunepar
