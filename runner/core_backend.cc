#include "runner/core_backend.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "base/no_follow.h"
#include "base/provenance.h"
#include "runner/core/core_log.h"
#include "runner/core/result_format.h"
#include "runner/launch_environment.h"
#include "runner/log_text.h"
#include "runner/process_trial.h"

namespace tunepar::runner {

Result<SliceMode> ParseSliceMode(std::string_view text) {
  if (text == "never") return SliceMode::kNever;
  if (text == "auto") return SliceMode::kAuto;
  if (text == "always") return SliceMode::kAlways;
  return InvalidArgument(fmt::format("--slice {}: expected never, auto or always", text));
}

std::string_view ToString(SliceMode mode) {
  switch (mode) {
    case SliceMode::kNever: return "never";
    case SliceMode::kAuto: return "auto";
    case SliceMode::kAlways: return "always";
  }
  return "?";
}

namespace {

// The shape fields issue 33 added, as TOML lines, each only away from its neutral value (kv_heads
// only when it is not heads), so a GPT's file reads as it always did; without them a Llama shape
// would run as a GPT of its size.
std::string LateShapeFields(const ModelShape& m) {
  std::string lines;
  if (m.KvHeads() != m.heads) lines += fmt::format("kv_heads = {}\n", m.KvHeads());
  for (const ShapeRow& row : ShapeRows()) {
    if (row.neutral.empty()) continue;
    const std::string text = ShapeFieldText(row, m);
    const std::string value = row.is_switch ? (text == "1" ? "true" : "false")
                              : row.choices.empty() ? text
                                                    : fmt::format("\"{}\"", text);
    if (value != row.neutral) lines += fmt::format("{} = {}\n", row.name, value);
  }
  return lines;
}

}  // namespace

std::string ModelToml(const ModelShape& m) {
  std::ostringstream name;
  name << toml::value<std::string>(m.name);  // quoted and escaped as TOML
  return fmt::format(
             "# written by tunepar for tunepar-core\nname = {}\nlayers = {}\nhidden = {}\nheads = {}\nseq_len = "
             "{}\n"
             "{}global_batch = {}\nffn_hidden = {}\ntied_embeddings = {}\n",
             name.str(), m.layers, m.hidden, m.heads, m.seq_len,
             m.HasVocabulary() ? fmt::format("vocab = {}\n", m.vocab) : "", m.global_batch, m.MlpWidth(),
             m.tied_embeddings ? "true" : "false") +
         LateShapeFields(m);
}

namespace {

std::string SlurmStepName(const std::string& trial_id) {
  return "tunepar:" + trial_id;
}

// Output that means MPI or Slurm could not start the ranks (not the layout's fault).
const std::regex kLaunchFailure(
    "(mpirun was unable to|ORTE (was unable|has lost)|PMIX? ?ERROR|PMIx_Init failed|srun: error: Unable to "
    "create "
    "step|Job step creation temporarily disabled|srun: error: .*(Connection refused|Socket timed out)|"
    "An ORTE daemon has unexpectedly failed)",
    std::regex::icase);

// The launcher's own report of a rank that ended badly (srun: "srun: error: n1: task 0:
// Segmentation fault"; mpirun: "mpirun noticed that process rank 1 ... exited on signal 11"),
// not of the ranks it then ended itself.
const std::regex kRankEnded("(srun: error: \\S+: tasks? [0-9,-]+: (?!Terminated)|mpirun noticed that process rank)");

// The first line of the file at `path` that `pattern` finds, trimmed; "" when none.
std::string FirstLineMatching(const std::string& path, const std::regex& pattern) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    if (std::regex_search(line, pattern)) return Trim(line);
  }
  return "";
}

// The core's result.json, read through its format (core/result_format.h). NotFound: there is
// none; InvalidArgument: it cannot be read, the message says why (to follow "result.json").
Result<core::CoreResult> ReadCoreResult(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("does not exist");
  std::ostringstream text;
  text << in.rdbuf();
  return core::ParseCoreResult(text.str());
}

