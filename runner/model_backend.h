// The `model` backend: "evaluates" a layout with the performance model. A dry run at any scale;
// a layout predicted not to fit is an `oom` trial (with its predicted memory, and no throughput:
// it would not run).
#pragma once

#include <string>

#include "runner/backend.h"
#include "runner/hardware_profile.h"
#include "runner/performance_model.h"
#include "runner/trial_result.h"

namespace tunepar::runner {

class ModelBackend : public Backend {
 public:
  explicit ModelBackend(const PerformanceModel& model, double device_memory_gb);

  std::string_view Name() const override { return "model"; }
  std::unique_ptr<RunningTrial> Start(const Layout& layout, const TrialContext& context) override;
  // The prediction as a trial result (what Start returns, without the context).
  TrialResult Evaluate(const Layout& layout) const;

 private:
  const PerformanceModel& model_;
  double device_memory_gb_;
  std::string host_;
};

// The prediction as a JSON object: step_time_s, tokens_per_s, tflops_per_gpu, mfu,
// memory_bytes, fits, breakdown {...seconds}, compute_terms {...seconds, named for `model`'s
// terms}, memory {...bytes}.
std::string PredictionJson(const Prediction& prediction, const ModelShape& model);

}  // namespace tunepar::runner
