// `tunepar report`: a study's summary; with --shap, which knobs matter (Shapley values of the
// surrogate's log throughput); with --of-model, the same for the performance model itself; with
// --svg DIR, the charts.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "runner/performance_model.h"
#include "search/knob_shapley.h"
#include "search/proposer.h"
#include "search/space.h"
#include "store/store_reader.h"
#include "tuner/commands.h"
#include "tuner/problem.h"
#include "tuner/study_lookup.h"
#include "tuner/svg_plot.h"
#include "tuner/text_table.h"
#include "tuner/trial_output.h"
#include "tuner/trial_records.h"

namespace tunepar {

namespace {

namespace fs = std::filesystem;

struct ReportOptions {
  std::string study;
  bool shap = false;
  bool of_model = false;
  std::string svg_dir;
  std::string background = "trials";  // trials | legal
  int background_size = 100;
  int top = 10;
  int64_t world = 0;
  std::string model = "gpt-1t", hardware = "frontier-mi250x", space = "default";
};

// What a report explains: the legal space, f (log throughput, NaN where undefined) on it, and
// the background and the layout to explain.
struct Explained {
  std::string subject;  // "surrogate of study X" / "performance model"
  std::string background_note;
  std::vector<search::Layout> legal;
  std::vector<double> f;  // log throughput (nats) up to a constant
  std::vector<int> background;
  int local = -1;  // the layout explained on its own (the best)
};

double Percent(double nats) {
  return 100.0 * (std::exp(nats) - 1.0);
}

std::string SignedPercent(double nats) {
  return fmt::format("{:+.1f}%", Percent(nats));
}

// Up to n indices of legal layouts where f is defined, chosen by a seeded shuffle.
std::vector<int> SampleDefined(const std::vector<double>& f, int n, uint64_t seed) {
  std::vector<int> all;
  for (size_t i = 0; i < f.size(); ++i) {
    if (std::isfinite(f[i])) all.push_back(static_cast<int>(i));
  }
  std::mt19937_64 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  if (static_cast<int>(all.size()) > n) all.resize(n);
  std::sort(all.begin(), all.end());
  return all;
}

int BestDefined(const std::vector<double>& f) {
  int best = -1;
  for (size_t i = 0; i < f.size(); ++i) {
    if (std::isfinite(f[i]) && (best < 0 || f[i] > f[best])) best = static_cast<int>(i);
  }
  return best;
}

struct ShapReport {
  search::KnobImportance global;
  search::KnobExplanation local;
  nlohmann::json json;
  std::string text;
};

ShapReport ExplainKnobs(const Explained& e) {
  ShapReport r;
  const search::KnobShapley shap(e.legal, e.f, e.background);
  r.global = shap.Global(true);
  r.local = shap.Explain(e.local, true);
  const auto& g = r.global;
  double total = 0;
  for (double v : g.mean_abs_phi) total += v;
  std::vector<size_t> order(g.knobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return g.mean_abs_phi[a] > g.mean_abs_phi[b]; });

  TextTable t;
  using A = TextTable::Align;
  t.AddColumn("knob", A::kLeft);
  t.AddColumn("importance");
  t.AddColumn("share");
  t.AddColumn("helps most (mean contribution)", A::kLeft);
  t.AddColumn("hurts most", A::kLeft);
  nlohmann::json knobs = nlohmann::json::array();
  for (size_t k : order) {
    // Mean contribution of the knob per value it takes in the background.
    std::map<std::string, std::pair<double, int>> by_value;
    for (size_t p = 0; p < g.points.size(); ++p) {
      auto& [sum, count] = by_value[search::KnobValue(g.knobs[k], e.legal[g.points[p]])];
      sum += g.phi[p][k];
      ++count;
    }
    std::string helps, hurts;
    double best = -INFINITY, worst = INFINITY;
    nlohmann::json values = nlohmann::json::object();
    for (const auto& [value, sc] : by_value) {
      const double mean = sc.first / sc.second;
      values[value] = mean;
      if (mean > best) best = mean, helps = value;
      if (mean < worst) worst = mean, hurts = value;
    }
    const std::string name(search::KnobName(g.knobs[k]));
    const double share = total > 0 ? g.mean_abs_phi[k] / total : 0.0;
    t.AddRow({name, fmt::format("{:.3f}", g.mean_abs_phi[k]), fmt::format("{:.1f}%", 100 * share),
              fmt::format("{} ({})", helps, SignedPercent(best)),
              fmt::format("{} ({})", hurts, SignedPercent(worst))});
    knobs.push_back({{"knob", name},
                     {"importance", g.mean_abs_phi[k]},
                     {"share", share},
                     {"helps", {{"value", helps}, {"mean_phi", best}}},
                     {"hurts", {{"value", hurts}, {"mean_phi", worst}}},
                     {"mean_phi_by_value", values}});
  }
  r.text += fmt::format(
      "Which knobs matter: Shapley values of the log throughput predicted by the {} (natural\n"
      "log: +0.10 is about +10.5% throughput), exact over all {} coalitions of knobs; importance =\n"
      "mean |phi| over the background ({}).\n",
      e.subject, 1u << g.knobs.size(), e.background_note);
  r.text += t.Render();

