// The skeleton both process-running backends share (command: the user's program; local and
// slurm: tunepar-core): a trial whose processes run in a ProcessGroup, polled until they exit,
// killed as a whole on its timeout or when interrupted, and classified by the backend once they
// have exited. The result carries what every trial has: backend, hosts, log, times, metrics,
// objective, details.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "runner/backend.h"
#include "runner/process_group.h"

namespace tunepar::runner {

struct ProcessTrialLimits {
  std::string backend;      // the backend's name, for the result
  double timeout_s = 3600;  // from the (last) launch
  double stop_grace_s = 10; // SIGTERM before SIGKILL
  std::string processes = "process";  // what a timeout kills, for its message: "process" or "rank"
  // A program that has written its whole result (ResultWritten) but has not exited this long
  // after: its processes are stopped and the result recorded, with a note (a safety net for a
  // teardown that hangs; issue 29: every trial should exit by itself within this).
  double exit_grace_s = 10;
};

class ProcessTrial : public RunningTrial {
 public:
  std::optional<TrialResult> Poll() final;
  TrialResult Interrupt() final;
  int64_t process_group() const final { return group_ ? group_->process_group() : 0; }

 protected:
  ProcessTrial(ProcessTrialLimits limits, ProcessOptions process);

  // Starts the processes (again, for a retried launch); the timeout counts from here.
  Status Launch();
  // The outcome once the processes have exited: Finish(...), or nullopt after a new Launch().
  virtual std::optional<TrialResult> Classify(const ExitInfo& exit) = 0;
  // Whether the program has written a complete result that decides the trial (the safety net
  // above; false: the program's exit decides).
  virtual bool ResultWritten() const { return false; }
  // What a timed-out trial had not done yet, said after "killed after the N s timeout" (e.g. "
  // before it wrote result.json"); "" when there is nothing to add.
  virtual std::string TimeoutNote() const { return ""; }
  // The trial's result, with the fields every trial has.
  std::optional<TrialResult> Finish(TrialStatus status, std::string message);
  // The safety net's check (Poll): nullopt while it does not apply or the grace runs.
  std::optional<TrialResult> EndAfterItsResult();
  // Records a measured step time with its tokens/s and TFLOP/s per GPU (the peak memory stays).
  void MeasuredStepTime(const ModelShape& model, double step_time_s, int world);

  const ProcessOptions& process() const { return process_; }

  TrialMetrics metrics_;
  std::optional<double> objective_;
  std::optional<CustomMetric> metric_;
  bool sliced_ = false;
  std::string hosts_;  // "" = this host
  nlohmann::json details_ = nlohmann::json::object();

 private:
  ProcessTrialLimits limits_;
  ProcessOptions process_;
  std::unique_ptr<ProcessGroup> group_;
  std::chrono::steady_clock::time_point start_;
  std::string started_at_;
  std::optional<TrialResult> result_;
  std::optional<std::chrono::steady_clock::time_point> result_seen_;  // when ResultWritten() first held
  std::string note_;  // appended to the result's message (the safety net's)
};

// A trial that ended before it ran: it could not be launched as asked (`status` says how).
std::unique_ptr<RunningTrial> UnstartedTrial(std::string_view backend, TrialStatus status, std::string message);

// Tokens per second and model TFLOP/s per GPU of a step that took `step_time_s` on `world` GPUs.
TrialMetrics MetricsOfStepTime(const ModelShape& model, double step_time_s, int world);

}  // namespace tunepar::runner
