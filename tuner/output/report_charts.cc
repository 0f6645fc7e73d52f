// `tunepar report --svg DIR`: the charts.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "tuner/output/report.h"
#include "tuner/output/svg_plot.h"
#include "tuner/study/trial_records.h"

namespace tunepar {

namespace fs = std::filesystem;

namespace {

constexpr const char* kBlue = "#2b6cb0";
constexpr const char* kRed = "#c53030";
constexpr const char* kOrange = "#dd6b20";
constexpr const char* kPurple = "#6b46c1";
constexpr const char* kGrey = "#a0aec0";
// predicted-vs-measured shades where the measurement is within this fraction of the prediction.
constexpr double kErrorBand = 0.25;

// An importance as text: three decimals, or two significant digits under 0.01 (noise-level
// values would all read 0.000).
std::string ImportanceText(double v) {
  return v >= 0.01 || v == 0 ? fmt::format("{:.3f}", v) : fmt::format("{:.2g}", v);
}

BarChart ImportanceChart(const Explained& e, const search::KnobImportance& g, const NoiseFloor& floor) {
  std::vector<size_t> order(g.knobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return g.mean_abs_phi[a] > g.mean_abs_phi[b]; });
  double total = 0;
  for (double v : g.mean_abs_phi) total += v;
  auto noise = [&](double v) { return floor.defined && v <= floor.value; };
  const bool all_noise = std::all_of(g.mean_abs_phi.begin(), g.mean_abs_phi.end(), noise);
  BarChart bars;
  bars.title = "Which knobs matter";
  bars.subtitle =
      fmt::format("{}: mean |Shapley value| of log throughput ({}); ", e.subject, e.background_note);
  if (floor.defined) {
    bars.floor = floor.value;
    bars.floor_label = fmt::format("noise floor {}", ImportanceText(floor.value));
    bars.subtitle += fmt::format("noise floor (grey band): {}", floor.method);
    if (all_noise) bars.subtitle += ". Every knob is under it: the measurements do not tell the knobs apart";
  } else {
    bars.subtitle += floor.method;
  }
  bars.x_label = "importance: mean |contribution| to log throughput (0.1 = about 10%)";
  for (size_t k : order) {
    const double v = g.mean_abs_phi[k];
    bars.labels.emplace_back(search::KnobName(g.knobs[k]));
    bars.values.push_back(v);
    if (all_noise) {
      bars.value_text.push_back(ImportanceText(v));
    } else if (noise(v)) {
      bars.value_text.push_back(fmt::format("{} (under the floor)", ImportanceText(v)));
    } else {
      bars.value_text.push_back(
          fmt::format("{} ({:.0f}%)", ImportanceText(v), total > 0 ? 100 * v / total : 0));
    }
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
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  // The OS's reason (no such directory, permission denied, disk full): what the user must fix.
  if (!out) return InvalidArgument(fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno != 0 ? errno : EIO)));
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
  TUNEPAR_RETURN_IF_ERROR(
      WriteChart(dir / "importance.svg", RenderBarChart(ImportanceChart(e, g, r.floor)), written));
  for (size_t k = 0; k < g.knobs.size(); ++k) {
    const fs::path path = dir / fmt::format("dependence-{}.svg", search::KnobName(g.knobs[k]));
    TUNEPAR_RETURN_IF_ERROR(WriteChart(path, RenderStripChart(DependenceChart(e, g, k)), written));
  }
  return Status::Ok();
}

