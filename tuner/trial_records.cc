#include "tuner/trial_records.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/provenance.h"
#include "tuner/trial_output.h"

namespace tunepar {

store::TrialRecord ToRecord(const std::string& study_id, const std::string& node_id, int64_t number,
                            const search::Layout& layout, const runner::TrialResult& r,
                            const runner::Prediction& predicted) {
  store::TrialRecord t;
  t.study_id = study_id;
  t.node_id = node_id;
  t.number = number;
  t.layout = layout;
  t.status = r.status;
  t.step_time_s = r.metrics.step_time_s;
  t.tokens_per_s = r.metrics.tokens_per_s;
  t.tflops_per_gpu = r.metrics.tflops_per_gpu;
  t.peak_memory_bytes = r.metrics.peak_memory_bytes;
  t.objective = r.objective;
  t.predicted_step_time_s = predicted.step_time_s;
  t.predicted_tokens_per_s = predicted.tokens_per_s;
  t.predicted_memory_bytes = predicted.memory_bytes;
  t.details = r.details_json.empty() ? "{}" : r.details_json;
  t.message = r.message;
  t.log_path = r.log_path;
  t.backend = r.backend;
  t.hosts = r.hosts;
  t.tunepar_version = std::string(Version());
  t.git_revision = std::string(GitRevision());
  t.host = HostName();
  t.pid = getpid();
  t.started_at = r.started_at;
  t.finished_at = r.finished_at;
  t.heartbeat_at = r.finished_at;
  t.lease_expires_at = r.finished_at;
  return t;
}

std::optional<double> ObjectiveOf(const store::TrialRecord& t) {
  if (t.status != search::TrialStatus::kOk) return std::nullopt;
  if (t.objective) return t.objective;
  return t.step_time_s;
}

std::vector<search::Outcome> History(const std::vector<store::TrialRecord>& trials) {
  std::vector<search::Outcome> history;
  for (const store::TrialRecord& t : trials) {
    if (!search::IsFinished(t.status) && t.status != search::TrialStatus::kRunning) continue;
    history.push_back({t.layout, t.status, ObjectiveOf(t), Sliced(t)});
  }
  return history;
}

}  // namespace tunepar
