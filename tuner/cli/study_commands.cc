// `tunepar list`, `tunepar show STUDY`, `tunepar export STUDY`: reading the store back.
#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "base/knobs.h"
#include "store/store_reader.h"
#include "tuner/cli/cli_messages.h"
#include "tuner/cli/commands.h"
#include "tuner/output/report.h"
#include "tuner/output/trial_output.h"
#include "tuner/study/stored_study.h"
#include "tuner/study/study_best.h"
#include "tuner/study/study_lookup.h"
#include "tuner/study/trial_records.h"

namespace tunepar {

namespace {

constexpr const char* kAllowDamagedHelp =
    "Exit 0 when a damaged shard is skipped (it is still named on stderr); without it, exit code 9";

Result<store::StoreView> ReadStoreReporting(const std::string& dir, const std::string& study_id = "") {
  Result<store::StoreView> view = store::ReadStore(dir, {study_id, ""});
  if (!view.ok()) return view.status();
  for (const std::string& w : view->warnings) spdlog::warn("{}", w);
  return view;
}

std::vector<store::TrialRecord> TrialsOf(const store::StoreView& view, const std::string& id) {
  std::vector<store::TrialRecord> out;
  for (const store::TrialRecord& t : view.trials) {
    if (t.study_id == id) out.push_back(t);
  }
  return out;
}

nlohmann::json StudyJson(const store::StudyRecord& s, const std::vector<store::TrialRecord>& trials) {
  return {{"study", s.name},
          {"study_id", s.id},
          {"world", s.world},
          {"model", s.model_name},
          {"hardware", s.hardware_name},
          {"space", s.space_name},
          {"objective", s.objective},
          {"backend", s.backend},
          {"created_at", s.created_at},
          {"created_by", s.created_by},
          {"trial_count", trials.size()},
          {"status_counts", CountByStatus(trials)},
          {"unmeasured_knobs", UnmeasuredKnobsJson(SupportOf(s))}};
}

std::string CountsText(const std::map<std::string, int64_t>& counts) {
  std::string out;
  for (const auto& [status, n] : counts)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", status, WithCommas(n));
  return out.empty() ? "none" : out;
}

Status ListStudies(const GlobalOptions& global, const store::StoreView& view) {
  if (global.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const store::StudyRecord& s : view.studies) j.push_back(StudyJson(s, TrialsOf(view, s.id)));
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }
  if (view.studies.empty()) {
    fmt::print("No studies in store '{}'{}.\n", global.store, view.exists ? "" : " (it does not exist yet)");
    return Status::Ok();
  }
  TextTable t;
  using A = TextTable::Align;
  t.AddColumn("study", A::kLeft);
  t.AddColumn("id", A::kLeft);  // the shortest prefix that `show` and the others resolve
  t.AddColumn("model", A::kLeft);
  t.AddColumn("hardware", A::kLeft);
  t.AddColumn("world");
  t.AddColumn("backend", A::kLeft);
  t.AddColumn("trials");
  t.AddColumn("ok");
  t.AddColumn("failed");
  t.AddColumn("best");
  t.AddColumn("created", A::kLeft);
  for (const store::StudyRecord& s : view.studies) {
    const std::vector<store::TrialRecord> trials = TrialsOf(view, s.id);
    // The study's objective decides (a custom metric has no tokens/s), in its own unit.
    const store::TrialRecord* best = FastestOkTrial(trials);
    int64_t ok = 0, failed = 0;
    for (const store::TrialRecord& r : trials) {
      if (r.status == TrialStatus::kOk)
        ++ok;
      else if (IsFinished(r.status))
        ++failed;
    }
    t.AddRow({s.name, ShortStudyId(view.studies, s.id), s.model_name, s.hardware_name,
              std::to_string(s.world), s.backend, WithCommas(static_cast<int64_t>(trials.size())),
              WithCommas(ok), WithCommas(failed), best == nullptr ? "-" : ThroughputText(*best),
              s.created_at});
  }
  fmt::print("{}", t.Render());
  fmt::print("{} stud{} from {} shard{} in '{}'\n", view.studies.size(),
             view.studies.size() == 1 ? "y" : "ies", view.shards.size(),
             view.shards.size() == 1 ? "" : "s", global.store);
  return Status::Ok();
}

Status RunList(const GlobalOptions& global, bool allow_damaged) {
  Result<store::StoreView> view = ReadStoreReporting(global.store);
  if (!view.ok()) return view.status();
  SettleTakenOverTrials(view->trials);
  return WithDamagedShards(*view, allow_damaged, ListStudies(global, *view));
}

struct ShowOptions {
  std::string study;
  int limit = 20;
  bool all = false;
  bool allow_damaged = false;  // --allow-damaged: skipped shards are only warned about
};

Status ShowStudy(const GlobalOptions& global, const ShowOptions& o, const store::StoreView& view) {
  Result<store::StudyRecord> study = FindStudyOrOnly(view, global.store, o.study);
  if (!study.ok()) return study.status();
  const std::vector<store::TrialRecord> trials = TrialsOf(view, study->id);
  if (global.json) {
    nlohmann::json j = StudyJson(*study, trials);
    nlohmann::json rows = nlohmann::json::array();
    const std::optional<StudyContext> context = ContextForPredictions(*study, trials);
    auto row = [&](const store::TrialRecord& t) { return context ? TrialJson(t, *context) : TrialJson(t); };
    if (o.all) {
      for (const store::TrialRecord& t : trials) rows.push_back(row(t));
    } else {
      const auto ranked = RankByThroughput(trials);
      for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(o.limit); ++i)
        rows.push_back(row(*ranked[i]));
    }
    j["selection"] = o.all ? "all" : "best";
    j["trials"] = rows;
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }
  fmt::print("Study {} (id {})\n", study->name, study->id);
  fmt::print("  model {}, hardware {}, space {}, world {}, backend {}, objective {}\n", study->model_name,
             study->hardware_name, study->space_name, study->world, study->backend, study->objective);
  fmt::print("  created {} by node {}\n", study->created_at, study->created_by);
  if (const std::string fixed = UnreceivedKnobs(SupportOf(*study)); !fixed.empty())
    fmt::print("  not measured (the program does not receive them): {}\n", fixed);
  fmt::print("  trials {}: {}\n\n", WithCommas(static_cast<int64_t>(trials.size())),
             CountsText(CountByStatus(trials)));
  if (o.all) {
    std::vector<const store::TrialRecord*> rows;
    for (const store::TrialRecord& t : trials) rows.push_back(&t);
    fmt::print("All trials in order:\n{}", TrialTable(rows, true).Render());
    return Status::Ok();
  }
  const auto ranked = RankByThroughput(trials);
  std::vector<const store::TrialRecord*> best(ranked.begin(),
                                              ranked.begin() + std::min<size_t>(ranked.size(), o.limit));
  if (best.empty()) {
    fmt::print("No trial finished ok yet.\n");
  } else {
    fmt::print("Best {} of {} ok:\n{}", best.size(), Counted(static_cast<int64_t>(ranked.size()), "layout"),
               TrialTable(best, true).Render());
  }
  return Status::Ok();
}