class CoreTrial : public ProcessTrial {
 public:
  CoreTrial(const CoreBackend& backend, Layout layout, TrialPlan plan, TrialContext context, ProcessOptions process)
      : ProcessTrial({std::string(backend.Name()), backend.options().timeout_s, backend.options().stop_grace_s, "rank"},
                     std::move(process)),
        backend_(backend),
        layout_(std::move(layout)),
        plan_(std::move(plan)),
        context_(std::move(context)) {}

  // Starts the ranks, without the result of an earlier launch.
  Status Launch() {
    std::error_code ec;
    std::filesystem::remove(context_.trial_dir + "/result.json", ec);
    return ProcessTrial::Launch();
  }

 private:
  std::optional<TrialResult> Classify(const ExitInfo& exit) override {
    details_["exit"] = ExitText(exit);
    if (plan_.sliced) {
      details_["slice"] = {{"measured_layout", LayoutKey(plan_.measured)}, {"measured_world", plan_.measured.World()}};
      sliced_ = true;  // whatever the outcome: it is the slice's
    }
    const Result<core::CoreResult> written = ReadCoreResult(context_.trial_dir + "/result.json");
    // The core's own last word, not a teardown stage it reached after it.
    const std::string last = Shorten(LastLine(process().log_path, core::kTeardownMarker));
    if (written.ok()) {
      if (std::optional<TrialResult> result = FromCoreResult(*written, exit)) return result;
    } else if (written.status().code() != StatusCode::kNotFound) {
      // Another build of the core, or a damaged file: the exit code decides, the message says why.
      const std::string damaged = "tunepar-core's result.json " + written.status().message() +
                                  ": another build of the core, or a damaged result";
      details_["result_error"] = damaged;
      if (!exit.signaled && exit.code == 0) return Finish(TrialStatus::kCrash, damaged);
    }
    if (!exit.signaled && exit.code == 2) return Finish(TrialStatus::kInvalid, "tunepar-core rejected the trial: " + last);
    if (!exit.signaled && exit.code == 3) return Finish(TrialStatus::kOom, last);
    if (LaunchFailed(exit)) return AfterLaunchFailure();
    return Finish(TrialStatus::kCrash, CrashMessage(exit, last));
  }

  // A launch that failed (LaunchFailed) says nothing of the layout: it is launched once more, the
  // first launch's log kept beside the trial's (output.launch1.log); a second failure is a crash
  // that says so. Nullopt: launched again.
  std::optional<TrialResult> AfterLaunchFailure() {
    const std::string& log = process().log_path;
    std::string why = FirstLineMatching(log, kLaunchFailure);
    if (why.empty()) why = FirstLineMatching(log, kRankEnded);
    if (why.empty()) why = LastLine(log, core::kTeardownMarker);
    why = Shorten(why);
    if (++launches_ < 2) {
      details_["launch_retried"] = why;
      std::error_code ec;
      std::filesystem::rename(log, context_.trial_dir + "/output.launch1.log", ec);
      if (Launch().ok()) return std::nullopt;
    }
    return Finish(TrialStatus::kCrash,
                  fmt::format("the ranks could not be launched{}: {}", launches_ > 1 ? " (twice)" : "", why));
  }

  // The outcome the core's result.json states (nullopt: it states none that decides).
  std::optional<TrialResult> FromCoreResult(const core::CoreResult& result, const ExitInfo& exit) {
    details_["core"] = {{"status", std::string(core::ToString(result.status))}, {"version", result.version}};
    if (!result.comm.empty()) details_["comm"] = result.comm;  // as the core chose it for the placement
    if (result.memory) details_["memory"] = core::ToJson(*result.memory);
    if (!result.phases.empty()) details_["phases"] = core::ToJson(result.phases);
    if (result.startup) details_["startup"] = core::ToJson(*result.startup);  // process start to first step
    if (!result.placement.empty()) ReadPlacement(result.placement);
    const auto said = [&](const char* otherwise) {
      return result.error.empty() ? std::string(otherwise) : result.error;
    };
    switch (result.status) {
      case core::CoreStatus::kOom:
        if (result.memory) metrics_.peak_memory_bytes = result.memory->peak_bytes;
        return Finish(TrialStatus::kOom, said("out of memory"));
      case core::CoreStatus::kNoDevice: return Finish(TrialStatus::kInvalid, said("no device"));
      // The core's own verdicts with its one line: a device, library or NCCL call failed; a
      // layout this machine cannot run (e.g. more ranks per node than devices with --comm nccl).
      case core::CoreStatus::kCrash: return Finish(TrialStatus::kCrash, said("a device call failed"));
      case core::CoreStatus::kInvalid:
        return Finish(TrialStatus::kInvalid, said("tunepar-core rejected the trial"));
      case core::CoreStatus::kDiverged: return Finish(TrialStatus::kCrash, "the loss diverged (non-finite)");
      case core::CoreStatus::kOk:
        if (exit.code == 0 && !exit.signaled) return Measured(result);
        return std::nullopt;
    }
    return std::nullopt;
  }

