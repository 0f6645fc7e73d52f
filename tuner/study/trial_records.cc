#include "tuner/study/trial_records.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "base/provenance.h"

namespace tunepar {

store::TrialRecord NewTrialRecord(const TrialIdentity& id, const runner::Prediction& predicted,
                                  int ranks_per_node) {
  store::TrialRecord t;
  t.study_id = id.study_id;
  t.node_id = id.node_id;
  t.number = id.number;
  t.attempt = id.attempt;
  t.layout = id.layout;
  t.status = TrialStatus::kQueued;
  t.predicted_step_time_s = predicted.step_time_s;
  t.predicted_tokens_per_s = predicted.tokens_per_s;
  t.predicted_memory_bytes = predicted.memory_bytes;
  t.ranks_per_node = ranks_per_node;
  t.tunepar_version = std::string(Version());
  t.git_revision = std::string(GitRevision());
  t.host = HostName();
  t.pid = getpid();
  return t;
}

store::TrialRecord WithResult(store::TrialRecord t, const runner::TrialResult& r) {
  t.status = r.status;
  t.step_time_s = r.metrics.step_time_s;
  t.tokens_per_s = r.metrics.tokens_per_s;
  t.tflops_per_gpu = r.metrics.tflops_per_gpu;
  t.peak_memory_bytes = r.metrics.peak_memory_bytes;
  t.objective = r.objective;
  t.details = r.details_json.empty() ? "{}" : r.details_json;
  t.sliced = r.sliced;
  t.metric_kind = r.metric ? r.metric->kind : "";
  t.metric_value = r.metric ? std::optional<double>(r.metric->value) : std::nullopt;
  t.message = r.message;
  if (!r.log_path.empty()) t.log_path = r.log_path;
  t.backend = r.backend;
  t.hosts = r.hosts;
  if (t.started_at.empty()) t.started_at = r.started_at;  // a trial that ran keeps when it was started
  t.finished_at = r.finished_at;
  t.heartbeat_at = r.finished_at;
  t.lease_expires_at = r.finished_at;
  t.process_group = 0;  // it has ended: no process of it is left to clean up
  return t;
}

std::optional<double> ObjectiveOf(const store::TrialRecord& t) {
  if (t.status != TrialStatus::kOk) return std::nullopt;
  if (t.objective) return t.objective;
  return t.step_time_s;
}

namespace {

// Whether `t` is a probe: its role says so, or it re-runs a probe of the gone node it names.
bool IsProbe(const store::TrialRecord& t, const std::vector<store::TrialRecord>& trials) {
  if (t.role == TrialRole::kProbe) return true;
  if (t.role != TrialRole::kRerun) return false;
  return std::any_of(trials.begin(), trials.end(), [&](const store::TrialRecord& gone) {
    return gone.role == TrialRole::kProbe && gone.node_id == t.rerun_of && gone.study_id == t.study_id &&
           gone.layout == t.layout;
  });
}

}  // namespace

std::vector<search::Outcome> History(const std::vector<store::TrialRecord>& trials) {
  std::vector<search::Outcome> history;
  for (const store::TrialRecord& t : trials) {
    if (!IsFinished(t.status) && t.status != TrialStatus::kRunning) continue;
    history.push_back(
        {t.layout, t.status, ObjectiveOf(t), t.sliced, t.peak_memory_bytes, IsProbe(t, trials)});
  }
  return history;
}

std::string RoleMark(const store::TrialRecord& t) {
  if (t.role == TrialRole::kConfirmation) return " (again)";
  if (t.role == TrialRole::kProbe) return " (probe: past the predicted memory limit)";
  return "";
}

std::string WithRoleMark(const store::TrialRecord& t, const std::string& message) {
  if (t.role == TrialRole::kConfirmation) return "confirmation: " + message;
  if (t.role == TrialRole::kRerun) {
    const std::string mark = fmt::format(
        "re-run of a trial of node {} (its tuner is gone: heartbeat silent for the lease)", t.rerun_of);
    return message.empty() ? mark : mark + "; " + message;
  }
  return message;
}

void SettleTakenOverTrials(std::vector<store::TrialRecord>& trials) {
  for (const store::TrialRecord& rerun : trials) {
    if (rerun.role != TrialRole::kRerun) continue;
    const std::string& gone_node = rerun.rerun_of;
    for (store::TrialRecord& t : trials) {
      if (t.status != TrialStatus::kRunning || t.node_id != gone_node || t.study_id != rerun.study_id ||
          !(t.layout == rerun.layout))
        continue;
      t.status = TrialStatus::kInterrupted;
      t.message = fmt::format("its tuner is gone (heartbeat silent for the lease); re-run by node {} as trial {}",
                              rerun.node_id, rerun.number);
    }
  }
}

}  // namespace tunepar
