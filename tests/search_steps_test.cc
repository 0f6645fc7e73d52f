// The steps of the Bayesian search loop (tuner/loops/bayesian_search.h), each called on its own over a
// real store and a backend whose trials end at once.
#include "tuner/loops/bayesian_search.h"

#include <gtest/gtest.h>

#include "tests/test_support.h"

namespace tunepar {
namespace {

using testing::TempDir;

// Trials that finish as soon as they start: ok with a step time that depends on the layout, or
// every one failing the same way.
class InstantBackend : public runner::Backend {
 public:
  std::string_view Name() const override { return "instant"; }
  std::unique_ptr<runner::RunningTrial> Start(const Layout& l, const runner::TrialContext&) override {
    ++started;
    runner::TrialResult r;
    r.backend = "instant";
    r.started_at = r.finished_at = "2026-11-23T00:00:00Z";
    if (fail) {
      r.status = TrialStatus::kCrash;
      r.message = "exit code 1; last output: no such file";
      return std::make_unique<runner::FinishedTrial>(r);
    }
    r.status = TrialStatus::kOk;
    r.metrics.step_time_s = r.objective = 1.0 + 0.1 * l.micro_batch + 0.05 * l.tp;
    return std::make_unique<runner::FinishedTrial>(r);
  }
  bool fail = false;
  int started = 0;
};

class SearchSteps : public ::testing::Test {
 protected:
  void SetUp() override {
    global_.store = dir_ / "store";
    global_.json = true;  // the steps print nothing but the JSON summary
    SessionRequest r;
    r.model = "tiny";
    r.hardware = testing::kTestCpu;
    r.space = "default";
    r.world = 2;
    r.settings.backend = "instant";
    r.node_id = "n0";
    Result<StudySession> session = OpenStudySession(global_, r);
    ASSERT_TRUE(session.ok()) << session.status().message();
    session_ = std::make_unique<StudySession>(std::move(*session));
  }

  // A trial of this node that a stopped tuner left running.
  void LeaveRunning(int64_t number, const Layout& layout) {
    store::TrialRecord r = NewTrialRecord({session_->study().id, "n0", number, 1, layout}, {}, 0);
    r.status = TrialStatus::kRunning;
    r.host = "elsewhere";
    ASSERT_TRUE(session_->Record({r}).ok());
  }

  BayesianSearchOptions Options(int budget, int batch = 1) {
    BayesianSearchOptions o;
    o.budget = budget;
    o.batch = batch;
    return o;
  }

