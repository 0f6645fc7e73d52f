// `tunepar report --shap`: which knobs matter, as Shapley values of log throughput.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "search/proposer.h"
#include "tuner/output/report.h"
#include "tuner/output/text_table.h"
#include "tuner/study/study_best.h"
#include "tuner/study/trial_records.h"

namespace tunepar {

namespace {

double Percent(double nats) { return 100.0 * (std::exp(nats) - 1.0); }

// Three decimals, or two significant digits under 0.01 (noise-level importances would all read 0.000).
std::string ImportanceText(double v) {
  return v >= 0.01 || v == 0 ? fmt::format("{:.3f}", v) : fmt::format("{:.2g}", v);
}

std::string SignedPercent(double nats) { return fmt::format("{:+.1f}%", Percent(nats)); }

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

int IndexIn(const std::vector<Layout>& legal, const Layout& layout) {
  const auto it = std::find(legal.begin(), legal.end(), layout);
  return it == legal.end() ? -1 : static_cast<int>(it - legal.begin());
}

// The performance model's log throughput on every legal layout (whether it fits or not:
// Shapley values explain speed, and a hybrid of two runnable layouts may not fit); `runnable`
// keeps it where the layout is predicted to fit.
void ModelValues(const StudyContext& context, Explained* e, std::vector<double>* runnable) {
  e->f.resize(e->legal.size());
  runnable->assign(e->legal.size(), NAN);
  for (size_t i = 0; i < e->legal.size(); ++i) {
    const runner::Prediction p = context.Predict(e->legal[i]);
    e->f[i] = -std::log(p.step_time_s);
    if (p.fits) (*runnable)[i] = e->f[i];
  }
}

// The surrogate fitted to the trials; `runnable` keeps it where the layout likely fits and runs:
// at least 0.5, or 0.8 of the likeliest layout's probability when none is that likely (every
// trial ran out of memory: the proposer's floor, Proposer::FeasibilityFloor).
void SurrogateValues(const StudyContext& context, const StudyTrials& trials, Explained* e, std::vector<double>* runnable) {
  const search::Proposer proposer(e->legal, context.Prior(), context.proposer_options);
  const search::Surrogate s = proposer.Posterior(History(trials.all));
  const size_t ok = trials.ok.size();
  e->subject = s.measured ? fmt::format("surrogate fitted to {} ok trial{}", ok, ok == 1 ? "" : "s")
                          : "surrogate (no ok trial yet: the performance model's prior)";
  e->f.resize(e->legal.size());
  runnable->assign(e->legal.size(), NAN);
  const double likeliest = s.feasibility.empty() ? 0.0 : *std::max_element(s.feasibility.begin(), s.feasibility.end());
  const double floor = std::min(0.5, 0.8 * likeliest);
  for (size_t i = 0; i < e->legal.size(); ++i) {
    e->f[i] = -s.log_step_time[i];
    if (s.feasibility[i] >= floor && s.feasibility[i] > 0) (*runnable)[i] = e->f[i];
  }
}

std::vector<int> TrialPoints(const Explained& e, const StudyTrials& trials) {
  std::vector<int> points;
  for (const store::TrialRecord* r : trials.ok) {
    if (const int i = IndexIn(e.legal, r->layout); i >= 0) points.push_back(i);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return points;
}

void ChooseBackground(const StudyContext& context, const StudyTrials& trials, const ImportanceOptions& o,
                      const std::vector<double>& runnable, Explained* e) {
  const std::vector<int> trial_points = context.study.backend == "model" ? std::vector<int>() : TrialPoints(*e, trials);
  if (o.background == "trials" && trial_points.size() >= 2) {
    e->background = trial_points;
    if (static_cast<int>(e->background.size()) > o.background_size) {
      std::mt19937_64 rng(1);
      std::shuffle(e->background.begin(), e->background.end(), rng);
      e->background.resize(o.background_size);
      std::sort(e->background.begin(), e->background.end());
    }
    e->background_note = fmt::format("{} finished ok trials", e->background.size());
    return;
  }
  e->background = SampleDefined(runnable, o.background_size, 1);
  e->background_note = fmt::format("{} legal layouts likely to fit, sampled", e->background.size());
  if (o.background == "trials" && context.study.backend != "model") {
    const size_t ok = trials.ok.size();
    e->background_note += fmt::format(" (the study has {} ok trial{}: too few for a trial background)", ok,
                                      ok == 1 ? "" : "s");
  }
}

TextTable GlobalTable(const Explained& e, const search::KnobImportance& g, const NoiseFloor& floor,
                      nlohmann::json* knobs) {
  double total = 0;
  for (double v : g.mean_abs_phi) total += v;
  std::vector<size_t> order(g.knobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return g.mean_abs_phi[a] > g.mean_abs_phi[b]; });
  TextTable t;
  using A = TextTable::Align;
  t.AddColumn("knob", A::kLeft);
  t.AddColumn("importance");
  t.AddColumn("share");
  t.AddColumn("helps most (mean contribution)", A::kLeft);
  t.AddColumn("hurts most", A::kLeft);
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
    const bool noise = floor.defined && g.mean_abs_phi[k] <= floor.value;
    t.AddRow({name, ImportanceText(g.mean_abs_phi[k]),
              noise ? "under floor" : fmt::format("{:.1f}%", 100 * share),
              fmt::format("{} ({})", helps, SignedPercent(best)),
              fmt::format("{} ({})", hurts, SignedPercent(worst))});
    knobs->push_back({{"knob", name},
                      {"importance", g.mean_abs_phi[k]},
                      {"share", share},
                      {"under_noise_floor", noise},
                      {"helps", {{"value", helps}, {"mean_phi", best}}},
                      {"hurts", {{"value", hurts}, {"mean_phi", worst}}},
                      {"mean_phi_by_value", values}});
  }
  return t;
}

TextTable LocalTable(const Explained& e, const search::KnobExplanation& l, nlohmann::json* contributions) {
  TextTable lt;
  lt.AddColumn("knob", TextTable::Align::kLeft);
  lt.AddColumn("value", TextTable::Align::kLeft);
  lt.AddColumn("contribution");
  std::vector<size_t> order(l.knobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return std::abs(l.phi[a]) > std::abs(l.phi[b]); });
  for (size_t i : order) {
    const std::string value = search::KnobValue(l.knobs[i], e.legal[e.local]);
    lt.AddRow({std::string(search::KnobName(l.knobs[i])), value, SignedPercent(l.phi[i])});
    contributions->push_back({{"knob", search::KnobName(l.knobs[i])}, {"value", value}, {"phi", l.phi[i]}});
  }
  return lt;
}

