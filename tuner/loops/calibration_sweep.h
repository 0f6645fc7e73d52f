// `tunepar calibrate --backend local|slurm`: a sweep of tunepar-core over layouts of a model at
// one world size, measured on this machine or allocation, as the runs the calibration fits. The
// model is measured in several shapes (as given, twice the global batch, half the hidden size,
// twice the sequence), so that GEMM sizes, message sizes and attention vary. In each shape the
// layouts are spread over the (tp, pp, micro-batch) combinations first, then precision,
// recomputation and ZeRO (a deterministic choice), so every fitted parameter has runs that
// depend on it. The runs are also written as CSV (tunepar calibrate --from FILE refits them).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "runner/measured_runs.h"
#include "tuner/backends/core_backend_config.h"
#include "tuner/study/global_options.h"

namespace tunepar {

struct SweepOptions {
  std::string backend;  // "local" or "slurm"
  std::string model = "small";
  std::string hardware;  // the profile being calibrated
  int world = 4;
  int layouts = 24;      // how many layouts to measure, over all shapes
  int shapes = 4;        // shape variants of the model (1: the model as given)
  double timeout_s = 0;  // per run (0: the core backend's default)
  CoreFlags core;
  std::string runs_csv;  // where the measured runs go ("" = <store>/calibration/<...>.csv)
};

inline constexpr int kMaxSweepShapes = 4;

// The model as given, then with twice the global batch, half the hidden size (and heads), and
// twice the sequence length: the first `count` of these (a variant that cannot be made is skipped).
std::vector<ModelShape> ShapeVariants(const ModelShape& model, int count);

// Runs the sweep (progress on stdout unless --json); the ok runs, in order. Failed runs (OOM,
// crash, timeout) are reported and left out of the fit.
Result<std::vector<runner::MeasuredRun>> RunCalibrationSweep(const GlobalOptions& global,
                                                             const SweepOptions& o);

// Writes runs as the CSV that ParseMeasuredRuns reads.
std::string MeasuredRunsCsv(const std::vector<runner::MeasuredRun>& runs);

}  // namespace tunepar
