// A store that no file can falsify or stall (issue 27, items 5-8) and a search killed at each step
// of a trial's life: a copied shard counted once, claims deleted under two searching nodes, a
// finished node's damaged shard, a stranger's shard whose query never ends, and SIGKILL at the
// claim, the start, the record and the publish of a trial, with the resumed sequence checked.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/launch_environment.h"
#include "store/claim_files.h"
#include "store/store_layout.h"
#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"

namespace tunepar {
namespace {

namespace fs = std::filesystem;

using testing::CliRun;
using testing::kTestCpu;
using testing::TempDir;

std::string Q(const std::string& word) {
  return runner::ShellQuote(word);
}

CliRun Tunepar(const std::string& args, const std::string& env = "") {
  return testing::RunCommand(env + testing::TuneparBinary() + " " + args);
}

// A command search of tiny at world 2 with the fake trainer (each trial takes
// $FAKE_TRAINER_SLEEP seconds, 0.02 unless set: not part of the command, so of the study).
std::string Search(const std::string& store, const std::string& node, int budget, const std::string& extra = "") {
  return fmt::format(
      "--store {} search --world 2 --model tiny --hardware {} --backend command --command {} --metric-regex {} "
      "--confirm 0 --time-budget 90 --budget {} --node-id {} --study plain {}",
      Q(store), Q(kTestCpu),
      Q(fmt::format("{} --tp {{tp}} --pp {{pp}} --mbs {{mbs}} --precision {{precision}} --recompute {{recompute}} "
                    "--vpp {{vpp}} --sleep 0.02",
                    TUNEPAR_FAKE_TRAINER)),
      Q("step_time: ([0-9.]+)"), budget, node, extra);
}

// Spawns `tunepar <args>` with trials of `sleep` seconds.
pid_t SpawnSleeping(const std::string& args, const std::string& out, double sleep) {
  setenv("FAKE_TRAINER_SLEEP", std::to_string(sleep).c_str(), 1);
  const pid_t pid = testing::Spawn(args, out);
  unsetenv("FAKE_TRAINER_SLEEP");
  return pid;
}

struct StoredTrial {
  std::string node;
  int64_t number;
  std::string layout, status, message;
};

bool IsFinished(const StoredTrial& t) {
  return t.status == "ok" || t.status == "oom" || t.status == "crash" || t.status == "timeout" || t.status == "invalid";
}

std::vector<StoredTrial> TrialsOf(const std::string& store, const std::string& study = "plain") {
  const CliRun show = Tunepar("--store " + Q(store) + " --json show " + Q(study) + " --all --allow-damaged");
  std::vector<StoredTrial> out;
  const nlohmann::json j = nlohmann::json::parse(show.out, nullptr, false);
  if (!j.is_object()) return out;
  for (const auto& t : j["trials"])
    out.push_back({t["node_id"], t["number"].get<int64_t>(), t["layout"], t["status"], t.value("message", "")});
  return out;
}

std::vector<StoredTrial> Finished(const std::string& store) {
  std::vector<StoredTrial> out;
  for (const StoredTrial& t : TrialsOf(store))
    if (IsFinished(t)) out.push_back(t);
  return out;
}

// Each finished layout once.
void ExpectNoLayoutTwice(const std::vector<StoredTrial>& finished) {
  std::map<std::string, int> times;
  for (const StoredTrial& t : finished) ++times[t.layout];
  for (const auto& [layout, n] : times) EXPECT_EQ(n, 1) << layout;
}

std::string StudyIdOf(const std::string& store) {
  const CliRun show = Tunepar("--store " + Q(store) + " --json show plain --allow-damaged");
  const nlohmann::json j = nlohmann::json::parse(show.out, nullptr, false);
  return j.is_object() ? j.value("study_id", "") : "";
}

int Count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// ---- Item 5: a shard counts only where it says it belongs.

TEST(ShardPlacement, ACopiedShardIsNamedAndCountedOnceAndItsNodeGoesOn) {
  TempDir dir;
  const std::string store = dir / "store";
  ASSERT_EQ(Tunepar(Search(store, "A", 6)).exit_code, 0);
  const std::string id = StudyIdOf(store);
  fs::copy(store + "/shards/A", store + "/shards/A-backup", fs::copy_options::recursive);
  const std::string copy = store + "/shards/A-backup/" + id + ".sqlite";

  const CliRun list = Tunepar("--store " + Q(store) + " list");
  EXPECT_EQ(list.exit_code, kExitDamaged) << list.err;
  EXPECT_NE(list.err.find("skipping shard " + copy + ": it belongs to node 'A'"), std::string::npos) << list.err;
  const CliRun json = Tunepar("--store " + Q(store) + " --json list --allow-damaged");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)[0]["trial_count"].get<int>(), 6);
  const std::vector<StoredTrial> trials = TrialsOf(store);
  ASSERT_EQ(trials.size(), 6u);
  std::set<int64_t> numbers;
  for (const StoredTrial& t : trials) EXPECT_TRUE(numbers.insert(t.number).second) << t.number;

