// Issue 28 items 9, 10 and 12: typed trial roles (a record field, a store column, a JSON key;
// old rows' roles derived from their messages by the migration), `tunepar forget` (a node's own
// rows: a study, named trials or the failed ones; their claims and budget slots given back),
// a resumed search after identical failures, `search --enqueue`, `tunepar best`, and the layout
// offered when no trial finished ok.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/launch_environment.h"
#include "store/rows.h"
#include "store/schema.h"
#include "store/shard_writer.h"
#include "store/store_layout.h"
#include "store/store_reader.h"
#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"

namespace tunepar {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CliRun;
using testing::RunCommand;
using testing::RunTunepar;
using testing::TempDir;

// A fake trainer that crashes while $CRASHFLAG is --crash: the same command before and after the
// "setup" is fixed, so the search resumes the same study.
std::string SearchArgs(const std::string& store, int budget, const std::string& extra = "") {
  const std::string command = std::string(TUNEPAR_FAKE_TRAINER) +
                              " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision} --recompute {recompute} "
                              "$CRASHFLAG";
  return "--store " + store + " search --world 2 --model tiny --hardware local-cpu --backend command --command " +
         runner::ShellQuote(command) + " --metric-regex 'step_time: ([0-9.]+)' --confirm 0 --node-id n0 --budget " +
         std::to_string(budget) + " " + extra;
}

CliRun Crashing(const std::string& args) { return RunCommand("CRASHFLAG=--crash " + testing::TuneparBinary() + " " + args); }

json Export(const std::string& store) {
  const CliRun run = RunTunepar("--store " + store + " --json export");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return json::parse(run.out, nullptr, false);
}

std::map<std::string, int> Roles(const json& exported) {
  std::map<std::string, int> roles;
  for (const json& t : exported["trials"]) ++roles[t["role"].get<std::string>()];
  return roles;
}

// ---- Item 9 and 12: a setup error, fixed, and its failed trials forgotten.

TEST(Forget, FailedTrialsOfAFixedSetupAreForgottenAndTheBudgetPaidBack) {
  TempDir dir;
  const std::string store = dir / "s";
  const CliRun failing = Crashing(SearchArgs(store, 3));
  ASSERT_EQ(failing.exit_code, kExitTrialsFailed) << failing.err;
  const std::string study = testing::OnlyStudy(store);
  // The failure says how to keep the failed trials from counting once the cause is fixed.
  EXPECT_NE(failing.err.find("forget " + study + " --failed --node-id n0 keeps these trials from counting"),
            std::string::npos)
      << failing.err;
  // Resumed as it was: it says the study's trials all failed the same way, and recommends nothing.
  const CliRun resumed = Crashing(SearchArgs(store, 3));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("all its 3 finished trials failed the same way (crash: exit code 3"), std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.err.find("forget them first: tunepar --store " + store + " forget " + study + " --failed"),
            std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.out.find("No layout to recommend: all 3 finished trials failed without running out of memory"),
            std::string::npos)
      << resumed.out;
  EXPECT_EQ(resumed.out.find("Best layout"), std::string::npos);
  const CliRun no_best = RunTunepar("--store " + store + " best");
  EXPECT_EQ(no_best.exit_code, kExitNotFound) << no_best.out;
  EXPECT_NE(no_best.err.find("no layout to recommend"), std::string::npos) << no_best.err;
  const CliRun script = RunTunepar("--store " + store + " launch-script --hardware local-cpu");
  EXPECT_EQ(script.exit_code, kExitUsage) << script.out;
  EXPECT_NE(script.err.find("nothing to launch"), std::string::npos) << script.err;

