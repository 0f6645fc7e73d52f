// The `local` and `slurm` backends: each trial runs tunepar-core (runner/core) on the layout,
// launched by mpirun on this machine (`local`, oversubscribing when the world exceeds the
// cores) or as a job step of the current Slurm allocation (`slurm`: srun with the hardware
// profile's tasks, CPU masks, MPI plugin and environment, launch_environment.h).
//
// A trial's directory holds what reproduces it: command.txt (the exact command line),
// environment.txt, model.toml, rank.sh (slurm), output.log and result.json (the core's). The
// outcome comes from the core's result and exit status:
//   interrupted > timeout > the result's status (ok, oom; diverged -> crash; no_device ->
//   invalid) > exit 2 (the core rejected the layout: invalid) > exit 3 (oom) > a launch failure
//   (MPI or Slurm could not start the ranks: retried once, then crash) > crash.
// On Slurm every rank's CPU set is checked against the profile's mask for its local rank; a
// placement that contradicts the profile makes the trial `invalid`, not a slow measurement.
//
// Slice trials: a layout whose world the allocation cannot hold (or every layout, on request)
// is measured on a slice that keeps TP and PP and one or two data-parallel replicas; the
// performance model then adds the difference in exposed data-parallel communication between
// the full world and the slice. Sliced results say so in their message and details.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/backend.h"
#include "runner/core/supported_knobs.h"
#include "runner/hardware_profile.h"
#include "runner/performance_model.h"

namespace tunepar::runner {

enum class Launcher { kLocal, kSlurm };
enum class SliceMode { kNever, kAuto, kAlways };
Result<SliceMode> ParseSliceMode(std::string_view text);  // never | auto | always
std::string_view ToString(SliceMode mode);

struct CoreBackendOptions {
  Launcher launcher = Launcher::kLocal;
  std::string core_binary;  // a tunepar-core build
  // What core_binary runs as (its knobs): the hardware profile's build (tuner: FindCoreBinary).
  core::CoreBuild build = core::CoreBuild::kCpu;
  int steps = 5;            // measured steps per trial
  int warmup = 2;           // steps before measuring
  double timeout_s = 600;   // per trial, launch included
  double stop_grace_s = 5;  // SIGTERM before SIGKILL
  int capacity = 0;         // ranks a trial may use (local: 4 x cores; slurm: nodes x devices per node)
  int cores = 1;            // local: this machine's cores
  SliceMode slice = SliceMode::kNever;
  int threads = 0;  // per rank; 0: the core's default (local: cores / ranks when not oversubscribed)
  std::vector<std::pair<std::string, std::string>> env;  // added to every rank's environment
  std::string mpirun = "mpirun";
  std::string srun = "srun";
  std::string master_addr;  // slurm: the allocation's first node
  int master_port = 29500;
};

// What a trial measures for `layout`: the layout itself or its slice.
struct TrialPlan {
  Layout measured;
  bool sliced = false;
  std::string error;  // non-empty: the layout cannot be measured here
};

class CoreBackend : public Backend {
 public:
  CoreBackend(CoreBackendOptions options, ModelShape model, HardwareProfile hardware);

  std::string_view Name() const override { return options_.launcher == Launcher::kSlurm ? "slurm" : "local"; }
  std::unique_ptr<RunningTrial> Start(const Layout& layout, const TrialContext& context) override;

  TrialPlan Plan(const Layout& layout) const;
  // The shell command that runs `measured` with its outputs in `trial_dir` (a Slurm job step is
  // named after `trial_id`, so a later tunepar can cancel it).
  std::string LaunchCommand(const Layout& measured, const std::string& trial_dir,
                            const std::string& trial_id) const;
  // All of a trial's ranks on this machine (local; a slice's when the world is sliced), one per
  // GPU under Slurm (0).
  int RanksPerNode(int world) const override {
    if (options_.launcher != Launcher::kLocal) return 0;
    return options_.capacity > 0 ? std::min(world, options_.capacity) : world;
  }
  // The knobs of the tunepar-core build it launches for its model, and the models it trains
  // (runner/core/supported_knobs.h).
  Result<KnobSupport> SupportedKnobs(const SpaceSpec& space, int world) const override {
    return core::SupportedKnobs(options_.build, model_, space.Values(Knob::kPrecision, world));
  }
  Status SupportsModel(const ModelShape& model) const override { return core::SupportsModel(model); }
  // The seconds of exposed data-parallel communication the full layout adds over its slice.
  double SliceCorrection(const Layout& full, const Layout& slice) const;

  const CoreBackendOptions& options() const { return options_; }
  const HardwareProfile& hardware() const { return hardware_; }
  const ModelShape& model() const { return model_; }

 private:
  CoreBackendOptions options_;
  ModelShape model_;
  HardwareProfile hardware_;
};

// Inside a Slurm allocation: cancels the job steps named after `trial_id` (those a stopped
// tunepar left running); returns how many. Nothing outside an allocation.
int CancelSlurmSteps(const std::string& trial_id);

// The model as a TOML file tunepar-core reads.
std::string ModelToml(const ModelShape& model);

}  // namespace tunepar::runner
