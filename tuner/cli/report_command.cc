// `tunepar report`: a study's summary; with --shap, which knobs matter (Shapley values of the
// surrogate's log throughput); with --of-model, the same for the performance model itself; with
// --svg DIR, the charts. The steps are in tuner/output/report.h.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "store/store_reader.h"
#include "tuner/cli/cli_messages.h"
#include "tuner/cli/commands.h"
#include "tuner/output/report.h"
#include "tuner/study/study_identity.h"
#include "tuner/study/study_lookup.h"
#include "tuner/study/stored_study.h"

namespace tunepar {

namespace {

struct ReportOptions {
  const CLI::App* command = nullptr;  // the parsed subcommand: which options were given
  std::string study;
  bool shap = false;
  bool of_model = false;
  std::string svg_dir;
  ImportanceOptions importance;
  int top = 10;
  int64_t world = 0;
  std::string model = "gpt-1t", hardware = "frontier-mi250x", space = "default";
  bool allow_damaged = false;  // --allow-damaged: skipped shards are only warned about
};

void Print(const GlobalOptions& global, Report& report) {
  if (global.json) {
    report.json["svg"] = report.written;
    if (!report.chart_notes.empty()) report.json["svg_notes"] = report.chart_notes;
    fmt::print("{}\n", report.json.dump(2));
    return;
  }
  fmt::print("{}", report.text);
  for (const std::string& w : report.written) fmt::print("wrote {}\n", w);
  for (const std::string& note : report.chart_notes) fmt::print("{}\n", note);
}

// The context of a study that is not stored: the problem the flags name, at --world.
Result<StudyContext> UnstoredContext(const ReportOptions& o) {
  if (!Given(*o.command, "--world")) return InvalidArgument("--of-model needs --world N (the number of GPUs)");
  Result<Problem> problem = LoadProblem(o.model, o.hardware, o.space);
  if (!problem.ok()) return problem.status();
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(o.world, problem->hardware));
  StudySettings settings;
  settings.world = static_cast<int>(o.world);
  const std::string id = StudyId(*problem, settings);
  return MakeStudyContext(MakeStudyRecord(*problem, settings, id, DefaultStudyName(*problem, settings, id), ""), 0);
}

Status RunOfModel(const GlobalOptions& global, const ReportOptions& o) {
  Result<StudyContext> context = UnstoredContext(o);
  if (!context.ok()) return context.status();
  const Problem& p = context->problem;
  const Explained e = ExplainModel(
      *context, fmt::format("performance model for {} on {} at world {}", p.model.name, p.hardware.name, o.world),
      o.importance.background_size);
  if (e.local < 0) return InvalidArgument("no legal layout is predicted to fit in device memory: nothing to explain");
  const ShapReport shap = ExplainKnobs(e);
  Report report;
  report.text = shap.text;
  report.json["shap"] = shap.json;
  if (!o.svg_dir.empty()) {
    TUNEPAR_RETURN_IF_ERROR(MakeChartDir(o.svg_dir));
    TUNEPAR_RETURN_IF_ERROR(WriteShapCharts(o.svg_dir, e, shap, &report.written));
  }
  Print(global, report);
  return Status::Ok();
}

Status AddImportance(const StudyContext& context, const StudyTrials& trials, const ReportOptions& o, Report* report) {
  const Explained e = ExplainStudy(context, trials, o.importance);
  if (e.local < 0 || e.background.empty()) {
    report->text += e.local < 0 && !e.local_header.empty()
                        ? fmt::format("\nNo layout to explain: {}.\n", e.local_header)
                        : std::string("\nNo layout to explain (nothing is predicted to fit).\n");
    if (!o.svg_dir.empty()) report->chart_notes.push_back("no importance chart: no layout to explain");
    return Status::Ok();
  }
  const ShapReport shap = ExplainKnobs(e, ImportanceNoiseFloor(context, trials, e));
  report->text += "\n" + shap.text;
  report->json["shap"] = shap.json;
  if (o.svg_dir.empty()) return Status::Ok();
  return WriteShapCharts(o.svg_dir, e, shap, &report->written);
}

Status ReportStudy(const GlobalOptions& global, const ReportOptions& o) {
  Result<StoredStudy> stored = ReadStoredStudy(global.store, o.study, "nothing to report on");
  if (!stored.ok()) return stored.status();
  const StudyContext& context = stored->context;
  const StudyTrials study_trials = ReadStudyTrials(std::move(stored->trials), o.top);
  Report report;
  AddSummary(context, study_trials, &report);
  if (!o.svg_dir.empty()) {
    TUNEPAR_RETURN_IF_ERROR(MakeChartDir(o.svg_dir));
    TUNEPAR_RETURN_IF_ERROR(
        WriteStudyCharts(o.svg_dir, context, study_trials, &report.written, &report.chart_notes));
  }
  if (o.shap) TUNEPAR_RETURN_IF_ERROR(AddImportance(context, study_trials, o, &report));
  Print(global, report);
  return Status::Ok();
}

// One warning per option given that the chosen report does not use.
void WarnIgnoredOptions(const ReportOptions& o) {
  if (o.of_model) {
    for (const char* name : {"--background", "--top", "--allow-damaged"}) {
      if (Given(*o.command, name))
        spdlog::warn("{} does nothing with --of-model (it explains the performance model, not a study)", name);
    }
    return;
  }
  for (const char* name : {"--world", "--model", "--hardware", "--space"}) {
    if (Given(*o.command, name))
      spdlog::warn("{} does nothing without --of-model (a study's report uses the study's own {})", name,
                   std::string(name).substr(2));
  }
}

Status RunReport(const GlobalOptions& global, const ReportOptions& o) {
  WarnIgnoredOptions(o);
  if (o.of_model && !o.study.empty())
    return InvalidArgument(fmt::format("--of-model explains the performance model, not a study: drop '{}'", o.study));
  if (o.of_model) return RunOfModel(global, o);
  // Which shards a read skips (ReadStoredStudy names them in warnings): a second read of the
  // study's files, cheap beside a report, so that the stored-study reading stays as
  // launch-script and calibrate use it.
  Result<store::StoreView> view = ReadStudyView(global.store, o.study, /*announce=*/false);
  if (!view.ok()) return view.status();
  return WithDamagedShards(*view, o.allow_damaged, ReportStudy(global, o));
}

}  // namespace

void AddReportCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand("report", "A study's summary; which knobs matter (--shap); charts (--svg)");
  o->command = cmd;
  cmd->add_option("study", o->study, "Study name or id (default: the store's only study)");
  cmd->add_flag("--shap", o->shap, "Knob importance: Shapley values of the surrogate's log throughput");
  cmd->add_flag("--of-model", o->of_model, "Explain the performance model itself (needs --world; no study)");
  cmd->add_option("--svg", o->svg_dir, "Write SVG charts into this directory");
  cmd->add_option("--background", o->importance.background,
                  "trials (the finished ok trials) or legal (a sample of legal layouts)")
      ->check(OneOf({"trials", "legal"}))
      ->capture_default_str();
  cmd->add_option("--background-size", o->importance.background_size, "At most this many background layouts")
      ->check(Between(2, 2000))
      ->capture_default_str();
  cmd->add_option("--top", o->top, "How many of the best layouts to list")
      ->check(AtLeast(1))
      ->capture_default_str();
  cmd->add_flag("--allow-damaged", o->allow_damaged,
                "Exit 0 when a damaged shard is skipped (it is still named on stderr); without it, exit code 9");
  cmd->add_option("--world,-w", o->world, "With --of-model: number of GPUs");
  cmd->add_option("--model,-m", o->model, "With --of-model: model preset or TOML path")->capture_default_str();
  cmd->add_option("--hardware", o->hardware, "With --of-model: hardware preset or TOML path")
      ->capture_default_str();
  cmd->add_option("--space", o->space, "With --of-model: search-space preset or TOML path")->capture_default_str();
  cmd->callback([&global, result, o] { *result = RunReport(global, *o); });
}

}  // namespace tunepar