Status RunShow(const GlobalOptions& global, const ShowOptions& o) {
  Result<store::StoreView> view = ReadStudyView(global.store, o.study);
  if (!view.ok()) return view.status();
  return WithDamagedShards(*view, o.allow_damaged, ShowStudy(global, o, *view));
}

// `tunepar best [STUDY]`: the study's best layout key alone (tuner/study/study_best.h: what
// search, report and launch-script call best), for scripts; --json adds what kind of best it is. A study with
// nothing to recommend is kNotFound, saying why.
Status RunBest(const GlobalOptions& global, const std::string& name) {
  Result<StoredStudy> stored = ReadStoredStudy(global.store, name, "nothing to choose from");
  if (!stored.ok()) return stored.status();
  const StudyBest best = BestOfStudy(stored->context, stored->trials);
  const std::string& study = stored->context.study.name;
  if (!best.layout)
    return Status{StatusCode::kNotFound, fmt::format("study {}: {}: no best layout", study, best.Header())};
  if (!global.json) {
    fmt::print("{}\n", LayoutKey(*best.layout));
    return Status::Ok();
  }
  nlohmann::json j = {{"study", study},
                      {"layout", LayoutKey(*best.layout)},
                      {"basis", best.BasisName()},
                      {"measured", best.measured()},
                      {"header", best.Header()}};
  if (best.trial != nullptr) {
    j["trial"] = fmt::format("{}/{}", best.trial->node_id, best.trial->number);
    j["tokens_per_s"] = best.trial->tokens_per_s ? nlohmann::json(*best.trial->tokens_per_s) : nlohmann::json();
    j["objective"] = ObjectiveOf(*best.trial) ? nlohmann::json(*ObjectiveOf(*best.trial)) : nlohmann::json();
  }
  fmt::print("{}\n", j.dump(2));
  return Status::Ok();
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string CsvNumber(const std::optional<double>& v) {
  return v ? fmt::format("{:.10g}", *v) : "";
}

struct ExportOptions {
  std::string study;
  bool csv = false;
  bool json = false;
  std::string output;  // "" = stdout
  bool allow_damaged = false;  // --allow-damaged: skipped shards are only warned about
};

Status ExportStudy(const GlobalOptions& global, const ExportOptions& o, const store::StoreView& view) {
  Result<store::StudyRecord> study = FindStudyOrOnly(view, global.store, o.study);
  if (!study.ok()) return study.status();
  const std::vector<store::TrialRecord> trials = TrialsOf(view, study->id);
  // Every row, the forgotten ones too (their role says so), in (node, number) order.
  std::vector<store::TrialRecord> rows = trials;
  for (const store::TrialRecord& t : view.forgotten)
    if (t.study_id == study->id) rows.push_back(t);
  std::stable_sort(rows.begin(), rows.end(), [](const store::TrialRecord& a, const store::TrialRecord& b) {
    return std::tie(a.node_id, a.number) < std::tie(b.node_id, b.number);
  });
  std::string text;
  if (o.csv) {
    std::vector<std::string> layout_columns;
    for (const LayoutField& f : LayoutFields()) layout_columns.emplace_back(f.name);
    text = fmt::format(
        "study,node_id,number,layout,{},status,attempt,step_time_s,tokens_per_s,tflops_per_gpu,"
        "peak_memory_bytes,predicted_step_time_s,predicted_tokens_per_s,predicted_memory_bytes,backend,hosts,"
        "started_at,finished_at,message,role\n",
        fmt::join(layout_columns, ","));
    for (const store::TrialRecord& t : rows) {
      const Layout& l = t.layout;
      std::vector<std::string> layout_cells;
      for (const LayoutField& f : LayoutFields()) layout_cells.push_back(LayoutFieldCell(f, l));
      text += fmt::format(
          "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
          CsvField(study->name), CsvField(t.node_id), t.number, LayoutKey(l), fmt::join(layout_cells, ","),
          ToString(t.status), t.attempt, CsvNumber(t.step_time_s), CsvNumber(t.tokens_per_s),
          CsvNumber(t.tflops_per_gpu), CsvNumber(t.peak_memory_bytes), CsvNumber(t.predicted_step_time_s),
          CsvNumber(t.predicted_tokens_per_s), CsvNumber(t.predicted_memory_bytes), CsvField(t.backend),
          CsvField(t.hosts), t.started_at, t.finished_at, CsvField(t.message), ToString(t.role));
    }
  } else {
    nlohmann::json j = StudyJson(*study, trials);
    j["model_toml"] = study->model_toml;
    j["hardware_toml"] = study->hardware_toml;
    j["space_toml"] = study->space_toml;
    j["backend_settings"] = nlohmann::json::parse(study->backend_settings, nullptr, false);
    nlohmann::json json_rows = nlohmann::json::array();
    const std::optional<StudyContext> context = ContextForPredictions(*study, trials);
    for (const store::TrialRecord& t : rows) json_rows.push_back(context ? TrialJson(t, *context) : TrialJson(t));
    j["trials"] = json_rows;
    text = j.dump(2) + "\n";
  }
  if (o.output.empty()) {
    fmt::print("{}", text);
    return Status::Ok();
  }
  TUNEPAR_RETURN_IF_ERROR(WriteFile(o.output, text));
  fmt::print(stderr, "wrote {} of study {} to {}\n", Counted(static_cast<int64_t>(trials.size()), "trial"),
             study->name, o.output);
  return Status::Ok();
}

Status RunExport(const GlobalOptions& global, const ExportOptions& o) {
  Result<store::StoreView> view = ReadStudyView(global.store, o.study);
  if (!view.ok()) return view.status();
  return WithDamagedShards(*view, o.allow_damaged, ExportStudy(global, o, *view));
}

}  // namespace

