// The end of a Bayesian search: what stopped it, the best layout found, how the performance
// model's own top layout fared, and how to go on, as text or as one JSON object.
#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runner/performance_model.h"
#include "tuner/loops/bayesian_search.h"
#include "tuner/output/text_table.h"
#include "tuner/output/trial_output.h"
#include "tuner/study/study_best.h"
#include "tuner/study/study_lookup.h"
#include "tuner/study/trial_records.h"

namespace tunepar {

namespace {

// The performance model's fastest layout that fits, and the study's last finished trial of it.
struct ModelTop {
  std::optional<Layout> layout;
  runner::Prediction predicted;
  const store::TrialRecord* measured = nullptr;
};

ModelTop ModelTopOf(const StudyContext& context, const std::vector<store::TrialRecord>& trials) {
  ModelTop top;
  top.layout = context.ModelBest();
  if (!top.layout) return top;
  top.predicted = context.Predict(*top.layout);
  for (const store::TrialRecord& t : trials) {
    if (t.layout == *top.layout && IsFinished(t.status)) top.measured = &t;
  }
  return top;
}

std::string ModelTopText(const ModelTop& top, const store::TrialRecord* best) {
  const std::string key = LayoutKey(*top.layout);
  const store::TrialRecord* measured = top.measured;
  if (measured == nullptr) {
    return fmt::format("The model's top layout, {} (predicted {} tok/s), was not measured.\n", key,
                       WithCommas(std::llround(top.predicted.tokens_per_s)));
  }
  if (best != nullptr && measured->status == TrialStatus::kOk && ObjectiveOf(*measured) && measured != best) {
    return fmt::format("The model's top layout, {}, measured {}: {:.1f}% below the best found.\n", key,
                       ThroughputText(*measured), 100 * (1 - *ObjectiveOf(*best) / *ObjectiveOf(*measured)));
  }
  if (measured == best) return "The model's top layout is the best found.\n";
  return fmt::format("The model's top layout, {}, was measured: {} ({}).\n", key, ToString(measured->status),
                     measured->message);
}

int CountConfirmations(const std::vector<store::TrialRecord>& trials) {
  return static_cast<int>(std::count_if(trials.begin(), trials.end(), [](const store::TrialRecord& t) {
    return t.role == TrialRole::kConfirmation;
  }));
}

// The study's probes (trials proposed past the predicted memory limit), by status:
// "2 probes past the predicted memory limit (counted in the budget): ok 1, oom 1"; "" when none.
std::string ProbeTrialsText(const std::vector<store::TrialRecord>& trials) {
  std::vector<store::TrialRecord> probes;
  std::copy_if(trials.begin(), trials.end(), std::back_inserter(probes),
               [](const store::TrialRecord& t) { return t.role == TrialRole::kProbe; });
  if (probes.empty()) return "";
  std::string by_status;
  for (const auto& [status, n] : CountByStatus(probes))
    by_status += fmt::format("{}{} {}", by_status.empty() ? "" : ", ", status, n);
  return fmt::format("{} past the predicted memory limit (counted in the budget): {}",
                     Counted(static_cast<int64_t>(probes.size()), "probe"), by_status);
}

// "94% likely the fastest measured": never 100% or 0% (a rounded certainty the data cannot show),
// and, before any repeat, only as sure as the assumed noise.
std::string LikelyFastestText(const search::Standing& st) {
  const double p = st.probability_best;
  const std::string chance = p >= 0.995 ? ">99%" : p <= 0.005 ? "<1%" : fmt::format("{:.0f}%", 100 * p);
  return chance + " likely the fastest measured" + (st.noise_degrees_of_freedom > 0 ? "" : " if that noise holds");
}

// "233 tok/s ± 2.1% (3 measurements, noise 9.5% each; 94% likely the fastest measured)": the
// surrogate's estimate of the layout's true throughput (or objective), not one sample of it.
std::string EstimateText(const search::Standing& st, const store::TrialRecord& trial, double tokens_per_step) {
  const double value = std::exp(st.log_step_time);
  const std::string estimate =
      trial.tokens_per_s && tokens_per_step > 0
          ? fmt::format("{} tok/s", WithCommas(std::llround(tokens_per_step / value)))
          : fmt::format("objective {:.4g}", value);
  const std::string noise = st.noise_degrees_of_freedom > 0
                                ? fmt::format("noise {:.1f}% each from {} repeat{}", 100 * st.noise_sd,
                                              st.noise_degrees_of_freedom, st.noise_degrees_of_freedom == 1 ? "" : "s")
                                : fmt::format("noise {:.1f}% each, no repeat yet", 100 * st.noise_sd);
  return fmt::format("{} ± {:.1f}% ({} measurement{}, {}; {})", estimate, 100 * st.sd, st.measurements,
                     st.measurements == 1 ? "" : "s", noise, LikelyFastestText(st));
}

nlohmann::json EstimateJson(const search::Standing& st, double tokens_per_step) {
  return {{"layout", LayoutKey(*st.best)},
          {"step_time_s", std::exp(st.log_step_time)},
          {"tokens_per_s", tokens_per_step > 0 ? tokens_per_step / std::exp(st.log_step_time) : 0.0},
          {"relative_sd", st.sd},
          {"measurements", st.measurements},
          {"noise_sd", st.noise_sd},
          {"noise_repeats", st.noise_degrees_of_freedom},
          {"probability_best", st.probability_best}};
}

// When the performance model is far off the measurements (by a median factor over 1.25), how to
// fit its profile to them.
std::string ModelErrorHint(const std::vector<store::TrialRecord>& trials, const StudyContext& context,
                           const GlobalOptions& global) {
  std::vector<double> log_ratios;
  for (const store::TrialRecord& t : trials) {
    if (t.status == TrialStatus::kOk && t.tokens_per_s && t.predicted_tokens_per_s && *t.tokens_per_s > 0 &&
        *t.predicted_tokens_per_s > 0)
      log_ratios.push_back(std::log(*t.predicted_tokens_per_s / *t.tokens_per_s));
  }
  if (log_ratios.size() < 3) return "";
  std::nth_element(log_ratios.begin(), log_ratios.begin() + log_ratios.size() / 2, log_ratios.end());
  const double median = log_ratios[log_ratios.size() / 2];
  if (std::abs(median) <= std::log(1.25)) return "";
  return fmt::format(
      "The performance model predicts {:.3g}x the measured throughput (median of {} trials): {} fits the profile to "
      "them, or says why no fit of it can.\n",
      std::exp(median), log_ratios.size(),
      TuneparCommand(global, {"calibrate", "--from", context.study.name, "--hardware", context.problem.hardware.name,
                              "-o", "fitted.toml"}));
}

// "No trial ..." from "no trial ...".
std::string Capitalised(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text;
}

}  // namespace

void BayesianSearch::Summarise(const std::string& stop_reason) const {
  if (global_.json) {
    PrintSummaryJson(stop_reason);
  } else {
    PrintSummaryText(stop_reason);
  }
}

void BayesianSearch::PrintSummaryText(const std::string& stop_reason) const {
  const std::vector<store::TrialRecord>& trials = session_.trials;
  const search::Standing standing = Standing();
  const StudyBest study_best = BestOfStudy(context_, trials);
  const store::TrialRecord* best = study_best.trial;
  fmt::print("\nStopped: {}.\n", stop_reason);
  if (best != nullptr) {
    fmt::print("Best layout: {}  {} {} (trial {}/{}; model predicted {} tok/s)\n", LayoutKey(best->layout),
               ThroughputText(*best), best->sliced ? "from a slice + the model" : "measured", best->node_id,
               best->number,
               best->predicted_tokens_per_s ? WithCommas(std::llround(*best->predicted_tokens_per_s)) : "-");
    if (standing.best)
      fmt::print("  estimate: {}\n", EstimateText(standing, *best, context_.proposer_options.tokens_per_step));
    if (const int n = CountConfirmations(trials); n > 0)
      fmt::print("  {} confirmation trial{} (counted in the budget) measured leading layouts again\n", n, n == 1 ? "" : "s");
  } else if (study_best.layout) {
    fmt::print("{}: {}\n", Capitalised(study_best.Header()), LayoutKey(*study_best.layout));
  } else {
    fmt::print("{}.\n", Capitalised(study_best.Header()));
    if (study_best.failed_trials > 0 && study_best.oom_trials == 0) {
      fmt::print("Once the failures' cause is fixed, {} keeps those trials from counting toward the budget.\n",
                 TuneparCommand(global_, ForgetFailedWords()));
    }
  }
  if (const std::string probes = ProbeTrialsText(trials); !probes.empty()) fmt::print("  {}\n", probes);
  if (const std::string fixed = UnreceivedKnobs(context_.support); !fixed.empty())
    fmt::print("Knobs the program does not receive (fixed, not measured): {}.\n", fixed);
  const ModelTop top = ModelTopOf(context_, trials);
  if (top.layout) fmt::print("{}", ModelTopText(top, best));
  std::string count_text;
  for (const auto& [status, n] : CountByStatus(trials))
    count_text += fmt::format("{}{} {}", count_text.empty() ? "" : ", ", status, n);
  fmt::print("Study {}: {} ({}) in store {}.\n", session_.study().name,
             Counted(static_cast<int64_t>(trials.size()), "trial"), count_text,
             global_.store);
  fmt::print("{}", ModelErrorHint(trials, context_, global_));
  const std::string& name = session_.study().name;
  if (CountFinished(trials) >= options_.budget) {
    fmt::print("To go on: run the same command with a larger --budget (the {} finished trials count toward it).\n",
               CountFinished(trials));
  } else if (stop_reason == "interrupted") {
    fmt::print("Resume: run the same command again.\n");
  }
  fmt::print("Inspect: {}    Report: {}\n", TuneparCommand(global_, {"show", name}),
             TuneparCommand(global_, {"report", name, "--shap"}));
}

void BayesianSearch::PrintSummaryJson(const std::string& stop_reason) const {
  const std::vector<store::TrialRecord>& trials = session_.trials;
  const search::Standing standing = Standing();
  nlohmann::json j =
      SearchJson(global_, session_, trials, BestLayouts(BestOfStudy(context_, trials), trials, options_.top));
  j["backend"] = backend_.Name();
  j["evaluated_now"] = this_run_.size();
  j["stopped_because"] = stop_reason;
  j["best_estimate"] = standing.best ? EstimateJson(standing, context_.proposer_options.tokens_per_step) : nlohmann::json();
  fmt::print("{}\n", j.dump(2));
}

nlohmann::json SearchJson(const GlobalOptions& global, const StudySession& session,
                          const std::vector<store::TrialRecord>& trials,
                          const std::vector<const store::TrialRecord*>& best) {
  const StudyContext& context = session.context;
  const StudyBest study_best = BestOfStudy(context, trials);
  nlohmann::json j = {{"study", session.study().name},
                      {"study_id", session.study().id},
                      {"resumed", session.resumed},
                      {"store", global.store},
                      {"shard", session.writer->snapshot_path()},
                      {"node", session.node_id()},
                      {"backend", session.study().backend},
                      {"world", context.world},
                      {"model", context.problem.model.name},
                      {"hardware", context.problem.hardware.name},
                      {"space", context.problem.space.name},
                      {"performance_model", runner::kPerformanceModelVersion},
                      {"candidates", context.space.candidates},
                      {"legal_layouts", context.space.legal.size()},
                      {"ranks_per_node", context.RanksOnANode()},
                      {"evaluated_now", 0},
                      {"stopped_because", ""},
                      {"trial_count", trials.size()},
                      {"status_counts", CountByStatus(trials)}};
  nlohmann::json rows = nlohmann::json::array();
  for (const store::TrialRecord* t : best) rows.push_back(TrialJson(*t, context));
  j["best"] = rows;
  j["best_basis"] = {{"basis", study_best.BasisName()},
                     {"header", study_best.Header()},
                     {"layout", study_best.layout ? nlohmann::json(LayoutKey(*study_best.layout)) : nlohmann::json()}};
  j["best_estimate"] = nullptr;
  j["confirmation_trials"] = CountConfirmations(trials);
  j["probe_trials"] = std::count_if(trials.begin(), trials.end(),
                                    [](const store::TrialRecord& t) { return t.role == TrialRole::kProbe; });
  j["unmeasured_knobs"] = UnmeasuredKnobsJson(context.support);
  const ModelTop top = ModelTopOf(context, trials);
  j["model_best"] = top.layout ? nlohmann::json{{"layout", LayoutKey(*top.layout)},
                                                {"predicted_tokens_per_s", top.predicted.tokens_per_s},
                                                {"measured", top.measured != nullptr && top.measured->backend != "model"
                                                                 ? TrialJson(*top.measured)
                                                                 : nlohmann::json()}}
                               : nlohmann::json();
  return j;
}

}  // namespace tunepar
