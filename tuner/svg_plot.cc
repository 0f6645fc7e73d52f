#include "tuner/svg_plot.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tunepar {

namespace {

constexpr double kWidth = 800, kHeight = 500;
constexpr const char* kFont = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";
constexpr const char* kBlue = "#2b6cb0";
constexpr const char* kRed = "#c53030";

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
  if (a >= 1e4) return fmt::format("{:.0f}k", v / 1e3);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 1 || a == 0) return fmt::format("{:.3g}", v);
  return fmt::format("{:.2g}", v);
}

struct Frame {
  double left, right, top, bottom;  // plot area in pixels
  double x0, x1, y0, y1;            // data range
  double X(double x) const { return left + (x - x0) / (x1 - x0) * (right - left); }
  double Y(double y) const { return bottom - (y - y0) / (y1 - y0) * (bottom - top); }
};

std::string Open(const std::string& title, const std::string& subtitle) {
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" {2}>\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      kWidth, kHeight, kFont);
  s += fmt::format(
      "<text x=\"{}\" y=\"30\" font-size=\"20\" font-weight=\"bold\" text-anchor=\"middle\">{}</text>\n",
      kWidth / 2, Escape(title));
  // The subtitle on one line, or two split at a space near the middle when it is long.
  std::vector<std::string> lines = {subtitle};
  if (subtitle.size() > 95) {
    size_t split = subtitle.rfind(' ', subtitle.size() / 2 + 10);
    if (split == std::string::npos) split = subtitle.size() / 2;
    lines = {subtitle.substr(0, split), subtitle.substr(split + 1)};
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#444\" text-anchor=\"middle\">{}</text>\n",
        kWidth / 2, 50 + 15 * i, Escape(lines[i]));
  }
  return s;
}

// Grid, ticks and axis labels for a numeric y axis and (optionally) a numeric x axis.
std::string Axes(const Frame& f, const std::vector<double>& xticks, const std::vector<double>& yticks,
                 const std::string& x_label, const std::string& y_label) {
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
                     f.top, x, f.bottom);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n", x,
                     f.bottom + 18, Number(t));
  }
  s += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#333\"/>\n",
      f.left, f.top, f.right - f.left, f.bottom - f.top);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"14\" text-anchor=\"middle\">{}</text>\n",
                   (f.left + f.right) / 2, kHeight - 14, Escape(x_label));
  s += fmt::format(
      "<text x=\"18\" y=\"{:.1f}\" font-size=\"14\" text-anchor=\"middle\" transform=\"rotate(-90 18 "
      "{:.1f})\">{}</text>\n",
      (f.top + f.bottom) / 2, (f.top + f.bottom) / 2, Escape(y_label));
  return s;
}

std::pair<double, double> Range(const std::vector<double>& v, bool include_zero) {
  double lo = INFINITY, hi = -INFINITY;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (include_zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  if (hi - lo < 1e-12) {
    const double pad = std::max(std::abs(hi) * 0.1, 1e-9);
    lo -= pad;
    hi += pad;
  }
  return {lo, hi};
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

std::string RenderBarChart(const BarChart& c) {
  std::string s = Open(c.title, c.subtitle);
  const double max_value =
      c.values.empty() ? 1.0 : std::max(1e-12, *std::max_element(c.values.begin(), c.values.end()));
  const std::vector<double> ticks = NiceTicks(0, max_value * 1.15);
  Frame f{170, kWidth - 40, 85, kHeight - 60, 0, ticks.back(), 0, 1};
  s += Axes(f, ticks, {}, c.x_label, "");
  const double band = (f.bottom - f.top) / std::max<size_t>(1, c.labels.size());
  for (size_t i = 0; i < c.labels.size(); ++i) {
    const double y = f.top + band * i + band * 0.15, h = band * 0.7;
    const double w = f.X(std::max(0.0, c.values[i])) - f.left;
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n",
                     f.left, y, w, h, kBlue);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"14\" text-anchor=\"end\">{}</text>\n",
                     f.left - 8, y + h / 2 + 5, Escape(c.labels[i]));
    if (i < c.value_text.size()) {
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"13\">{}</text>\n", f.left + w + 6,
                       y + h / 2 + 5, Escape(c.value_text[i]));
    }
  }
  return s + "</svg>\n";
}

