#include "runner/process_trial.h"

#include <filesystem>

#include <fmt/format.h>

#include "base/flops.h"
#include "base/provenance.h"

namespace tunepar::runner {

ProcessTrial::ProcessTrial(ProcessTrialLimits limits, ProcessOptions process)
    : limits_(std::move(limits)), process_(std::move(process)), started_at_(UtcNow()) {
  // Both backends keep the log in the trial's directory; the process record goes beside it,
  // where a resumed tunepar looks for it (ProcessRecordPath of the trial's directory).
  if (process_.record_path.empty() && !process_.log_path.empty())
    process_.record_path = ProcessRecordPath(std::filesystem::path(process_.log_path).parent_path().string());
}

Status ProcessTrial::Launch() {
  start_ = std::chrono::steady_clock::now();
  Result<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Start(process_);
  if (!group.ok()) return group.status();
  group_ = std::move(*group);
  return Status::Ok();
}

std::optional<TrialResult> ProcessTrial::Poll() {
  if (result_) return result_;
  if (const std::optional<ExitInfo> exit = group_->Poll()) return Classify(*exit);
  if (std::optional<TrialResult> ended = EndAfterItsResult()) return ended;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (elapsed > limits_.timeout_s) {
    group_->Stop(limits_.stop_grace_s);
    // "Every process" only once it is checked that none is left.
    const std::vector<pid_t> survivors = group_->Survivors();
    const std::string killed = fmt::format("killed after the {:g} s timeout{}", limits_.timeout_s, TimeoutNote());
    return Finish(TrialStatus::kTimeout, survivors.empty()
                                             ? fmt::format("{}, with every {} of the trial", killed, limits_.processes)
                                             : fmt::format("{}; {}", killed, SurvivorsText(survivors)));
  }
  return std::nullopt;
}

// The safety net: a result written, and no exit within the grace: its processes stopped, and the
// trial classified from its result as if it had exited 0, with a note saying so.
std::optional<TrialResult> ProcessTrial::EndAfterItsResult() {
  if (!ResultWritten()) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  if (!result_seen_) result_seen_ = now;
  const double waited = std::chrono::duration<double>(now - *result_seen_).count();
  if (waited < limits_.exit_grace_s) return std::nullopt;
  group_->Stop(limits_.stop_grace_s);
  const std::string survivors = SurvivorsText(group_->Survivors());
  note_ = fmt::format("; it wrote its result but had not exited {:g} s later: its {}es were stopped by tunepar{}",
                      limits_.exit_grace_s, limits_.processes == "rank" ? "rank process" : "process",
                      survivors.empty() ? "" : " (" + survivors + ")");
  details_["ended_after_result"] = fmt::format("not exited {:g} s after writing its result; stopped", limits_.exit_grace_s);
  return Classify(ExitInfo{false, 0});
}

TrialResult ProcessTrial::Interrupt() {
  if (result_) return *result_;
  group_->Stop(limits_.stop_grace_s);
  const std::string survivors = SurvivorsText(group_->Survivors());
  return *Finish(TrialStatus::kInterrupted,
                 "stopped by tunepar (signal or shutdown)" + (survivors.empty() ? "" : "; " + survivors));
}

std::optional<TrialResult> ProcessTrial::Finish(TrialStatus status, std::string message) {
  TrialResult r;
  r.status = status;
  r.message = std::move(message) + note_;
  r.backend = limits_.backend;
  r.hosts = hosts_.empty() ? HostName() : hosts_;
  r.log_path = process_.log_path;
  r.started_at = started_at_;
  r.finished_at = UtcNow();
  r.metrics = metrics_;
  r.objective = objective_;
  r.metric = metric_;
  r.sliced = sliced_;
  r.details_json = details_.dump();
  result_ = std::move(r);
  return result_;
}

void ProcessTrial::MeasuredStepTime(const ModelShape& model, double step_time_s, int world) {
  const TrialMetrics measured = MetricsOfStepTime(model, step_time_s, world);
  metrics_.step_time_s = measured.step_time_s;
  metrics_.tokens_per_s = measured.tokens_per_s;
  metrics_.tflops_per_gpu = measured.tflops_per_gpu;
}

std::unique_ptr<RunningTrial> UnstartedTrial(std::string_view backend, TrialStatus status, std::string message) {
  TrialResult r;
  r.status = status;
  r.message = std::move(message);
  r.backend = std::string(backend);
  r.hosts = HostName();
  r.started_at = r.finished_at = UtcNow();
  return std::make_unique<FinishedTrial>(std::move(r));
}

TrialMetrics MetricsOfStepTime(const ModelShape& model, double step_time_s, int world) {
  TrialMetrics m;
  m.step_time_s = step_time_s;
  m.tokens_per_s = model.TokensPerStep() / step_time_s;
  m.tflops_per_gpu = ModelTflopsPerGpu(model, step_time_s, world);
  return m;
}

}  // namespace tunepar::runner