  // The local explanation of the best layout.
  const search::KnobExplanation& l = r.local;
  TextTable lt;
  lt.AddColumn("knob", A::kLeft);
  lt.AddColumn("value", A::kLeft);
  lt.AddColumn("contribution");
  nlohmann::json contributions = nlohmann::json::array();
  std::vector<size_t> lorder(l.knobs.size());
  for (size_t i = 0; i < lorder.size(); ++i) lorder[i] = i;
  std::sort(lorder.begin(), lorder.end(),
            [&](size_t a, size_t b) { return std::abs(l.phi[a]) > std::abs(l.phi[b]); });
  for (size_t i : lorder) {
    const std::string value = search::KnobValue(l.knobs[i], e.legal[e.local]);
    lt.AddRow({std::string(search::KnobName(l.knobs[i])), value, SignedPercent(l.phi[i])});
    contributions.push_back({{"knob", search::KnobName(l.knobs[i])}, {"value", value}, {"phi", l.phi[i]}});
  }
  r.text += fmt::format("\nWhy {} is best: {} throughput against the background's mean\n",
                        search::LayoutKey(e.legal[e.local]), SignedPercent(l.value - l.baseline));
  r.text += lt.Render();

  // The strongest pairwise interaction.
  double strongest = 0;
  size_t si = 0, sj = 0;
  for (size_t i = 0; i < g.interaction.size(); ++i) {
    for (size_t j = i + 1; j < g.interaction.size(); ++j) {
      if (g.interaction[i][j] > strongest) strongest = g.interaction[i][j], si = i, sj = j;
    }
  }
  nlohmann::json interaction;
  if (strongest > 0) {
    r.text += fmt::format("Strongest interaction: {} x {} (mean |interaction| {:.3f})\n",
                          search::KnobName(g.knobs[si]), search::KnobName(g.knobs[sj]), strongest);
    interaction = {{"knobs", {search::KnobName(g.knobs[si]), search::KnobName(g.knobs[sj])}},
                   {"mean_abs", strongest}};
  }
  r.json = {{"subject", e.subject},
            {"background", e.background_note},
            {"unit", "natural log of throughput"},
            {"knobs", knobs},
            {"local",
             {{"layout", search::LayoutKey(e.legal[e.local])},
              {"value", l.value},
              {"baseline", l.baseline},
              {"contributions", contributions}}},
            {"strongest_interaction", interaction}};
  return r;
}

Status WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return InvalidArgument(fmt::format("cannot write '{}'", path.string()));
  return Status::Ok();
}

