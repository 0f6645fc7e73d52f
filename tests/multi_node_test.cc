// Several `tunepar search` processes on one store, under the faults a cluster produces: the
// same seed on eight nodes, a node killed mid-trial, a node that stops responding, two searches
// with one node id. Measured with the fake trainer through the command backend.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "store/claim_files.h"
#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"

namespace tunepar {
namespace {

namespace fs = std::filesystem;

using testing::OnlyStudy;
using testing::kTestCpu;
using testing::RunTunepar;
using testing::Spawn;
using testing::TempDir;
using testing::Trial;
using testing::Trials;
using testing::Wait;

// A search that never takes more than 90 s, so that a broken protocol fails the test (a node
// waiting forever for a claim that never expires) instead of hanging it.
std::string SearchArgs(const std::string& store, const std::string& node, int budget, const std::string& extra) {
  return "--store " + store + " search --world 2 --model tiny --hardware " + kTestCpu +
         " --backend command --command '" + TUNEPAR_FAKE_TRAINER +
         " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision} --recompute {recompute} --vpp {vpp} --sleep 0.05'"
         " --metric-regex 'step_time: ([0-9.]+)' --confirm 0 --time-budget 90 --budget " +
         std::to_string(budget) + " --node-id " + node + " " + extra;
}

bool IsFinished(const Trial& t) {
  return t.status == "ok" || t.status == "oom" || t.status == "crash" || t.status == "timeout" ||
         t.status == "invalid";
}

std::vector<Trial> Finished(const std::string& store) {
  std::vector<Trial> out;
  for (const Trial& t : Trials(store, OnlyStudy(store)))
    if (IsFinished(t)) out.push_back(t);
  return out;
}

std::map<std::string, int> TimesFinished(const std::vector<Trial>& finished) {
  std::map<std::string, int> n;
  for (const Trial& t : finished) ++n[t.layout];
  return n;
}

// The layout of the first claim in the store (polls up to 20 s): "" when none appeared.
std::string FirstClaimedLayout(const std::string& store) {
  for (int i = 0; i < 400; ++i) {
    std::error_code ec;
    for (const auto& study : fs::directory_iterator(store + "/claims", ec)) {
      Result<std::map<std::string, int>> latest = store::LatestGenerations(study.path().string() + "/layouts");
      if (latest.ok() && !latest->empty()) return latest->begin()->first.substr(0, latest->begin()->first.rfind(".m"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

TEST(MultiNode, EightNodesWithOneSeedFinishExactlyTheBudgetOnDistinctLayouts) {
  TempDir dir;
  const std::string store = dir / "s";
  std::vector<pid_t> pids;
  for (int node = 0; node < 8; ++node)
    pids.push_back(Spawn(SearchArgs(store, "n" + std::to_string(node), 24, ""), dir / ("out" + std::to_string(node))));
  for (int node = 0; node < 8; ++node) {
    const std::string out = testing::ReadFile(dir / ("out" + std::to_string(node)));
    EXPECT_EQ(Wait(pids[node]), 0) << out;
  }
  for (int node = 0; node < 8; ++node) {
    const std::string out = testing::ReadFile(dir / ("out" + std::to_string(node)));
    EXPECT_EQ(out.find("locked"), std::string::npos) << out;
  }
  const std::vector<Trial> finished = Finished(store);
  EXPECT_EQ(finished.size(), 24u);
  EXPECT_EQ(TimesFinished(finished).size(), 24u);
}

TEST(MultiNode, ALayoutOfANodeKilledMidTrialIsMeasuredByAnotherAfterItsLease) {
  TempDir dir;
  const std::string store = dir / "s";
  const pid_t dead = Spawn(SearchArgs(store, "n0", 3, "--lease 4 --env FAKE_TRAINER_SLEEP=1000"), dir / "out0");
  const std::string layout = FirstClaimedLayout(store);
  ASSERT_FALSE(layout.empty()) << testing::ReadFile(dir / "out0");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // its trial is recorded running
  kill(dead, SIGKILL);
  Wait(dead);
  const testing::CliRun other = RunTunepar(SearchArgs(store, "n1", 3, "--lease 4"));
  ASSERT_EQ(other.exit_code, 0) << other.out << other.err;
  const std::vector<Trial> finished = Finished(store);
  EXPECT_EQ(finished.size(), 3u);
  EXPECT_EQ(TimesFinished(finished)[layout], 1) << other.out;
  bool rerun = false;
  for (const Trial& t : finished) rerun = rerun || (t.layout == layout && t.message.find("re-run of a trial of node n0") != std::string::npos);
  EXPECT_TRUE(rerun) << other.out;
  // The killed node's row is shown interrupted, naming the re-run, not running for ever.
  bool settled = false;
  for (const Trial& t : Trials(store, OnlyStudy(store))) {
    EXPECT_NE(t.status, "running") << t.layout << " " << t.message;
    settled = settled || (t.layout == layout && t.status == "interrupted" &&
                          t.message.find("re-run by node n1") != std::string::npos);
  }
  EXPECT_TRUE(settled);
}

TEST(MultiNode, ASlowOwnerWhoseClaimWasTakenOverStopsAndNoLayoutFinishesTwice) {
  TempDir dir;
  const std::string store = dir / "s";
  const pid_t slow = Spawn(SearchArgs(store, "n0", 2, "--lease 2 --env FAKE_TRAINER_SLEEP=5"), dir / "out0");
  const std::string layout = FirstClaimedLayout(store);
  ASSERT_FALSE(layout.empty()) << testing::ReadFile(dir / "out0");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(slow, SIGSTOP);  // alive, but its heartbeat stands still
  const testing::CliRun other = RunTunepar(SearchArgs(store, "n1", 2, "--lease 2"));
  kill(slow, SIGCONT);
  EXPECT_EQ(other.exit_code, 0) << other.out << other.err;
  EXPECT_EQ(Wait(slow), 0) << testing::ReadFile(dir / "out0");
  const std::vector<Trial> finished = Finished(store);
  EXPECT_EQ(finished.size(), 2u);
  for (const auto& [key, n] : TimesFinished(finished)) EXPECT_EQ(n, 1) << key;
  EXPECT_EQ(TimesFinished(finished)[layout], 1);
  bool stopped = false;
  for (const Trial& t : Trials(store, OnlyStudy(store)))
    stopped = stopped || (t.status == "interrupted" && t.message.find("taken over") != std::string::npos);
  EXPECT_TRUE(stopped) << testing::ReadFile(dir / "out0");
}

TEST(MultiNode, TwoSearchesWithOneNodeIdAndTwoWorkDirsNeverShareIt) {
  TempDir dir;
  const std::string store = dir / "s";
  const pid_t first =
      Spawn(SearchArgs(store, "n0", 3, "--work-dir " + dir / "w1" + " --env FAKE_TRAINER_SLEEP=0.5"), dir / "out0");
  ASSERT_FALSE(FirstClaimedLayout(store).empty()) << testing::ReadFile(dir / "out0");
  const testing::CliRun second = RunTunepar(SearchArgs(store, "n0", 3, "--work-dir " + dir / "w2"));
  EXPECT_EQ(second.exit_code, kExitStore) << second.out << second.err;
  EXPECT_NE(second.err.find("node id 'n0' is in use"), std::string::npos) << second.err;
  EXPECT_EQ(std::count(second.err.begin(), second.err.end(), '\n'), 1) << second.err;
  const std::string out = testing::ReadFile(dir / "out0");
  EXPECT_EQ(Wait(first), 0) << out;
  const std::vector<Trial> trials = Trials(store, OnlyStudy(store));
  ASSERT_EQ(trials.size(), 3u);
  for (const Trial& t : trials) EXPECT_EQ(t.status, "ok") << t.message;
}

}  // namespace
}  // namespace tunepar
