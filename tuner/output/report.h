// `tunepar report` in named steps: a study's summary (counts, best layouts measured against
// predicted, best so far, the model's error, what the trials taught about memory), which knobs
// matter (Shapley values of the surrogate, or of the performance model), and the charts. Each
// step adds to a Report; the command prints it as text or JSON.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "search/knob_shapley.h"
#include "store/records.h"
#include "tuner/study/study_context.h"

namespace tunepar {

struct Report {
  std::string text;
  nlohmann::json json = nlohmann::json::object();
  std::vector<std::string> written;      // chart files
  std::vector<std::string> chart_notes;  // the charts not written, and why ("no chart of ...: ...")
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
  int top = 10;                                     // how many best layouts to list (--top)
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

// ---- What the trials taught about memory (report_memory.cc).
// The memory model's fitted multiplier of each component of the performance model's memory, with
// a 90% interval, and the ok, OOM and probe trials it learned from; nothing for a model-backend
// study, a hardware profile without a device memory, or a study with no ok or OOM trial.
void AddMemoryModel(const StudyContext& context, const StudyTrials& trials, Report* report);

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
  std::string local_header;  // which best the local explanation explains (StudyBest::Header)
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

// How much importance a knob gets from data in which no knob matters (report_importance.cc).
// The default is the performance model's: deterministic, so there is none.
struct NoiseFloor {
  bool defined = false;
  double value = 0;  // importances at or under this are noise (when defined)
  std::string method = "no noise floor: the performance model is deterministic";  // or why there is none
  int refits = 0;      // of the surrogate, each to the ok measurements shuffled among their layouts
  int background = 0;  // background points of each refit
};
// For a study measured by a real backend: the surrogate refitted to its ok measurements shuffled
// among their layouts, the knobs' importances recomputed each time; the floor is the 90th
// percentile of those importances (every knob, every refit).
NoiseFloor ImportanceNoiseFloor(const StudyContext& context, const StudyTrials& trials,
                                const Explained& explained);

struct ShapReport {
  NoiseFloor floor;
  search::KnobImportance global;
  search::KnobExplanation local;
  nlohmann::json json;
  std::string text;
};
// Knobs under the floor are marked in the text and the JSON (shap.noise_floor says how it was found).
ShapReport ExplainKnobs(const Explained& explained, const NoiseFloor& floor = {});

// ---- Charts (report_charts.cc).
Status WriteFile(const std::filesystem::path& path, const std::string& text);
Status MakeChartDir(const std::string& dir);
Status WriteShapCharts(const std::filesystem::path& dir, const Explained& explained, const ShapReport& shap,
                       std::vector<std::string>* written);
// The charts that need no Shapley values: the performance model's throughput against memory of
// the legal layouts (every study); for a measuring backend, the best throughput against finished
// trials (OOM, failed and sliced trials marked) and predicted against measured throughput (log
// axes). A chart that cannot be drawn gets a line in `notes` saying why.
Status WriteStudyCharts(const std::filesystem::path& dir, const StudyContext& context,
                        const StudyTrials& trials, std::vector<std::string>* written,
                        std::vector<std::string>* notes = nullptr);

// Throughput for display: tokens/s when the metric converts to it, else 1 / the objective.
double DisplayThroughput(const store::TrialRecord& trial);

}  // namespace tunepar
