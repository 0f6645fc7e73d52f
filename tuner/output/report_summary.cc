// `tunepar report STUDY`: the summary of a study.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tuner/output/report.h"
#include "tuner/output/text_table.h"
#include "tuner/output/trial_costs.h"
#include "tuner/output/trial_output.h"
#include "tuner/study/study_best.h"
#include "tuner/study/trial_records.h"

namespace tunepar {

namespace {

void AddCounts(const StudyContext& context, const StudyTrials& trials, Report* report) {
  const store::StudyRecord& study = context.study;
  const std::map<std::string, int64_t> counts = CountByStatus(trials.all);
  report->text += fmt::format("Study {} (id {}): model {}, hardware {}, space {}, world {}, backend {}\n", study.name,
                              study.id, study.model_name, study.hardware_name, study.space_name, study.world,
                              study.backend);
  std::string count_text;
  for (const auto& [status, n] : counts)
    count_text += fmt::format("{}{} {}", count_text.empty() ? "" : ", ", status, WithCommas(n));
  report->text += fmt::format("trials {}: {}\n", WithCommas(static_cast<int64_t>(trials.all.size())),
                              count_text.empty() ? "none" : count_text);
  report->text += fmt::format("legal layouts {}; {} rank{} per node, as the trials ran\n",
                              WithCommas(static_cast<int64_t>(context.space.legal.size())), context.RanksOnANode(),
                              context.RanksOnANode() == 1 ? "" : "s");
  if (const std::string fixed = UnreceivedKnobs(context.support); !fixed.empty())
    report->text += fmt::format("not measured (the program does not receive them): {}\n", fixed);
  report->json["unmeasured_knobs"] = UnmeasuredKnobsJson(context.support);
  report->json["study"] = study.name;
  report->json["study_id"] = study.id;
  report->json["trial_count"] = trials.all.size();
  report->json["status_counts"] = counts;
  report->json["legal_layouts"] = context.space.legal.size();
  report->json["ranks_per_node"] = context.RanksOnANode();
}

TextTable BestTable(bool measured) {
  TextTable t;
  using A = TextTable::Align;
  t.AddColumn("#");
  t.AddColumn("trial", A::kLeft);
  t.AddColumn("layout", A::kLeft);
  if (measured) t.AddColumn("measured tok/s");
  t.AddColumn("predicted tok/s");
  if (measured) t.AddColumn("model error");
  t.AddColumn(measured ? "measured mem GB" : "predicted mem GB");
  return t;
}

std::vector<std::string> BestRow(int rank, const store::TrialRecord& r, bool measured) {
  std::vector<std::string> row = {std::to_string(rank),
                                  fmt::format("{}/{}{}", r.node_id, r.number, r.sliced ? " sliced" : ""),
                                  LayoutKey(r.layout)};
  if (measured) row.push_back(r.tokens_per_s ? WithCommas(std::llround(*r.tokens_per_s)) : "-");
  row.push_back(r.predicted_tokens_per_s ? WithCommas(std::llround(*r.predicted_tokens_per_s)) : "-");
  if (measured) {
    row.push_back(r.tokens_per_s && r.predicted_tokens_per_s
                      ? fmt::format("{:+.1f}%", 100 * (*r.predicted_tokens_per_s / *r.tokens_per_s - 1))
                      : "-");
  }
  const std::optional<double> memory = measured ? r.peak_memory_bytes : r.predicted_memory_bytes;
  row.push_back(GigabytesText(memory.value_or(NAN)));
  return row;
}

// The study's best layout (tuner/study/study_best.h), said first, as the search's summary and
// launch-script name it.
void AddStudyBest(const StudyBest& best, Report* report) {
  report->json["best_basis"] = {{"basis", best.BasisName()},
                                {"header", best.Header()},
                                {"layout", best.layout ? nlohmann::json(LayoutKey(*best.layout)) : nlohmann::json()}};
  if (best.layout) report->text += fmt::format("\nBest layout: {}\n  {}\n", LayoutKey(*best.layout), best.Header());
}

// The best layouts (tuner/study/study_best.h: one row per layout, the study's best first),
// measured against predicted. The header says the number of rows, and why it is below --top when it is.
void AddBest(const StudyContext& context, const StudyTrials& trials, Report* report) {
  const StudyBest best = BestOfStudy(context, trials.all);
  AddStudyBest(best, report);
  report->json["best"] = nlohmann::json::array();  // the same key with nothing ok yet
  const std::vector<const store::TrialRecord*> layouts = BestLayouts(best, trials.all, trials.top);
  if (trials.ok.empty()) {
    report->text += "No trial has finished ok yet: nothing measured to rank.\n";
    return;
  }
  const bool measured = context.study.backend != "model";
  TextTable t = BestTable(measured);
  nlohmann::json rows = nlohmann::json::array();
  int rank = 0;
  for (const store::TrialRecord* r : layouts) {
    t.AddRow(BestRow(++rank, *r, measured));
    rows.push_back(TrialJson(*r, context));
  }
  const std::string fewer =
      static_cast<int>(layouts.size()) < trials.top
          ? fmt::format(" every layout with an ok trial, fewer than --top {}", trials.top)
          : "";
  report->text += fmt::format("\nBest {}{}:{}\n{}", Counted(static_cast<int64_t>(layouts.size()), "layout"),
                              measured ? ", measured" : ", predicted", fewer, t.Render());
  if (std::any_of(layouts.begin(), layouts.end(), [](const store::TrialRecord* r) { return r->sliced; })) {
    report->text +=
        "(sliced: measured on fewer data-parallel replicas; the model added the full world's exposed "
        "data-parallel communication)\n";
  }
  report->json["best"] = rows;
}

void AddBestSoFar(const StudyContext& context, const StudyTrials& trials, Report* report) {
  if (context.study.backend == "model") return;
  const Convergence convergence = ConvergenceOf(trials);
  if (!convergence.improvements.empty()) {
    report->text += fmt::format("\nBest so far, each time it improved (finished trial #: best): {}\n",
                                convergence.improvements);
  }
}

// The performance model's error on the measured ok trials.
void AddModelError(const StudyTrials& trials, Report* report) {
  std::vector<double> errors, predicted, measured;
  for (const store::TrialRecord* r : trials.ok) {
    if (r->backend == "model" || !r->tokens_per_s || !r->predicted_tokens_per_s) continue;
    errors.push_back(*r->predicted_tokens_per_s / *r->tokens_per_s - 1);
    predicted.push_back(*r->predicted_tokens_per_s);
    measured.push_back(*r->tokens_per_s);
  }
  if (errors.empty()) return;
  std::vector<double> abs_errors;
  for (double e : errors) abs_errors.push_back(std::abs(e));
  std::sort(abs_errors.begin(), abs_errors.end());
  double mean = 0;
  for (double e : errors) mean += e / errors.size();
  const double median = abs_errors[abs_errors.size() / 2];
  const double rho = errors.size() >= 2 ? search::SpearmanCorrelation(predicted, measured) : NAN;
  report->text += fmt::format(
      "Model against measurement over {} ok trials: median |error| {:.1f}%, mean {:+.1f}% (predicted tok/s / "
      "measured - 1), rank correlation {}\n",
      errors.size(), 100 * median, 100 * mean, std::isfinite(rho) ? fmt::format("{:.2f}", rho) : "-");
  report->json["model_error"] = {{"trials", errors.size()},
                                 {"median_abs", median},
                                 {"mean", mean},
                                 {"spearman", std::isfinite(rho) ? nlohmann::json(rho) : nlohmann::json()}};
}

}  // namespace

Convergence ConvergenceOf(const StudyTrials& trials) {
  Convergence convergence;
  const store::TrialRecord* best_so_far = nullptr;
  for (size_t i = 0; i < trials.finished.size(); ++i) {
    const store::TrialRecord* t = trials.finished[i];
    if (!ObjectiveOf(*t)) continue;
    convergence.markers.emplace_back(i + 1, DisplayThroughput(*t));
    if (best_so_far == nullptr || *ObjectiveOf(*t) < *ObjectiveOf(*best_so_far)) {
      best_so_far = t;
      // In the trial's own unit: tok/s, or the custom metric as the program printed it (1 / the
      // objective would be neither, and negative for a metric below zero).
      convergence.improvements +=
          fmt::format("{}#{}: {}", convergence.improvements.empty() ? "" : ", ", i + 1, ThroughputText(*t));
    }
    convergence.x.push_back(static_cast<double>(i + 1));
    convergence.y.push_back(DisplayThroughput(*best_so_far));
  }
  return convergence;
}

double DisplayThroughput(const store::TrialRecord& r) {
  return r.tokens_per_s ? *r.tokens_per_s : 1.0 / *ObjectiveOf(r);
}

StudyTrials ReadStudyTrials(std::vector<store::TrialRecord> all, int top) {
  StudyTrials t;
  t.all = std::move(all);
  for (const store::TrialRecord& r : t.all) {
    if (IsFinished(r.status)) t.finished.push_back(&r);
    if (ObjectiveOf(r)) t.ok.push_back(&r);
  }
  std::stable_sort(t.finished.begin(), t.finished.end(), [](const store::TrialRecord* a, const store::TrialRecord* b) {
    return std::tie(a->finished_at, a->node_id, a->number) < std::tie(b->finished_at, b->node_id, b->number);
  });
  t.top = top;
  return t;
}

void AddSummary(const StudyContext& context, const StudyTrials& trials, Report* report) {
  AddCounts(context, trials, report);
  AddTrialCosts(trials, report);
  AddBest(context, trials, report);
  AddBestSoFar(context, trials, report);
  AddModelError(trials, report);
  AddMemoryModel(context, trials, report);
}

}  // namespace tunepar
