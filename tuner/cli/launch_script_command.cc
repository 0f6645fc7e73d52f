// `tunepar launch-script`: the sbatch script for a layout: by default the best measured (or
// predicted) layout of a study (--top K: the K best, one script each), else --layout with
// --model/--hardware. The training command is tunepar-core (the build the profile's devices
// need: cuda, hip or CPU), your template (--training-command, with the command backend's
// placeholders), or a command config's (e.g.
// configs/commands/megatron-deepspeed.toml): its own srun/mpirun is dropped (the script's srun
// places the ranks), a node-level launcher (torchrun) gets one task per node and its rendezvous,
// deepspeed/accelerate launchers are refused, and a trial's length (--train-iters 8) becomes the
// launch's (--steps). What a site requires (--account, --partition on LUMI) is refused when
// missing; --time is checked; --container runs every step inside an image.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "base/names.h"
#include "base/provenance.h"
#include "runner/command_backend.h"
#include "runner/core/supported_knobs.h"
#include "runner/core_backend.h"
#include "runner/launch_environment.h"
#include "runner/launch_script.h"
#include "runner/performance_model.h"
#include "store/store_reader.h"
#include "tuner/backends/command_config.h"
#include "tuner/backends/core_backend_config.h"
#include "tuner/cli/commands.h"
#include "tuner/study/problem.h"
#include "tuner/study/stored_study.h"
#include "tuner/study/study_best.h"
#include "tuner/study/trial_records.h"

