// What the store keeps: studies (a search problem and its full configuration) and trials (one
// evaluated layout each, with status, metrics and provenance).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/layout.h"
#include "base/trial_role.h"
#include "base/trial_status.h"

namespace tunepar::store {

struct StudyRecord {
  std::string id;    // hash of (model, hardware, space, world, objective, backend settings)
  std::string name;  // what users type: `tunepar show NAME`
  int world = 0;
  std::string model_name, hardware_name, space_name;
  std::string model_toml, hardware_toml, space_toml;  // the full configs, canonical TOML
  std::string objective;                              // "max_tokens_per_s"
  std::string backend;                                // "model", "command", "local", "slurm"
  std::string backend_settings;                       // JSON object
  std::string created_at;                             // UTC, ISO 8601
  std::string created_by;                             // node id that created it
  // The search settings the proposals depend on (also in backend_settings, which the id hashes).
  int64_t seed = 0;
  std::string acquisition = "logei";  // "logei" or "ucb"
  std::string pinned_knobs;           // knob values the backend cannot run (PinnedKnobs: key fragments)

  bool operator==(const StudyRecord&) const = default;
};

struct TrialRecord {
  std::string study_id;
  std::string node_id;  // the shard that owns the row
  int64_t number = 0;   // per (study, node), from 1, in proposal order
  Layout layout;
  TrialStatus status = TrialStatus::kQueued;
  int attempt = 1;  // > 1 when an interrupted trial is re-run

  std::optional<double> step_time_s;
  std::optional<double> tokens_per_s;
  std::optional<double> tflops_per_gpu;
  std::optional<double> peak_memory_bytes;
  std::optional<double> objective;  // what the search minimises (the step time unless a custom metric)
  std::optional<double> predicted_step_time_s;  // the performance model's view of the layout
  std::optional<double> predicted_tokens_per_s;
  std::optional<double> predicted_memory_bytes;
  std::string details = "{}";  // JSON object: breakdowns, backend detail
  // Measured on a slice of the world (fewer data-parallel replicas), the rest from the model.
  bool sliced = false;
  // A custom metric as the program printed it (metric_kind "" when the objective is a step time).
  std::string metric_kind;
  std::optional<double> metric_value;
  // Ranks per node the trial was placed (and its prediction priced) with; 0: one per device;
  // nullopt: not known.
  std::optional<int> ranks_per_node;

  // Why it ran (base/trial_role.h); a re-run names the node whose trial it re-runs.
  TrialRole role = TrialRole::kFirst;
  std::string rerun_of;

  std::string message;
  std::string log_path;
  std::string backend;
  std::string hosts;
  std::string tunepar_version;
  std::string git_revision;
  std::string host;  // where the tuner that ran the trial was
  int64_t pid = 0;   // the tuner's process id
  int64_t process_group = 0;  // the trial's process group while it runs (0: none), to clean up after
  std::string started_at, finished_at, heartbeat_at, lease_expires_at;

  bool operator==(const TrialRecord&) const = default;
};

}  // namespace tunepar::store