// The strongest pairwise interaction, as text and JSON (null when none).
nlohmann::json StrongestInteraction(const search::KnobImportance& g, std::string* text) {
  double strongest = 0;
  size_t si = 0, sj = 0;
  for (size_t i = 0; i < g.interaction.size(); ++i) {
    for (size_t j = i + 1; j < g.interaction.size(); ++j) {
      if (g.interaction[i][j] > strongest) strongest = g.interaction[i][j], si = i, sj = j;
    }
  }
  if (strongest <= 0) return nlohmann::json();
  *text += fmt::format("Strongest interaction: {} x {} (mean |interaction| {:.3f})\n", search::KnobName(g.knobs[si]),
                       search::KnobName(g.knobs[sj]), strongest);
  return {{"knobs", {search::KnobName(g.knobs[si]), search::KnobName(g.knobs[sj])}}, {"mean_abs", strongest}};
}

// The noise floor's refits: how many, the seed of their shuffles, at most how many background
// points each explains (Global costs background^2 x 2^knobs evaluations: 24 refits over 100
// points of 9 knobs take a few seconds; the default background is no larger, so the refits
// explain the same points as the report), and the quantile of the refits' importances taken
// as the floor.
constexpr int kFloorRefits = 24;
constexpr uint64_t kFloorSeed = 16;
constexpr int kFloorBackground = 100;
constexpr double kFloorQuantile = 0.9;
// With repeats: the floor in repeat spreads (a mean |phi| of 1.5 spreads: three between a knob's values).
constexpr double kRepeatFloorSpreads = 1.5;

