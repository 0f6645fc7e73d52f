#include "tuner/study/study_context.h"

#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tunepar {

namespace {

search::AcquisitionKind AcquisitionOf(const store::StudyRecord& study) {
  return study.acquisition == "ucb" ? search::AcquisitionKind::kUpperConfidenceBound
                                    : search::AcquisitionKind::kLogExpectedImprovement;
}

Result<Problem> ProblemOf(const store::StudyRecord& study) {
  const std::string origin = "study " + study.name;
  Result<Problem> problem = ParseProblem({study.model_name, origin + " model", study.model_toml},
                                         {study.hardware_name, origin + " hardware", study.hardware_toml},
                                         {study.space_name, origin + " space", study.space_toml});
  if (!problem.ok()) return problem.status();
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(study.world, problem->hardware));
  return problem;
}

// The command a command study's trials ran, from its backend settings
// (tuner/cli/search_command.cc writes them); nullopt for the other backends.
std::optional<StudyProgram> ProgramOf(const store::StudyRecord& study) {
  if (study.backend != "command") return std::nullopt;
  const nlohmann::json settings = nlohmann::json::parse(study.backend_settings, nullptr, false);
  if (!settings.is_object() || !settings.contains("command") || !settings["command"].is_string()) return std::nullopt;
  return StudyProgram{settings["command"].get<std::string>(), settings.value("reads_layout_env", false)};
}

}  // namespace

search::PriorPrediction PriorOf(const runner::Prediction& p) {
  const runner::MemoryBreakdown& m = p.memory;
  return {p.step_time_s,
          p.memory_bytes,
          // FSDP's gathered weights are weight bytes: they share the weights' multiplier.
          {m.weights + m.gathered_weights, m.gradients, m.optimizer_states, m.activations, m.comm_buffers,
           m.runtime_overhead}};
}

search::PriorModel StudyContext::Prior() const {
  return [prior = model()](const Layout& l) { return PriorOf(prior.Predict(l)); };
}

int StudyContext::Nodes() const {
  const int per_node = PlacedRanksPerNode();
  return (world + per_node - 1) / per_node;
}

std::optional<Layout> StudyContext::ModelBest() const {
  std::optional<Layout> best;
  double best_step = 0;
  for (const Layout& l : space.legal) {
    const runner::Prediction p = Predict(l);
    if (p.fits && (!best || p.step_time_s < best_step)) {
      best = l;
      best_step = p.step_time_s;
    }
  }
  return best;
}

Result<StudyContext> MakeStudyContext(const store::StudyRecord& study, int ranks_per_node) {
  StudyContext c;
  c.study = study;
  c.program = ProgramOf(study);
  Result<Problem> problem = ProblemOf(study);
  if (!problem.ok()) return problem.status();
  c.problem = std::move(*problem);
  Result<KnobSupport> support = ParsePinnedKnobs(study.pinned_knobs);
  if (!support.ok()) return support.status().WithContext("study " + study.name);
  c.support = *support;
  if (const std::string none = KnobLeftWithoutValues(c.problem.space, c.support, study.world); !none.empty()) {
    return Status(StatusCode::kNoLegalLayout,
                  fmt::format("no legal layout for world {} with model {}: the {} backend cannot run the space's {}",
                              study.world, study.model_name, study.backend, none));
  }
  c.problem.space = Restrict(c.problem.space, c.support, study.world);
  c.world = study.world;
  Result<search::SpaceEnumeration> space = search::EnumerateSpace(c.Query());
  if (!space.ok()) return space.status();
  if (space->legal.empty()) return Status(StatusCode::kNoLegalLayout, search::ExplainEmpty(c.Query(), *space));
  c.space = std::move(*space);
  Result<runner::PerformanceModel> model = runner::PerformanceModel::Create(c.problem.model, c.problem.hardware);
  if (!model.ok()) return model.status();
  c.ranks_per_node = ranks_per_node;
  c.performance_model.emplace(std::move(*model));
  c.performance_model->set_ranks_per_node(ranks_per_node);
  search::ProposerOptions& po = c.proposer_options;
  po.acquisition = AcquisitionOf(study);
  po.device_memory_bytes = c.problem.hardware.MemoryBytes();
  po.tokens_per_step = c.problem.model.TokensPerStep();
  po.seed = static_cast<uint64_t>(study.seed);
  return c;
}

int PlacementOfTrials(const std::vector<store::TrialRecord>& trials) {
  std::map<int, int> uses;
  int latest = 0;
  for (const store::TrialRecord& t : trials) {
    if (!t.ranks_per_node) continue;
    ++uses[*t.ranks_per_node];
    latest = *t.ranks_per_node;
  }
  int placement = 0, most = 0;
  for (const auto& [ranks, count] : uses) {
    if (count > most || (count == most && ranks == latest)) {
      placement = ranks;
      most = count;
    }
  }
  return placement;
}

}  // namespace tunepar