  // Node A resumes with a larger budget and runs what is left of it.
  const CliRun resumed = Tunepar(Search(store, "A", 9));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(Finished(store).size(), 9u);
  EXPECT_NE(resumed.err.find(copy), std::string::npos) << resumed.err;
}

TEST(ShardPlacement, AShardFiledUnderAnotherNodeOrStudyIsNotCounted) {
  TempDir dir;
  const std::string store = dir / "store";
  ASSERT_EQ(Tunepar(Search(store, "A", 3)).exit_code, 0);
  ASSERT_EQ(Tunepar("--store " + Q(store) + " search --world 8 --model tiny --hardware local-cpu --study dry").exit_code,
            0);
  const std::string id = StudyIdOf(store);
  const std::string dry_id =
      nlohmann::json::parse(Tunepar("--store " + Q(store) + " --json show dry").out)["study_id"].get<std::string>();
  // Another user's file copied in under node B, and node A's shard of plain filed as study dry.
  fs::create_directories(store + "/shards/B");
  fs::copy_file(store + "/shards/A/" + id + ".sqlite", store + "/shards/B/" + id + ".sqlite");
  const std::string misfiled = store + "/shards/A/" + dry_id + ".sqlite";
  fs::copy_file(store + "/shards/A/" + id + ".sqlite", misfiled);
  const CliRun list = Tunepar("--store " + Q(store) + " list");
  EXPECT_EQ(list.exit_code, kExitDamaged) << list.err;
  EXPECT_NE(list.err.find("shards/B/" + id + ".sqlite: it belongs to node 'A'"), std::string::npos) << list.err;
  EXPECT_NE(list.err.find(misfiled + ": it belongs to study " + id), std::string::npos) << list.err;
  const CliRun dry = Tunepar("--store " + Q(store) + " --json show dry --all");
  EXPECT_EQ(dry.exit_code, kExitDamaged) << dry.err;
  EXPECT_EQ(TrialsOf(store).size(), 3u);
}

// ---- Item 6: claims deleted under two searching nodes.