  TempDir dir_;
  GlobalOptions global_;
  std::unique_ptr<StudySession> session_;
  InstantBackend backend_;
};

TEST_F(SearchSteps, RecoveryMarksThisNodesRunningTrialsInterruptedAndTheyRunFirst) {
  const Layout layout = session_->context.space.legal[3];
  LeaveRunning(1, layout);
  BayesianSearch search(global_, *session_, backend_, Options(4, 2));
  ASSERT_TRUE(search.JoinClaims().ok());
  Result<std::vector<store::TrialRecord>> recovered = search.RecoverInterrupted();
  ASSERT_TRUE(recovered.ok()) << recovered.status().message();
  ASSERT_EQ(recovered->size(), 1u);
  EXPECT_EQ(session_->trials[0].status, TrialStatus::kInterrupted);
  EXPECT_NE(session_->trials[0].message.find("its tuner (pid"), std::string::npos);
  // The next batch is the interrupted trial alone, as its second attempt under its own number
  // (its claim, left by the tuner that stopped, taken over).
  Result<BayesianSearch::NextBatch> next = search.ClaimNextBatch();
  ASSERT_TRUE(next.ok()) << next.status().message();
  ASSERT_EQ(next->trials.size(), 1u);
  const TrialIdentity& id = next->trials[0].first;
  EXPECT_EQ(id.number, 1);
  EXPECT_EQ(id.attempt, 2);
  EXPECT_EQ(id.layout, layout);
  EXPECT_EQ(next->trials[0].second.slot, 1);
}

TEST_F(SearchSteps, StartAndPollRecordEveryTrialUntilTheBudget) {
  BayesianSearch search(global_, *session_, backend_, Options(3, 2));
  ASSERT_TRUE(search.JoinClaims().ok());
  EXPECT_EQ(search.CheckBudget(), "");
  Result<BayesianSearch::NextBatch> next = search.ClaimNextBatch();
  ASSERT_TRUE(next.ok()) << next.status().message();
  ASSERT_EQ(next->trials.size(), 2u);  // the batch size, each with its claim and budget slot
  EXPECT_NE(next->trials[0].first.layout, next->trials[1].first.layout);
  EXPECT_NE(next->trials[0].second.slot, next->trials[1].second.slot);
  Result<std::vector<ActiveTrial>> active = search.StartBatch(next->trials);
  ASSERT_TRUE(active.ok());
  for (const store::TrialRecord& t : session_->trials) {
    EXPECT_EQ(t.status, TrialStatus::kRunning);  // recorded before they are polled
    EXPECT_FALSE(t.lease_expires_at.empty());
    EXPECT_EQ(t.ranks_per_node, 0);
  }
  Result<bool> interrupted = search.PollBatch(*active);
  ASSERT_TRUE(interrupted.ok());
  EXPECT_FALSE(*interrupted);
  EXPECT_EQ(search.finished_this_run().size(), 2u);
  for (const store::TrialRecord& t : session_->trials) EXPECT_EQ(t.status, TrialStatus::kOk);
  // One trial left of the budget: the next batch holds one.
  Result<BayesianSearch::NextBatch> last = search.ClaimNextBatch();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->trials.size(), 1u);
  Result<std::string> stop = search.CheckStop();
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(*stop, "");
  // The records are in the store, not only in memory.
  ASSERT_TRUE(session_->Refresh().ok());
  EXPECT_EQ(CountFinished(session_->trials), 2);
}

TEST_F(SearchSteps, IdenticalFailuresStopTheRunAsAWrongSetup) {
  backend_.fail = true;
  BayesianSearch search(global_, *session_, backend_, Options(10, 1));
  ASSERT_TRUE(search.JoinClaims().ok());
  for (int k = 0; k < 3; ++k) {
    Result<BayesianSearch::NextBatch> next = search.ClaimNextBatch();
    ASSERT_TRUE(next.ok());
    Result<std::vector<ActiveTrial>> active = search.StartBatch(next->trials);
    ASSERT_TRUE(active.ok());
    ASSERT_TRUE(search.PollBatch(*active).ok());
    Result<std::string> stop = search.CheckStop();
    if (k < 2) {
      EXPECT_TRUE(stop.ok()) << k;
    } else {
      ASSERT_FALSE(stop.ok());
      EXPECT_EQ(stop.status().code(), StatusCode::kTrialsFailed);
      EXPECT_NE(stop.status().message().find("every trial failed the same way (3 trials): crash"), std::string::npos)
          << stop.status().message();
    }
  }
  // The whole loop says the same.
  EXPECT_EQ(BayesianSearch(global_, *session_, backend_, Options(10, 1)).Run().code(), StatusCode::kTrialsFailed);
}

// A proposal marked as a probe (search::Proposal::probe; today's proposer makes none, so the
// batch is marked here) is recorded with the role probe, its line says so, and the history
// carries it back to the proposer; the next proposal, not a probe, is a first measurement.
TEST_F(SearchSteps, AProbeIsRecordedAsOneSaidOnItsLineAndCountedInTheHistory) {
  global_.json = false;
  BayesianSearch search(global_, *session_, backend_, Options(3));
  ASSERT_TRUE(search.JoinClaims().ok());
  Result<BayesianSearch::NextBatch> next = search.ClaimNextBatch();
  ASSERT_TRUE(next.ok()) << next.status().message();
  ASSERT_EQ(next->trials.size(), 1u);
  EXPECT_FALSE(next->trials[0].first.probe);
  next->trials[0].first.probe = true;
  Result<std::vector<ActiveTrial>> active = search.StartBatch(next->trials);
  ASSERT_TRUE(active.ok());
  ASSERT_EQ(session_->trials.size(), 1u);
  EXPECT_EQ(session_->trials[0].role, TrialRole::kProbe);  // already while it runs
  ::testing::internal::CaptureStdout();
  ASSERT_TRUE(search.PollBatch(*active).ok());
  const std::string line = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(line.find(" ok (probe: past the predicted memory limit) "), std::string::npos) << line;
  ASSERT_TRUE(session_->Refresh().ok());  // as stored
  ASSERT_EQ(session_->trials.size(), 1u);
  EXPECT_EQ(session_->trials[0].role, TrialRole::kProbe);
  EXPECT_EQ(session_->trials[0].status, TrialStatus::kOk);
  Result<BayesianSearch::NextBatch> plain = search.ClaimNextBatch();
  ASSERT_TRUE(plain.ok());
  ASSERT_EQ(plain->trials.size(), 1u);
  active = search.StartBatch(plain->trials);
  ASSERT_TRUE(active.ok());
  ::testing::internal::CaptureStdout();
  ASSERT_TRUE(search.PollBatch(*active).ok());
  EXPECT_EQ(::testing::internal::GetCapturedStdout().find("probe"), std::string::npos);
  const std::vector<search::Outcome> history = History(session_->trials);
  ASSERT_EQ(history.size(), 2u);
  EXPECT_TRUE(history[0].probe);
  EXPECT_FALSE(history[1].probe);
  EXPECT_EQ(session_->trials[1].role, TrialRole::kFirst);
}

// A probe that a stopped tuner left running is run again as its second attempt, still a probe.
TEST_F(SearchSteps, AnInterruptedProbeRunsAgainAsTheProbe) {
  store::TrialRecord r =
      NewTrialRecord({session_->study().id, "n0", 1, 1, session_->context.space.legal[2]}, {}, 0);
  r.status = TrialStatus::kRunning;
  r.host = "elsewhere";
  r.role = TrialRole::kProbe;
  ASSERT_TRUE(session_->Record({r}).ok());
  BayesianSearch search(global_, *session_, backend_, Options(4));
  ASSERT_TRUE(search.JoinClaims().ok());
  ASSERT_TRUE(search.RecoverInterrupted().ok());
  EXPECT_EQ(session_->trials[0].role, TrialRole::kProbe);
  Result<BayesianSearch::NextBatch> next = search.ClaimNextBatch();
  ASSERT_TRUE(next.ok()) << next.status().message();
  ASSERT_EQ(next->trials.size(), 1u);
  EXPECT_EQ(next->trials[0].first.attempt, 2);
  EXPECT_TRUE(next->trials[0].first.probe);
  Result<std::vector<ActiveTrial>> active = search.StartBatch(next->trials);
  ASSERT_TRUE(active.ok());
  ASSERT_TRUE(search.PollBatch(*active).ok());
  ASSERT_EQ(session_->trials.size(), 1u);
  EXPECT_EQ(session_->trials[0].attempt, 2);
  EXPECT_EQ(session_->trials[0].role, TrialRole::kProbe);
  EXPECT_TRUE(History(session_->trials)[0].probe);
}

// The history's probes: a trial with the role, and a re-run of another node's probe; not a
// confirmation, a first measurement, or a re-run of a trial that was no probe.
TEST(TrialHistory, ProbesAreTheProbeRoleAndReRunsOfAProbe) {
  auto trial = [](const std::string& node, int64_t number, int mbs, TrialRole role,
                  const std::string& rerun_of = "") {
    store::TrialRecord t;
    t.study_id = "s";
    t.node_id = node;
    t.number = number;
    t.layout = {.tp = 1, .pp = 1, .dp = 2, .micro_batch = mbs, .num_micro_batches = 1};
    t.status = TrialStatus::kOk;
    t.step_time_s = 1.0;
    t.role = role;
    t.rerun_of = rerun_of;
    return t;
  };
  const std::vector<store::TrialRecord> trials = {
      trial("n0", 1, 1, TrialRole::kFirst),        trial("n0", 2, 2, TrialRole::kProbe),
      trial("n0", 3, 1, TrialRole::kConfirmation), trial("n1", 1, 4, TrialRole::kProbe),
      trial("n0", 4, 4, TrialRole::kRerun, "n1"),  trial("n0", 5, 1, TrialRole::kRerun, "n1"),
  };
  std::vector<bool> probes;
  for (const search::Outcome& o : History(trials)) probes.push_back(o.probe);
  EXPECT_EQ(probes, (std::vector<bool>{false, true, false, true, true, false}));
  EXPECT_EQ(RoleMark(trials[1]), " (probe: past the predicted memory limit)");
  EXPECT_EQ(RoleMark(trials[2]), " (again)");
  EXPECT_EQ(RoleMark(trials[0]), "");
}

}  // namespace
}  // namespace tunepar
