// How a layout is evaluated: a backend starts a trial and the tuner polls it. Backends never
// throw trial failures at the tuner: an OOM, a crash, a timeout or an interruption is a status
// in the TrialResult.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/knob_support.h"
#include "base/space_spec.h"
#include "base/status.h"
#include "runner/trial_result.h"
#include "base/layout.h"
#include "base/model_shape.h"

namespace tunepar::runner {

struct TrialContext {
  std::string
      trial_id;  // unique: "<study id>/<node>/<number>.<attempt>/<store hash>"; marks the trial's processes
  std::string trial_dir;  // where its log and artefacts go (created by the tuner)
  int64_t number = 0;     // the trial's number in this node's shard
  int attempt = 1;
  int world = 0;
  int gpus_per_node = 1;
  const ModelShape* model = nullptr;
  uint64_t seed = 0;
  // trial_dir is a shell expression that the shell expands ("$job_dir" in a launch script): a
  // template gets it in double quotes, never as a literal word.
  bool trial_dir_is_expression = false;
};

class RunningTrial {
 public:
  virtual ~RunningTrial() = default;
  // The result once the trial has ended (its own timeout included); nullopt while it runs.
  virtual std::optional<TrialResult> Poll() = 0;
  // Stops the trial now (all its processes) and returns it as `interrupted`.
  virtual TrialResult Interrupt() = 0;
  // The trial's process group (0 when it runs no process), recorded to clean up after a crash.
  virtual int64_t process_group() const { return 0; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view Name() const = 0;
  virtual std::unique_ptr<RunningTrial> Start(const Layout& layout, const TrialContext& context) = 0;
  // Ranks a trial of `world` ranks runs on one node, for the performance model's placement
  // (PerformanceModel::set_ranks_per_node); 0: one per GPU, as the hardware profile has it.
  virtual int RanksPerNode(int /*world*/) const { return 0; }
  // Which knob values its program runs and tells apart, for a study of `space` at `world`: the
  // study's space is restricted to them (base/knob_support.h). The one statement of a backend's
  // capabilities. An error when the program's inputs leave a knob undetermined.
  virtual Result<KnobSupport> SupportedKnobs(const SpaceSpec& /*space*/, int /*world*/) const { return KnobSupport{}; }
  // Whether its program can train `model` (its shape's features): checked when a study starts,
  // so a model the program cannot train is refused before a trial runs (kConfig, naming the field).
  virtual Status SupportsModel(const ModelShape& /*model*/) const { return Status::Ok(); }

  // Start, then poll until the trial ends.
  TrialResult Evaluate(const Layout& layout, const TrialContext& context);
};

// A trial that ended as soon as it started (the model backend, or a failure to launch).
class FinishedTrial : public RunningTrial {
 public:
  explicit FinishedTrial(TrialResult result) : result_(std::move(result)) {}
  std::optional<TrialResult> Poll() override { return result_; }
  TrialResult Interrupt() override { return result_; }

 private:
  TrialResult result_;
};

}  // namespace tunepar::runner