Status WriteShapCharts(const fs::path& dir, const Explained& e, const ShapReport& r,
                       std::vector<std::string>* written) {
  const auto& g = r.global;
  std::vector<size_t> order(g.knobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return g.mean_abs_phi[a] > g.mean_abs_phi[b]; });
  double total = 0;
  for (double v : g.mean_abs_phi) total += v;
  BarChart bars;
  bars.title = "Which knobs matter";
  bars.subtitle =
      fmt::format("{}: mean |Shapley value| of log throughput ({})", e.subject, e.background_note);
  bars.x_label = "importance: mean |contribution| to log throughput (0.1 = about 10%)";
  for (size_t k : order) {
    bars.labels.emplace_back(search::KnobName(g.knobs[k]));
    bars.values.push_back(g.mean_abs_phi[k]);
    bars.value_text.push_back(
        fmt::format("{:.3f} ({:.0f}%)", g.mean_abs_phi[k], total > 0 ? 100 * g.mean_abs_phi[k] / total : 0));
  }
  TUNEPAR_RETURN_IF_ERROR(WriteFile(dir / "importance.svg", RenderBarChart(bars)));
  written->push_back((dir / "importance.svg").string());
  for (size_t k = 0; k < g.knobs.size(); ++k) {
    StripChart strip;
    const std::string name(search::KnobName(g.knobs[k]));
    strip.title = fmt::format("Effect of {}", name);
    strip.subtitle = fmt::format(
        "one dot per background layout: its value of {} and that value's Shapley contribution", name);
    strip.x_label = name;
    strip.y_label = "contribution to log throughput";
    // Categories in the knob's natural order (numbers numerically).
    std::vector<std::pair<std::string, double>> values;
    for (int point : g.points) {
      const search::Layout& l = e.legal[point];
      const std::string v = search::KnobValue(g.knobs[k], l);
      const double sort_key = std::isdigit(static_cast<unsigned char>(v[0]))
                                  ? std::stod(v)
                                  : static_cast<double>(v.size() * 1000 + v[0]);
      if (std::find_if(values.begin(), values.end(), [&](const auto& x) { return x.first == v; }) ==
          values.end())
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
    const fs::path path = dir / fmt::format("dependence-{}.svg", name);
    TUNEPAR_RETURN_IF_ERROR(WriteFile(path, RenderStripChart(strip)));
    written->push_back(path.string());
  }
  return Status::Ok();
}

Result<std::vector<search::Layout>> LegalSpace(const Problem& p, int world) {
  Result<search::SpaceEnumeration> space = search::EnumerateSpace(MakeSpaceQuery(p, world));
  if (!space.ok()) return space.status();
  if (space->legal.empty())
    return Status(StatusCode::kNoLegalLayout, search::ExplainEmpty(MakeSpaceQuery(p, world), *space));
  return std::move(space->legal);
}

Status RunOfModel(const GlobalOptions& global, const ReportOptions& o) {
  if (o.world == 0) return InvalidArgument("--of-model needs --world N");
  Result<Problem> problem = LoadProblem(o.model, o.hardware, o.space);
  if (!problem.ok()) return problem.status();
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(o.world, problem->hardware));
  Result<std::vector<search::Layout>> legal = LegalSpace(*problem, static_cast<int>(o.world));
  if (!legal.ok()) return legal.status();
  Result<runner::PerformanceModel> model =
      runner::PerformanceModel::Create(problem->model, problem->hardware);
  if (!model.ok()) return model.status();
  Explained e;
  e.legal = std::move(*legal);
  e.subject = fmt::format("performance model ({} on {}, world {})", problem->model.name,
                          problem->hardware.name, o.world);
  // f: the predicted log throughput of every legal layout (whether it fits or not: Shapley values
  // explain speed, and a hybrid of two runnable layouts may not fit); the background and the
  // explained layout: layouts predicted to fit.
  e.f.resize(e.legal.size());
  std::vector<double> runnable(e.legal.size(), NAN);
  for (size_t i = 0; i < e.legal.size(); ++i) {
    const runner::Prediction p = model->Predict(e.legal[i]);
    e.f[i] = -std::log(p.step_time_s);
    if (p.fits) runnable[i] = e.f[i];
  }
  e.background = SampleDefined(runnable, o.background_size, 1);
  e.local = BestDefined(runnable);
  if (e.local < 0)
    return InvalidArgument("no legal layout is predicted to fit in device memory: nothing to explain");
  e.background_note = fmt::format("{} legal layouts predicted to fit, sampled", e.background.size());
  const ShapReport r = ExplainKnobs(e);
  std::vector<std::string> written;
  if (!o.svg_dir.empty()) {
    std::error_code ec;
    fs::create_directories(o.svg_dir, ec);
    TUNEPAR_RETURN_IF_ERROR(WriteShapCharts(o.svg_dir, e, r, &written));
  }
  if (global.json) {
    nlohmann::json j = {{"shap", r.json}, {"svg", written}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}", r.text);
    for (const std::string& w : written) fmt::print("wrote {}\n", w);
  }
  return Status::Ok();
}

