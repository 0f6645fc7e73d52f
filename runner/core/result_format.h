// The format of tunepar-core's result.json, as one struct: the core writes it (ToJson) and the
// runner reads it (FromJson, runner/core_backend.cc). Neither side names a key anywhere else.
//
//   {"version": 1, "status": "ok" | "oom" | "diverged" | "no_device" | "invalid" | "crash",
//    "error": one line, "model": {...}, "layout": KEY, "stage_layers": blocks per stage ([3, 4, 3]),
//    "comm": "nccl" | "mpi-staged" | ..., "world": N, "global_batch", "tokens_per_step", "devices_per_node",
//    "steps", "warmup", "step_time_s": median, "step_times_s", "tokens_per_s",
//    "model_flops_per_step", "tflops_per_gpu", "loss": [...], "loss_floor", "grad_norm",
//    "loss_scale", "skipped_steps", "mpi_wait", "data",
//    "phases": {"compute": {"max", "mean"}, "tp_comm", "pp_wait", "dp_comm", "optimizer"},
//    "memory": {"cap_bytes", "peak_bytes", "held_peak_bytes", "peak_by_category": {...},
//               "cap_why", "rank", "category"},
//    "placement": [{"rank", "host", "local_rank", "cpus", "cpu_binding", "device", "threads",
//                   "tp_rank", "pp_rank", "dp_rank", "slurm_step"}],
//    "startup": {"total_s", ...}, "versions": {...}, "gradient_check": {...}}
//
// `--core` may name an older or newer binary than the runner's: a result without "version" is
// version 1 (the format before the key existed, which version 1 keeps unchanged); one newer than
// kCoreResultVersion is refused with a message. Bump the version when a key changes meaning or a
// new key becomes required, and keep reading the older ones.
//
// FromJson never throws and never asserts: a missing, mistyped or unreadable key is a Status
// whose message names the key (the runner makes it the trial's message).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tunepar::core {

inline constexpr int kCoreResultVersion = 1;

enum class CoreStatus { kOk, kOom, kDiverged, kNoDevice, kInvalid, kCrash };
std::string_view ToString(CoreStatus status);  // "ok", "oom", "diverged", "no_device", "invalid", "crash"

// One phase of a step, in seconds per step: the slowest rank's and the mean over ranks.
struct PhaseSummary {
  double max = 0;
  double mean = 0;
};

// Memory as the core's allocator counted it: maxima over ranks (or, with oom, the failing rank's).
struct MemoryPeaks {
  std::optional<double> cap_bytes;  // null in JSON: no cap
  double peak_bytes = 0;
  double held_peak_bytes = 0;  // the bytes the buffers actually hold (16-bit storage)
  std::map<std::string, double> peak_by_category;
  std::string cap_why;          // "" unless the device's share bounds the cap
  std::optional<int> oom_rank;  // with oom: the rank that ran out ("rank")
  std::string oom_category;     // with oom: what it was allocating ("category")
};

// Where one rank ran.
struct RankPlacement {
  int rank = 0;
  std::string host;
  int local_rank = 0;
  std::string cpus;         // the rank's CPU list, "0-3,8"
  std::string cpu_binding;  // how its CPUs were chosen (--cpu-bind)
  std::string device;
  int threads = 0;
  int tp_rank = 0, pp_rank = 0, dp_rank = 0;
  std::string slurm_step;  // "JOB.STEP" under Slurm, else ""
};

// Process start to the first step, on the core's own clock: each stage's slowest rank.
struct StartupTimes {
  double total_s = 0;  // the slowest rank's process start to its first step
  double process_to_main_s = 0;
  double mpi_init_s = 0;
  double device_and_comm_s = 0;
  double model_setup_s = 0;
};

struct CoreResult {
  int version = kCoreResultVersion;
  CoreStatus status = CoreStatus::kCrash;
  std::string error;  // one line, when not ok ("" when none was given)

  // What ran (every status).
  nlohmann::json model = nlohmann::json::object();  // the model as the core read it, for people
  std::string layout;
  std::vector<int> stage_layers;  // blocks per pipeline stage, first to last ([] when not given)
  std::string comm;
  int world = 0;
  int64_t global_batch = 0;
  int64_t tokens_per_step = 0;
  std::optional<int> devices_per_node;  // as rank 0's node shows them

  // What the steps gave (ok, diverged). Loss and norms may hold non-finite values (null in JSON).
  int steps = 0;
  int warmup = 0;
  std::optional<double> step_time_s;  // required with ok
  std::vector<double> step_times_s;
  double tokens_per_s = 0;
  double model_flops_per_step = 0;
  double tflops_per_gpu = 0;
  std::vector<double> loss;
  std::optional<double> loss_floor;
  std::vector<double> grad_norm;
  std::optional<std::vector<double>> loss_scale;  // fp16 only
  std::optional<int> skipped_steps;               // fp16 only
  std::string mpi_wait;
  std::string data;
  std::map<std::string, PhaseSummary> phases;
  std::optional<MemoryPeaks> memory;
  std::vector<RankPlacement> placement;
  std::optional<StartupTimes> startup;
  std::map<std::string, std::string> versions;
  // --gradient-check (a test hook), as gradient_check.cc writes it; null when not run.
  nlohmann::json gradient_check;
};

nlohmann::json ToJson(const CoreResult& result);
nlohmann::json ToJson(const MemoryPeaks& memory);
nlohmann::json ToJson(const RankPlacement& placement);
nlohmann::json ToJson(const std::map<std::string, PhaseSummary>& phases);
nlohmann::json ToJson(const StartupTimes& startup);
nlohmann::json ToJson(const std::vector<RankPlacement>& placement);

// The result in `j`, or why it cannot be read: a message such as "says ok but holds no step time
// (step_time_s)" or "is version 3, newer than this tunepar reads (1)", to follow the file's name.
Result<CoreResult> FromJson(const nlohmann::json& j);
// JSON text (a whole result.json); text that does not parse is "is not JSON ...".
Result<CoreResult> ParseCoreResult(std::string_view text);
// One rank's placement (the core gathers them as JSON text).
Result<RankPlacement> PlacementFromJson(const nlohmann::json& j);

}  // namespace tunepar::core
