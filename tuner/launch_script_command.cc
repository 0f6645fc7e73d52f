// `tunepar launch-script`: the sbatch script for a layout: by default the best measured (or
// predicted) layout of a study, else --layout with --model/--hardware. The training command is
// tunepar-core, your template (--training-command, with the command backend's placeholders),
// or a command config's (e.g. configs/commands/megatron-deepspeed.toml).
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/provenance.h"
#include "runner/command_backend.h"
#include "runner/core/supported_knobs.h"
#include "runner/core_backend.h"
#include "runner/launch_environment.h"
#include "runner/launch_script.h"
#include "runner/performance_model.h"
#include "tuner/command_config.h"
#include "tuner/commands.h"
#include "tuner/core_backend_config.h"
#include "tuner/problem.h"
#include "tuner/stored_study.h"
#include "tuner/study_best.h"
#include "tuner/trial_records.h"

namespace tunepar {

namespace {

struct LaunchScriptOptions {
  std::string study;
  std::string layout_key;
  std::string model = "gpt-1t", hardware = "frontier-mi250x";
  std::string training_command;
  std::string command_config;
  std::string core;
  int core_steps = 50;
  std::string time = "01:00:00";
  std::string partition, account, job_name;
  std::string output;
};

struct Chosen {
  ModelShape model;
  runner::HardwareProfile hardware;
  Layout layout;
  std::string origin;  // why this layout
};

// A command config for the command backend launches the job itself (srun ... python ...); the
// script's srun does here, with the profile's masks: keep the program every rank runs.
Result<std::string> WithoutLauncher(std::string command) {
  for (const char* launcher : {"srun ", "mpirun "}) {
    if (command.rfind(launcher, 0) != 0) continue;
    size_t program = std::string::npos;
    for (const char* p : {" python", " torchrun", " bash ", " ./", " /"}) program = std::min(program, command.find(p));
    if (program == std::string::npos) {
      return InvalidArgument(fmt::format(
          "the command starts its own {}launcher; give --training-command with the program every rank runs", launcher));
    }
    command = command.substr(program + 1);
  }
  return command;
}

Status SetCoreCommand(const LaunchScriptOptions& o, const Chosen& chosen, runner::LaunchScriptRequest* r) {
  if (Status supported = CheckSupported(chosen.layout, core::SupportedKnobs(), "tunepar-core"); !supported.ok()) {
    return InvalidArgument(supported.message() +
                           "; give --command-config configs/commands/megatron-deepspeed.toml or --training-command");
  }
  Result<std::string> core = FindCoreBinary(o.core);
  if (!core.ok()) return core.status();
  r->model_toml = runner::ModelToml(chosen.model);
  r->training_command = fmt::format(
      "{} --model \"$TUNEPAR_MODEL\" --layout {} --steps {} --warmup 5 --memory-cap {:.0f} -o "
      "\"$job_dir/tunepar-core-$SLURM_JOB_ID.json\"",
      runner::ShellQuote(*core), LayoutKey(chosen.layout), o.core_steps, chosen.hardware.MemoryBytes());
  return Status::Ok();
}

std::string ScriptHeader(const Chosen& chosen, const runner::Prediction& prediction) {
  return fmt::format(
      "# Launch script written by tunepar {} ({}) on {}.\n# Layout {}: {}.\n# Model {} ({} parameters) on {} ({} x "
      "{}).\n# The performance model predicts {:.3f} s/step, {:.0f} tokens/s, {:.1f} GB per device (one rank per "
      "device, as this script places them).\n",
      Version(), GitRevision(), UtcNow(), LayoutKey(chosen.layout), chosen.origin, chosen.model.name,
      static_cast<int64_t>(chosen.model.Parameters()), chosen.hardware.name, chosen.hardware.gpus_per_node, chosen.hardware.device_name,
      prediction.step_time_s, prediction.tokens_per_s, prediction.memory_bytes / 1e9);
}

Status WriteScript(const LaunchScriptOptions& o, const Chosen& chosen, const std::string& script) {
  if (o.output.empty()) {
    fmt::print("{}", script);
    return Status::Ok();
  }
  {
    std::ofstream out(o.output);
    out << script;
    if (!out) return InvalidArgument(fmt::format("cannot write '{}'", o.output));
  }
  chmod(o.output.c_str(), 0755);
  fmt::print(stderr, "wrote {}: {} on {} nodes; submit with: sbatch {}\n", o.output, LayoutKey(chosen.layout),
             (chosen.layout.World() + chosen.hardware.gpus_per_node - 1) / chosen.hardware.gpus_per_node, o.output);
  return Status::Ok();
}

// The layout given (it must be legal in the study's space, as the study's backend restricts
// it), or the study's best layout (study_best.h), with where it ran.
Result<Chosen> ChooseFromStudy(const GlobalOptions& global, const LaunchScriptOptions& o) {
  Result<StoredStudy> stored = ReadStoredStudy(global.store, o.study, "name one, or give --layout with --model and --hardware");
  if (!stored.ok()) return stored.status();
  const StudyContext& context = stored->context;
  const store::StudyRecord& study = context.study;
  Chosen chosen{context.problem.model, context.problem.hardware, {}, ""};
  if (!o.layout_key.empty()) {
    Result<Layout> l = ParseLayoutKey(o.layout_key);
    if (!l.ok()) return l.status().WithContext("--layout");
    if (Status legal = search::CheckLegal(context.Query(), *l); !legal.ok()) {
      return InvalidArgument(fmt::format(
          "study {}: {} (to launch a layout outside the study, give --layout with --model and --hardware, no study)",
          study.name, legal.message()));
    }
    chosen.layout = *l;
    chosen.origin = fmt::format("layout given for study {}", study.name);
    return chosen;
  }
  const StudyBest best = BestOfStudy(context, stored->trials);
  if (!best.layout)
    return InvalidArgument(fmt::format("study {}: {}; nothing to launch (give --layout)", study.name, best.Header()));
  chosen.layout = *best.layout;
  if (best.trial == nullptr) {
    spdlog::warn("study {}: {}: {}; measure it before a long run", study.name, best.Header(), LayoutKey(*best.layout));
    chosen.origin = fmt::format("best of study {} ({} backend): {}", study.name, study.backend, best.Header());
    return chosen;
  }
  chosen.origin = fmt::format("best of study {} ({} backend): trial {}/{}, {:.0f} tokens/s {}; {}", study.name,
                              study.backend, best.trial->node_id, best.trial->number,
                              best.trial->tokens_per_s.value_or(0),
                              study.backend == "model"
                                  ? "predicted"
                                  : fmt::format("measured with {} ranks per node", context.PlacedRanksPerNode()),
                              best.Header());
  return chosen;
}

Result<Chosen> ChooseLayout(const GlobalOptions& global, const LaunchScriptOptions& o) {
  if (!o.study.empty() || o.layout_key.empty()) return ChooseFromStudy(global, o);
  Result<Problem> problem = LoadProblem(o.model, o.hardware, "default");
  if (!problem.ok()) return problem.status();
  Result<Layout> l = ParseLayoutKey(o.layout_key);
  if (!l.ok()) return l.status().WithContext("--layout");
  return Chosen{problem->model, problem->hardware, *l, "layout given"};
}

// The command every rank runs: the template (given, or a command config's) with the layout's
// values, without a launcher of its own; else tunepar-core, when it can run the layout.
Status SetTrainingCommand(const LaunchScriptOptions& o, const Chosen& chosen, runner::LaunchScriptRequest* r) {
  std::string template_command = o.training_command;
  if (template_command.empty() && !o.command_config.empty()) {
    CommandFlags flags;
    flags.config_file = o.command_config;
    flags.metric_regex = "(x)";  // only the command is used here
    Result<runner::CommandBackendOptions> config = ResolveCommandOptions(flags);
    if (!config.ok()) return config.status();
    template_command = config->command;
  }
  if (template_command.empty()) return SetCoreCommand(o, chosen, r);
  runner::TrialContext context;
  context.trial_id = "launch";
  context.trial_dir = "$job_dir";
  context.world = chosen.layout.World();
  context.gpus_per_node = chosen.hardware.gpus_per_node;
  context.model = &chosen.model;
  Result<std::string> expanded = runner::ExpandCommand(template_command, chosen.layout, context);
  if (!expanded.ok()) return expanded.status();
  Result<std::string> program = WithoutLauncher(*expanded);
  if (!program.ok()) return program.status();
  r->training_command = *program;
  return Status::Ok();
}

Status RunLaunchScript(const GlobalOptions& global, const LaunchScriptOptions& o) {
  Result<Chosen> choice = ChooseLayout(global, o);
  if (!choice.ok()) return choice.status();
  const Chosen& chosen = *choice;
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(chosen.layout.World(), chosen.hardware));
  // The script places one rank per device: so does the prediction it quotes.
  Result<runner::PerformanceModel> pm = runner::PerformanceModel::Create(chosen.model, chosen.hardware);
  if (!pm.ok()) return pm.status();
  TUNEPAR_RETURN_IF_ERROR(pm->CheckLayout(chosen.layout));
  runner::LaunchScriptRequest r;
  r.model = chosen.model;
  r.hardware = chosen.hardware;
  r.layout = chosen.layout;
  r.time = o.time;
  r.partition = o.partition;
  r.account = o.account;
  r.job_name = o.job_name.empty() ? "tunepar-" + chosen.model.name : o.job_name;
  TUNEPAR_RETURN_IF_ERROR(SetTrainingCommand(o, chosen, &r));
  r.header = ScriptHeader(chosen, pm->Predict(chosen.layout));
  return WriteScript(o, chosen, runner::LaunchScript(r));
}

}  // namespace

void AddLaunchScriptCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto o = std::make_shared<LaunchScriptOptions>();
  CLI::App* cmd =
      app.add_subcommand("launch-script", "Write the sbatch script for a layout (default: a study's best)");
  cmd->add_option("study", o->study, "Study (default: the store's only study)");
  cmd->add_option("--layout", o->layout_key, "Layout key (default: the study's best trial)");
  cmd->add_option("--model,-m", o->model, "Model, with --layout and no study")->capture_default_str();
  cmd->add_option("--hardware", o->hardware, "Hardware, with --layout and no study")->capture_default_str();
  cmd->add_option("--training-command", o->training_command,
                  "Command template run by every rank (placeholders as for --backend command)");
  cmd->add_option("--command-config", o->command_config, "Take the command of a command config TOML");
  cmd->add_option("--core", o->core, "tunepar-core binary (default: next to tunepar)");
  cmd->add_option("--steps", o->core_steps, "tunepar-core: training steps")->capture_default_str();
  cmd->add_option("--time", o->time, "#SBATCH --time")->capture_default_str();
  cmd->add_option("--partition", o->partition, "#SBATCH --partition");
  cmd->add_option("--account", o->account, "#SBATCH --account");
  cmd->add_option("--job-name", o->job_name, "#SBATCH --job-name (default tunepar-<model>)");
  cmd->add_option("--output,-o", o->output, "Write the script here (default: stdout)");
  cmd->callback([&global, result, o] { *result = RunLaunchScript(global, *o); });
}

}  // namespace tunepar