  // --dry-run changes nothing.
  const auto before = testing::SnapshotFiles(store + "/shards");
  const CliRun dry = RunTunepar("--store " + store + " forget --failed --node-id n0 --dry-run");
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("Would forget 3 trials of study " + study + " on node n0 (crash 3) (--dry-run"),
            std::string::npos)
      << dry.out;
  EXPECT_EQ(testing::SnapshotFiles(store + "/shards"), before);

  const CliRun forgot = RunTunepar("--store " + store + " forget --failed --node-id n0");
  ASSERT_EQ(forgot.exit_code, 0) << forgot.err;
  EXPECT_NE(forgot.out.find("Forgot 3 trials of study " + study + " on node n0 (crash 3): they no longer count"),
            std::string::npos)
      << forgot.out;
  EXPECT_EQ(Roles(Export(store)), (std::map<std::string, int>{{"forgotten", 3}}));
  const json shown = json::parse(RunTunepar("--store " + store + " --json show --all").out, nullptr, false);
  EXPECT_EQ(shown["trials"].size(), 0u) << shown.dump(2);

  // Fixed: the same command runs the whole budget again, the crashed layouts among them may be
  // measured (their claims were given back), and nothing is recommended without grounds.
  const CliRun fixed = RunTunepar(SearchArgs(store, 3, "--json"));
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  const json exported = Export(store);
  EXPECT_EQ(Roles(exported), (std::map<std::string, int>{{"first", 3}, {"forgotten", 3}}));
  int ok = 0;
  std::set<std::string> crashed, measured;
  for (const json& t : exported["trials"]) {
    if (t["role"] == "forgotten") crashed.insert(t["layout"].get<std::string>());
    if (t["status"] == "ok") ++ok, measured.insert(t["layout"].get<std::string>());
    if (t["role"] == "first") {
      EXPECT_GT(t["number"].get<int>(), 3) << "numbers of forgotten trials stay taken";
    }
  }
  EXPECT_EQ(ok, 3);
  EXPECT_FALSE(std::none_of(crashed.begin(), crashed.end(), [&](const std::string& l) { return measured.count(l) > 0; }))
      << "the first proposal (a crashed layout) is measured again";
  const json best = json::parse(RunTunepar("--store " + store + " --json best").out, nullptr, false);
  EXPECT_EQ(best["basis"], "measured");
  EXPECT_EQ(best["layout"], json::parse(fixed.out)["best_basis"]["layout"]);
  const CliRun key = RunTunepar("--store " + store + " best " + study);
  EXPECT_EQ(key.out, best["layout"].get<std::string>() + "\n");
}

// A node forgets only its own rows and says what the others still hold; a trial not there, or a
// node with no rows, is refused with one line; a whole study's rows of one node are forgotten.
TEST(Forget, ANodeForgetsOnlyItsOwnRows) {
  TempDir dir;
  const std::string store = dir / "s";
  ASSERT_EQ(RunTunepar(SearchArgs(store, 2)).exit_code, 0);
  std::string other = SearchArgs(store, 4);
  other.replace(other.find("--node-id n0"), 12, "--node-id n1");
  ASSERT_EQ(RunTunepar(other).exit_code, 0);
  const auto before = testing::SnapshotFiles(store + "/shards");
  const CliRun theirs = RunTunepar("--store " + store + " forget --node-id n0 n1/3");
  EXPECT_EQ(theirs.exit_code, kExitUsage);
  EXPECT_NE(theirs.err.find("trial n1/3 is node n1's: a node forgets only its own rows"), std::string::npos) << theirs.err;
  const CliRun missing = RunTunepar("--store " + store + " forget --node-id n0 9");
  EXPECT_EQ(missing.exit_code, kExitNotFound);
  EXPECT_NE(missing.err.find("has no trial n0/9 to forget"), std::string::npos) << missing.err;
  const CliRun nobody = RunTunepar("--store " + store + " forget --node-id n7");
  EXPECT_EQ(nobody.exit_code, kExitNotFound);
  EXPECT_NE(nobody.err.find("node n7 holds no trial of study"), std::string::npos) << nobody.err;
  EXPECT_NE(nobody.err.find("n0 (2 trials), n1 (2 trials)"), std::string::npos) << nobody.err;
  for (const CliRun* r : {&theirs, &missing, &nobody}) EXPECT_EQ(std::count(r->err.begin(), r->err.end(), '\n'), 1);
  EXPECT_EQ(testing::SnapshotFiles(store + "/shards"), before);

  const CliRun all = RunTunepar("--store " + store + " forget --node-id n0");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.out.find("Forgot 2 trials"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("Other nodes still hold trials of it: n1 (2 trials)"), std::string::npos) << all.out;
  const json listed = json::parse(RunTunepar("--store " + store + " --json list").out, nullptr, false);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["trial_count"], 2) << listed.dump(2);
}