namespace tunepar {

namespace {

struct LaunchScriptOptions {
  std::string study;
  std::string layout_key;
  int top = 1;
  std::string model = "gpt-1t", hardware = "frontier-mi250x";
  bool model_or_hardware_given = false;  // --model or --hardware on the command line
  std::string training_command;
  std::string command_config;
  std::string core;
  int steps = 0;  // 0: not given (tunepar-core runs 50; a template keeps no trial length)
  std::string time = "01:00:00";
  std::string partition, account, job_name;
  std::vector<std::string> modules, required_env;
  std::string mpi;
  std::string container, container_runtime, container_hook;
  std::vector<std::string> binds;
  std::string output;
};

constexpr int kCoreDefaultSteps = 50;

struct Chosen {
  ModelShape model;
  runner::HardwareProfile hardware;
  Layout layout;
  std::string origin;  // why this layout
  std::string study;   // the study it comes from ("" for a layout given with --model/--hardware)
  std::optional<StudyProgram> program;  // the program that study measured (its own command)
};

int NodesOf(const Chosen& c) { return (c.layout.World() + c.hardware.gpus_per_node - 1) / c.hardware.gpus_per_node; }

// The MPI a binary links, from `ldd` ("cray-mpich", "open-mpi"; "" when neither or no ldd).
std::string MpiLinkedBy(const std::string& binary) {
  FILE* pipe = popen(("ldd " + runner::ShellQuote(binary) + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return "";
  std::string text;
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
  pclose(pipe);
  if (text.find("libmpi_cray") != std::string::npos || text.find("libmpich") != std::string::npos) return "cray-mpich";
  if (text.find("libopen-pal") != std::string::npos || text.find("libopen-rte") != std::string::npos) return "open-mpi";
  return "";
}

// srun's MPI plugin: --mpi (an MPI of the profile's launch.mpi_plugins, or a plugin), else the
// MPI the tunepar-core binary links (`core_binary`: "" for another program), else none for a
// Python program (the request's training command), else the profile's launch.mpi; and the
// reason, for the script.
Status ChooseMpi(const LaunchScriptOptions& o, const std::string& core_binary, runner::LaunchScriptRequest* r) {
  const runner::LaunchSettings& launch = r->hardware.launch;
  const std::string from = fmt::format("{} launch.mpi_plugins", r->hardware.name);
  if (!o.mpi.empty()) {
    if (auto it = launch.mpi_plugins.find(o.mpi); it != launch.mpi_plugins.end()) {
      r->mpi_plugin = it->second;
      r->mpi_reason = fmt::format("the program links {} (--mpi; {})", o.mpi, from);
      return Status::Ok();
    }
    static const std::set<std::string> kPlugins = {"pmix", "pmi2", "cray_shasta", "none"};
    if (kPlugins.count(o.mpi) == 0) {
      std::string known;
      for (const auto& [name, plugin] : launch.mpi_plugins) known += name + ", ";
      return InvalidArgument(fmt::format("--mpi {}: not an MPI of {} ({}) nor a Slurm MPI plugin (pmix, pmi2, "
                                         "cray_shasta, none)",
                                         o.mpi, r->hardware.name, known.empty() ? "it lists none" : known.substr(0, known.size() - 2)));
    }
    r->mpi_plugin = o.mpi;
    r->mpi_reason = "given with --mpi";
    return Status::Ok();
  }
  if (const std::string python = core_binary.empty() ? runner::PythonProgramOf(r->training_command) : "";
      !python.empty()) {
    r->mpi_plugin = "none";
    r->mpi_reason = fmt::format(
        "{} is a Python program, which links no MPI (torch.distributed meets its ranks at MASTER_ADDR:MASTER_PORT); "
        "give --mpi when it uses MPI (mpi4py)",
        python);
    return Status::Ok();
  }
  const std::string program = core_binary.substr(core_binary.rfind('/') + 1);
  const std::string mpi = core_binary.empty() ? "" : MpiLinkedBy(core_binary);
  if (auto it = launch.mpi_plugins.find(mpi); !mpi.empty() && it != launch.mpi_plugins.end()) {
    r->mpi_plugin = it->second;
    r->mpi_reason = fmt::format("{} links {} (ldd; {})", program, mpi, from);
    return Status::Ok();
  }
  const std::string why = core_binary.empty() ? "the MPI the program links is not known here"
                          : mpi.empty()       ? fmt::format("which MPI {} links is not known", program)
                                              : fmt::format("{} links {}, which {} does not name", program, mpi, from);
  r->mpi_plugin = launch.mpi;
  r->mpi_reason = fmt::format(
      "the profile's launch.mpi ({}); a program linked with another MPI needs --mpi (e.g. --mpi cray-mpich)", why);
  return Status::Ok();
}

// tunepar-core's command: the build the profile's devices need (--core stands in for it), said
// in the script's header, and its smoke test before training (`--smoke`, with the training's comm).
Status SetCoreCommand(const LaunchScriptOptions& o, const Chosen& chosen, runner::LaunchScriptRequest* r) {
  std::string why;
  const core::CoreBuild build = CoreBuildFor(chosen.hardware, &why);
  TUNEPAR_RETURN_IF_ERROR(core::SupportsModel(chosen.model));  // a MoE model, a ViT, ALiBi: exit 3, naming it
  if (Status supported = CheckSupported(chosen.layout, core::SupportedKnobs(build, chosen.model), core::BinaryName(build));
      !supported.ok()) {
    return InvalidArgument(supported.message() +
                           "; give --command-config configs/commands/megatron-deepspeed.toml or --training-command");
  }
  Result<CoreBinary> core = FindCoreBinary(chosen.hardware, o.core);
  if (!core.ok()) return core.status();
  r->header += fmt::format("# The program: {}.\n", core->said);
  r->model_toml = runner::ModelToml(chosen.model);
  r->training_command = fmt::format(
      "{} --model \"$TUNEPAR_MODEL\" --layout {} --steps {} --warmup 5 --memory-cap {:.0f} -o "
      "\"$job_dir/tunepar-core-$SLURM_JOB_ID.json\"",
      runner::ShellQuote(core->path), LayoutKey(chosen.layout), o.steps > 0 ? o.steps : kCoreDefaultSteps,
      chosen.hardware.MemoryBytes());
  r->smoke_command = runner::ShellQuote(core->path) + " --smoke";
  return ChooseMpi(o, core->path, r);
}

std::string ScriptHeader(const Chosen& chosen, const runner::Prediction& prediction) {
  return fmt::format(
      "# Launch script written by tunepar {} ({}) on {}.\n# Layout {}: {}.\n# Model {} ({} parameters) on {} ({} x "
      "{}).\n# The performance model predicts {:.3f} s/step, {:.0f} tokens/s, {:.1f} GB per device (one rank per "
      "device, as this script places them).\n",
      // Names and origins are the user's text: one line each, so none can start a line of the script.
      Version(), GitRevision(), UtcNow(), LayoutKey(chosen.layout), OneLine(chosen.origin), OneLine(chosen.model.name),
      static_cast<int64_t>(chosen.model.Parameters()), OneLine(chosen.hardware.name), chosen.hardware.gpus_per_node,
      OneLine(chosen.hardware.device_name),
      prediction.step_time_s, prediction.tokens_per_s, prediction.memory_bytes / 1e9);
}

// -o FILE for one script; with --top K, FILE-1.ext ... FILE-K.ext (rank 1 is the best).
std::string OutputPath(const std::string& output, int rank, int count) {
  if (count == 1) return output;
  const size_t slash = output.rfind('/');
  const size_t dot = output.rfind('.');
  const size_t at = dot == std::string::npos || (slash != std::string::npos && dot < slash) ? output.size() : dot;
  return output.substr(0, at) + "-" + std::to_string(rank) + output.substr(at);
}

Status WriteScript(const std::string& path, const Chosen& chosen, const std::string& script) {
  if (path.empty()) {
    fmt::print("{}", script);
    return Status::Ok();
  }
  {
    std::ofstream out(path);
    out << script;
    if (!out) return InvalidArgument(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  }
  chmod(path.c_str(), 0755);
  fmt::print(stderr, "wrote {}: {} on {} node{}; submit with: sbatch {}\n", OneLine(path), LayoutKey(chosen.layout),
             NodesOf(chosen), NodesOf(chosen) == 1 ? "" : "s", runner::ShellQuote(path));
  return Status::Ok();
}

// The other measured layouts of a study after its best, fastest first (by their fastest ok trial).
std::vector<const store::TrialRecord*> RunnersUp(const std::vector<store::TrialRecord>& trials, const Layout& best,
                                                 int count) {
  std::vector<const store::TrialRecord*> fastest;  // one per layout
  for (const store::TrialRecord& t : trials) {
    if (t.status != TrialStatus::kOk || !t.objective || t.layout == best) continue;
    auto same = std::find_if(fastest.begin(), fastest.end(), [&](const store::TrialRecord* f) { return f->layout == t.layout; });
    if (same == fastest.end()) fastest.push_back(&t);
    else if (*t.objective < *(*same)->objective) *same = &t;
  }
  std::sort(fastest.begin(), fastest.end(),
            [](const store::TrialRecord* a, const store::TrialRecord* b) { return *a->objective < *b->objective; });
  if (static_cast<int>(fastest.size()) > count) fastest.resize(count);
  return fastest;
}

std::string TrialOrigin(const StudyContext& context, const store::TrialRecord& t, const std::string& what) {
  const store::StudyRecord& study = context.study;
  return fmt::format("{} of study {} ({} backend): trial {}/{}, {:.0f} tokens/s {}", what, study.name, study.backend,
                     t.node_id, t.number, t.tokens_per_s.value_or(0),
                     study.backend == "model"
                         ? "predicted"
                         : fmt::format("measured with {} ranks per node", context.RanksOnANode()));
}

// The layout given (it must be legal in the study's space, as the study's backend restricts
// it), or the study's best layout (tuner/study/study_best.h) and, with --top K, the next K-1
// measured ones.
Result<std::vector<Chosen>> ChooseFromStudy(const GlobalOptions& global, const LaunchScriptOptions& o) {
  Result<StoredStudy> stored = ReadStoredStudy(global.store, o.study, "name one, or give --layout with --model and --hardware");
  if (!stored.ok()) return stored.status();
  const StudyContext& context = stored->context;
  const store::StudyRecord& study = context.study;
  Chosen chosen{context.problem.model, context.problem.hardware, {}, "", study.name, context.program};
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
    return std::vector<Chosen>{chosen};
  }
  const StudyBest best = BestOfStudy(context, stored->trials);
  if (!best.layout)
    return InvalidArgument(fmt::format("study {}: {}; nothing to launch (give --layout)", study.name, best.Header()));
  chosen.layout = *best.layout;
  if (best.trial == nullptr) {
    spdlog::warn("study {}: {}: {}; measure it before a long run", study.name, best.Header(), LayoutKey(*best.layout));
    chosen.origin = fmt::format("best of study {} ({} backend): {}", study.name, study.backend, best.Header());
  } else {
    chosen.origin = TrialOrigin(context, *best.trial, "best") + "; " + best.Header();
  }
  std::vector<Chosen> all = {chosen};
  for (const store::TrialRecord* t : RunnersUp(stored->trials, *best.layout, o.top - 1)) {
    chosen.layout = t->layout;
    chosen.origin = TrialOrigin(context, *t, fmt::format("number {} of the top {}", all.size() + 1, o.top));
    all.push_back(chosen);
  }
  if (static_cast<int>(all.size()) < o.top) {
    spdlog::warn("study {}: {} measured layout{} to launch, not {} (--top)", study.name, all.size(),
                 all.size() == 1 ? "" : "s", o.top);
  }
  return all;
}

// Whether the store holds any study (its studies' headers read; no trial).
bool HasStudies(const std::string& store_dir) {
  Result<store::StoreView> view = store::ReadStore(store_dir, {"-", ""});
  return view.ok() && !view->studies.empty();
}

Result<std::vector<Chosen>> ChooseLayouts(const GlobalOptions& global, const LaunchScriptOptions& o) {
  if (o.top > 1 && !o.layout_key.empty())
    return InvalidArgument("--top chooses a study's best layouts; it does not go with --layout");
  if (o.top > 1 && o.output.empty())
    return InvalidArgument("--top writes one script per layout: give -o FILE (they are named FILE-1, FILE-2, ...)");
  // A layout with no study and no model or hardware is for the store's only study (its hardware,
  // container and binds); several studies: name one.
  if (!o.study.empty() || o.layout_key.empty() || (!o.model_or_hardware_given && HasStudies(global.store)))
    return ChooseFromStudy(global, o);
  Result<Problem> problem = LoadProblem(o.model, o.hardware, "default");
  if (!problem.ok()) return problem.status();
  Result<Layout> l = ParseLayoutKey(o.layout_key);
  if (!l.ok()) return l.status().WithContext("--layout");
  return std::vector<Chosen>{Chosen{problem->model, problem->hardware, *l, "layout given", "", std::nullopt}};
}

// What the script and Slurm set themselves: not asked of the user.
std::vector<std::string> SetByScript(const runner::HardwareProfile& hw) {
  std::vector<std::string> names = {"job_dir",   "TUNEPAR_MODEL",       "MASTER_ADDR", "MASTER_PORT", "RANK",
                                    "LOCAL_RANK", "WORLD_SIZE",         "OMP_NUM_THREADS", "NCCL_DEBUG",
                                    "NCCL_DEBUG_SUBSYS", "MIOPEN_USER_DB_PATH", "MIOPEN_CUSTOM_CACHE_DIR",
                                    "TUNEPAR_SLURM_DEVICES", "HOME", "USER", "PATH", "PWD", "HOSTNAME"};
  if (!hw.launch.visible_devices_env.empty()) names.push_back(hw.launch.visible_devices_env);
  for (const runner::EnvSetting& e : hw.launch.env) names.push_back(e.name);
  return names;
}

// The command every rank (or node launcher) runs: the template (given, or a command config's)
// with the layout's values ({trial?...} text, a trial's only, left out), its own launcher
// replaced by the script's, a trial's length made the launch's; else tunepar-core.
Status SetTrainingCommand(const LaunchScriptOptions& o, const Chosen& chosen, runner::LaunchScriptRequest* r) {
  std::string template_command = o.training_command;
  if (template_command.empty() && !o.command_config.empty()) {
    CommandFlags flags;
    flags.config_file = o.command_config;
    flags.metric_regex = "(x)";  // only the command is used here
    std::string declared;
    Result<runner::CommandBackendOptions> config = ResolveCommandOptions(flags, &declared);
    if (!config.ok()) return config.status();
    if (Status runs = CheckDeclaredKnobs(chosen.layout, declared, o.command_config); !runs.ok()) {
      return InvalidArgument(runs.message() +
                             "; search with this --command-config (its study holds only layouts it runs), or give --layout");
    }
    TUNEPAR_RETURN_IF_ERROR(runner::CheckTrainsModel(*config, chosen.model));
    template_command = config->command;
  } else if (!template_command.empty()) {
    runner::CommandBackendOptions given;
    given.command = template_command;
    given.source = "--training-command";
    TUNEPAR_RETURN_IF_ERROR(runner::CheckTrainsModel(given, chosen.model));
  }
  if (template_command.empty() && chosen.program) {
    // A study measured with its own command launches that program, never tunepar-core.
    template_command = chosen.program->command;
    r->header += fmt::format("# The program: study {}'s own command, as its trials ran it, for this layout.\n",
                             OneLine(chosen.study));
    if (chosen.program->reads_layout_env) r->program_env.emplace_back("TUNEPAR_LAYOUT", LayoutKey(chosen.layout));
  }
  if (template_command.empty()) return SetCoreCommand(o, chosen, r);
  runner::TrialContext context;
  context.trial_id = "launch";
  context.trial_dir = "$job_dir";
  context.trial_dir_is_expression = true;
  context.number = 0;  // no trial: {trial?TEXT} is off
  context.world = chosen.layout.World();
  context.gpus_per_node = chosen.hardware.gpus_per_node;
  context.model = &chosen.model;
  Result<std::string> expanded = runner::ExpandCommand(template_command, chosen.layout, context);
  if (!expanded.ok()) return expanded.status();
  Result<runner::LaunchProgram> program = runner::LaunchProgramOf(
      *expanded, NodesOf(chosen), std::min(chosen.layout.World(), chosen.hardware.gpus_per_node));
  if (!program.ok()) return program.status();
  Result<std::string> command = runner::WithTrainingLength(program->command, o.steps);
  if (!command.ok()) return command.status();
  r->replaced = program->dropped;
  r->training_command = *command;
  r->node_launcher = program->node_launcher;
  if (template_command.find("{deepspeed_config}") != std::string::npos) {
    // As the command backend writes it for a trial: the layout's batch sizes, ZeRO stage, precision.
    r->job_files.emplace_back(runner::DeepSpeedConfigPath(context.trial_dir), runner::DeepSpeedConfig(chosen.layout));
  }
  r->required_env = runner::VariablesTheCommandNeeds(*command, SetByScript(chosen.hardware));
  return ChooseMpi(o, "", r);
}

// What the site requires (the profile's launch.requires_*) and Slurm's --time forms.
// A value written after "#SBATCH --flag=": one word of printable ASCII (a space, quote or newline
// would end the directive, or start a line of the script).
Status CheckSbatchValue(std::string_view flag, const std::string& value) {
  for (char c : value) {
    if (c <= ' ' || c > '~' || c == '\'' || c == '"' || c == '\\')
      return InvalidArgument(fmt::format("{} '{}' must be one word of printable ASCII without quotes (it is written "
                                         "into an #SBATCH line)",
                                         flag, OneLine(value)));
  }
  return Status::Ok();
}

Status CheckSiteOptions(const LaunchScriptOptions& o, const runner::HardwareProfile& hw) {
  TUNEPAR_RETURN_IF_ERROR(runner::CheckSlurmTime(o.time));
  TUNEPAR_RETURN_IF_ERROR(CheckSbatchValue("--job-name", o.job_name));
  TUNEPAR_RETURN_IF_ERROR(CheckSbatchValue("--account", o.account));
  TUNEPAR_RETURN_IF_ERROR(CheckSbatchValue("--partition", o.partition));
  if (hw.launch.requires_account && o.account.empty()) {
    return InvalidArgument(fmt::format(
        "{} bills every job to a project (launch.requires_account): give --account PROJECT (e.g. --account "
        "project_465000123)",
        hw.name));
  }
  if (hw.launch.requires_partition && o.partition.empty()) {
    return InvalidArgument(fmt::format(
        "{} has no default partition (launch.requires_partition): give --partition (e.g. --partition standard-g "
        "for whole nodes)",
        hw.name));
  }
  return Status::Ok();
}

// --container IMAGE: the profile's launch.container (runtime, binds, hook), with --bind added
// and --container-runtime / --container-hook replacing.
std::optional<runner::ContainerLaunch> ContainerOf(const LaunchScriptOptions& o, const runner::HardwareProfile& hw) {
  if (o.container.empty()) return std::nullopt;
  const runner::ContainerSettings& profile = hw.launch.container;
  runner::ContainerLaunch c{o.container, profile.runtime, profile.binds, profile.hook, ""};
  std::vector<std::string> from;
  if (!profile.source.empty()) from.push_back(fmt::format("{} launch.container: {}", hw.name, profile.source));
  if (!o.container_runtime.empty()) c.runtime = o.container_runtime;
  if (!o.binds.empty()) c.binds.insert(c.binds.end(), o.binds.begin(), o.binds.end()), from.push_back("--bind");
  if (!o.container_hook.empty()) c.hook = o.container_hook, from.push_back("--container-hook");
  for (const std::string& f : from) c.source += (c.source.empty() ? "" : "; ") + f;
  if (c.source.empty()) c.source = "no binds or hook given";
  return c;
}

// The host directories the training command names (data, checkpoints) that no bind covers yet
// (by its container side), bound too, and said where the binds are explained.
void BindTheCommandsDirectories(runner::LaunchScriptRequest* r) {
  runner::ContainerLaunch& c = *r->container;
  const char* home = std::getenv("HOME");
  std::vector<std::string> added;
  for (const std::string& dir : runner::DirectoriesTheCommandNames(r->training_command, home ? home : "")) {
    const bool covered = std::any_of(c.binds.begin(), c.binds.end(), [&](const std::string& bind) {
      const std::string inside = bind.substr(bind.find(':') == std::string::npos ? 0 : bind.find(':') + 1);
      return dir == inside || dir.rfind(inside + "/", 0) == 0;
    });
    if (!covered) c.binds.push_back(dir), added.push_back(dir);
  }
  if (added.empty()) return;
  c.source += fmt::format("; {}: the training command names paths under {}, which the image does not have "
                          "(bound at a project directory's level, as /scratch/PROJECT on LUMI)",
                          fmt::join(added, ", "), added.size() == 1 ? "it" : "them");
}

Result<std::string> ScriptFor(const LaunchScriptOptions& o, const Chosen& chosen) {
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
  r.job_name = o.job_name.empty() ? "tunepar-" + ToValidName(chosen.model.name) : o.job_name;
  r.modules = chosen.hardware.launch.modules;
  r.modules.insert(r.modules.end(), o.modules.begin(), o.modules.end());
  r.container = ContainerOf(o, chosen.hardware);
  TUNEPAR_RETURN_IF_ERROR(SetTrainingCommand(o, chosen, &r));
  if (r.container) BindTheCommandsDirectories(&r);
  for (const std::string& name : o.required_env) {
    if (std::find(r.required_env.begin(), r.required_env.end(), name) == r.required_env.end())
      r.required_env.push_back(name);
  }
  // Where the layout comes from, then the program (SetCoreCommand says which build).
  r.header = ScriptHeader(chosen, pm->Predict(chosen.layout)) + r.header;
  return runner::LaunchScript(r);
}

Status RunLaunchScript(const GlobalOptions& global, const LaunchScriptOptions& o) {
  if (o.top < 1) return InvalidArgument(fmt::format("--top {}: give 1 or more layouts", o.top));
  Result<std::vector<Chosen>> choice = ChooseLayouts(global, o);
  if (!choice.ok()) return choice.status();
  TUNEPAR_RETURN_IF_ERROR(CheckSiteOptions(o, choice->front().hardware));
  std::vector<std::string> scripts;  // all first: nothing is written when one cannot be
  for (const Chosen& chosen : *choice) {
    Result<std::string> script = ScriptFor(o, chosen);
    if (!script.ok()) return script.status();
    scripts.push_back(*script);
  }
  for (size_t i = 0; i < scripts.size(); ++i) {
    TUNEPAR_RETURN_IF_ERROR(WriteScript(o.output.empty() ? "" : OutputPath(o.output, static_cast<int>(i) + 1, o.top),
                                        (*choice)[i], scripts[i]));
  }
  return Status::Ok();
}

}  // namespace

void AddLaunchScriptCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto o = std::make_shared<LaunchScriptOptions>();
  CLI::App* cmd = app.add_subcommand(
      "launch-script",
      "Write the sbatch script for a layout (default: a study's best)");
  cmd->footer(
      "Sites that bill jobs to a project or have no default partition (the profile's launch.requires_account / "
      "requires_partition: lumi-g, frontier-mi250x) get no script without --account / --partition: it is refused, "
      "not written with a placeholder.");
  cmd->add_option("study", o->study, "Study (default: the store's only study)");
  cmd->add_option("--layout", o->layout_key, "Layout key (default: the study's best trial)");
  cmd->add_option("--top", o->top, "Write scripts for the study's K best layouts, -o FILE naming them FILE-1 ... FILE-K")
      ->capture_default_str();
  CLI::Option* model = cmd->add_option("--model,-m", o->model, "Model, with --layout and no study")->capture_default_str();
  CLI::Option* hardware =
      cmd->add_option("--hardware", o->hardware, "Hardware, with --layout and no study")->capture_default_str();
  cmd->add_option("--training-command", o->training_command,
                  "Command template run by every rank (placeholders as for --backend command; {trial?TEXT} is a "
                  "trial's only)");
  cmd->add_option("--command-config", o->command_config, "Take the command of a command config TOML");
  cmd->add_option("--core", o->core, kCoreOptionHelp);
  cmd->add_option("--steps", o->steps,
                  "Training steps: tunepar-core's (default 50); replaces a template's trial length (--train-iters, "
                  "--training.steps; --exit-interval goes)");
  cmd->add_option("--time", o->time, "#SBATCH --time, in a Slurm form (minutes, H:M:S, D-H:M:S)")->capture_default_str();
  cmd->add_option("--partition", o->partition, "#SBATCH --partition (required where the profile says so)");
  cmd->add_option("--account", o->account, "#SBATCH --account (required where the profile says so)");
  cmd->add_option("--job-name", o->job_name, "#SBATCH --job-name (default tunepar-<model>)");
  cmd->add_option("--module", o->modules, "A `module load` line of the script (repeatable; after the profile's)");
  cmd->add_option("--require-env", o->required_env,
                  "A variable the job needs, checked before any step (repeatable; those the command reads are found)");
  cmd->add_option("--mpi", o->mpi,
                  "The MPI the program links (open-mpi, cray-mpich: the profile's launch.mpi_plugins) or a srun --mpi "
                  "plugin (default: what tunepar-core links, else the profile's launch.mpi)");
  cmd->add_option("--container", o->container, "Run every step inside this image (singularity/apptainer exec)");
  cmd->add_option("--container-runtime", o->container_runtime, "singularity or apptainer (default: the profile's)")
      ->check(CLI::IsMember({"singularity", "apptainer"}));
  cmd->add_option("--bind", o->binds, "A bind mount SRC[:DST] of the container (repeatable; after the profile's)");
  cmd->add_option("--container-hook", o->container_hook,
                  "Run inside the container before each step (default: the profile's, e.g. $WITH_CONDA)");
  cmd->add_option("--output,-o", o->output, "Write the script here (default: stdout)");
  cmd->callback([&global, result, o, model, hardware] {
    o->model_or_hardware_given = model->count() > 0 || hardware->count() > 0;
    *result = RunLaunchScript(global, *o);
  });
}

}  // namespace tunepar
