// Noise that is measured, not ignored: on a machine whose measurements spread 10% either way
// and whose three fastest layouts are within 3% of each other, the search re-measures the
// leaders (confirmation trials, in the budget) and names the true best, with its uncertainty.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "tests/test_support.h"
#include "tuner/loops/bayesian_search.h"

namespace tunepar {
namespace {

using testing::TempDir;

// Every measurement: the layout's true step time times a factor uniform in [0.9, 1.1].
class NoisyBackend : public runner::Backend {
 public:
  NoisyBackend(std::map<std::string, double> truth, uint64_t seed) : truth_(std::move(truth)), rng_(seed) {}
  std::string_view Name() const override { return "noisy"; }
  std::unique_ptr<runner::RunningTrial> Start(const Layout& l, const runner::TrialContext&) override {
    runner::TrialResult r;
    r.backend = "noisy";
    r.started_at = r.finished_at = "2026-11-23T00:00:00Z";
    r.status = TrialStatus::kOk;
    r.metrics.step_time_s = r.objective = truth_.at(LayoutKey(l)) * std::uniform_real_distribution(0.9, 1.1)(rng_);
    return std::make_unique<runner::FinishedTrial>(r);
  }

 private:
  std::map<std::string, double> truth_;
  std::mt19937_64 rng_;
};

// The truth: the model's step times, except that its 2nd, 4th and 6th fastest layouts are the
// three fastest (1 s, then 1.03 s twice: the model ranks them in another order), and every other
// layout takes at least 1.12 s. Returns the true best.
std::string MakeTruth(const StudyContext& c, std::map<std::string, double>* truth) {
  std::vector<std::pair<double, std::string>> ranked;
  for (const Layout& l : c.space.legal) ranked.emplace_back(c.Predict(l).step_time_s, LayoutKey(l));
  std::sort(ranked.begin(), ranked.end());
  const double unit = ranked.front().first;
  for (const auto& [step, key] : ranked) (*truth)[key] = std::max(1.12, step / unit);
  (*truth)[ranked[3].second] = 1.0;
  (*truth)[ranked[1].second] = 1.03;
  (*truth)[ranked[5].second] = 1.03;
  return ranked[3].second;
}

TEST(NoisySearch, ConfirmationTrialsNameTheTrueBestWithItsUncertainty) {
  int right = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    TempDir dir;
    const std::string space = dir / "space.toml";
    std::ofstream(space) << "name = \"small\"\n[knobs]\ntp = \"divisors\"\npp = \"divisors\"\nmicro_batch = [1, 2, 4]\n"
                            "precision = [\"bf16\", \"fp16\"]\nrecompute = [\"none\", \"full\"]\nzero = [0, 1]\n";
    GlobalOptions global;
    global.store = dir / "store";
    global.json = true;
    SessionRequest r;
    r.model = "tiny";
    r.hardware = testing::kTestCpu;
    r.space = space;
    r.world = 2;
    r.settings.backend = "noisy";
    r.settings.seed = static_cast<int64_t>(seed);
    r.node_id = "n0";
    Result<StudySession> session = OpenStudySession(global, r);
    ASSERT_TRUE(session.ok()) << session.status().message();
    std::map<std::string, double> truth;
    const std::string best = MakeTruth(session->context, &truth);
    NoisyBackend backend(truth, seed);
    BayesianSearchOptions o;
    o.budget = 90;
    o.confirmations = 60;
    BayesianSearch search(global, *session, backend, o);
    ASSERT_TRUE(search.Run().ok());
    const search::Standing standing = search.Standing();
    ASSERT_TRUE(standing.best.has_value());
    right += LayoutKey(*standing.best) == best;
    // Its uncertainty: about the noise (a uniform 10% spread has sd 5.8%) over the root of the
    // measurements of it, and the noise itself learned from the repeats.
    EXPECT_GE(standing.measurements, 2) << seed;
    EXPECT_GT(standing.sd, 0.005) << seed;
    EXPECT_LT(standing.sd, 0.05) << seed;
    EXPECT_GT(standing.noise_sd, 0.01) << seed;
    EXPECT_LT(standing.noise_sd, 0.12) << seed;
    const std::vector<store::TrialRecord>& trials = session->trials;
    EXPECT_GT(std::count_if(trials.begin(), trials.end(),
                            [](const store::TrialRecord& t) { return t.role == TrialRole::kConfirmation; }),
              0)
        << seed;
  }
  EXPECT_GE(right, 8);
}

}  // namespace
}  // namespace tunepar
