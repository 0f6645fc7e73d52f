// `tunepar report` in named steps: a study's summary (counts, best layouts measured against
// predicted, best so far, the model's error), which knobs matter (Shapley values of the
// surrogate, or of the performance model), and the charts. Each step adds to a Report; the
// command prints it as text or JSON.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "search/knob_shapley.h"
#include "store/records.h"
#include "tuner/study_context.h"

namespace tunepar {

struct Report {
  std::string text;
  nlohmann::json json = nlohmann::json::object();
  std::vector<std::string> written;  // chart files
};

// A study's trials as the report reads them.
struct StudyTrials {
  StudyTrials() = default;
  StudyTrials(StudyTrials&&) = default;  // the pointers below point into `all`: moved, never copied
  StudyTrials& operator=(StudyTrials&&) = default;
  StudyTrials(const StudyTrials&) = delete;
  StudyTrials& operator=(const StudyTrials&) = delete;

  std::vector<store::TrialRecord> all;
  std::vector<const store::TrialRecord*> finished;  // in the order they finished
  std::vector<const store::TrialRecord*> ok;        // with an objective, in study order
  std::vector<const store::TrialRecord*> best;      // ok, best objective first, at most `top`
};
StudyTrials ReadStudyTrials(std::vector<store::TrialRecord> trials, int top);

// ---- Summary (report_summary.cc).
// The best throughput found against finished trials: a step per finished trial that ran ok, the
// measured points, and when the best improved ("#1 12,345, #4 13,456").
struct Convergence {
  std::vector<double> x, y;
  std::vector<std::pair<double, double>> markers;
  std::string improvements;
};
Convergence ConvergenceOf(const StudyTrials& trials);
void AddSummary(const StudyContext& context, const StudyTrials& trials, Report* report);

// ---- Which knobs matter (report_importance.cc).
// What an explanation explains: f (log throughput, NaN where undefined) on the legal layouts,
// the background, and the layout explained on its own.
struct Explained {
  std::string subject;  // "surrogate fitted to 12 ok trials" / "performance model"
  std::string background_note;
  std::vector<Layout> legal;
  std::vector<double> f;
  std::vector<int> background;
  int local = -1;
};
struct ImportanceOptions {
  std::string background = "trials";  // trials | legal
  int background_size = 100;
};
// The performance model's log throughput over the study's legal space (model-backend studies),
// or the surrogate fitted to the trials; background and explained layout as the options ask.
Explained ExplainStudy(const StudyContext& context, const StudyTrials& trials, const ImportanceOptions& options);
// The performance model itself (report --of-model), on the context's legal space.
Explained ExplainModel(const StudyContext& context, const std::string& subject, int background_size);

struct ShapReport {
  search::KnobImportance global;
  search::KnobExplanation local;
  nlohmann::json json;
  std::string text;
};
ShapReport ExplainKnobs(const Explained& explained);

// ---- Charts (report_charts.cc).
Status WriteFile(const std::filesystem::path& path, const std::string& text);
Status MakeChartDir(const std::string& dir);
Status WriteShapCharts(const std::filesystem::path& dir, const Explained& explained, const ShapReport& shap,
                       std::vector<std::string>* written);
// Best throughput against finished trials, with the model's predicted optimum; and predicted
// against measured throughput. Measuring-backend studies only.
Status WriteStudyCharts(const std::filesystem::path& dir, const StudyContext& context, const StudyTrials& trials,
                        std::vector<std::string>* written);

// Throughput for display: tokens/s when the metric converts to it, else 1 / the objective.
double DisplayThroughput(const store::TrialRecord& trial);

}  // namespace tunepar
