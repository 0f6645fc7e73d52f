// `tunepar report --svg DIR`: the charts.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "tuner/report.h"
#include "tuner/svg_plot.h"

namespace tunepar {

namespace fs = std::filesystem;

namespace {

BarChart ImportanceChart(const Explained& e, const search::KnobImportance& g) {
  std::vector<size_t> order(g.knobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return g.mean_abs_phi[a] > g.mean_abs_phi[b]; });
  double total = 0;
  for (double v : g.mean_abs_phi) total += v;
  BarChart bars;
  bars.title = "Which knobs matter";
  bars.subtitle = fmt::format("{}: mean |Shapley value| of log throughput ({})", e.subject, e.background_note);
  bars.x_label = "importance: mean |contribution| to log throughput (0.1 = about 10%)";
  for (size_t k : order) {
    bars.labels.emplace_back(search::KnobName(g.knobs[k]));
    bars.values.push_back(g.mean_abs_phi[k]);
    bars.value_text.push_back(
        fmt::format("{:.3f} ({:.0f}%)", g.mean_abs_phi[k], total > 0 ? 100 * g.mean_abs_phi[k] / total : 0));
  }
  return bars;
}

// One dot per background layout: its value of knob k and that value's contribution; the
// values in the knob's natural order (numbers numerically).
StripChart DependenceChart(const Explained& e, const search::KnobImportance& g, size_t k) {
  StripChart strip;
  const std::string name(search::KnobName(g.knobs[k]));
  strip.title = fmt::format("Effect of {}", name);
  strip.subtitle =
      fmt::format("one dot per background layout: its value of {} and that value's Shapley contribution", name);
  strip.x_label = name;
  strip.y_label = "contribution to log throughput";
  std::vector<std::pair<std::string, double>> values;
  for (int point : g.points) {
    const std::string v = search::KnobValue(g.knobs[k], e.legal[point]);
    const double sort_key = std::isdigit(static_cast<unsigned char>(v[0])) ? std::stod(v)
                                                                           : static_cast<double>(v.size() * 1000 + v[0]);
    if (std::find_if(values.begin(), values.end(), [&](const auto& x) { return x.first == v; }) == values.end())
      values.emplace_back(v, sort_key);
  }
  std::sort(values.begin(), values.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  for (const auto& v : values) strip.categories.push_back(v.first);
  for (size_t p = 0; p < g.points.size(); ++p) {
    const std::string v = search::KnobValue(g.knobs[k], e.legal[g.points[p]]);
    const int c = static_cast<int>(std::find(strip.categories.begin(), strip.categories.end(), v) -
                                   strip.categories.begin());
    strip.points.emplace_back(c, g.phi[p][k]);
  }
  return strip;
}

Status WriteChart(const fs::path& path, const std::string& svg, std::vector<std::string>* written) {
  TUNEPAR_RETURN_IF_ERROR(WriteFile(path, svg));
  written->push_back(path.string());
  return Status::Ok();
}

}  // namespace

Status WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return InvalidArgument(fmt::format("cannot write '{}'", path.string()));
  return Status::Ok();
}

Status MakeChartDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return InvalidArgument(fmt::format("cannot create '{}': {}", dir, ec.message()));
  return Status::Ok();
}

Status WriteShapCharts(const fs::path& dir, const Explained& e, const ShapReport& r, std::vector<std::string>* written) {
  const search::KnobImportance& g = r.global;
  TUNEPAR_RETURN_IF_ERROR(WriteChart(dir / "importance.svg", RenderBarChart(ImportanceChart(e, g)), written));
  for (size_t k = 0; k < g.knobs.size(); ++k) {
    const fs::path path = dir / fmt::format("dependence-{}.svg", search::KnobName(g.knobs[k]));
    TUNEPAR_RETURN_IF_ERROR(WriteChart(path, RenderStripChart(DependenceChart(e, g, k)), written));
  }
  return Status::Ok();
}

Status WriteStudyCharts(const fs::path& dir, const StudyContext& context, const StudyTrials& trials,
                        std::vector<std::string>* written) {
  if (context.study.backend == "model") return Status::Ok();
  const Convergence convergence = ConvergenceOf(trials);
  if (!convergence.x.empty()) {
    LineChart line;
    line.title = "Convergence";
    line.subtitle = fmt::format("study {}: best throughput found against finished trials", context.study.name);
    line.x_label = "finished trials";
    line.y_label = "throughput (tokens/s)";
    line.x = convergence.x;
    line.y = convergence.y;
    line.markers = convergence.markers;
    if (const std::optional<Layout> best = context.ModelBest())
      line.references.emplace_back(context.Predict(*best).tokens_per_s, "the model's predicted optimum");
    TUNEPAR_RETURN_IF_ERROR(WriteChart(dir / "convergence.svg", RenderLineChart(line), written));
  }
  ScatterChart scatter;
  for (const store::TrialRecord* r : trials.ok) {
    if (r->backend == "model" || !r->tokens_per_s || !r->predicted_tokens_per_s) continue;
    scatter.x.push_back(*r->predicted_tokens_per_s);
    scatter.y.push_back(*r->tokens_per_s);
  }
  if (scatter.x.empty()) return Status::Ok();
  scatter.title = "Performance model against measurement";
  scatter.subtitle = fmt::format("study {}: one dot per ok trial", context.study.name);
  scatter.x_label = "predicted throughput (tokens/s)";
  scatter.y_label = "measured throughput (tokens/s)";
  return WriteChart(dir / "predicted-vs-measured.svg", RenderScatterChart(scatter), written);
}

}  // namespace tunepar