// The floor's text under the knob table.
std::string NoiseFloorText(const NoiseFloor& floor, const search::KnobImportance& g) {
  if (!floor.defined) return fmt::format("{}.\n", floor.method);
  std::string text = fmt::format("Noise floor {}: {}. Knobs at or under it are marked \"under floor\".\n",
                                 ImportanceText(floor.value), floor.method);
  if (std::all_of(g.mean_abs_phi.begin(), g.mean_abs_phi.end(), [&](double v) { return v <= floor.value; }))
    text += "Every knob is under the noise floor: the measurements do not tell the knobs apart.\n";
  return text;
}

nlohmann::json NoiseFloorJson(const NoiseFloor& floor) {
  if (!floor.defined) return {{"value", nullptr}, {"method", floor.method}};
  return {{"value", floor.value},
          {"method", floor.method},
          {"refits", floor.refits},
          {"background", floor.background},
          {"quantile", kFloorQuantile}};
}

}  // namespace

Explained ExplainStudy(const StudyContext& context, const StudyTrials& trials, const ImportanceOptions& o) {
  Explained e;
  e.legal = context.space.legal;
  std::vector<double> runnable;  // where the background may come from
  if (context.study.backend == "model") {
    e.subject = "performance model";
    ModelValues(context, &e, &runnable);
  } else {
    SurrogateValues(context, trials, &e, &runnable);
  }
  ChooseBackground(context, trials, o, runnable, &e);
  // The layout explained: the study's best (tuner/study/study_best.h), as the summary and
  // launch-script name it.
  const StudyBest best = BestOfStudy(context, trials.all);
  if (best.layout) e.local = IndexIn(e.legal, *best.layout);
  e.local_header = best.Header();
  return e;
}

Explained ExplainModel(const StudyContext& context, const std::string& subject, int background_size) {
  Explained e;
  e.legal = context.space.legal;
  e.subject = subject;
  std::vector<double> runnable;
  ModelValues(context, &e, &runnable);
  e.background = SampleDefined(runnable, background_size, 1);
  e.local = BestDefined(runnable);
  e.local_header = "the performance model's fastest layout predicted to fit";  // as StudyBest says a dry run's
  e.background_note = fmt::format("{} legal layouts predicted to fit, sampled", e.background.size());
  return e;
}

// Where layouts were measured more than once (repeats with 2 or more degrees of freedom), the
// floor is what the measurements themselves say of noise: a knob that moves log throughput by
// more than three repeat spreads between its values (a mean |phi| over 1.5 spreads) matters.
// Shuffled refits of a few distinct layouts can put every knob under a floor far above what
// repeats agreeing to 1% allow.
void UseRepeatsForTheFloor(const search::Proposer& proposer, const std::vector<search::Outcome>& history,
                           NoiseFloor& floor) {
  const auto [spread, df] = proposer.RepeatNoise(history);
  if (df < 2) return;
  floor.value = kRepeatFloorSpreads * spread;
  floor.method = fmt::format(
      "{} times the spread of repeated measurements (pooled sd of log step time {:.2g}, {} repeats): a knob "
      "whose values move throughput by more than three such spreads is above it",
      kRepeatFloorSpreads, spread, df);
}