void AddStudyCommands(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto allow_damaged = std::make_shared<bool>(false);
  CLI::App* list = app.add_subcommand("list", "List the studies in the store");
  list->add_flag("--allow-damaged", *allow_damaged, kAllowDamagedHelp);
  list->callback([&global, result, allow_damaged] { *result = RunList(global, *allow_damaged); });

  auto show = std::make_shared<ShowOptions>();
  CLI::App* show_cmd = app.add_subcommand("show", "Show a study and its best (or all) trials");
  show_cmd->add_option("study", show->study,
                       "Study name or id, or a unique prefix of 4+ characters of the id (default: the store's only "
                       "study); the name and the 16-digit id are stable for scripts");
  show_cmd->add_option("--limit", show->limit, "How many of the best trials to print")
      ->check(AtLeast(1))
      ->capture_default_str();
  show_cmd->add_flag("--all", show->all, "Every trial, in trial order, with its status");
  show_cmd->add_flag("--allow-damaged", show->allow_damaged, kAllowDamagedHelp);
  show_cmd->callback([&global, result, show] { *result = RunShow(global, *show); });

  auto best_study = std::make_shared<std::string>();
  CLI::App* best_cmd = app.add_subcommand(
      "best", "Print a study's best layout key alone (with --json: which kind of best, and its trial)");
  best_cmd->add_option("study", *best_study,
                       "Study name or id, or a unique prefix of 4+ characters of the id (default: the store's only "
                       "study)");
  best_cmd->callback([&global, result, best_study] { *result = RunBest(global, *best_study); });

  auto exp = std::make_shared<ExportOptions>();
  CLI::App* export_cmd = app.add_subcommand("export", "Export every trial of a study as CSV or JSON");
  export_cmd->add_option("study", exp->study,
                         "Study name or id, or a unique prefix of 4+ characters of the id (default: the store's only "
                         "study); the name and the 16-digit id are stable for scripts");
  auto* csv = export_cmd->add_flag("--csv", exp->csv, "Comma-separated values, one row per trial");
  auto* json =
      export_cmd->add_flag("--json", exp->json, "One JSON object with the study, its configs and trials");
  csv->excludes(json);
  export_cmd->add_option("-o,--output", exp->output, "Write to this file instead of stdout");
  export_cmd->add_flag("--allow-damaged", exp->allow_damaged, kAllowDamagedHelp);
  export_cmd->callback([&global, result, exp] {
    if (!exp->csv && !exp->json && global.json) exp->json = true;
    if (!exp->csv && !exp->json) {
      *result = InvalidArgument("export needs --csv or --json");
      return;
    }
    *result = RunExport(global, *exp);
  });
}

}  // namespace tunepar
