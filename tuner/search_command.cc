// `tunepar search`: finds the fastest layouts. With the `model` backend every legal layout is
// predicted (exhaustive: exact and cheap there); with a measuring backend a Bayesian search
// proposes the trials. Either way every trial is recorded in this node's shard, and a study
// found in the store is resumed.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runner/command_backend.h"
#include "runner/performance_model.h"
#include "tuner/command_config.h"
#include "tuner/commands.h"
#include "tuner/problem_options.h"
#include "tuner/searches.h"
#include "tuner/study_session.h"

namespace tunepar {

namespace {

struct SearchOptions {
  ProblemOptions problem;
  std::string backend = "model";
  std::string study;
  std::string node_id;
  std::string work_dir;
  bool new_study = false;
  bool resume_only = false;
  int top = 10;
  BayesianSearchOptions bayes;
  std::string acquisition = "logei";
  double early_stop_gain = 0;  // 0: no early stop
  double early_stop_probability = 0.05;
  int64_t seed = 0;
  CommandFlags command;
};

Status RunSearch(const GlobalOptions& global, SearchOptions o) {
  if (o.bayes.budget < 1)
    return InvalidArgument(fmt::format("--budget must be at least 1, got {}", o.bayes.budget));
  if (o.bayes.batch < 1)
    return InvalidArgument(fmt::format("--batch must be at least 1, got {}", o.bayes.batch));
  if (o.seed < 0) return InvalidArgument(fmt::format("--seed must be non-negative, got {}", o.seed));
  if (o.early_stop_gain < 0 || o.early_stop_probability <= 0 || o.early_stop_probability >= 1)
    return InvalidArgument("--early-stop GAIN needs GAIN >= 0 and --early-stop-probability in (0, 1)");
  o.bayes.seed = static_cast<uint64_t>(o.seed);
  o.bayes.top = o.top;
  o.bayes.acquisition = o.acquisition == "ucb" ? search::AcquisitionKind::kUpperConfidenceBound
                                               : search::AcquisitionKind::kLogExpectedImprovement;
  if (o.early_stop_gain > 0) o.bayes.early_stop = std::make_pair(o.early_stop_gain, o.early_stop_probability);

  SessionRequest request{o.problem.model, o.problem.hardware, o.problem.space, o.problem.world, {}, o.study,
                         o.node_id,       o.work_dir,         o.new_study,     o.resume_only};
  request.settings.backend = o.backend;
  nlohmann::json settings = {{"performance_model", runner::kPerformanceModelId}};
  std::optional<runner::CommandBackendOptions> command;
  if (o.backend == "command") {
    Result<runner::CommandBackendOptions> resolved = ResolveCommandOptions(o.command);
    if (!resolved.ok()) return resolved.status();
    command = std::move(*resolved);
    // What decides the proposals is part of the study: resuming with another seed or command
    // would not continue the same search.
    settings["command"] = command->command;
    settings["metric"] = runner::ToString(command->metric);
    settings["metric_regex"] = command->metric_regex;
    settings["metric_json"] = command->metric_json;
    settings["seed"] = o.seed;
    settings["acquisition"] = o.acquisition;
  }
  request.settings.backend_settings = settings.dump();

  Result<StudySession> session = OpenStudySession(global, request);
  if (!session.ok()) return session.status();
  if (o.backend == "model") return RunExhaustiveSearch(global, *session, o.top);
  runner::CommandBackend backend(*command);
  return RunBayesianSearch(global, *session, backend, o.bayes);
}

}  // namespace

void AddSearchCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto o = std::make_shared<SearchOptions>();
  CLI::App* cmd = app.add_subcommand("search", "Find the fastest layouts; record every trial in the store");
  o->problem.AddTo(cmd);
  cmd->add_option("--backend", o->backend,
                  "model: the performance model, every legal layout (a dry run); command: your training "
                  "command, Bayesian search")
      ->check(CLI::IsMember({"model", "command"}))
      ->capture_default_str();
  cmd->add_option("--study", o->study, "Study name (default: <model>-w<world>-<id>)");
  cmd->add_flag("--new", o->new_study, "Start a fresh study even if one with these inputs exists");
  cmd->add_flag("--resume-only", o->resume_only, "Fail unless the study already exists");
  cmd->add_option("--node-id", o->node_id,
                  "This node's shard name (default: $SLURMD_NODENAME or the host name)");
  cmd->add_option("--work-dir", o->work_dir,
                  "Where this node's live shard is written (default: <store>/work)")
      ->envname("TUNEPAR_WORK_DIR");
  cmd->add_option("--top", o->top, "How many of the best layouts to print")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  auto* bayes = cmd->add_option_group("Bayesian search (measuring backends)");
  bayes->add_option("--budget", o->bayes.budget, "Finished trials in the study to stop at")
      ->capture_default_str();
  bayes->add_option("--time-budget", o->bayes.time_budget_s, "Seconds this run may take (0: no limit)");
  bayes->add_option("--batch", o->bayes.batch, "Trials proposed and run at a time")->capture_default_str();
  bayes->add_option("--seed", o->seed, "Seed of the proposals (part of the study)")->capture_default_str();
  bayes->add_option("--acquisition", o->acquisition, "logei (log expected improvement) or ucb")
      ->check(CLI::IsMember({"logei", "ucb"}))
      ->capture_default_str();
  bayes->add_option("--early-stop", o->early_stop_gain,
                    "Stop when no layout can beat the best by more than this fraction (e.g. 0.02) ...");
  bayes
      ->add_option("--early-stop-probability", o->early_stop_probability,
                   "... with at least this probability")
      ->capture_default_str();
  bayes->add_option("--lease", o->bayes.lease_s, "Lease of a running trial, renewed every lease/4 (s)")
      ->capture_default_str();

  auto* c = cmd->add_option_group("Command backend");
  c->add_option("--command-config", o->command.config_file, "TOML file with the options below");
  c->add_option("--command", o->command.command,
                "Command template, e.g. \"train.py --tp {tp} --pp {pp} --mbs {mbs}\"");
  c->add_option("--metric", o->command.metric,
                "step_time_s|step_time_ms|tokens_per_s|samples_per_s|tflops_per_gpu|higher|lower (default "
                "step_time_s)");
  c->add_option("--metric-regex", o->command.metric_regex,
                "Regex whose first group is the metric (last match wins)");
  c->add_option("--metric-json", o->command.metric_json, "Or: key of the metric in JSON lines of the output");
  c->add_option("--oom-pattern", o->command.oom_patterns, "Extra regex meaning out-of-memory (repeatable)");
  c->add_option("--timeout", o->command.timeout_s, "Seconds before a trial is killed (default 3600)");
  c->add_option("--env", o->command.env, "KEY=VALUE for the command's environment (repeatable)");
  c->add_option("--workdir", o->command.workdir, "Working directory of the command");
  cmd->callback([&global, result, o] { *result = RunSearch(global, *o); });
}

}  // namespace tunepar
