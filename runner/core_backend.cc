#include "runner/core_backend.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/provenance.h"
#include "runner/launch_environment.h"
#include "runner/log_text.h"
#include "runner/process_group.h"

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

std::string ModelToml(const search::ModelShape& m) {
  return fmt::format(
      "# written by tunepar for tunepar-core\nname = \"{}\"\nlayers = {}\nhidden = {}\nheads = {}\nseq_len = "
      "{}\n"
      "vocab = {}\nglobal_batch = {}\nffn_hidden = {}\ntied_embeddings = {}\n",
      m.name, m.layers, m.hidden, m.heads, m.seq_len, m.vocab, m.global_batch,
      m.ffn_hidden > 0 ? m.ffn_hidden : 4 * m.hidden, m.tied_embeddings ? "true" : "false");
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

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

class CoreTrial : public RunningTrial {
 public:
  CoreTrial(const CoreBackend& backend, search::Layout layout, TrialPlan plan, TrialContext context,
            ProcessOptions process)
      : backend_(backend),
        layout_(std::move(layout)),
        plan_(std::move(plan)),
        context_(std::move(context)),
        process_(std::move(process)),
        started_at_(UtcNow()) {}

  Status Launch() {
    start_ = std::chrono::steady_clock::now();
    std::error_code ec;
    std::filesystem::remove(context_.trial_dir + "/result.json", ec);
    Result<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Start(process_);
    if (!group.ok()) return group.status();
    group_ = std::move(*group);
    return Status::Ok();
  }

  std::optional<TrialResult> Poll() override {
    if (done_) return result_;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const CoreBackendOptions& o = backend_.options();
    if (elapsed > o.timeout_s) {
      group_->Stop(o.stop_grace_s);
      return Finish(
          search::TrialStatus::kTimeout,
          fmt::format("killed after the {:g} s timeout, with every rank of the trial", o.timeout_s));
    }
    const std::optional<ExitInfo> exit = group_->Poll();
    if (!exit) return std::nullopt;
    return Classify(*exit);
  }

  TrialResult Interrupt() override {
    if (done_) return *result_;
    group_->Stop(backend_.options().stop_grace_s);
    return *Finish(search::TrialStatus::kInterrupted, "stopped by tunepar (signal or shutdown)");
  }

  int64_t process_group() const override { return group_ ? group_->process_group() : 0; }

 private:
  std::optional<TrialResult> Finish(search::TrialStatus status, std::string message) {
    TrialResult r;
    r.status = status;
    r.message = std::move(message);
    r.backend = std::string(backend_.Name());
    r.hosts = hosts_.empty() ? HostName() : hosts_;
    r.log_path = process_.log_path;
    r.started_at = started_at_;
    r.finished_at = UtcNow();
    r.metrics = metrics_;
    r.objective = objective_;
    r.details_json = details_.dump();
    result_ = std::move(r);
    done_ = true;
    return result_;
  }

  std::optional<TrialResult> Classify(const ExitInfo& exit) {
    details_["exit"] = ExitText(exit);
    if (plan_.sliced) {
      details_["slice"] = {{"measured_layout", search::LayoutKey(plan_.measured)},
                           {"measured_world", plan_.measured.World()}};
    }
    std::ifstream in(context_.trial_dir + "/result.json");
    nlohmann::json core = nlohmann::json::parse(in, nullptr, false);
    const std::string last = Shorten(LastLine(process_.log_path));
    if (core.is_object() && core.contains("status")) {
      details_["core"] = {{"status", core["status"]}};
      if (core.contains("memory")) details_["memory"] = core["memory"];
      if (core.contains("phases")) details_["phases"] = core["phases"];
      if (core.contains("placement")) ReadPlacement(core["placement"]);
      const std::string status = core["status"];
      if (status == "oom") {
        if (core["memory"].contains("peak_bytes"))
          metrics_.peak_memory_bytes = core["memory"]["peak_bytes"].get<double>();
        return Finish(search::TrialStatus::kOom, core.value("error", "out of memory"));
      }
      if (status == "no_device")
        return Finish(search::TrialStatus::kInvalid, core.value("error", "no device"));
      if (status == "diverged") return Finish(search::TrialStatus::kCrash, "the loss diverged (non-finite)");
      if (status == "ok" && exit.code == 0 && !exit.signaled) return Measured(core);
    }
    if (!exit.signaled && exit.code == 2) {
      return Finish(search::TrialStatus::kInvalid, "tunepar-core rejected the trial: " + last);
    }
    if (!exit.signaled && exit.code == 3) return Finish(search::TrialStatus::kOom, last);
    if (LaunchFailed() && ++launches_ < 2) {
      details_["launch_retried"] = last;
      if (Status s = Launch(); s.ok()) return std::nullopt;
    }
    if (LaunchFailed())
      return Finish(search::TrialStatus::kCrash, "the ranks could not be launched: " + last);
    return Finish(search::TrialStatus::kCrash, CrashMessage(exit, last));
  }

  bool LaunchFailed() const {
    std::ifstream in(process_.log_path, std::ios::binary);
    std::string line;
    bool failure = false, core_ran = false;
    while (std::getline(in, line)) {
      if (std::regex_search(line, kLaunchFailure)) failure = true;
      if (line.find("tunepar-core") != std::string::npos) core_ran = true;
    }
    return failure && !core_ran;
  }

  void ReadPlacement(const nlohmann::json& placement) {
    std::vector<std::string> hosts;
    for (const nlohmann::json& p : placement) {
      const std::string host = p.value("host", "");
      if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
      if (backend_.options().launcher == Launcher::kSlurm && placement_error_.empty()) {
        placement_error_ = CheckPlacement(backend_.hardware(), p.value("rank", -1), p.value("local_rank", -1),
                                          p.value("cpus", std::string()));
      }
    }
    details_["placement"] = placement;
    hosts_ = fmt::format("{}", fmt::join(hosts, ","));
  }

  std::optional<TrialResult> Measured(const nlohmann::json& core) {
    if (!placement_error_.empty())
      return Finish(search::TrialStatus::kInvalid, "placement: " + placement_error_);
    const search::ModelShape& model = backend_.model();
    double step = core["step_time_s"].get<double>();
    std::string message =
        fmt::format("measured {} steps after {} warm-up", core.value("steps", 0), core.value("warmup", 0));
    if (plan_.sliced) {
      const double added = backend_.SliceCorrection(layout_, plan_.measured);
      details_["slice"]["measured_step_time_s"] = step;
      details_["slice"]["dp_comm_added_s"] = added;
      message = fmt::format(
          "sliced: measured {} on {} ranks ({:.4g} s/step), plus {:.3g} s of exposed DP "
          "communication for dp {} from the performance model",
          search::LayoutKey(plan_.measured), plan_.measured.World(), step, added, layout_.dp);
      step += added;
    }
    if (!(step > 0) || !std::isfinite(step))
      return Finish(search::TrialStatus::kInvalid, "no step time measured");
    metrics_.step_time_s = step;
    metrics_.tokens_per_s = static_cast<double>(model.global_batch) * model.seq_len / step;
    metrics_.tflops_per_gpu = ModelFlopsPerStep(model) / step / layout_.World() / 1e12;
    if (core.contains("memory")) metrics_.peak_memory_bytes = core["memory"]["peak_bytes"].get<double>();
    objective_ = step;
    return Finish(search::TrialStatus::kOk, message);
  }

  const CoreBackend& backend_;
  search::Layout layout_;
  TrialPlan plan_;
  TrialContext context_;
  ProcessOptions process_;
  std::unique_ptr<ProcessGroup> group_;
  std::chrono::steady_clock::time_point start_;
  std::string started_at_;
  std::string hosts_;
  std::string placement_error_;
  int launches_ = 0;
  nlohmann::json details_ = nlohmann::json::object();
  TrialMetrics metrics_;
  std::optional<double> objective_;
  bool done_ = false;
  std::optional<TrialResult> result_;
};

}  // namespace