std::string RenderStripChart(const StripChart& c) {
  std::string s = Open(c.title, c.subtitle);
  std::vector<double> ys;
  for (const auto& p : c.points) ys.push_back(p.second);
  const auto [lo, hi] = Range(ys, true);
  const std::vector<double> ticks = NiceTicks(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo));
  const double n = static_cast<double>(std::max<size_t>(1, c.categories.size()));
  Frame f{90, kWidth - 30, 85, kHeight - 60, -0.5, n - 0.5, ticks.front(), ticks.back()};
  s += Axes(f, {}, ticks, c.x_label, c.y_label);
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

std::string RenderLineChart(const LineChart& c) {
  std::string s = Open(c.title, c.subtitle);
  std::vector<double> ys = c.y;
  for (const auto& m : c.markers) ys.push_back(m.second);
  const auto [data_lo, data_hi] = Range(ys, false);
  // A reference far outside the data would flatten it: such lines are named, not drawn.
  std::vector<std::pair<double, std::string>> drawn, named;
  for (const auto& r : c.references) {
    const double span = std::max(data_hi - data_lo, std::abs(data_hi) * 0.1);
    (r.first > data_hi + 2 * span || r.first < data_lo - 2 * span ? named : drawn).push_back(r);
  }
  for (const auto& r : drawn) ys.push_back(r.first);
  const auto [ylo, yhi] = Range(ys, false);
  const double pad = 0.06 * (yhi - ylo);
  const std::vector<double> yt = NiceTicks(ylo >= 0 ? std::max(0.0, ylo - pad) : ylo - pad, yhi + pad);
  const auto [xlo, xhi] = Range(c.x, false);
  const std::vector<double> xt = NiceTicks(std::min(xlo, 0.0), xhi);
  Frame f{90, kWidth - 30, 85, kHeight - 60, xt.front(), std::max(xt.back(), xhi), yt.front(), yt.back()};
  s += Axes(f, xt, yt, c.x_label, c.y_label);
  for (const auto& [y, label] : drawn) {
    s += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-dasharray=\"6 "
        "4\"/>\n",
        f.left, f.Y(y), f.right, f.Y(y), kRed);
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" fill=\"{}\" text-anchor=\"end\">{}</text>\n",
        f.right - 6, f.Y(y) - 6, kRed, Escape(label));
  }
  for (size_t i = 0; i < named.size(); ++i) {
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" fill=\"{}\" text-anchor=\"end\">{}: {} (off the "
        "chart)</text>\n",
        f.right - 6, f.top + 16 + 15 * i, kRed, Escape(named[i].second), Number(named[i].first));
  }
  for (const auto& [x, y] : c.markers) {
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#999\"/>\n", f.X(x), f.Y(y));
  }
  if (!c.x.empty()) {
    std::string path = fmt::format("M {:.1f} {:.1f}", f.X(c.x[0]), f.Y(c.y[0]));
    for (size_t i = 1; i < c.x.size(); ++i) {
      path += fmt::format(" L {:.1f} {:.1f} L {:.1f} {:.1f}", f.X(c.x[i]), f.Y(c.y[i - 1]), f.X(c.x[i]),
                          f.Y(c.y[i]));
    }
    s += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2.5\"/>\n", path, kBlue);
  }
  return s + "</svg>\n";
}

std::string RenderScatterChart(const ScatterChart& c) {
  std::string s = Open(c.title, c.subtitle);
  std::vector<double> all = c.x;
  all.insert(all.end(), c.y.begin(), c.y.end());
  const auto [lo, hi] = Range(all, false);
  const std::vector<double> t = NiceTicks(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo));
  Frame f{90, kWidth - 30, 85, kHeight - 60, t.front(), t.back(), t.front(), t.back()};
  s += Axes(f, t, t, c.x_label, c.y_label);
  s += fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#888\" stroke-dasharray=\"4 "
      "3\"/>\n",
      f.X(t.front()), f.Y(t.front()), f.X(t.back()), f.Y(t.back()));
  s += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" fill=\"#666\">predicted = measured</text>\n",
      f.X(t.back()) - 150, f.Y(t.back()) + 16);
  for (size_t i = 0; i < c.x.size() && i < c.y.size(); ++i) {
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\" fill-opacity=\"0.7\"/>\n",
                     f.X(c.x[i]), f.Y(c.y[i]), kBlue);
  }
  return s + "</svg>\n";
}

}  // namespace tunepar