  // The core writes result.json once, at its end (whole: it parses): the trial's outcome is
  // decided from there on, whatever its teardown does.
  bool ResultWritten() const override {
    return ReadCoreResult(context_.trial_dir + "/result.json").status().code() != StatusCode::kNotFound;
  }

  // A core that never wrote its result: the last stage its log shows, so a hang says where.
  std::string TimeoutNote() const override {
    if (ResultWritten()) return "";
    const std::string last = Shorten(LastLine(process().log_path));
    return last.empty() ? " before writing its result, with nothing in its log"
                        : " before writing its result; its log's last line: " + last;
  }

  // Whether the ranks never all started: the run ended badly before the core said that every
  // rank had joined MPI (core_log.h kJoinedLine), and the launcher said it could not start them
  // or the core said nothing at all (a rank died in MPI's start-up: Open MPI 4.1's TCP transport
  // does that now and then when two ranks of a node connect to each other at once).
  bool LaunchFailed(const ExitInfo& exit) const {
    if (!exit.signaled && exit.code == 0) return false;
    std::ifstream in(process().log_path, std::ios::binary);
    std::string line;
    bool launcher_said = false, core_said = false, joined = false;
    while (std::getline(in, line)) {
      if (std::regex_search(line, kLaunchFailure)) launcher_said = true;
      if (line.find("tunepar-core") != std::string::npos) core_said = true;
      if (line.find(core::kJoinedLine) != std::string::npos) joined = true;
    }
    return !joined && (launcher_said || !core_said);
  }

  void ReadPlacement(const std::vector<core::RankPlacement>& placement) {
    std::vector<std::string> hosts;
    for (const core::RankPlacement& p : placement) {
      if (std::find(hosts.begin(), hosts.end(), p.host) == hosts.end()) hosts.push_back(p.host);
      if (backend_.options().launcher == Launcher::kSlurm && placement_error_.empty())
        placement_error_ = CheckPlacement(backend_.hardware(), p.rank, p.local_rank, p.cpus);
    }
    details_["placement"] = core::ToJson(placement);
    hosts_ = fmt::format("{}", fmt::join(hosts, ","));
  }

  std::optional<TrialResult> Measured(const core::CoreResult& result) {
    if (!placement_error_.empty()) return Finish(TrialStatus::kInvalid, "placement: " + placement_error_);
    double step = result.step_time_s.value_or(0);  // an ok result holds one (FromJson)
    std::string message = fmt::format("measured {} steps after {} warm-up", result.steps, result.warmup);
    if (plan_.sliced) {
      const double added = backend_.SliceCorrection(layout_, plan_.measured);
      details_["slice"]["measured_step_time_s"] = step;
      details_["slice"]["dp_comm_added_s"] = added;
      message = fmt::format(
          "sliced: measured {} on {} ranks ({:.4g} s/step), plus {:.3g} s of exposed DP "
          "communication for dp {} from the performance model",
          LayoutKey(plan_.measured), plan_.measured.World(), step, added, layout_.dp);
      step += added;
    }
    if (!(step > 0) || !std::isfinite(step)) return Finish(TrialStatus::kInvalid, "no step time measured");
    MeasuredStepTime(backend_.model(), step, layout_.World());
    message += DevicesUnlikeTheProfile(result);
    if (result.memory) metrics_.peak_memory_bytes = result.memory->peak_bytes;
    objective_ = step;
    return Finish(TrialStatus::kOk, message);
  }