CoreBackend::CoreBackend(CoreBackendOptions options, search::ModelShape model, HardwareProfile hardware)
    : options_(std::move(options)), model_(std::move(model)), hardware_(std::move(hardware)) {}

TrialPlan CoreBackend::Plan(const search::Layout& layout) const {
  TrialPlan plan;
  plan.measured = layout;
  const bool fits = layout.World() <= options_.capacity;
  if (options_.slice == SliceMode::kNever || (options_.slice == SliceMode::kAuto && fits)) {
    if (!fits) {
      plan.error =
          fmt::format("{} needs {} ranks; this {} holds {}", search::LayoutKey(layout), layout.World(),
                      options_.launcher == Launcher::kSlurm ? "allocation" : "machine", options_.capacity);
    }
    return plan;
  }
  const int replica = layout.tp * layout.pp;
  int dp = std::min(layout.dp, 2);
  while (dp > 1 && replica * dp > options_.capacity) --dp;
  if (replica * dp > options_.capacity) {
    plan.error = fmt::format("one replica of {} needs {} ranks; only {} are available",
                             search::LayoutKey(layout), replica, options_.capacity);
    return plan;
  }
  plan.measured.dp = dp;
  plan.sliced = dp != layout.dp;
  return plan;
}

double CoreBackend::SliceCorrection(const search::Layout& full, const search::Layout& slice) const {
  auto exposed = [&](const search::Layout& l) {
    search::ModelShape m = model_;
    m.global_batch = l.micro_batch * l.num_micro_batches * l.dp;
    Result<PerformanceModel> pm = PerformanceModel::Create(m, hardware_);
    return pm.ok() ? pm->Predict(l).time.dp_comm_exposed : 0.0;
  };
  return std::max(0.0, exposed(full) - exposed(slice));
}

