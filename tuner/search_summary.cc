// The end of a Bayesian search: what stopped it, the best layout found, how the performance
// model's own top layout fared, and how to go on, as text or as one JSON object.
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tuner/bayesian_search.h"
#include "tuner/text_table.h"
#include "tuner/trial_output.h"

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
  const store::TrialRecord* best = BestTrial(trials);
  fmt::print("\nStopped: {}.\n", stop_reason);
  if (best != nullptr) {
    fmt::print("Best layout: {}  {} {} (trial {}/{}; model predicted {} tok/s)\n", LayoutKey(best->layout),
               ThroughputText(*best), best->sliced ? "from a slice + the model" : "measured", best->node_id,
               best->number,
               best->predicted_tokens_per_s ? WithCommas(std::llround(*best->predicted_tokens_per_s)) : "-");
  } else {
    fmt::print("No trial has finished ok yet.\n");
  }
  const ModelTop top = ModelTopOf(context_, trials);
  if (top.layout) fmt::print("{}", ModelTopText(top, best));
  std::string count_text;
  for (const auto& [status, n] : CountByStatus(trials))
    count_text += fmt::format("{}{} {}", count_text.empty() ? "" : ", ", status, n);
  fmt::print("Study {}: {} trials ({}) in store {}.\n", session_.study().name, trials.size(), count_text,
             global_.store);
  fmt::print("Resume: run the same command again (or add --study {}).  Inspect: tunepar show {}\n",
             session_.study().name, session_.study().name);
}

void BayesianSearch::PrintSummaryJson(const std::string& stop_reason) const {
  const std::vector<store::TrialRecord>& trials = session_.trials;
  const store::TrialRecord* best = BestTrial(trials);
  nlohmann::json j = {{"study", session_.study().name},
                      {"study_id", session_.study().id},
                      {"resumed", session_.resumed},
                      {"node", session_.node_id()},
                      {"backend", backend_.Name()},
                      {"legal_layouts", context_.space.legal.size()},
                      {"ranks_per_node", context_.PlacedRanksPerNode()},
                      {"stopped_because", stop_reason},
                      {"trials", trials.size()},
                      {"status_counts", CountByStatus(trials)}};
  j["best"] = best != nullptr ? TrialJson(*best) : nlohmann::json();
  const ModelTop top = ModelTopOf(context_, trials);
  if (top.layout) {
    j["model_best"] = {{"layout", LayoutKey(*top.layout)},
                       {"predicted_tokens_per_s", top.predicted.tokens_per_s},
                       {"measured", top.measured != nullptr ? TrialJson(*top.measured) : nlohmann::json()}};
  }
  fmt::print("{}\n", j.dump(2));
}

}  // namespace tunepar