Status RunReport(const GlobalOptions& global, const ReportOptions& o) {
  if (o.of_model) return RunOfModel(global, o);
  Result<store::StoreView> view = store::ReadStore(global.store);
  if (!view.ok()) return view.status();
  for (const std::string& w : view->warnings) spdlog::warn("{}", w);
  std::string name = o.study;
  if (name.empty()) {
    if (view->studies.size() != 1) {
      std::vector<std::string> names;
      for (const store::StudyRecord& s : view->studies) names.push_back(s.name);
      return InvalidArgument(view->studies.empty()
                                 ? fmt::format("store '{}' has no study to report on", global.store)
                                 : fmt::format("store '{}' has {} studies; name one: {}", global.store,
                                               names.size(), fmt::join(names, ", ")));
    }
    name = view->studies.front().name;
  }
  Result<store::StudyRecord> study = FindStudy(*view, global.store, name);
  if (!study.ok()) return study.status();
  std::vector<store::TrialRecord> trials;
  for (const store::TrialRecord& t : view->trials) {
    if (t.study_id == study->id) trials.push_back(t);
  }
  // The problem as the study recorded it.
  Result<search::ModelShape> shape = search::ParseModelShape(study->model_toml, "study model");
  if (!shape.ok()) return shape.status();
  Result<runner::HardwareProfile> hardware =
      runner::ParseHardwareProfile(study->hardware_toml, "study hardware");
  if (!hardware.ok()) return hardware.status();
  Result<search::SpaceSpec> spec = search::ParseSpaceSpec(study->space_toml, "study space");
  if (!spec.ok()) return spec.status();
  Problem problem{{}, {}, {}, *shape, *hardware, *spec};
  Result<std::vector<search::Layout>> legal = LegalSpace(problem, study->world);
  if (!legal.ok()) return legal.status();
  Result<runner::PerformanceModel> model = runner::PerformanceModel::Create(problem.model, problem.hardware);
  if (!model.ok()) return model.status();
  // The local backend ran every rank on one machine (as its search's prior had them).
  if (study->backend == "local") model->set_ranks_per_node(static_cast<int>(study->world));

  // ---- Summary.
  std::vector<const store::TrialRecord*> finished, ok;
  for (const store::TrialRecord& t : trials) {
    if (search::IsFinished(t.status)) finished.push_back(&t);
    if (ObjectiveOf(t)) ok.push_back(&t);
  }
  std::stable_sort(finished.begin(), finished.end(),
                   [](const store::TrialRecord* a, const store::TrialRecord* b) {
                     return std::tie(a->finished_at, a->node_id, a->number) <
                            std::tie(b->finished_at, b->node_id, b->number);
                   });
  const std::map<std::string, int64_t> counts = CountByStatus(trials);
  std::string text = fmt::format("Study {} (id {}): model {}, hardware {}, space {}, world {}, backend {}\n",
                                 study->name, study->id, study->model_name, study->hardware_name,
                                 study->space_name, study->world, study->backend);
  std::string count_text;
  for (const auto& [status, n] : counts)
    count_text += fmt::format("{}{} {}", count_text.empty() ? "" : ", ", status, WithCommas(n));
  text += fmt::format("trials {}: {}\n", WithCommas(static_cast<int64_t>(trials.size())),
                      count_text.empty() ? "none" : count_text);
  nlohmann::json json = {
      {"study", study->name}, {"study_id", study->id}, {"trials", trials.size()}, {"status_counts", counts}};

  // Best layouts, measured against predicted.
  std::vector<const store::TrialRecord*> best = ok;
  std::sort(best.begin(), best.end(), [](const store::TrialRecord* a, const store::TrialRecord* b) {
    return *ObjectiveOf(*a) < *ObjectiveOf(*b);
  });
  if (static_cast<int>(best.size()) > o.top) best.resize(o.top);
  if (best.empty()) {
    text += "No trial has finished ok yet: nothing measured to rank.\n";
  } else {
    const bool measured = study->backend != "model";
    TextTable t;
    using A = TextTable::Align;
    t.AddColumn("#");
    t.AddColumn("trial", A::kLeft);
    t.AddColumn("layout", A::kLeft);
    if (measured) t.AddColumn("measured tok/s");
    t.AddColumn("predicted tok/s");
    if (measured) t.AddColumn("model error");
    t.AddColumn(measured ? "measured mem GB" : "predicted mem GB");
    nlohmann::json rows = nlohmann::json::array();
    int rank = 0;
    for (const store::TrialRecord* r : best) {
      std::vector<std::string> row = {std::to_string(++rank),
                                      fmt::format("{}/{}{}", r->node_id, r->number, Sliced(*r) ? " sliced" : ""),
                                      search::LayoutKey(r->layout)};
      if (measured) row.push_back(r->tokens_per_s ? WithCommas(std::llround(*r->tokens_per_s)) : "-");
      row.push_back(r->predicted_tokens_per_s ? WithCommas(std::llround(*r->predicted_tokens_per_s)) : "-");
      if (measured) {
        row.push_back(r->tokens_per_s && r->predicted_tokens_per_s
                          ? fmt::format("{:+.1f}%", 100 * (*r->predicted_tokens_per_s / *r->tokens_per_s - 1))
                          : "-");
      }
      const std::optional<double> memory = measured ? r->peak_memory_bytes : r->predicted_memory_bytes;
      row.push_back(memory ? fmt::format("{:.1f}", *memory / 1e9) : "-");
      t.AddRow(std::move(row));
      rows.push_back(TrialJson(*r));
    }
    text += fmt::format("\nBest {} layouts{}:\n{}", best.size(),
                        study->backend == "model" ? " (predicted)" : " (measured)", t.Render());
    if (std::any_of(best.begin(), best.end(), [](const store::TrialRecord* r) { return Sliced(*r); })) {
      text +=
          "(sliced: measured on fewer data-parallel replicas; the model added the full world's exposed "
          "data-parallel communication)\n";
    }
    json["best"] = rows;
  }

  // Best so far against trial number, and the model's error on the measured trials.
  std::vector<double> xs, ys;
  std::vector<std::pair<double, double>> markers;
  const store::TrialRecord* best_so_far = nullptr;
  std::string improvements;
  // Throughput for display: tokens/s when the metric converts to it, else 1 / the objective.
  auto throughput = [](const store::TrialRecord& r) {
    return r.tokens_per_s ? *r.tokens_per_s : 1.0 / *ObjectiveOf(r);
  };
  for (size_t i = 0; i < finished.size(); ++i) {
    if (!ObjectiveOf(*finished[i])) continue;
    markers.emplace_back(i + 1, throughput(*finished[i]));
    if (best_so_far == nullptr || *ObjectiveOf(*finished[i]) < *ObjectiveOf(*best_so_far)) {
      best_so_far = finished[i];
      improvements += fmt::format("{}#{} {}", improvements.empty() ? "" : ", ", i + 1,
                                  WithCommas(std::llround(throughput(*best_so_far))));
    }
    xs.push_back(static_cast<double>(i + 1));
    ys.push_back(throughput(*best_so_far));
  }
  if (study->backend != "model" && !improvements.empty()) {
    text += fmt::format("\nBest so far (finished trial #, tok/s when the best improved): {}\n", improvements);
  }
  std::vector<double> errors, predicted, measured;
  for (const store::TrialRecord* r : ok) {
    if (r->backend == "model" || !r->tokens_per_s || !r->predicted_tokens_per_s) continue;
    errors.push_back(*r->predicted_tokens_per_s / *r->tokens_per_s - 1);
    predicted.push_back(*r->predicted_tokens_per_s);
    measured.push_back(*r->tokens_per_s);
  }
  if (!errors.empty()) {
    std::vector<double> abs_errors;
    for (double e : errors) abs_errors.push_back(std::abs(e));
    std::sort(abs_errors.begin(), abs_errors.end());
    double mean = 0;
    for (double e : errors) mean += e / errors.size();
    const double median = abs_errors[abs_errors.size() / 2];
    const double rho = errors.size() >= 2 ? search::SpearmanCorrelation(predicted, measured) : NAN;
    text += fmt::format(
        "Model against measurement over {} ok trials: median |error| {:.1f}%, mean {:+.1f}% (predicted "
        "tok/s / measured - 1), rank correlation {}\n",
        errors.size(), 100 * median, 100 * mean, std::isfinite(rho) ? fmt::format("{:.2f}", rho) : "-");
    json["model_error"] = {{"trials", errors.size()},
                           {"median_abs", median},
                           {"mean", mean},
                           {"spearman", std::isfinite(rho) ? nlohmann::json(rho) : nlohmann::json()}};
  }

  std::vector<std::string> written;
  std::error_code ec;
  if (!o.svg_dir.empty()) {
    fs::create_directories(o.svg_dir, ec);
    if (ec) return InvalidArgument(fmt::format("cannot create '{}': {}", o.svg_dir, ec.message()));
  }
  if (!o.svg_dir.empty() && !xs.empty() && study->backend != "model") {
    LineChart line;
    line.title = "Convergence";
    line.subtitle = fmt::format("study {}: best throughput found against finished trials", study->name);
    line.x_label = "finished trials";
    line.y_label = "throughput (tokens/s)";
    line.x = xs;
    line.y = ys;
    line.markers = markers;
    int model_best = -1;
    double model_best_step = INFINITY;
    for (size_t i = 0; i < legal->size(); ++i) {
      const runner::Prediction p = model->Predict((*legal)[i]);
      if (p.fits && p.step_time_s < model_best_step)
        model_best_step = p.step_time_s, model_best = static_cast<int>(i);
    }
    if (model_best >= 0) {
      line.references.emplace_back(
          problem.model.global_batch * static_cast<double>(problem.model.seq_len) / model_best_step,
          "the model's predicted optimum");
    }
    TUNEPAR_RETURN_IF_ERROR(WriteFile(fs::path(o.svg_dir) / "convergence.svg", RenderLineChart(line)));
    written.push_back((fs::path(o.svg_dir) / "convergence.svg").string());
  }
  if (!o.svg_dir.empty() && !predicted.empty()) {
    ScatterChart scatter;
    scatter.title = "Performance model against measurement";
    scatter.subtitle = fmt::format("study {}: one dot per ok trial", study->name);
    scatter.x_label = "predicted throughput (tokens/s)";
    scatter.y_label = "measured throughput (tokens/s)";
    scatter.x = predicted;
    scatter.y = measured;
    TUNEPAR_RETURN_IF_ERROR(
        WriteFile(fs::path(o.svg_dir) / "predicted-vs-measured.svg", RenderScatterChart(scatter)));
    written.push_back((fs::path(o.svg_dir) / "predicted-vs-measured.svg").string());
  }

  // ---- Knob importance.
  if (o.shap) {
    Explained e;
    e.legal = *legal;
    e.f.assign(e.legal.size(), NAN);
    std::vector<int> trial_points;
    std::vector<double> runnable(e.legal.size(), NAN);  // where the background may come from
    if (study->backend == "model") {
      e.subject = "performance model";
      for (size_t i = 0; i < e.legal.size(); ++i) {
        const runner::Prediction p = model->Predict(e.legal[i]);
        e.f[i] = -std::log(p.step_time_s);
        if (p.fits) runnable[i] = e.f[i];
      }
    } else {
      const nlohmann::json settings = nlohmann::json::parse(study->backend_settings, nullptr, false);
      search::ProposerOptions po;
      po.device_memory_bytes = problem.hardware.MemoryBytes();
      po.seed = settings.is_object() && settings.contains("seed") ? settings["seed"].get<uint64_t>() : 0;
      const search::Proposer proposer(
          e.legal,
          [&](const search::Layout& l) {
            const runner::Prediction p = model->Predict(l);
            return search::PriorPrediction{p.step_time_s, p.memory_bytes};
          },
          po);
      const search::Surrogate s = proposer.Posterior(History(trials));
      e.subject = s.measured
                      ? fmt::format("surrogate fitted to {} ok trial{}", ok.size(), ok.size() == 1 ? "" : "s")
                      : "surrogate (no ok trial yet: the performance model's prior)";
      for (size_t i = 0; i < e.legal.size(); ++i) {
        e.f[i] = -s.log_step_time[i];
        if (s.feasibility[i] >= 0.5) runnable[i] = e.f[i];
      }
      for (const store::TrialRecord* r : ok) {
        const auto it = std::find(e.legal.begin(), e.legal.end(), r->layout);
        if (it != e.legal.end()) trial_points.push_back(static_cast<int>(it - e.legal.begin()));
      }
      std::sort(trial_points.begin(), trial_points.end());
      trial_points.erase(std::unique(trial_points.begin(), trial_points.end()), trial_points.end());
    }
    if (o.background == "trials" && trial_points.size() >= 2) {
      e.background = trial_points;
      if (static_cast<int>(e.background.size()) > o.background_size) {
        std::mt19937_64 rng(1);
        std::shuffle(e.background.begin(), e.background.end(), rng);
        e.background.resize(o.background_size);
        std::sort(e.background.begin(), e.background.end());
      }
      e.background_note = fmt::format("{} finished ok trials", e.background.size());
    } else {
      e.background = SampleDefined(runnable, o.background_size, 1);
      e.background_note = fmt::format("{} legal layouts likely to fit, sampled", e.background.size());
      if (o.background == "trials" && study->backend != "model") {
        e.background_note += fmt::format(" (the study has {} ok trial{}: too few for a trial background)",
                                         ok.size(), ok.size() == 1 ? "" : "s");
      }
    }
    // The layout explained: the best measured one, else the surrogate's best.
    e.local = -1;
    if (!best.empty()) {
      const auto it = std::find(e.legal.begin(), e.legal.end(), best.front()->layout);
      if (it != e.legal.end()) e.local = static_cast<int>(it - e.legal.begin());
    }
    if (e.local < 0) e.local = BestDefined(runnable);
    if (e.local < 0 || e.background.empty()) {
      text += "\nNo layout to explain (nothing is predicted to fit).\n";
    } else {
      const ShapReport r = ExplainKnobs(e);
      text += "\n" + r.text;
      json["shap"] = r.json;
      if (!o.svg_dir.empty()) TUNEPAR_RETURN_IF_ERROR(WriteShapCharts(o.svg_dir, e, r, &written));
    }
  }
  json["svg"] = written;
  if (global.json) {
    fmt::print("{}\n", json.dump(2));
  } else {
    fmt::print("{}", text);
    for (const std::string& w : written) fmt::print("wrote {}\n", w);
  }
  return Status::Ok();
}

}  // namespace

void AddReportCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd =
      app.add_subcommand("report", "A study's summary; which knobs matter (--shap); charts (--svg)");
  cmd->add_option("study", o->study, "Study name or id (default: the store's only study)");
  cmd->add_flag("--shap", o->shap, "Knob importance: Shapley values of the surrogate's log throughput");
  cmd->add_flag("--of-model", o->of_model, "Explain the performance model itself (needs --world; no study)");
  cmd->add_option("--svg", o->svg_dir, "Write SVG charts into this directory");
  cmd->add_option("--background", o->background,
                  "trials (the finished ok trials) or legal (a sample of legal layouts)")
      ->check(CLI::IsMember({"trials", "legal"}))
      ->capture_default_str();
  cmd->add_option("--background-size", o->background_size, "At most this many background layouts")
      ->check(CLI::Range(2, 2000))
      ->capture_default_str();
  cmd->add_option("--top", o->top, "How many of the best layouts to list")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--world,-w", o->world, "With --of-model: number of GPUs");
  cmd->add_option("--model,-m", o->model, "With --of-model: model preset or TOML path")
      ->capture_default_str();
  cmd->add_option("--hardware", o->hardware, "With --of-model: hardware preset or TOML path")
      ->capture_default_str();
  cmd->add_option("--space", o->space, "With --of-model: search-space preset or TOML path")
      ->capture_default_str();
  cmd->callback([&global, result, o] { *result = RunReport(global, *o); });
}

}  // namespace tunepar