namespace {

std::string Plural(size_t n, const std::string& word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// The performance model's throughput against memory per device of every legal layout: where the
// fast layouts sit against the device's memory.
ScatterChart ModelLandscapeChart(const StudyContext& context) {
  MarkerSet fits{"", MarkerShape::kDot, kBlue, {}}, too_big{"", MarkerShape::kDot, kGrey, {}};
  for (const Layout& layout : context.space.legal) {
    const runner::Prediction p = context.Predict(layout);
    (p.fits ? fits : too_big).points.emplace_back(p.memory_bytes / 1e9, p.tokens_per_s);
  }
  fits.label = fmt::format("predicted to fit ({})", fits.points.size());
  too_big.label = fmt::format("predicted not to fit ({})", too_big.points.size());
  ScatterChart chart;
  chart.title = "The performance model's view of the legal layouts";
  chart.subtitle = fmt::format(
      "study {}: predicted throughput against predicted memory per device, one dot per legal layout "
      "({}, world {}, {} ranks per node); log axes",
      context.study.name, context.problem.hardware.name, context.world, context.RanksOnANode());
  chart.x_label = "predicted memory per device (GB, log scale)";
  chart.y_label = "predicted throughput (tokens/s, log scale)";
  chart.log_x = chart.log_y = true;
  chart.series = {too_big, fits};
  if (const std::optional<Layout> best = context.ModelBest()) {
    const runner::Prediction p = context.Predict(*best);
    MarkerSet marked{fmt::format("the model's best: {}", LayoutKey(*best)), MarkerShape::kRing, kRed, {}};
    marked.points.emplace_back(p.memory_bytes / 1e9, p.tokens_per_s);
    chart.series.push_back(marked);
  }
  if (const double memory = context.proposer_options.device_memory_bytes; memory > 0)
    chart.verticals.emplace_back(memory / 1e9, fmt::format("device memory {:.3g} GB", memory / 1e9));
  return chart;
}

// Best so far against finished trials: ok trials as dots (sliced ones as rings), OOM and failed
// trials in a lane of their own (they have no throughput).
LineChart ConvergenceChart(const StudyContext& context, const StudyTrials& trials) {
  const Convergence convergence = ConvergenceOf(trials);
  const bool tokens = std::all_of(trials.ok.begin(), trials.ok.end(),
                                  [](const store::TrialRecord* r) { return r->tokens_per_s.has_value(); });
  MarkerSet whole{"", MarkerShape::kDot, "#4a5568", {}}, sliced{"", MarkerShape::kRing, kPurple, {}};
  MarkerSet oom{"", MarkerShape::kCross, kRed, {}}, failed{"", MarkerShape::kTriangle, kOrange, {}};
  std::map<std::string, int> failures;
  for (size_t i = 0; i < trials.finished.size(); ++i) {
    const store::TrialRecord& t = *trials.finished[i];
    const double x = static_cast<double>(i + 1);
    if (ObjectiveOf(t)) {
      (t.sliced ? sliced : whole).points.emplace_back(x, DisplayThroughput(t));
    } else if (t.status == TrialStatus::kOom) {
      oom.points.emplace_back(x, 0);
    } else {
      failed.points.emplace_back(x, 0);
      ++failures[std::string(ToString(t.status))];
    }
  }
  whole.label = fmt::format("ok ({})", whole.points.size());
  sliced.label = fmt::format("ok, sliced ({})", sliced.points.size());
  oom.label = fmt::format("out of memory ({})", oom.points.size());
  std::string kinds;
  for (const auto& [status, n] : failures)
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", status, n);
  failed.label = fmt::format("failed: {}", kinds);

  LineChart line;
  line.title = "Convergence";
  line.subtitle =
      fmt::format("study {}: best throughput found against finished trials ({}, {} ok)", context.study.name,
                  Plural(trials.finished.size(), "finished trial"), trials.ok.size());
  line.x_label = "finished trials";
  line.y_label = tokens ? "throughput (tokens/s)" : "throughput (1 / objective)";
  line.line_label = "best so far";
  line.x = convergence.x;
  line.y = convergence.y;
  line.markers = {whole, sliced};
  line.lane = {oom, failed};
  line.lane_label = "no throughput";
  line.integer_x = true;
  line.empty_note = "no trial finished ok: no throughput to plot";
  if (const std::optional<Layout> best = context.ModelBest(); best && tokens)
    line.references.emplace_back(context.Predict(*best).tokens_per_s, "the model's predicted optimum");
  return line;
}

// Predicted against measured throughput on log axes (a badly calibrated model is off by
// factors, not by an amount), with y = x and the band within kErrorBand of it. *drawn: dots.
ScatterChart PredictedVsMeasuredChart(const StudyContext& context, const StudyTrials& trials, size_t* drawn) {
  MarkerSet whole{"", MarkerShape::kDot, kBlue, {}}, sliced{"", MarkerShape::kRing, kPurple, {}};
  std::vector<double> errors;
  size_t left_out = 0;
  for (const store::TrialRecord* r : trials.ok) {
    if (r->backend == "model" || !r->tokens_per_s || !r->predicted_tokens_per_s) continue;
    const double predicted = *r->predicted_tokens_per_s, measured = *r->tokens_per_s;
    if (!(predicted > 0) || !(measured > 0) || !std::isfinite(predicted) || !std::isfinite(measured)) {
      ++left_out;
      continue;
    }
    (r->sliced ? sliced : whole).points.emplace_back(predicted, measured);
    errors.push_back(std::abs(predicted / measured - 1));
  }
  *drawn = errors.size();
  whole.label = fmt::format("ok trial ({})", whole.points.size());
  sliced.label = fmt::format("ok trial, sliced ({})", sliced.points.size());
  ScatterChart scatter;
  scatter.title = "Performance model against measurement";
  scatter.subtitle = fmt::format("study {}: one dot per ok trial, log-log axes", context.study.name);
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    const double median = errors[errors.size() / 2];
    scatter.subtitle += fmt::format("; median |error| {:.1f}% (predicted / measured - 1)", 100 * median);
    if (median >= 1)
      scatter.subtitle += fmt::format(": the model is off by a factor of about {:.0f}", 1 + median);
  }
  scatter.subtitle += fmt::format("; shaded: measured within {:.0f}% of predicted", 100 * kErrorBand);
  if (left_out > 0) {
    scatter.subtitle += fmt::format("; {} left out (a non-positive throughput has no place on a log axis)",
                                    Plural(left_out, "trial"));
  }
  scatter.x_label = "predicted throughput (tokens/s, log scale)";
  scatter.y_label = "measured throughput (tokens/s, log scale)";
  scatter.log_x = scatter.log_y = true;
  scatter.identity = true;
  scatter.identity_band = kErrorBand;
  scatter.identity_band_label = fmt::format("within {:.0f}%", 100 * kErrorBand);
  scatter.series = {whole, sliced};
  return scatter;
}

}  // namespace