  // A GPU node that shows another number of devices than the hardware profile says: said on the
  // trial (its ranks shared devices the profile counts as separate, or left some idle), and kept
  // in its details. Nothing for the CPU build, whose one "device" is the host.
  std::string DevicesUnlikeTheProfile(const core::CoreResult& result) {
    const std::optional<int> shown = result.devices_per_node;
    if (backend_.options().build == core::CoreBuild::kCpu || !shown || *shown == backend_.hardware().gpus_per_node)
      return "";
    const int devices = *shown;
    details_["devices"] = {{"node_shows", devices}, {"profile_says", backend_.hardware().gpus_per_node}};
    return fmt::format("; the node shows {} device(s), hardware profile {} says {} per node", devices,
                       backend_.hardware().name, backend_.hardware().gpus_per_node);
  }

  const CoreBackend& backend_;
  Layout layout_;
  TrialPlan plan_;
  TrialContext context_;
  std::string placement_error_;
  int launches_ = 0;
};

}  // namespace

CoreBackend::CoreBackend(CoreBackendOptions options, ModelShape model, HardwareProfile hardware)
    : options_(std::move(options)), model_(std::move(model)), hardware_(std::move(hardware)) {}

TrialPlan CoreBackend::Plan(const Layout& layout) const {
  TrialPlan plan;
  plan.measured = layout;
  const bool fits = layout.World() <= options_.capacity;
  if (options_.slice == SliceMode::kNever || (options_.slice == SliceMode::kAuto && fits)) {
    if (!fits) {
      plan.error =
          fmt::format("{} needs {} ranks; this {} holds {}", LayoutKey(layout), layout.World(),
                      options_.launcher == Launcher::kSlurm ? "allocation" : "machine", options_.capacity);
    }
    return plan;
  }
  const int replica = layout.tp * layout.cp * layout.pp;  // one data-parallel replica: its tp, cp and pp ranks
  int dp = std::min(layout.dp, 2);
  while (dp > 1 && replica * dp > options_.capacity) --dp;
  if (replica * dp > options_.capacity) {
    plan.error = fmt::format("one replica of {} needs {} ranks; only {} are available",
                             LayoutKey(layout), replica, options_.capacity);
    return plan;
  }
  plan.measured.dp = dp;
  plan.sliced = dp != layout.dp;
  // A slice of one or two replicas is one shard group: hybrid sharding's replicas are what it
  // leaves out (their all-reduce is in the correction).
  if (plan.sliced) plan.measured.dp_replicate = 1;
  return plan;
}

double CoreBackend::SliceCorrection(const Layout& full, const Layout& slice) const {
  auto exposed = [&](const Layout& l) {
    ModelShape m = model_;
    m.global_batch = static_cast<int>(l.GlobalBatch());
    Result<PerformanceModel> pm = PerformanceModel::Create(m, hardware_);
    if (!pm.ok()) return 0.0;
    const Prediction p = pm->Predict(l);
    return p.time.dp_comm_exposed + p.time.weight_gather_exposed;  // ZeRO-3's gathers grow with dp too
  };
  return std::max(0.0, exposed(full) - exposed(slice));
}

std::string CoreBackend::LaunchCommand(const Layout& l, const std::string& dir,
                                       const std::string& trial_id) const {
  const int world = l.World();
  std::vector<std::string> words;
  if (options_.launcher == Launcher::kLocal) {
    words = {options_.mpirun, "-np", std::to_string(world)};
    if (geteuid() == 0) words.push_back("--allow-run-as-root");
    if (world > options_.cores) {
      words.insert(words.end(), {"--oversubscribe", "--bind-to", "none"});
    } else if (options_.build != core::CoreBuild::kCpu) {
      // A GPU rank binds itself to its share of the CPUs near its device (the core's --cpu-bind
      // auto, where sysfs says which), not to the next cores in line.
      words.insert(words.end(), {"--bind-to", "none"});
    } else {
      words.insert(words.end(),
                   {"--map-by", fmt::format("slot:PE={}", options_.cores / world), "--bind-to", "core"});
    }
  } else {
    const int nodes = (world + hardware_.gpus_per_node - 1) / hardware_.gpus_per_node;
    words = {options_.srun};
    for (const std::string& o : SrunOptions(hardware_, nodes, world)) words.push_back(o);
    words.insert(words.end(),
                 {"--job-name=" + SlurmStepName(trial_id), "--export=ALL", "bash", dir + "/rank.sh"});
  }
  words.insert(words.end(),
               {options_.core_binary, "--model", dir + "/model.toml", "--layout", LayoutKey(l),
                "--steps", std::to_string(options_.steps), "--warmup", std::to_string(options_.warmup),
                "--memory-cap", fmt::format("{:.0f}", hardware_.MemoryBytes()), "-o", dir + "/result.json"});
  int threads = options_.threads;
  if (threads == 0 && options_.launcher == Launcher::kLocal) threads = std::max(1, options_.cores / world);
  if (threads > 0) words.insert(words.end(), {"--threads", std::to_string(threads)});
  std::string command;
  for (const std::string& w : words) {
    if (!command.empty()) command += ' ';
    command += ShellQuote(w);
  }
  return command;
}

