// Calibration: fits a hardware profile's efficiency parameters to measured runs by least
// squares on the log of step time (NLopt BOBYQA inside each parameter's physical range,
// several deterministic restarts), so that one profile explains every run with no per-run
// constants.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "runner/efficiency.h"
#include "runner/hardware_profile.h"
#include "runner/measured_runs.h"
#include "runner/performance_model.h"

namespace tunepar::runner {

struct RowFit {
  std::string label;
  std::string shape;  // the run's model dimensions, e.g. "L4 h256 a8 s128 V1024 B8"

  Layout layout;
  double measured_step_s = 0;
  double predicted_step_s = 0;
  double error = 0;  // predicted / measured - 1 (step time)
  double memory_gb = 0;
  bool fits = false;
};

struct CalibrationResult {
  Efficiency efficiency;
  std::vector<EfficiencyKey> fitted;
  std::vector<RowFit> rows;
  double mean_abs_error = 0;  // of step time, as a fraction
  double max_abs_error = 0;
  int evaluations = 0;
};

struct CalibrationOptions {
  std::vector<EfficiencyKey> free;  // the parameters to fit; the others keep the profile's values
  int restarts = 12;                // starts: the profile's values, then seeded random points
  unsigned seed = 1;
};

// The parameters worth fitting to these runs, at most one per four runs (fewer parameters
// generalise better): the GEMM efficiency always; then the intra-node link efficiency when some
// run communicates within a node (tp > 1, or dp or pp > 1 on one node); the network efficiency
// when some run spans nodes with dp or pp > 1; the memory efficiency; the GEMM roll-off; the
// link latency (with the link efficiency).
std::vector<EfficiencyKey> DefaultFitSet(const std::vector<MeasuredRun>& runs,
                                         const HardwareProfile& profile);

// The profile must hold every efficiency parameter (its values start the fit). Fails when a
// run's layout is not legal for its model.
Result<CalibrationResult> Calibrate(const std::vector<MeasuredRun>& runs, const HardwareProfile& profile,
                                    const CalibrationOptions& options);

// The rows as predicted with the given efficiencies (no fitting): for reports and benchmarks.
Result<std::vector<RowFit>> EvaluateRuns(const std::vector<MeasuredRun>& runs, const HardwareProfile& profile,
                                         const Efficiency& efficiency);

// Whether a fit found the hardware. It failed when a fitted parameter ended at a limit of its
// range that no real machine has (an efficiency at its floor, 0.05 of peak; a size, latency or
// overhead at its ceiling; an efficiency of 1.0 or a latency of 0 are physical and pass), or
// when the mean |error| of step time is above kMaxMeanAbsError. The reason then says what
// failed and its likely cause, judged from the numbers, first match: fewer runs than twice the
// parameters fitted; every prediction off by a common factor (a profile of another machine, or
// measurements in other units); an efficiency at its floor (the same, or runs that barely
// depend on it); else errors that differ from run to run.
inline constexpr double kMaxMeanAbsError = 0.25;

struct FitJudgement {
  bool failed = false;
  std::vector<EfficiencyKey> at_bound;  // fitted parameters at a non-physical end of their range
  // exp(mean log(predicted / measured)): the factor every prediction is off by, when they share one.
  double common_factor = 1;
  bool off_by_common_factor = false;  // every error has the same sign and about the same size
  std::string reason;  // "" when the fit passed; else one line: what failed, then the likely cause
};

FitJudgement JudgeFit(const CalibrationResult& result);

// The profile's TOML text with its [efficiency] and [calibration] tables replaced by the fit's
// values (fitted ones marked origin = "fitted" with the fit in their source); everything else in
// the text, comments included, is kept. A failed fit (JudgeFit) is recorded as failed, with its
// reason, in the fitted parameters' source and in a comment of [calibration].
std::string WriteCalibratedProfile(const std::string& profile_toml, const HardwareProfile& profile,
                                   const CalibrationResult& result, const std::string& data_name,
                                   const std::string& date);

}  // namespace tunepar::runner