Status WriteStudyCharts(const fs::path& dir, const StudyContext& context, const StudyTrials& trials,
                        std::vector<std::string>* written, std::vector<std::string>* notes) {
  std::vector<std::string> ignored;
  if (notes == nullptr) notes = &ignored;
  TUNEPAR_RETURN_IF_ERROR(WriteChart(dir / "predicted-throughput-vs-memory.svg",
                                     RenderScatterChart(ModelLandscapeChart(context)), written));
  if (context.study.backend == "model") {
    notes->push_back(
        "no convergence or predicted-vs-measured chart: a model study measures nothing (its trials are the "
        "performance model's predictions)");
    return Status::Ok();
  }
  if (trials.finished.empty()) {
    notes->push_back("no convergence chart: the study has no finished trial");
  } else {
    TUNEPAR_RETURN_IF_ERROR(
        WriteChart(dir / "convergence.svg", RenderLineChart(ConvergenceChart(context, trials)), written));
  }
  size_t drawn = 0;
  const ScatterChart scatter = PredictedVsMeasuredChart(context, trials, &drawn);
  if (drawn == 0) {
    notes->push_back(
        trials.ok.empty()
            ? "no predicted-vs-measured chart: no trial finished ok"
            : "no predicted-vs-measured chart: no ok trial has a positive measured and predicted tokens/s");
    return Status::Ok();
  }
  return WriteChart(dir / "predicted-vs-measured.svg", RenderScatterChart(scatter), written);
}

}  // namespace tunepar