// ---- Item 12: the trial role, a typed field: stored, exported, and derived for old rows.

// A shard as schema 4 wrote it: the role, rerun_of and knobs (schema 6) columns gone, the
// checksums of the shorter column list, the roles only in the messages' words.
void MakeSchema4(const std::string& path) {
  Result<store::Database> db = store::Database::Open(path, SQLITE_OPEN_READWRITE, path);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db->Exec("ALTER TABLE trials DROP COLUMN knobs").ok());
  ASSERT_TRUE(db->Exec("ALTER TABLE trials DROP COLUMN role").ok());
  ASSERT_TRUE(db->Exec("ALTER TABLE trials DROP COLUMN rerun_of").ok());
  ASSERT_TRUE(db->Exec(R"sql(UPDATE trials SET checksum = tunepar_row_checksum(
  study_id, node_id, number, layout_key, tp, pp, dp, micro_batch, num_micro_batches, precision,
  zero, recompute, seq_parallel, virtual_stages, flash_attention, status, attempt, step_time_s,
  tokens_per_s, tflops_per_gpu, peak_memory_bytes, objective, predicted_step_time_s,
  predicted_tokens_per_s, predicted_memory_bytes, details, sliced, metric_kind, metric_value,
  ranks_per_node, message, log_path, backend, hosts, tunepar_version, git_revision, host, pid,
  process_group, started_at, finished_at, heartbeat_at, lease_expires_at))sql")
                  .ok());
  ASSERT_TRUE(db->Exec("PRAGMA user_version = 4").ok());
}

TEST(TrialRole, OldRowsGetTheirRolesFromTheirMessagesOnce) {
  TempDir dir;
  const std::string store = dir / "s";
  store::StudyRecord study;
  study.id = "0123456789abcdef";
  study.name = "old";
  study.world = 2;
  std::vector<store::TrialRecord> rows;
  const std::vector<std::pair<std::string, std::string>> messages = {
      {"", "{}"},
      {"confirmation: the leaders are within noise", "{}"},
      {"re-run of a trial of node gone7 (its tuner is gone: heartbeat silent for the lease); ok", "{}"},
      {"exit code 1", R"({"reclassified_from":[{"status":"crash"}]})"},
      {"a message that mentions confirmation: later", "{}"}};
  for (size_t i = 0; i < messages.size(); ++i) {
    store::TrialRecord t;
    t.study_id = study.id;
    t.node_id = "n0";
    t.number = static_cast<int64_t>(i) + 1;
    t.layout.tp = t.layout.pp = t.layout.dp = t.layout.micro_batch = t.layout.num_micro_batches = 1;
    t.status = TrialStatus::kOk;
    t.message = messages[i].first;
    t.details = messages[i].second;
    rows.push_back(t);
  }
  {
    Result<std::unique_ptr<store::ShardWriter>> w = store::ShardWriter::Open({store, "n0", study.id, ""});
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_TRUE((*w)->PutStudy(study).ok());
    ASSERT_TRUE((*w)->PutTrials(rows).ok());
    ASSERT_TRUE((*w)->Publish().ok());
  }
  const std::string copy = store::SnapshotPath(store, "n0", study.id);
  MakeSchema4(copy);
  Result<store::StoreView> view = store::ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_TRUE(view->warnings.empty()) << view->warnings.front();  // every checksum matches after the migration
  ASSERT_EQ(view->trials.size(), 5u);
  EXPECT_EQ(view->trials[0].role, TrialRole::kFirst);
  EXPECT_EQ(view->trials[1].role, TrialRole::kConfirmation);
  EXPECT_EQ(view->trials[2].role, TrialRole::kRerun);
  EXPECT_EQ(view->trials[2].rerun_of, "gone7");
  EXPECT_EQ(view->trials[3].role, TrialRole::kReclassified);
  EXPECT_EQ(view->trials[4].role, TrialRole::kFirst);
  // A row damaged before the migration stays damaged after it.
  {
    Result<store::Database> db = store::Database::Open(copy, SQLITE_OPEN_READWRITE, copy);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("UPDATE trials SET step_time_s = 9 WHERE number = 2").ok());
  }
  Result<store::StoreView> damaged = store::ReadStore(store);
  ASSERT_TRUE(damaged.ok());
  EXPECT_FALSE(damaged->warnings.empty());
  for (const store::TrialRecord& t : damaged->trials) EXPECT_NE(t.number, 2) << "the damaged row is not read";
}