// Refits to the study's own ok measurements shuffled among their layouts: the data keep their
// spread and the search's coverage but no knob can matter in them, so the importance the refits
// give a knob is what the surrogate makes of no signal: its prior, its smoothing, and the
// hybrids of layouts no trial measured (the null importances of Altmann et al. 2010,
// "Permutation importance: a corrected feature importance measure"). Measurements that are all
// equal are their own shuffle: every importance is then at the floor. (Perturbing by the
// surrogate's fitted noise, or a bootstrap of the trials, leaves such a study as flat as it is
// and its importances above a floor near zero.) The background is the explained one (a larger
// one subsampled to kFloorBackground points).
NoiseFloor ImportanceNoiseFloor(const StudyContext& context, const StudyTrials& trials, const Explained& e) {
  NoiseFloor floor;
  if (context.study.backend == "model") return floor;
  if (trials.ok.empty()) {
    floor.method = "no noise floor: no trial finished ok, and the performance model's prior is deterministic";
    return floor;
  }
  const auto start = std::chrono::steady_clock::now();
  const search::Proposer proposer(e.legal, context.Prior(), context.proposer_options);
  std::vector<search::Outcome> history = History(trials.all);
  std::vector<double*> measured;  // the ok objectives, shuffled among their outcomes in place
  for (search::Outcome& o : history) {
    if (o.status == TrialStatus::kOk && o.step_time_s) measured.push_back(&*o.step_time_s);
  }
  std::vector<double> values;
  for (const double* v : measured) values.push_back(*v);
  std::vector<int> background = e.background;
  std::mt19937_64 rng(kFloorSeed);
  if (static_cast<int>(background.size()) > kFloorBackground) {
    std::shuffle(background.begin(), background.end(), rng);
    background.resize(kFloorBackground);
    std::sort(background.begin(), background.end());
  }
  std::vector<double> null_importance;  // every knob's, in every refit
  for (int refit = 0; refit < kFloorRefits; ++refit) {
    std::shuffle(values.begin(), values.end(), rng);
    for (size_t j = 0; j < measured.size(); ++j) *measured[j] = values[j];
    const search::Surrogate s = proposer.Posterior(history);
    std::vector<double> f(s.log_step_time.size());
    for (size_t i = 0; i < f.size(); ++i) f[i] = -s.log_step_time[i];
    const search::KnobImportance g = search::KnobShapley(e.legal, std::move(f), background).Global(false);
    null_importance.insert(null_importance.end(), g.mean_abs_phi.begin(), g.mean_abs_phi.end());
  }
  std::sort(null_importance.begin(), null_importance.end());
  // The nearest-rank quantile: the smallest value at or above kFloorQuantile of them.
  const size_t rank =
      static_cast<size_t>(std::ceil(kFloorQuantile * static_cast<double>(null_importance.size())));
  floor.defined = true;
  floor.value = null_importance.empty() ? 0.0 : null_importance[std::max<size_t>(rank, 1) - 1];
  floor.refits = kFloorRefits;
  floor.background = static_cast<int>(background.size());
  floor.method = fmt::format(
      "the 90th percentile of the knobs' importances over {} refits of the surrogate to the {} ok "
      "measurements shuffled among their layouts (where no knob can matter), {} background points each",
      kFloorRefits, measured.size(), floor.background);
  UseRepeatsForTheFloor(proposer, History(trials.all), floor);
  spdlog::debug("noise floor {:.3g} from {} refits in {:.2f} s", floor.value, kFloorRefits,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return floor;
}

ShapReport ExplainKnobs(const Explained& e, const NoiseFloor& floor) {
  ShapReport r;
  r.floor = floor;
  const search::KnobShapley shap(e.legal, e.f, e.background);
  r.global = shap.Global(true);
  r.local = shap.Explain(e.local, true);
  nlohmann::json knobs = nlohmann::json::array(), contributions = nlohmann::json::array();
  const TextTable global = GlobalTable(e, r.global, floor, &knobs);
  r.text += fmt::format(
      "Which knobs matter: Shapley values of the log throughput predicted by the {} (natural\n"
      "log: +0.10 is about +10.5% throughput), exact over all {} coalitions of knobs; importance =\n"
      "mean |phi| over the background ({}).\n",
      e.subject, 1u << r.global.knobs.size(), e.background_note);
  r.text += global.Render();
  r.text += NoiseFloorText(floor, r.global);
  const TextTable local = LocalTable(e, r.local, &contributions);
  r.text += fmt::format("\nWhy {} is best: {} throughput against the background's mean.\nIt is {}.\n",
                        LayoutKey(e.legal[e.local]), SignedPercent(r.local.value - r.local.baseline), e.local_header);
  r.text += local.Render();
  const nlohmann::json interaction = StrongestInteraction(r.global, &r.text);
  r.json = {{"subject", e.subject},
            {"background", e.background_note},
            {"unit", "natural log of throughput"},
            {"knobs", knobs},
            {"noise_floor", NoiseFloorJson(floor)},
            {"local",
             {{"layout", LayoutKey(e.legal[e.local])},
              {"which", e.local_header},
              {"value", r.local.value},
              {"baseline", r.local.baseline},
              {"contributions", contributions}}},
            {"strongest_interaction", interaction}};
  return r;
}

}  // namespace tunepar
