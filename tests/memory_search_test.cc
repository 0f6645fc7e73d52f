// A search on a machine whose memory the performance model gets wrong in structure (activations
// take 1.6x what the model says) spends few trials running out of memory: the memory model
// learns from the peaks and OOMs, and an OOM condemns what needs more of everything.
#include <random>

#include <gtest/gtest.h>

#include "search/proposer.h"
#include "search/space.h"
#include "tests/test_support.h"
#include "tuner/study/problem.h"
#include "tuner/study/study_context.h"

namespace tunepar {
namespace {

struct SearchCount {
  int oom = 0;
  int ok = 0;
};

// 30 trials of the Bayesian search of `model` at `world` on frontier-mi250x, where a trial's
// true memory is the model's breakdown with the activations scaled by `activations`.
SearchCount SearchWithMisjudgedActivations(const std::string& model, int world, double activations, uint64_t seed) {
  const Result<Problem> problem = LoadProblem(model, "frontier-mi250x", "default");
  EXPECT_TRUE(problem.ok());
  const Result<search::SpaceEnumeration> space = search::EnumerateSpace(MakeSpaceQuery(*problem, world));
  EXPECT_TRUE(space.ok());
  const Result<runner::PerformanceModel> pm = runner::PerformanceModel::Create(problem->model, problem->hardware);
  EXPECT_TRUE(pm.ok());
  search::ProposerOptions o;
  o.device_memory_bytes = problem->hardware.MemoryBytes();
  o.seed = seed;
  const search::Proposer proposer(space->legal, [&](const Layout& l) { return PriorOf(pm->Predict(l)); }, o);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 0.02);
  std::vector<search::Outcome> history;
  SearchCount count;
  for (int k = 0; k < 30; ++k) {
    const std::vector<search::Proposal> next = proposer.Propose(history, 1);
    if (next.empty()) break;
    const runner::Prediction p = pm->Predict(next[0].layout);
    const double memory = p.memory.Total() + (activations - 1) * p.memory.activations;
    search::Outcome outcome{next[0].layout, TrialStatus::kOom, std::nullopt};
    if (memory <= o.device_memory_bytes) {
      outcome.status = TrialStatus::kOk;
      outcome.step_time_s = p.step_time_s * std::exp(noise(rng));
      outcome.peak_memory_bytes = memory;
      ++count.ok;
    } else {
      ++count.oom;
    }
    history.push_back(outcome);
  }
  return count;
}

TEST(MemorySearch, ActivationsAtOnePointSixTimesTheModelCostFewOomTrials) {
  for (const auto& [model, world] : std::vector<std::pair<std::string, int>>{
           {"gpt-22b", 256}, {"gpt-175b", 1024}, {"gpt-1t", 3072}}) {
    const SearchCount count = SearchWithMisjudgedActivations(model, world, 1.6, 1);
    EXPECT_LE(count.oom, 6) << model << "@" << world;
    EXPECT_GE(count.ok, 20) << model << "@" << world;
  }
}

}  // namespace
}  // namespace tunepar