std::unique_ptr<RunningTrial> CoreBackend::Start(const Layout& layout, const TrialContext& context) {
  TrialPlan plan = Plan(layout);
  if (!plan.error.empty()) return UnstartedTrial(Name(), TrialStatus::kInvalid, plan.error);
  const std::string& dir = context.trial_dir;
  ModelShape shape = model_;
  shape.global_batch = static_cast<int>(plan.measured.GlobalBatch());
  ProcessOptions p;
  p.command = LaunchCommand(plan.measured, dir, context.trial_id);
  p.env = options_.env;
  // The core's teardown stages in the trial's log (lifecycle.h): where a rank that does not end stopped.
  p.env.emplace_back("TUNEPAR_CORE_TEARDOWN", "1");
  // The line after which a rank's death is the layout's business, not the launch's (core_log.h).
  p.env.emplace_back(core::kSayJoinedVariable, "1");
  std::vector<std::pair<std::string, std::string>> files = {{"model.toml", ModelToml(shape)}};
  if (options_.launcher == Launcher::kSlurm) {
    files.emplace_back("rank.sh", "#!/usr/bin/env bash\n# One rank of a tunepar trial (written by tunepar).\nset -e\n" +
                                      RankSetup(hardware_) + "exec \"$@\"\n");
    for (const auto& kv : ProfileEnvironment(hardware_)) p.env.push_back(kv);
    p.env.emplace_back("MASTER_ADDR", options_.master_addr);
    p.env.emplace_back("MASTER_PORT", std::to_string(options_.master_port));
  }
  p.log_path = dir + "/output.log";
  p.trial_id = context.trial_id;
  files.emplace_back("command.txt", p.command + "\n");
  std::string env_text;
  for (const auto& [k, v] : p.env) env_text += k + "=" + v + "\n";
  files.emplace_back("environment.txt", env_text);
  // Never through a link planted in the trial's folder.
  for (const auto& [name, text] : files) {
    if (Status written = WriteFileNoFollow(dir + "/" + name, text); !written.ok())
      return UnstartedTrial(Name(), TrialStatus::kCrash, "could not write the trial's files: " + written.message());
  }
  auto trial = std::make_unique<CoreTrial>(*this, layout, plan, context, std::move(p));
  if (Status s = trial->Launch(); !s.ok())
    return UnstartedTrial(Name(), TrialStatus::kCrash, "could not start the launcher: " + s.message());
  return trial;
}

int CancelSlurmSteps(const std::string& trial_id) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr || *job == '\0') return 0;
  FILE* list = popen(fmt::format("squeue -h -s -j {} -o '%i|%j' 2>/dev/null", ShellQuote(job)).c_str(), "r");
  if (list == nullptr) return 0;
  std::vector<std::string> steps;
  char line[1024];
  while (fgets(line, sizeof(line), list) != nullptr) {
    const std::string entry = Trim(line);
    const size_t bar = entry.find('|');
    if (bar != std::string::npos && entry.substr(bar + 1) == SlurmStepName(trial_id))
      steps.push_back(entry.substr(0, bar));
  }
  pclose(list);
  for (const std::string& step : steps) {
    (void)!std::system(fmt::format("scancel {} >/dev/null 2>&1", ShellQuote(step)).c_str());
  }
  return static_cast<int>(steps.size());
}

}  // namespace tunepar::runner
