#include "tuner/study/reclassify_trials.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/provenance.h"
#include "tuner/study/trial_records.h"

namespace tunepar {

namespace {

bool Reclassifiable(const store::TrialRecord& t, const std::string& node) {
  const bool failed = t.status == TrialStatus::kCrash || t.status == TrialStatus::kOom ||
                      t.status == TrialStatus::kInvalid;
  std::error_code ec;
  return failed && t.node_id == node && !t.log_path.empty() && std::filesystem::exists(t.log_path, ec);
}

// The exit the trial recorded ("code 1", "signal 9" under "exit" in its details).
std::optional<runner::ExitInfo> RecordedExit(const store::TrialRecord& t) {
  const nlohmann::json details = nlohmann::json::parse(t.details, nullptr, false);
  if (!details.is_object() || !details.contains("exit") || !details["exit"].is_string()) return std::nullopt;
  return runner::ParseExitText(details["exit"].get<std::string>());
}

// The trial with its new outcome; its earlier outcomes kept in its details.
store::TrialRecord Reclassified(const store::TrialRecord& t, const runner::TrialResult& result) {
  store::TrialRecord r = WithResult(t, result);
  r.message = WithRoleMark(t, result.message);  // a confirmation's or re-run's mark kept
  if (t.role == TrialRole::kFirst) r.role = TrialRole::kReclassified;  // a confirmation or re-run stays one
  r.started_at = t.started_at;  // when it ran, not when it was read again
  r.finished_at = r.heartbeat_at = r.lease_expires_at = t.finished_at;
  r.backend = t.backend;
  r.hosts = t.hosts;
  nlohmann::json details = nlohmann::json::parse(r.details, nullptr, false);
  if (!details.is_object()) details = nlohmann::json::object();
  const nlohmann::json old = nlohmann::json::parse(t.details, nullptr, false);
  nlohmann::json history = old.is_object() && old.contains("reclassified_from") ? old["reclassified_from"]
                                                                                 : nlohmann::json::array();
  history.push_back({{"status", ToString(t.status)}, {"message", t.message}, {"until", UtcNow()}});
  details["reclassified_from"] = history;
  r.details = details.dump();
  return r;
}

}  // namespace

Result<int> ReclassifyFailedTrials(const GlobalOptions& global, StudySession& session,
                                   const runner::CommandBackend& backend) {
  const StudyContext& context = session.context;
  std::vector<store::TrialRecord> changed;
  int read = 0;
  for (const store::TrialRecord& t : session.trials) {
    if (!Reclassifiable(t, session.node_id())) continue;
    const std::optional<runner::ExitInfo> exit = RecordedExit(t);
    if (!exit) continue;
    runner::TrialContext trial;
    trial.trial_dir = std::filesystem::path(t.log_path).parent_path().string();
    trial.number = t.number;
    trial.attempt = t.attempt;
    trial.world = context.world;
    trial.gpus_per_node = context.problem.hardware.gpus_per_node;
    trial.model = &context.problem.model;
    const std::optional<runner::TrialResult> result = backend.Reclassify(t.log_path, *exit, trial);
    if (!result) continue;
    ++read;
    if (result->status == t.status && WithRoleMark(t, result->message) == t.message) continue;
    changed.push_back(Reclassified(t, *result));
    if (!global.json) {
      fmt::print("trial {}/{} {}: {} -> {}: {}\n", t.node_id, t.number, LayoutKey(t.layout), ToString(t.status),
                 ToString(result->status), result->message);
    }
  }
  TUNEPAR_RETURN_IF_ERROR(session.Record(changed));
  if (!global.json) {
    fmt::print("reclassified {} of {} failed {} read again from {} log{}{}\n", changed.size(), read,
               read == 1 ? "trial" : "trials", read == 1 ? "its" : "their", read == 1 ? "" : "s",
               changed.empty() ? "" : " (each changed trial keeps its earlier status in its details)");
  }
  return static_cast<int>(changed.size());
}

}  // namespace tunepar
