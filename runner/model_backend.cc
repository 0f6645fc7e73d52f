#include "runner/model_backend.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/provenance.h"
#include "runner/compute_terms.h"

namespace tunepar::runner {

std::string PredictionJson(const Prediction& p, const ModelShape& model) {
  nlohmann::json terms = nlohmann::json::object();
  for (const NamedTerm& term : NamedComputeTerms(model, p.compute_terms)) terms[std::string(term.key)] = term.seconds;
  nlohmann::json j = {
      {"step_time_s", p.step_time_s},
      {"tokens_per_s", p.tokens_per_s},
      {"tflops_per_gpu", p.tflops_per_gpu},
      {"mfu", p.mfu},
      {"memory_bytes", p.memory_bytes},
      {"fits", p.fits},
      {"breakdown",
       {{"compute_s", p.time.compute},
        {"tp_comm_s", p.time.tp_comm},
        {"cp_comm_s", p.time.cp_comm},
        {"pp_p2p_s", p.time.pp_p2p},
        {"bubble_s", p.time.bubble},
        {"dp_comm_exposed_s", p.time.dp_comm_exposed},
        {"weight_gather_exposed_s", p.time.weight_gather_exposed},
        {"optimizer_s", p.time.optimizer},
        {"device_sharing_s", p.time.device_sharing}}},
      // breakdown.compute_s term by term (beside breakdown, whose values add up to the step time)
      {"compute_terms", terms},
      {"memory",
       {{"weights", p.memory.weights},
        {"gradients", p.memory.gradients},
        {"optimizer_states", p.memory.optimizer_states},
        {"activations", p.memory.activations},
        {"comm_buffers", p.memory.comm_buffers},
        {"runtime_overhead", p.memory.runtime_overhead},
        {"gathered_weights", p.memory.gathered_weights}}},
  };
  // A MoE model's all-to-alls (a dense model's details stay as they were).
  if (model.experts > 0) j["breakdown"]["moe_all_to_all_s"] = p.time.moe_all_to_all;
  return j.dump();
}

ModelBackend::ModelBackend(const PerformanceModel& model, double device_memory_gb)
    : model_(model), device_memory_gb_(device_memory_gb), host_(HostName()) {}

std::unique_ptr<RunningTrial> ModelBackend::Start(const Layout& layout,
                                                  const TrialContext& /*context*/) {
  return std::make_unique<FinishedTrial>(Evaluate(layout));
}

TrialResult ModelBackend::Evaluate(const Layout& layout) const {
  TrialResult r;
  r.backend = "model";
  r.hosts = host_;
  r.started_at = UtcNow();
  const Prediction p = model_.Predict(layout);
  r.details_json = PredictionJson(p, model_.model());
  r.metrics.peak_memory_bytes = p.memory_bytes;
  if (p.fits) {
    r.metrics.step_time_s = p.step_time_s;
    r.metrics.tokens_per_s = p.tokens_per_s;
    r.metrics.tflops_per_gpu = p.tflops_per_gpu;
    r.objective = p.step_time_s;
    r.status = TrialStatus::kOk;
    r.message = "predicted";
  } else {
    r.status = TrialStatus::kOom;
    r.message = fmt::format("predicted not to fit: {:.1f} GB needed, {:.1f} GB on the device",
                            p.memory_bytes / 1e9, device_memory_gb_);
  }
  r.finished_at = r.started_at;
  return r;
}

}  // namespace tunepar::runner