// Two nodes search `plain` (budget 20); `remove` deletes part of the claims once some trials
// finished. Every node stops with one line naming what vanished (none discards a result as
// "taken over"); run again, they finish exactly the budget, no layout twice.
void ExpectClaimsDeletedMidSearchStopEveryNode(const std::string& what) {
  TempDir dir;
  const std::string store = dir / "store";
  ASSERT_EQ(Tunepar(Search(store, "a", 1)).exit_code, 0);  // the study exists, one trial done
  const std::string claims = store + "/claims";
  const std::string slots = claims + "/" + StudyIdOf(store) + "/slots";
  const pid_t a = SpawnSleeping(Search(store, "a", 20), dir / "a.out", 0.3);
  const pid_t b = SpawnSleeping(Search(store, "b", 20), dir / "b.out", 0.3);
  for (int i = 0; i < 400; ++i) {  // until a few trials are done (up to 20 s)
    Result<std::map<std::string, int>> taken = store::LatestGenerations(slots);
    if (taken.ok() && taken->size() >= 5) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (what == "claims") fs::remove_all(claims);
  if (what == "beats") fs::remove_all(claims + "/beats");
  if (what == "slots") fs::remove_all(slots);
  const int a_exit = testing::Wait(a), b_exit = testing::Wait(b);
  const std::string a_out = testing::ReadFile(dir / "a.out"), b_out = testing::ReadFile(dir / "b.out");
  EXPECT_EQ(a_exit, kExitStore) << what << ": " << a_out;
  EXPECT_EQ(b_exit, kExitStore) << what << ": " << b_out;
  EXPECT_NE(a_out.find("claims vanished during the search"), std::string::npos) << a_out;
  EXPECT_NE(b_out.find("claims vanished during the search"), std::string::npos) << b_out;
  std::vector<StoredTrial> finished = Finished(store);
  EXPECT_LE(finished.size(), 20u);
  ExpectNoLayoutTwice(finished);
  for (const StoredTrial& t : TrialsOf(store)) EXPECT_EQ(t.message.find("taken over"), std::string::npos) << t.message;

  // Run again: the claims are rebuilt from the shards, and the budget comes out exact.
  const pid_t a2 = SpawnSleeping(Search(store, "a", 20), dir / "a2.out", 0.05);
  const pid_t b2 = SpawnSleeping(Search(store, "b", 20), dir / "b2.out", 0.05);
  EXPECT_EQ(testing::Wait(a2), 0) << testing::ReadFile(dir / "a2.out");
  EXPECT_EQ(testing::Wait(b2), 0) << testing::ReadFile(dir / "b2.out");
  finished = Finished(store);
  EXPECT_EQ(finished.size(), 20u) << what;
  ExpectNoLayoutTwice(finished);
  for (const StoredTrial& t : TrialsOf(store)) {
    EXPECT_EQ(t.message.find("taken over"), std::string::npos) << t.message;
    EXPECT_EQ(t.message.find("discarded"), std::string::npos) << t.message;
  }
}

TEST(ClaimsIntegrity, DeletingTheClaimsFolderMidSearchStopsBothNodesAndTheBudgetHolds) {
  ExpectClaimsDeletedMidSearchStopEveryNode("claims");
}

TEST(ClaimsIntegrity, DeletingTheSlotsMidSearchStopsBothNodesAndTheBudgetHolds) {
  ExpectClaimsDeletedMidSearchStopEveryNode("slots");
}

TEST(ClaimsIntegrity, DeletingTheHeartbeatsMidSearchStopsBothNodesAndTheBudgetHolds) {
  ExpectClaimsDeletedMidSearchStopEveryNode("beats");
}

// ---- Item 7: a finished node's damaged published shard stalls no one.

TEST(DamagedShards, TheOtherNodeFinishesItsBudgetPastAFinishedNodesDamagedShard) {
  const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> damages = {
      {"emptied", [](const std::string& f) { fs::resize_file(f, 0); }},
      {"cut short", [](const std::string& f) { fs::resize_file(f, fs::file_size(f) / 2); }},
      {"appended to", [](const std::string& f) { testing::WriteFile(f, testing::ReadFile(f) + "garbage"); }},
      {"one byte flipped",
       [](const std::string& f) {
         std::string bytes = testing::ReadFile(f);
         const size_t at = bytes.rfind("step_time_s = ");  // an ok trial's message, in its row
         ASSERT_NE(at, std::string::npos);
         bytes[at] = 'S';
         testing::WriteFile(f, bytes);
       }},
  };
  for (const auto& [what, damage] : damages) {
    TempDir dir;
    const std::string store = dir / "store";
    ASSERT_EQ(Tunepar(Search(store, "a", 5)).exit_code, 0);
    const std::string shard = testing::NodeShard(store, "a");
    damage(shard);
    const auto start = std::chrono::steady_clock::now();
    const CliRun b = Tunepar(Search(store, "b", 9));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(b.exit_code, 0) << what << ": " << b.err;
    EXPECT_LT(seconds, 60) << what;
    EXPECT_NE(b.out.find("the budget of 9 trials is reached"), std::string::npos) << what << ": " << b.out;
    EXPECT_EQ(Count(b.err, "skipping shard " + shard), 1) << what << ": " << b.err;
    int of_b = 0;
    for (const StoredTrial& t : Finished(store)) of_b += t.node == "b" ? 1 : 0;
    EXPECT_EQ(of_b, 4) << what;
  }
}

// ---- Item 8: a stranger's shard whose query never ends.

// A copy of node n0's shard of `plain`, filed as node `evil` under `study_id`, whose trials table
// is a view over an endless recursive query (and which says it is evil's).
void PlantEndlessShard(const std::string& store, const std::string& study_id) {
  const std::string from = testing::NodeShard(store, "n0");
  const std::string evil = store + "/shards/evil/" + study_id + ".sqlite";
  fs::create_directories(fs::path(evil).parent_path());
  fs::copy_file(from, evil, fs::copy_options::overwrite_existing);
  const std::string sql =
      "UPDATE meta SET value = 'evil' WHERE key = 'node_id'; ALTER TABLE trials RENAME TO trials_real; "
      "CREATE VIEW trials AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
      "SELECT t.* FROM r JOIN trials_real t;";
  ASSERT_EQ(testing::RunCommand("sqlite3 " + Q(evil) + " " + Q(sql)).exit_code, 0);
}

TEST(HostileShards, EveryReaderEndsQuicklyPastAShardWhoseQueryNeverEnds) {
  TempDir dir;
  const std::string store = dir / "store";
  ASSERT_EQ(Tunepar(Search(store, "n0", 2)).exit_code, 0);
  ASSERT_EQ(Tunepar("--store " + Q(store) + " search --world 8 --model tiny --hardware local-cpu --study dry").exit_code,
            0);
  const std::string dry_id =
      nlohmann::json::parse(Tunepar("--store " + Q(store) + " --json show dry").out)["study_id"].get<std::string>();
  PlantEndlessShard(store, StudyIdOf(store));
  PlantEndlessShard(store, dry_id);  // also filed under another study's name
  const std::string s = "--store " + Q(store);
  for (const std::string& args : {s + " list", s + " show plain", s + " export plain --csv", s + " report plain",
                                  s + " show dry", s + " export dry --json", Search(store, "n0", 3)}) {
    const auto start = std::chrono::steady_clock::now();
    const CliRun run = testing::RunCommand("timeout 60 " + testing::TuneparBinary() + " " + args);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10) << args;
    EXPECT_NE(run.exit_code, 124) << args;  // timeout's: it never ended
    const bool search = args.find(" search ") != std::string::npos;
    EXPECT_EQ(run.exit_code, search ? 0 : kExitDamaged) << args << "\n" << run.err;
    EXPECT_NE(run.err.find("/shards/evil/"), std::string::npos) << args << "\n" << run.err;
    EXPECT_NE(run.err.find("it defines a view 'trials'"), std::string::npos) << args << "\n" << run.err;
  }
}

