// `tunepar search`: finds the fastest layouts. With the `model` backend every legal layout is
// predicted (exhaustive: exact and cheap there); with a measuring backend (`command`: the
// user's program; `local`, `slurm`: tunepar-core through mpirun or srun) a Bayesian search
// proposes the trials. Without --backend: `slurm` inside an allocation, else `model`. Either
// way every trial is recorded in this node's shard, and a study found in the store is resumed.
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/names.h"
#include "runner/command_backend.h"
#include "runner/core_backend.h"
#include "runner/performance_model.h"
#include "tuner/backends/command_config.h"
#include "tuner/backends/core_backend_config.h"
#include "tuner/cli/cli_messages.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/problem_options.h"
#include "tuner/loops/searches.h"
#include "tuner/study/reclassify_trials.h"
#include "tuner/study/study_session.h"

namespace tunepar {

namespace {

struct SearchOptions {
  const CLI::App* cli = nullptr;  // the parsed subcommand: which options were given
  ProblemOptions problem;
  std::string backend = "auto";
  std::string study;
  std::string node_id;
  std::string work_dir;
  bool new_study = false;
  bool resume_only = false;
  int top = 10;
  BayesianSearchOptions bayes;
  std::vector<std::string> enqueue;  // --enqueue KEY: layouts measured first
  std::string acquisition = "logei";
  double early_stop_gain = 0;  // 0: no early stop
  double early_stop_probability = 0.05;
  int64_t seed = 0;
  CommandFlags command;
  CoreFlags core;
  std::string knobs;  // the declared knob values (command config [knobs], --fix) as TOML lines
};

Status CheckSearchOptions(const SearchOptions& o) {
  if (o.bayes.budget < 1) return InvalidArgument(fmt::format("--budget must be at least 1, got {}", o.bayes.budget));
  if (o.bayes.batch < 1) return InvalidArgument(fmt::format("--batch must be at least 1, got {}", o.bayes.batch));
  if (o.seed < 0) return InvalidArgument(fmt::format("--seed must be non-negative, got {}", o.seed));
  if (o.bayes.confirmations < -1)
    return InvalidArgument(fmt::format("--confirm must be a number of trials (0: none), got {}", o.bayes.confirmations));
  if (!(o.bayes.confidence > 0 && o.bayes.confidence < 1))
    return InvalidArgument(fmt::format("--confidence must be in (0, 1), got {}", o.bayes.confidence));
  if (o.bayes.max_probes < 0)
    return InvalidArgument(
        fmt::format("--max-probes must be a number of trials (0: no probes), got {}", o.bayes.max_probes));
  if (o.early_stop_gain < 0 || o.early_stop_probability <= 0 || o.early_stop_probability >= 1)
    return InvalidArgument("--early-stop GAIN needs GAIN >= 0 and --early-stop-probability in (0, 1)");
  for (const std::string& key : o.enqueue)
    if (Result<Layout> l = ParseLayoutKey(key); !l.ok()) return l.status().WithContext("--enqueue");
  return Status::Ok();
}

// The backend that measures (command, local or slurm), set up from the flags; checks that need
// the problem but touch nothing on disk come first, so bad input leaves the store alone.
// Sets o->knobs: the command config's [knobs], then --fix; `core_said`: which tunepar-core build
// the local and slurm backends run.
Result<std::unique_ptr<runner::Backend>> MeasuringBackend(SearchOptions* options, std::string* core_said) {
  const SearchOptions& o = *options;
  if (o.backend == "command") {
    std::string declared;
    Result<runner::CommandBackendOptions> command = ResolveCommandOptions(o.command, &declared);
    if (!command.ok()) return command.status();
    Result<std::string> knobs = KnobDeclarations(declared, o.problem.fix);
    if (!knobs.ok()) return knobs.status();
    options->knobs = *knobs;
    return std::unique_ptr<runner::Backend>(std::make_unique<runner::CommandBackend>(std::move(*command)));
  }
  Result<std::string> knobs = KnobDeclarations("", o.problem.fix);
  if (!knobs.ok()) return knobs.status();
  options->knobs = *knobs;
  Result<Problem> problem = LoadProblem(o.problem.model, o.problem.hardware, o.problem.space, o.knobs);
  if (!problem.ok()) return problem.status();
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(o.problem.world, problem->hardware));
  TUNEPAR_RETURN_IF_ERROR(CheckHardwareRunsPrecisions(*problem, static_cast<int>(o.problem.world)));
  Result<runner::CoreBackendOptions> core =
      ResolveCoreOptions(o.core, o.backend == "slurm" ? runner::Launcher::kSlurm : runner::Launcher::kLocal,
                         problem->hardware, static_cast<int>(o.problem.world), o.command.timeout_s, core_said);
  if (!core.ok()) return core.status();
  return std::unique_ptr<runner::Backend>(
      std::make_unique<runner::CoreBackend>(std::move(*core), problem->model, problem->hardware));
}

// What decides the proposals is part of the study (resuming with another seed or command would
// not continue the same search); where the core runs (the allocation) is not, so a study can
// continue in another allocation. Canonical JSON: the study id hashes it.
std::string BackendSettingsJson(const SearchOptions& o, const StudySettings& settings, const runner::Backend* backend) {
  nlohmann::json j = {{"performance_model", runner::kPerformanceModelId}};
  if (const auto* command = dynamic_cast<const runner::CommandBackend*>(backend)) {
    j["command"] = command->options().command;
    j["metric"] = runner::ToString(command->options().metric);
    j["metric_regex"] = command->options().metric_regex;
    j["metric_json"] = command->options().metric_json;
    if (command->options().reads_layout_env) j["reads_layout_env"] = true;
  }
  if (const auto* core_backend = dynamic_cast<const runner::CoreBackend*>(backend)) {
    j["core"] = {{"steps", o.core.steps},
                 {"warmup", o.core.warmup},
                 {"slice", o.core.slice},
                 {"knobs", PinnedKnobs(core::SupportedKnobs(core_backend->options().build))}};
  }
  if (backend != nullptr) {
    j["seed"] = settings.seed;
    j["acquisition"] = settings.acquisition;
  }
  return j.dump();
}

SessionRequest MakeSessionRequest(const SearchOptions& o, const runner::Backend* backend) {
  SessionRequest r;
  r.model = o.problem.model;
  r.hardware = o.problem.hardware;
  r.space = o.problem.space;
  r.knobs = o.knobs;
  r.world = o.problem.world;
  r.study = o.study;
  r.node_id = o.node_id;
  r.work_dir = o.work_dir;
  r.lease_s = o.bayes.lease_s;
  r.new_study = o.new_study;
  r.resume_only = o.resume_only;
  r.settings.backend = o.backend;
  // The model backend's exhaustive search has no proposals to seed or choose.
  r.settings.seed = backend != nullptr ? o.seed : 0;
  r.settings.acquisition = backend != nullptr ? o.acquisition : "logei";
  r.settings.backend_settings = BackendSettingsJson(o, r.settings, backend);
  if (backend != nullptr) {
    r.backend = backend;
    r.ranks_per_node = backend->RanksPerNode(static_cast<int>(o.problem.world));
  }
  return r;
}

BayesianSearchOptions BayesOptions(const SearchOptions& o) {
  BayesianSearchOptions b = o.bayes;
  b.top = o.top;
  if (o.early_stop_gain > 0) b.early_stop = std::make_pair(o.early_stop_gain, o.early_stop_probability);
  return b;
}

// --enqueue's layouts, each legal in the study (as its backend restricts the space): checked
// before the study is stored (SessionRequest::check_inputs), then queued.
Status EnqueuedLayouts(const SearchOptions& o, const StudyContext& context, BayesianSearchOptions* bayes) {
  for (const std::string& key : o.enqueue) {
    Result<Layout> l = ParseLayoutKey(key);
    if (!l.ok()) return l.status().WithContext("--enqueue");
    if (Status legal = search::CheckLegal(context.Query(), *l); !legal.ok())
      return InvalidArgument(fmt::format("--enqueue {}: not a legal layout of study {}: {}", key,
                                         OneLine(context.study.name), legal.message()));
    if (bayes != nullptr && std::find(bayes->enqueued.begin(), bayes->enqueued.end(), *l) == bayes->enqueued.end())
      bayes->enqueued.push_back(*l);
  }
  return Status::Ok();
}

// One warning per option given that the chosen backend does not use (a warning, not an error:
// one command line may be tried on several backends).
void WarnIgnoredOptions(const CLI::App& cmd, const std::string& backend) {
  static const std::vector<std::string> kBayesian = {"--budget",     "--time-budget", "--batch",
                                                     "--seed",       "--acquisition", "--early-stop",
                                                     "--early-stop-probability",      "--confirm",
                                                     "--confidence", "--lease",       "--enqueue",
                                                     "--max-probes"};
  static const std::vector<std::string> kCommand = {"--command-config", "--command",     "--metric",
                                                    "--metric-regex",   "--metric-json", "--memory-regex",
                                                    "--memory-json",    "--oom-pattern", "--env",
                                                    "--workdir",        "--reads-layout-env"};
  static const std::vector<std::string> kCore = {"--core",      "--steps",   "--warmup",  "--slice",
                                                 "--max-ranks", "--threads", "--core-env"};
  auto warn = [&](const std::vector<std::string>& names, const std::string& why) {
    for (const std::string& name : names) {
      if (Given(cmd, name)) spdlog::warn("{} does nothing with --backend {} ({})", name, backend, why);
    }
  };
  if (backend == "model") {
    warn(kBayesian, "a dry run evaluates every legal layout");
    warn(kCommand, "the performance model predicts; --backend command runs a command");
    warn({"--timeout"}, "the performance model predicts; nothing runs");
    warn(kCore, "the performance model predicts; --backend local or slurm runs tunepar-core");
  } else if (backend == "command") {
    warn(kCore, "it runs your command; --backend local or slurm runs tunepar-core");
  } else {
    warn(kCommand, "it runs tunepar-core; --backend command runs your command");
    if (backend == "slurm") warn({"--max-ranks"}, "the allocation's nodes set the ranks");
  }
}

Status RunSearch(const GlobalOptions& global, SearchOptions o) {
  TUNEPAR_RETURN_IF_ERROR(CheckSearchOptions(o));
  // What tunepar chose for the user, printed first once the study is open: a command that fails
  // before prints nothing on stdout, only its error line.
  std::string chosen;
  if (o.backend == "auto") {
    std::string why;
    o.backend = AutomaticBackend(&why);
    chosen += why + "\n";
  }
  if (o.backend == "local" && !o.problem.HardwareGiven()) {
    // tunepar-core runs on this machine's CPUs: a GPU profile would price its trials (the
    // model's prior, the memory cap) for another machine.
    o.problem.hardware = "local-cpu";
    chosen += "hardware: local-cpu (tunepar-core on this machine's CPUs; --hardware names another profile)\n";
  }
  if (o.cli != nullptr) WarnIgnoredOptions(*o.cli, o.backend);
  std::unique_ptr<runner::Backend> backend;
  if (o.backend != "model") {
    std::string core_said;
    Result<std::unique_ptr<runner::Backend>> made = MeasuringBackend(&o, &core_said);
    if (!made.ok()) return made.status();
    if (!core_said.empty()) chosen += "core: " + core_said + "\n";
    backend = std::move(*made);
  } else {
    Result<std::string> knobs = KnobDeclarations("", o.problem.fix);
    if (!knobs.ok()) return knobs.status();
    o.knobs = *knobs;
  }
  const auto* command_backend = dynamic_cast<const runner::CommandBackend*>(backend.get());
  if (o.command.reclassify && command_backend == nullptr)
    return InvalidArgument("--reclassify reads the logs of the command backend's trials: it needs --backend command");
  SessionRequest request = MakeSessionRequest(o, backend.get());
  request.check_inputs = [&o](const StudyContext& context) { return EnqueuedLayouts(o, context, nullptr); };
  Result<StudySession> session = OpenStudySession(global, std::move(request));
  if (!session.ok()) return session.status();
  if (!global.json) fmt::print("{}", chosen);
  if (backend == nullptr) return RunExhaustiveSearch(global, *session, o.top);
  // The core runs the study's own model and hardware: a study resumed from the inputs stored with
  // it (a preset changed since) measures what it was made to measure.
  if (const auto* core = dynamic_cast<const runner::CoreBackend*>(backend.get()); core != nullptr && session->resumed)
    backend = std::make_unique<runner::CoreBackend>(core->options(), session->context.problem.model,
                                                    session->context.problem.hardware);
  if (o.command.reclassify) {
    if (Result<int> changed = ReclassifyFailedTrials(global, *session, *command_backend); !changed.ok())
      return changed.status();
  }
  if (const auto* core = dynamic_cast<const runner::CoreBackend*>(backend.get());
      core != nullptr && !global.json && core->options().slice != runner::SliceMode::kNever) {
    fmt::print("slice trials: {} (a trial holds at most {} ranks here)\n", runner::ToString(core->options().slice),
               core->options().capacity);
  }
  BayesianSearchOptions bayes = BayesOptions(o);
  TUNEPAR_RETURN_IF_ERROR(EnqueuedLayouts(o, session->context, &bayes));
  return RunBayesianSearch(global, *session, *backend, bayes);
}

// The command backend's options (--command-config and what it may hold).
void AddCommandBackendOptions(CLI::App* cmd, CommandFlags* flags) {
  auto* c = cmd->add_option_group("Command backend");
  c->add_option("--command-config", flags->config_file, "TOML file with the options below");
  c->add_option("--command", flags->command,
                "Command template, e.g. \"train.py --tp {tp} --pp {pp} --mbs {mbs}\"");
  c->add_option("--metric", flags->metric,
                "step_time_s|step_time_ms|tokens_per_s|tokens_per_s_per_gpu|samples_per_s|tflops_per_gpu|higher|"
                "lower (default step_time_s)");
  c->add_option("--metric-regex", flags->metric_regex,
                "Regex whose first group is the metric (last match wins)");
  c->add_option("--metric-json", flags->metric_json, "Or: key of the metric in JSON lines of the output");
  c->add_option("--memory-regex", flags->memory_regex,
                "Regex whose first group is the peak device memory, a size like 40.2 GiB (largest match wins)");
  c->add_option("--memory-json", flags->memory_json, "Or: key of the peak memory (bytes) in JSON lines");
  c->add_option("--oom-pattern", flags->oom_patterns, "Extra regex meaning out-of-memory (repeatable)");
  c->add_option("--timeout", flags->timeout_s,
                "Seconds before a trial is killed (default 3600; 600 for local and slurm)")
      ->check(CLI::PositiveNumber);
  c->add_option("--env", flags->env, "KEY=VALUE for the command's environment (repeatable)");
  c->add_option("--workdir", flags->workdir, "Working directory of the command");
  c->add_flag("--reads-layout-env", flags->reads_layout_env,
              "The program reads its layout from $TUNEPAR_LAYOUT: it receives every knob (without it, a knob "
              "the template does not pass is fixed and not measured)");
  c->add_flag("--reclassify", flags->reclassify,
              "Before searching, read this node's failed trials (crash, oom, invalid) again from their logs with "
              "the current --oom-pattern and metric; a changed trial keeps its earlier status in its details");
}

}  // namespace

void AddSearchCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto o = std::make_shared<SearchOptions>();
  CLI::App* cmd = app.add_subcommand("search", "Find the fastest layouts; record every trial in the store");
  o->cli = cmd;
  o->problem.AddTo(cmd);
  cmd->add_option(
         "--backend", o->backend,
         "model: the performance model, every legal layout (a dry run); command: your training "
         "command; local: tunepar-core through mpirun here; slurm: tunepar-core as job steps of this "
         "allocation; auto: slurm inside an allocation, else model")
      ->check(OneOf({"auto", "model", "command", "local", "slurm"}))
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
      ->check(AtLeast(1))
      ->capture_default_str();

  auto* bayes = cmd->add_option_group("Bayesian search (measuring backends)");
  bayes->add_option("--budget", o->bayes.budget, "Finished trials in the study to stop at")
      ->capture_default_str();
  bayes->add_option("--time-budget", o->bayes.time_budget_s, "Seconds this run may take (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  bayes->add_option("--batch", o->bayes.batch, "Trials proposed and run at a time")->capture_default_str();
  bayes->add_option("--seed", o->seed, "Seed of the proposals (part of the study)")->capture_default_str();
  bayes->add_option("--acquisition", o->acquisition, "logei (log expected improvement) or ucb")
      ->check(OneOf({"logei", "ucb"}))
      ->capture_default_str();
  bayes->add_option("--early-stop", o->early_stop_gain,
                    "Stop when no layout can beat the best by more than this fraction (e.g. 0.02) ...");
  bayes
      ->add_option("--early-stop-probability", o->early_stop_probability,
                   "... with at least this probability")
      ->capture_default_str();
  bayes->add_option("--enqueue", o->enqueue,
                    "A layout key to measure first, before any proposal (repeatable; legal in the study, counted in "
                    "the budget; one the study has measured already is not run again)");
  bayes->add_option("--confirm", o->bayes.confirmations,
                    "Confirmation trials: in the last N trials of the budget (default: a fifth), and before an early "
                    "stop, measure a leading layout again while the best is not clearly the fastest (0: never)");
  bayes->add_option("--confidence", o->bayes.confidence,
                    "... until the best is this likely faster than every other measured layout")
      ->capture_default_str();
  bayes
      ->add_option(
          "--max-probes", o->bayes.max_probes,
          "Probes: trials the study may spend on layouts its memory model calls unlikely to fit, when "
          "they promise enough to be worth the risk (0: never; counted over the study, not part of it)")
      ->capture_default_str();
  bayes->add_option("--lease", o->bayes.lease_s,
                    "Heartbeat lease (s): this process beats every lease/4; once its heartbeat has stood still this "
                    "long, other nodes take over its trials, budget slots and node id")
      ->check(Positive())
      ->capture_default_str();

  AddCommandBackendOptions(cmd, &o->command);
  auto* k = cmd->add_option_group("Core backends (local, slurm: tunepar-core)");
  k->add_option("--core", o->core.core, kCoreOptionHelp);
  k->add_option("--steps", o->core.steps, "Measured steps per trial")->capture_default_str();
  k->add_option("--warmup", o->core.warmup, "Warm-up steps per trial")->capture_default_str();
  k->add_option("--slice", o->core.slice,
                "Measure one or two data-parallel replicas and model the rest: never, auto (when the world "
                "does not fit the allocation), always")
      ->capture_default_str();
  k->add_option("--max-ranks", o->core.max_ranks, "local: ranks a trial may use (default 4 x cores)");
  k->add_option("--threads", o->core.threads, "Threads per rank (default: automatic)");
  k->add_option("--core-env", o->core.env, "KEY=VALUE for every rank's environment (repeatable)");
  cmd->callback([&global, result, o] { *result = RunSearch(global, *o); });
}

}  // namespace tunepar
