// What evaluating one layout produced: a status (failures are data) and, when it ran, metrics.
#pragma once

#include <optional>
#include <string>

#include "base/trial_status.h"

namespace tunepar::runner {

struct TrialMetrics {
  std::optional<double> step_time_s;        // wall clock per optimizer step
  std::optional<double> tokens_per_s;       // global batch * seq_len / step time
  std::optional<double> tflops_per_gpu;     // model FLOPs (no recompute) / step time / GPUs
  std::optional<double> peak_memory_bytes;  // per device, when known
};

// A metric of the program's own choosing, as it printed it (the command backend's --metric).
struct CustomMetric {
  std::string kind;  // "higher", "lower", "tokens_per_s", ... (MetricKind)
  double value = 0;
};

struct TrialResult {
  TrialStatus status = TrialStatus::kCrash;
  TrialMetrics metrics;
  // What the search minimises: the step time in seconds, or for a custom metric its value
  // (lower is better) or its inverse (higher is better). Set for ok trials.
  std::optional<double> objective;
  std::optional<CustomMetric> metric;  // the metric read from the output, when it is not a step time
  // Measured on a slice of the world (fewer data-parallel replicas), the rest from the model.
  bool sliced = false;
  std::string message;       // why it failed, or a note ("predicted by model v0")
  std::string details_json;  // backend-specific detail (breakdowns), a JSON object
  std::string log_path;      // "" when the backend writes no log
  std::string backend;       // "model", "command", "local", "slurm"
  std::string hosts;         // where it ran
  std::string started_at;
  std::string finished_at;
};

}  // namespace tunepar::runner