// ---- A search killed with SIGKILL at each step of a trial's life, then resumed.

TEST(CrashPoints, ASearchKilledAtEachStepOfATrialResumesToTheSameSequence) {
  TempDir dir;
  const std::string reference = dir / "reference";
  ASSERT_EQ(Tunepar(Search(reference, "n0", 4)).exit_code, 0);
  std::vector<std::string> expected;
  for (const StoredTrial& t : Finished(reference)) expected.push_back(t.layout);
  ASSERT_EQ(expected.size(), 4u);
  for (const std::string moment : {"claim", "start", "record", "publish"}) {
    const std::string store = dir / moment;
    const CliRun killed = Tunepar(Search(store, "n0", 4), "TUNEPAR_CRASH_AT=" + moment + ":2 ");
    // Killed: sh reports 128 + 9, or the test sees the signal itself (-1) when sh exec'd tunepar.
    EXPECT_TRUE(killed.exit_code == 128 + SIGKILL || killed.exit_code == -1) << moment << ": " << killed.exit_code;
    const std::string id = StudyIdOf(store);
    ASSERT_FALSE(id.empty()) << moment;
    EXPECT_TRUE(testing::NoTrialProcessesLeft(id + "/")) << moment;
    const CliRun resumed = Tunepar(Search(store, "n0", 4));
    ASSERT_EQ(resumed.exit_code, 0) << moment << ": " << resumed.err;
    std::vector<std::string> layouts;
    for (const StoredTrial& t : Finished(store)) layouts.push_back(t.layout);
    EXPECT_EQ(layouts, expected) << moment;
    // Nothing lost, nothing repeated: the budget's trials, and a claim done for each.
    Result<std::map<std::string, int>> slots = store::LatestGenerations(store + "/claims/" + id + "/slots");
    ASSERT_TRUE(slots.ok());
    int done = 0;
    for (const auto& [slot, generation] : *slots) {
      const Result<std::string> text = store::ReadSmallFile(fmt::format("{}/claims/{}/slots/{}.g{}", store, id, slot, generation));
      done += text.ok() && text->find("state=done") != std::string::npos ? 1 : 0;
    }
    EXPECT_EQ(done, 4) << moment;
  }
}

}  // namespace
}  // namespace tunepar