std::string CoreBackend::LaunchCommand(const search::Layout& l, const std::string& dir,
                                       const std::string& trial_id) const {
  const int world = l.World();
  std::vector<std::string> words;
  if (options_.launcher == Launcher::kLocal) {
    words = {options_.mpirun, "-np", std::to_string(world)};
    if (geteuid() == 0) words.push_back("--allow-run-as-root");
    if (world > options_.cores) {
      words.insert(words.end(), {"--oversubscribe", "--bind-to", "none"});
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
               {options_.core_binary, "--model", dir + "/model.toml", "--layout", search::LayoutKey(l),
                "--steps", std::to_string(options_.steps), "--warmup", std::to_string(options_.warmup),
                "--memory-cap", fmt::format("{:.0f}", hardware_.MemoryBytes()), "-o", dir + "/result.json"});
  int threads = options_.threads;
  if (threads == 0 && options_.launcher == Launcher::kLocal) threads = std::max(1, options_.cores / world);
  if (threads > 0) words.insert(words.end(), {"--threads", std::to_string(threads)});
  std::string command;
  for (const std::string& w : words) command += (command.empty() ? "" : " ") + ShellQuote(w);
  return command;
}

std::unique_ptr<RunningTrial> CoreBackend::Start(const search::Layout& layout, const TrialContext& context) {
  TrialPlan plan = Plan(layout);
  auto fail = [&](search::TrialStatus status, std::string message) {
    TrialResult r;
    r.status = status;
    r.message = std::move(message);
    r.backend = std::string(Name());
    r.hosts = HostName();
    r.started_at = r.finished_at = UtcNow();
    return std::make_unique<FinishedTrial>(std::move(r));
  };
  if (!plan.error.empty()) return fail(search::TrialStatus::kInvalid, plan.error);
  const std::string& dir = context.trial_dir;
  search::ModelShape shape = model_;
  shape.global_batch = plan.measured.micro_batch * plan.measured.num_micro_batches * plan.measured.dp;
  WriteText(dir + "/model.toml", ModelToml(shape));
  ProcessOptions p;
  p.command = LaunchCommand(plan.measured, dir, context.trial_id);
  p.env = options_.env;
  if (options_.launcher == Launcher::kSlurm) {
    WriteText(dir + "/rank.sh",
              "#!/usr/bin/env bash\n# One rank of a tunepar trial (written by tunepar).\nset -e\n" +
                  RankSetup(hardware_) + "exec \"$@\"\n");
    for (const auto& kv : ProfileEnvironment(hardware_)) p.env.push_back(kv);
    p.env.emplace_back("MASTER_ADDR", options_.master_addr);
    p.env.emplace_back("MASTER_PORT", std::to_string(options_.master_port));
  }
  p.log_path = dir + "/output.log";
  p.trial_id = context.trial_id;
  WriteText(dir + "/command.txt", p.command + "\n");
  std::string env_text;
  for (const auto& [k, v] : p.env) env_text += k + "=" + v + "\n";
  WriteText(dir + "/environment.txt", env_text);
  auto trial = std::make_unique<CoreTrial>(*this, layout, plan, context, p);
  if (Status s = trial->Launch(); !s.ok()) {
    return fail(search::TrialStatus::kCrash, "could not start the launcher: " + s.message());
  }
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