// ---- Item 12: --enqueue.

TEST(Enqueue, AHandPickedLayoutIsMeasuredFirstAndCountedInTheBudget) {
  TempDir dir;
  const std::string store = dir / "s";
  const std::string mine = "tp2-pp1-dp1-mbs2-nmb4-fp32-zero0-rcfull-sp0-vpp1-fa0";
  const CliRun run = RunTunepar(SearchArgs(store, 2, "--enqueue " + mine));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("enqueued (--enqueue): " + mine + ": measured before any proposal"), std::string::npos)
      << run.out;
  const json exported = Export(store);
  ASSERT_EQ(exported["trials"].size(), 2u);
  EXPECT_EQ(exported["trials"][0]["layout"], mine);
  EXPECT_NE(exported["trials"][0]["message"].get<std::string>().find("enqueued"), std::string::npos);
  // Measured already: not run again; the budget goes to proposals.
  ASSERT_EQ(RunTunepar(SearchArgs(store, 3, "--enqueue " + mine)).exit_code, 0);
  const json again = Export(store);
  ASSERT_EQ(again["trials"].size(), 3u);
  EXPECT_NE(again["trials"][2]["layout"], mine);
  // Not a layout of the study: one line, exit 2, no trial.
  const CliRun illegal = RunTunepar(SearchArgs(store, 4, "--enqueue tp2-pp1-dp1-mbs2-nmb4-fp32-zero1-rcfull-sp0-vpp1-fa0"));
  EXPECT_EQ(illegal.exit_code, kExitUsage);
  EXPECT_NE(illegal.err.find("not a legal layout of study"), std::string::npos) << illegal.err;
  // Refused before anything is stored: a new study's header too.
  const CliRun fresh = RunTunepar(SearchArgs(dir / "fresh", 2, "--enqueue tp2-pp1-dp1-mbs2-nmb4-fp32-zero1-rcfull-sp0-vpp1-fa0"));
  EXPECT_EQ(fresh.exit_code, kExitUsage) << fresh.err;
  EXPECT_FALSE(fs::exists(dir / "fresh")) << "the refused study left a store behind";
  const CliRun garbage = RunTunepar(SearchArgs(dir / "other", 4, "--enqueue tp2-nonsense"));
  EXPECT_EQ(garbage.exit_code, kExitUsage);
  EXPECT_FALSE(fs::exists(dir / "other"));
  EXPECT_EQ(Export(store)["trials"].size(), 3u);
}

// ---- Item 12: a node id is held per node and study.

// A search running as node n0 blocks another search of its study as n0 (exit 5), not a dry
// run of another study in the same store.
TEST(NodeIdPerStudy, ARunningSearchDoesNotBlockAnotherStudyOfItsNode) {
  TempDir dir;
  const std::string store = dir / "s";
  std::string slow = SearchArgs(store, 2);
  slow.replace(slow.find("$CRASHFLAG"), 10, "--sleep 4");
  const pid_t running = testing::Spawn(slow, dir / "slow.log");
  // Wait until it holds its node id for its study.
  for (int i = 0; i < 100 && !fs::exists(store + "/nodes"); ++i) usleep(50000);
  usleep(500000);
  const CliRun dry = RunTunepar("--store " + store + " search --world 8 --model tiny --hardware local-cpu --node-id n0");
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  const CliRun same = RunTunepar(slow);
  EXPECT_EQ(same.exit_code, kExitStore) << same.err;
  EXPECT_NE(same.err.find("node id 'n0' is in use in this store for study"), std::string::npos) << same.err;
  EXPECT_EQ(testing::Wait(running), 0) << testing::ReadFile(dir / "slow.log");
}

}  // namespace
}  // namespace tunepar
