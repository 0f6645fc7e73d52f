#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/knobs.h"
#include "store/rows.h"
#include "store/schema.h"
#include "store/shard_writer.h"
#include "store/store_layout.h"
#include "store/store_reader.h"
#include "tests/test_support.h"

namespace tunepar::store {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

StudyRecord Study(const std::string& id = "0123456789abcdef") {
  StudyRecord s;
  s.id = id;
  s.name = "study-" + id.substr(0, 4);
  s.world = 64;
  s.model_name = "gpt-22b";
  s.hardware_name = "frontier-mi250x";
  s.space_name = "default";
  s.model_toml = "name = \"gpt-22b\"\n";
  s.hardware_toml = "name = \"frontier-mi250x\"\n";
  s.space_toml = "name = \"default\"\n";
  s.objective = "max_tokens_per_s";
  s.backend = "model";
  s.backend_settings = "{}";
  s.created_at = "2026-11-21T00:00:00Z";
  s.created_by = "n0";
  return s;
}

TrialRecord Trial(const std::string& study_id, const std::string& node, int64_t number) {
  TrialRecord t;
  t.study_id = study_id;
  t.node_id = node;
  t.number = number;
  t.layout.tp = 1 << (number % 4);
  t.layout.pp = 2;
  t.layout.dp = 64 / (2 * t.layout.tp);
  t.layout.micro_batch = static_cast<int>(number);
  t.layout.num_micro_batches = 3;
  t.layout.recompute = Recompute::kSelective;
  t.status = number % 3 == 0 ? TrialStatus::kOom : TrialStatus::kOk;
  if (t.status == TrialStatus::kOk) {
    t.step_time_s = 1.0 + number;
    t.tokens_per_s = 1000.0 / (1.0 + number);
  }
  t.predicted_step_time_s = 0.9 + number;
  t.details = R"({"compute_s": 0.5})";
  t.message = "msg, with \"quotes\"";
  t.backend = "model";
  t.hosts = node;
  t.tunepar_version = "0.1.0";
  t.git_revision = "abc";
  t.host = node;
  t.pid = 42;
  t.started_at = t.finished_at = t.heartbeat_at = t.lease_expires_at = "2026-11-21T00:00:01Z";
  return t;
}

std::unique_ptr<ShardWriter> OpenWriter(const std::string& store, const std::string& node,
                                        const std::string& work = "", const std::string& study = Study().id) {
  Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, node, study, work});
  EXPECT_TRUE(w.ok()) << w.status().message();
  return w.ok() ? std::move(*w) : nullptr;
}

TEST(Store, WritesPublishesAndReadsBack) {
  TempDir dir;
  const std::string store = dir / "store";
  auto w = OpenWriter(store, "n0");
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->PutStudy(Study()).ok());
  std::vector<TrialRecord> trials;
  for (int i = 1; i <= 5; ++i) trials.push_back(Trial(Study().id, "n0", i));
  ASSERT_TRUE(w->PutTrials(trials).ok());

  // Nothing is visible to readers before the snapshot is published.
  Result<StoreView> before = ReadStore(store);
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(before->trials.empty());

  ASSERT_TRUE(w->Publish().ok());
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  ASSERT_EQ(view->studies.size(), 1u);
  EXPECT_EQ(view->studies[0], Study());
  EXPECT_EQ(view->trials, trials);
  EXPECT_TRUE(view->warnings.empty());
  EXPECT_EQ(view->shards, std::vector<std::string>{SnapshotPath(store, "n0", Study().id)});

  // Upserting a trial replaces it (a running trial that finished).
  trials[1].status = TrialStatus::kTimeout;
  ASSERT_TRUE(w->PutTrials({trials[1]}).ok());
  ASSERT_TRUE(w->Publish().ok());
  EXPECT_EQ(ReadStore(store)->trials[1].status, TrialStatus::kTimeout);
}

TEST(Store, TwoNodesWriteConcurrentlyFromSeparateProcesses) {
  TempDir dir;
  const std::string store = dir / "store";
  constexpr int kPerNode = 40;
  std::vector<pid_t> children;
  for (const char* node : {"n0", "n1"}) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: its own shard, one trial per transaction, a snapshot after each.
      Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, node, Study().id, ""});
      if (!w.ok()) _exit(10);
      if (!(*w)->PutStudy(Study()).ok()) _exit(11);
      for (int i = 1; i <= kPerNode; ++i) {
        if (!(*w)->PutTrials({Trial(Study().id, node, i)}).ok()) _exit(12);
        if (!(*w)->Publish().ok()) _exit(13);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  // Meanwhile a reader merges whatever is published: never an error, never a torn shard.
  int reads = 0;
  bool running = true;
  while (running) {
    Result<StoreView> view = ReadStore(store);
    ASSERT_TRUE(view.ok()) << view.status().message();
    EXPECT_TRUE(view->warnings.empty()) << view->warnings.front();
    ++reads;
    running = false;
    for (pid_t pid : children) {
      if (waitpid(pid, nullptr, WNOHANG) == 0) running = true;
    }
  }
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->shards.size(), 2u);
  EXPECT_EQ(view->studies.size(), 1u);
  ASSERT_EQ(view->trials.size(), 2u * kPerNode);
  for (int i = 0; i < kPerNode; ++i) {
    EXPECT_EQ(view->trials[i], Trial(Study().id, "n0", i + 1));
    EXPECT_EQ(view->trials[kPerNode + i], Trial(Study().id, "n1", i + 1));
  }
  EXPECT_GT(reads, 0);
}

TEST(Store, RefusesASecondWriterOnTheSameNode) {
  TempDir dir;
  const std::string store = dir / "store";
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, "n0", Study().id, ""});
    char c = w.ok() ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    (void)!read(done[0], &c, 1);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  Result<std::unique_ptr<ShardWriter>> second = ShardWriter::Open({store, "n0", Study().id, ""});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kStore);
  EXPECT_NE(second.status().message().find("another tunepar process"), std::string::npos)
      << second.status().message();
  // Another node id on the same machine is fine.
  EXPECT_TRUE(OpenWriter(store, "n1"));
  (void)!write(done[1], "x", 1);
  waitpid(pid, nullptr, 0);
  EXPECT_TRUE(OpenWriter(store, "n0"));
}

TEST(Store, SkipsTruncatedAndForeignShardsByName) {
  TempDir dir;
  const std::string store = dir / "store";
  for (const char* node : {"good", "bad"}) {
    auto w = OpenWriter(store, node);
    ASSERT_TRUE(w);
    ASSERT_TRUE(w->PutStudy(Study()).ok());
    std::vector<TrialRecord> trials;
    for (int i = 1; i <= 300; ++i) trials.push_back(Trial(Study().id, node, i));
    ASSERT_TRUE(w->PutTrials(trials).ok());
    ASSERT_TRUE(w->Publish().ok());
  }
  const std::string bad = SnapshotPath(store, "bad", Study().id);
  fs::resize_file(bad, fs::file_size(bad) / 2);
  fs::create_directories(NodeShardsDir(store, "empty"));
  testing::WriteFile(SnapshotPath(store, "empty", Study().id), "");  // a node's copy of the study
  testing::WriteFile(LegacySnapshotPath(store, "junk"), std::string(8192, 'x'));  // a whole node's shard
  const auto before = testing::SnapshotFiles(store);

  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->trials.size(), 300u);
  EXPECT_EQ(view->trials.front().node_id, "good");
  ASSERT_EQ(view->warnings.size(), 3u);
  std::string all;
  for (const std::string& w : view->warnings) all += w + "\n";
  for (const std::string& name : {"bad/" + Study().id + ".sqlite", "empty/" + Study().id + ".sqlite",
                                  std::string("junk.sqlite")})
    EXPECT_NE(all.find(name), std::string::npos) << all;
  // Reading changed nothing on disk.
  EXPECT_EQ(testing::SnapshotFiles(store), before);
}

// A shard from a newer tunepar is that file's alone: readers name it and skip it (one stranger's
// file must not block everyone); only its own node's writer stops (kSchemaTooNew), touching nothing.
TEST(Store, ShardFromANewerSchemaIsSkippedByReadersAndStopsItsOwnNode) {
  TempDir dir;
  const std::string store = dir / "store";
  for (const std::string node : {"n0", "n1"}) {
    auto w = OpenWriter(store, node);
    ASSERT_TRUE(w->PutStudy(Study()).ok());
    ASSERT_TRUE(w->PutTrials({Trial(Study().id, node, 1)}).ok());
    ASSERT_TRUE(w->Publish().ok());
  }
  {
    Result<Database> db = Database::Open(SnapshotPath(store, "n0", Study().id), SQLITE_OPEN_READWRITE, "test");
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("PRAGMA user_version = 99").ok());
  }
  const auto before = testing::SnapshotFiles(store);
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  ASSERT_EQ(view->warnings.size(), 1u);
  EXPECT_NE(view->warnings[0].find("n0/" + Study().id + ".sqlite"), std::string::npos) << view->warnings[0];
  EXPECT_NE(view->warnings[0].find("newer tunepar (schema version 99"), std::string::npos) << view->warnings[0];
  ASSERT_EQ(view->trials.size(), 1u);
  EXPECT_EQ(view->trials[0].node_id, "n1");
  // Node n1's writer goes on; node n0's must not touch its files.
  EXPECT_TRUE(ShardWriter::Open({store, "n1", Study().id, ""}).ok());
  Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, "n0", Study().id, ""});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kSchemaTooNew);
  for (const auto& [path, content] : before)
    if (path.find("/n0/") != std::string::npos) {
      EXPECT_EQ(testing::ReadFile(path), content) << path;
    }
}

TEST(Store, WorkFileIsRestoredFromTheSnapshotWhenLost) {
  TempDir dir;
  const std::string store = dir / "store", local = dir / "node-local";
  std::string work_path;
  {
    auto w = OpenWriter(store, "n0", local);
    ASSERT_TRUE(w);
    work_path = w->work_path();
    EXPECT_EQ(work_path.rfind(local, 0), 0u);  // lives on the "node-local" disk
    ASSERT_TRUE(w->PutStudy(Study()).ok());
    ASSERT_TRUE(w->PutTrials({Trial(Study().id, "n0", 1), Trial(Study().id, "n0", 2)}).ok());
    ASSERT_TRUE(w->Publish().ok());
  }
  fs::remove_all(local);  // a new job on a wiped node
  auto w = OpenWriter(store, "n0", local);
  ASSERT_TRUE(w);
  Result<std::vector<TrialRecord>> trials = w->Trials(Study().id);
  ASSERT_TRUE(trials.ok());
  EXPECT_EQ(trials->size(), 2u);
  ASSERT_TRUE(w->PutTrials({Trial(Study().id, "n0", 3)}).ok());
  ASSERT_TRUE(w->Publish().ok());
  EXPECT_EQ(ReadStore(store)->trials.size(), 3u);
}

TEST(Store, MergedViewCombinesOwnLiveShardWithOtherNodes) {
  TempDir dir;
  const std::string store = dir / "store";
  auto other = OpenWriter(store, "n1");
  ASSERT_TRUE(other->PutStudy(Study()).ok());
  ASSERT_TRUE(other->PutTrials({Trial(Study().id, "n1", 1)}).ok());
  ASSERT_TRUE(other->Publish().ok());
  auto mine = OpenWriter(store, "n0");
  ASSERT_TRUE(mine->PutStudy(Study()).ok());
  ASSERT_TRUE(mine->PutTrials({Trial(Study().id, "n0", 1)}).ok());  // not yet published
  Result<StoreView> view = mine->ReadMerged();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->studies.size(), 1u);
  ASSERT_EQ(view->trials.size(), 2u);
  EXPECT_EQ(view->trials[0].node_id, "n0");
  EXPECT_EQ(view->trials[1].node_id, "n1");
}

TEST(Store, RejectsBadNodeIdsAndUnwritableDirectories) {
  TempDir dir;
  for (const char* bad : {"", "../x", ".hidden", "a b", "a/b"}) {
    Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({dir / "store", bad, Study().id, ""});
    EXPECT_FALSE(w.ok()) << bad;
  }
  testing::WriteFile(dir / "file", "not a directory");
  Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({dir / "file/store", "n0", Study().id, ""});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kStore);
  EXPECT_NE(w.status().message().find("file/store"), std::string::npos);
}

TEST(Store, SchemaVersionAndApplicationIdAreRecorded) {
  TempDir dir;
  const std::string store = dir / "store";
  auto w = OpenWriter(store, "n0");
  ASSERT_TRUE(w->Publish().ok());
  Result<Database> db = OpenShardForReading(SnapshotPath(store, "n0", Study().id));
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ(*db->PragmaInt("user_version"), kSchemaVersion);
  EXPECT_EQ(*db->PragmaInt("application_id"), kApplicationId);
}

// Each study has its own files: publishing one study never rewrites another's copy, and a
// reader of one study opens only that study's files (a damaged copy of another study does not
// even show up as a warning).
TEST(Store, APublishAndAReadOfOneStudyTouchOnlyThatStudysFiles) {
  TempDir dir;
  const std::string store = dir / "store";
  const StudyRecord big = Study("bbbbbbbbbbbbbbbb"), small = Study("aaaaaaaaaaaaaaaa");
  {
    auto w = OpenWriter(store, "n0", "", big.id);
    ASSERT_TRUE(w->PutStudy(big).ok());
    std::vector<TrialRecord> trials;
    for (int i = 1; i <= 500; ++i) trials.push_back(Trial(big.id, "n0", i));
    ASSERT_TRUE(w->PutTrials(trials).ok());
    ASSERT_TRUE(w->Publish().ok());
  }
  const std::string big_copy = SnapshotPath(store, "n0", big.id);
  const std::string big_bytes = testing::ReadFile(big_copy);
  const auto big_time = fs::last_write_time(big_copy);
  auto w = OpenWriter(store, "n0", "", small.id);
  ASSERT_TRUE(w->PutStudy(small).ok());
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(w->PutTrials({Trial(small.id, "n0", i)}).ok());
    ASSERT_TRUE(w->Publish().ok());
  }
  EXPECT_EQ(testing::ReadFile(big_copy), big_bytes);
  EXPECT_EQ(fs::last_write_time(big_copy), big_time);
  EXPECT_LT(fs::file_size(SnapshotPath(store, "n0", small.id)), fs::file_size(big_copy) / 4);

  fs::resize_file(big_copy, fs::file_size(big_copy) / 2);
  Result<StoreView> one = ReadStore(store, {small.id, ""});
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_TRUE(one->warnings.empty()) << one->warnings.front();
  EXPECT_EQ(one->shards, std::vector<std::string>{SnapshotPath(store, "n0", small.id)});
  EXPECT_EQ(one->trials.size(), 3u);
  // A reader of everything reads every file, and names the damaged one.
  Result<StoreView> all = ReadStore(store);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->warnings.size(), 1u);
  EXPECT_NE(all->warnings[0].find(big_copy), std::string::npos) << all->warnings[0];
}

// A search's refresh reads again only the copies that changed since its last read.
TEST(Store, ARefreshReadsOnlyTheCopiesThatChanged) {
  TempDir dir;
  const std::string store = dir / "store";
  std::vector<std::unique_ptr<ShardWriter>> others;
  for (const char* node : {"n1", "n2", "n3"}) {
    others.push_back(OpenWriter(store, node));
    ASSERT_TRUE(others.back()->PutStudy(Study()).ok());
    ASSERT_TRUE(others.back()->PutTrials({Trial(Study().id, node, 1)}).ok());
    ASSERT_TRUE(others.back()->Publish().ok());
  }
  ShardCache cache;
  ASSERT_TRUE(ReadStore(store, {Study().id, "n0", &cache}).ok());
  EXPECT_EQ(cache.reads, 3);
  Result<StoreView> unchanged = ReadStore(store, {Study().id, "n0", &cache});
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(cache.reads, 3);
  EXPECT_EQ(unchanged->trials.size(), 3u);
  ASSERT_TRUE(others[1]->PutTrials({Trial(Study().id, "n2", 2)}).ok());
  ASSERT_TRUE(others[1]->Publish().ok());
  Result<StoreView> changed = ReadStore(store, {Study().id, "n0", &cache});
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(cache.reads, 4);
  ASSERT_EQ(changed->trials.size(), 4u);
  EXPECT_EQ(changed->trials[2].node_id, "n2");
  EXPECT_EQ(changed->trials[2].number, 2);
}

// A store that a tunepar before schema 4 wrote (one shard per node, every study in it): a
// writer of one of its studies takes that study's rows into a file of the study's own; readers
// then see each trial once, the other study still from the old file, which is left as it was.
TEST(Store, AWholeNodeShardOfTheOldLayoutHandsAStudyOverToItsOwnFiles) {
  TempDir dir;
  const std::string store = dir / "store";
  const StudyRecord first = Study("1111111111111111"), second = Study("2222222222222222");
  {
    auto w = OpenWriter(store, "n0", "", first.id);
    ASSERT_TRUE(w->PutStudy(first).ok());
    ASSERT_TRUE(w->PutTrials({Trial(first.id, "n0", 1), Trial(first.id, "n0", 2)}).ok());
    ASSERT_TRUE(w->Publish().ok());
  }
  // Make it an old store: the same rows, and a second study's, in one file per node.
  const std::string old = LegacySnapshotPath(store, "n0");
  fs::rename(SnapshotPath(store, "n0", first.id), old);
  fs::remove_all(NodeShardsDir(store, "n0"));
  fs::remove_all(dir / "store/work");
  {
    Result<Database> db = Database::Open(old, SQLITE_OPEN_READWRITE, old);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(InsertStudy(*db, second).ok());
    ASSERT_TRUE(UpsertTrials(*db, {Trial(second.id, "n0", 1)}).ok());
  }
  const std::string old_bytes = testing::ReadFile(old);
  ASSERT_EQ(ReadStore(store)->trials.size(), 3u);

  auto w = OpenWriter(store, "n0", "", first.id);
  ASSERT_TRUE(w);
  Result<std::vector<TrialRecord>> adopted = w->Trials(first.id);
  ASSERT_TRUE(adopted.ok());
  EXPECT_EQ(adopted->size(), 2u);
  ASSERT_TRUE(w->PutTrials({Trial(first.id, "n0", 3)}).ok());
  ASSERT_TRUE(w->Publish().ok());
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_TRUE(view->warnings.empty());
  EXPECT_EQ(view->studies.size(), 2u);
  std::map<std::string, int> per_study;
  for (const TrialRecord& t : view->trials) ++per_study[t.study_id];
  EXPECT_EQ(per_study[first.id], 3);
  EXPECT_EQ(per_study[second.id], 1);
  EXPECT_EQ(testing::ReadFile(old), old_bytes);
  // The store now says which layout it has, in a file that tunepars before schema 4 refuse.
  Result<Database> format = OpenShardForReading(StoreFormatPath(store), CheckDepth::kIdentity);
  ASSERT_TRUE(format.ok()) << format.status().message();
  EXPECT_EQ(*format->PragmaInt("user_version"), kSchemaVersion);
}

TEST(Store, MissingStoreReadsAsEmpty) {
  TempDir dir;
  Result<StoreView> view = ReadStore(dir / "nothing-here");
  ASSERT_TRUE(view.ok());
  EXPECT_FALSE(view->exists);
  EXPECT_TRUE(view->studies.empty());
}

// ---- Links planted inside the store (issue 27, item 3): refused, named, never followed.

TEST(StoreLinks, ALiveShardThatIsALinkIsRefusedAndItsTargetUntouched) {
  TempDir dir;
  const std::string store = dir / "store";
  const std::string live = WorkPath(store, "n0", Study().id, "");
  fs::create_directories(fs::path(live).parent_path());
  testing::WriteFile(dir / "victim", "");
  fs::create_symlink(dir / "victim", live);
  Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, "n0", Study().id, ""});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kStore);
  EXPECT_NE(w.status().message().find(live + " is damaged (a symbolic link"), std::string::npos) << w.status().message();
  EXPECT_EQ(fs::file_size(dir / "victim"), 0u);
  EXPECT_TRUE(fs::is_symlink(live));
}

TEST(StoreLinks, AStoreFolderThatIsALinkIsRefused) {
  for (const std::string folder : {"work/n0", "shards/n0", "shards", "work"}) {
    TempDir dir;
    const std::string store = dir / "store";
    fs::create_directories(dir / "elsewhere");
    fs::create_directories(fs::path(store + "/" + folder).parent_path());
    fs::create_symlink(dir / "elsewhere", store + "/" + folder);
    Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, "n0", Study().id, ""});
    ASSERT_FALSE(w.ok()) << folder;
    EXPECT_NE(w.status().message().find("is a symbolic link"), std::string::npos) << w.status().message();
    EXPECT_TRUE(fs::is_empty(dir / "elsewhere")) << folder;
  }
  // The store's own path, and --work-dir, may be links: the user chose where they point.
  TempDir dir;
  fs::create_directories(dir / "real-store");
  fs::create_directories(dir / "real-work");
  fs::create_symlink(dir / "real-store", dir / "store");
  fs::create_symlink(dir / "real-work", dir / "work");
  auto w = ShardWriter::Open({dir / "store", "n0", Study().id, dir / "work"});
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE((*w)->PutStudy(Study()).ok());
  ASSERT_TRUE((*w)->Publish().ok());
  EXPECT_TRUE(fs::exists(SnapshotPath(dir / "real-store", "n0", Study().id)));
}

TEST(StoreLinks, LinksInTheShardsFolderAreNamedSkippedAndNeverFollowed) {
  TempDir dir;
  const std::string store = dir / "store";
  {
    auto w = OpenWriter(store, "n0");
    ASSERT_TRUE(w->PutStudy(Study()).ok());
    ASSERT_TRUE(w->PutTrials({Trial(Study().id, "n0", 1)}).ok());
    ASSERT_TRUE(w->Publish().ok());
  }
  fs::create_symlink(NodeShardsDir(store, "n0"), NodeShardsDir(store, "n1"));  // a whole node folder
  fs::create_directories(NodeShardsDir(store, "n2"));
  fs::create_symlink(SnapshotPath(store, "n0", Study().id), SnapshotPath(store, "n2", Study().id));
  for (const std::string& study : {std::string(), Study().id}) {
    Result<StoreView> view = ReadStore(store, {study, ""});
    ASSERT_TRUE(view.ok()) << view.status().message();
    EXPECT_EQ(view->trials.size(), 1u);
    ASSERT_EQ(view->warnings.size(), 2u) << ::testing::PrintToString(view->warnings);
    EXPECT_NE(view->warnings[0].find(NodeShardsDir(store, "n1") + ": a symbolic link"), std::string::npos)
        << view->warnings[0];
    EXPECT_NE(view->warnings[1].find(SnapshotPath(store, "n2", Study().id) + ": a symbolic link"), std::string::npos)
        << view->warnings[1];
  }
  // A link where this node publishes: the publish replaces the link, never writes its target.
  testing::WriteFile(dir / "victim", "the victim's\n");
  fs::remove(SnapshotPath(store, "n0", Study().id));
  fs::create_symlink(dir / "victim", SnapshotPath(store, "n0", Study().id));
  auto w = OpenWriter(store, "n0");
  ASSERT_TRUE(w != nullptr);
  ASSERT_TRUE(w->Publish().ok());
  EXPECT_EQ(testing::ReadFile(dir / "victim"), "the victim's\n");
  EXPECT_FALSE(fs::is_symlink(SnapshotPath(store, "n0", Study().id)));
  bool kept = false;  // the link itself, set aside as damage
  for (const auto& entry : fs::directory_iterator(NodeShardsDir(store, "n0")))
    kept = kept || (entry.path().filename().string().find(".damaged-") != std::string::npos && fs::is_symlink(entry.path()));
  EXPECT_TRUE(kept);
}

}  // namespace
}  // namespace tunepar::store

namespace tunepar::store {
namespace {

// Facts that travelled as JSON are typed columns now; every one survives the round trip.
TEST(Store, TypedTrialAndStudyFactsRoundTrip) {
  TempDir dir;
  const std::string store = dir / "store";
  auto w = OpenWriter(store, "n0");
  StudyRecord s = Study();
  s.seed = 17;
  s.acquisition = "ucb";
  s.pinned_knobs = "sp0 vpp1 fa0";
  TrialRecord t = Trial(s.id, "n0", 1);
  t.sliced = true;
  t.metric_kind = "higher";
  t.metric_value = 410.5;
  t.ranks_per_node = 3;
  t.process_group = 4242;
  TrialRecord unplaced = Trial(s.id, "n0", 2);
  ASSERT_TRUE(w->PutStudy(s).ok());
  ASSERT_TRUE(w->PutTrials({t, unplaced}).ok());
  ASSERT_TRUE(w->Publish().ok());
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  ASSERT_EQ(view->studies.size(), 1u);
  EXPECT_EQ(view->studies[0], s);
  ASSERT_EQ(view->trials.size(), 2u);
  EXPECT_EQ(view->trials[0], t);
  EXPECT_EQ(view->trials[1], unplaced);
  EXPECT_FALSE(view->trials[1].ranks_per_node.has_value());
}

// A shard written by tunepar at schema 1 (tests/data/v1-store/n0.sql): read through a migrated
// copy, its JSON facts typed, and the file itself left as it was.
TEST(Store, SchemaOneShardIsReadWithItsJsonFactsTyped) {
  TempDir dir;
  const std::string store = dir / "store";
  fs::create_directories(ShardsDir(store));
  const std::string shard = LegacySnapshotPath(store, "n0");
  ASSERT_EQ(std::system(("sqlite3 " + shard + " < " + std::string(TUNEPAR_SOURCE_DIR) +
                         "/tests/data/v1-store/n0.sql").c_str()),
            0);
  const std::string before = testing::ReadFile(shard);
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  ASSERT_TRUE(view->warnings.empty()) << view->warnings.front();
  ASSERT_EQ(view->studies.size(), 2u);
  const StudyRecord& command = view->studies[0].backend == "command" ? view->studies[0] : view->studies[1];
  const StudyRecord& local = view->studies[0].backend == "local" ? view->studies[0] : view->studies[1];
  EXPECT_EQ(command.seed, 7);
  EXPECT_EQ(command.acquisition, "ucb");
  EXPECT_EQ(command.pinned_knobs, "");
  EXPECT_EQ(local.seed, 0);
  EXPECT_EQ(local.acquisition, "logei");
  EXPECT_EQ(local.pinned_knobs, "sp0 vpp1 fa0");
  int metrics = 0, slices = 0, running = 0;
  for (const TrialRecord& t : view->trials) {
    EXPECT_EQ(t.details.find("\"metric\""), std::string::npos) << t.details;
    EXPECT_EQ(t.details.find("\"pgid\""), std::string::npos) << t.details;
    if (t.study_id == command.id && t.status == TrialStatus::kOk) {
      EXPECT_EQ(t.metric_kind, "higher");
      EXPECT_EQ(t.metric_value, 410.0);
      EXPECT_EQ(t.ranks_per_node, 0);
      ++metrics;
    }
    if (t.status == TrialStatus::kRunning) {
      EXPECT_EQ(t.process_group, 4242);
      ++running;
    }
    if (t.study_id == local.id) {
      EXPECT_TRUE(t.sliced) << t.details;
      EXPECT_EQ(t.ranks_per_node, 2);  // the largest slice the study measured (the machine held 2 ranks)
      ++slices;
    }
  }
  EXPECT_EQ(metrics, 3);
  EXPECT_EQ(slices, 2);
  EXPECT_EQ(running, 1);
  EXPECT_EQ(testing::ReadFile(shard), before);
}

// ---- Schema 6 (issue 30 item 1): a trial's knobs in one column, its layout read from its key.

// The trial columns of schema 5, in the order its checksums cover them; schema 6 appends knobs.
constexpr char kSchema5TrialColumns[] =
    "study_id, node_id, number, layout_key, tp, pp, dp, micro_batch, num_micro_batches, precision, zero, "
    "recompute, seq_parallel, virtual_stages, flash_attention, status, attempt, step_time_s, tokens_per_s, "
    "tflops_per_gpu, peak_memory_bytes, objective, predicted_step_time_s, predicted_tokens_per_s, "
    "predicted_memory_bytes, details, sliced, metric_kind, metric_value, ranks_per_node, message, log_path, "
    "backend, hosts, tunepar_version, git_revision, host, pid, process_group, started_at, finished_at, "
    "heartbeat_at, lease_expires_at, role, rerun_of";

void Sql(const std::string& path, const std::string& sql) {
  Result<Database> db = Database::Open(path, SQLITE_OPEN_READWRITE, path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  const Status s = db->Exec(sql);
  ASSERT_TRUE(s.ok()) << s.message();
}

// The first column of what `sql` selects from `db`, as text, row by row.
std::vector<std::string> Query(Database& db, const std::string& sql) {
  std::vector<std::string> rows;
  Result<Statement> st = db.Prepare(sql);
  EXPECT_TRUE(st.ok()) << st.status().message();
  if (!st.ok()) return rows;
  for (Result<bool> row = st->Step(); row.ok() && *row; row = st->Step()) rows.push_back(st->Text(0));
  return rows;
}

std::vector<std::string> Query(const std::string& path, const std::string& sql) {
  Result<Database> db = Database::Open(path, SQLITE_OPEN_READONLY, path);
  EXPECT_TRUE(db.ok()) << db.status().message();
  return db.ok() ? Query(*db, sql) : std::vector<std::string>{};
}

// `path` as schema 5 wrote it: no knobs column, the checksums of schema 5's column list.
void MakeSchema5(const std::string& path) {
  Sql(path, "ALTER TABLE trials DROP COLUMN knobs");
  Sql(path, fmt::format("UPDATE trials SET checksum = tunepar_row_checksum({})", kSchema5TrialColumns));
  Sql(path, "PRAGMA user_version = 5");
}

// Trials 1-4 whose layouts set every knob apart from its default somewhere.
std::vector<TrialRecord> KnobTrials() {
  const std::vector<Layout> layouts = {
      {.tp = 4,
       .pp = 2,
       .dp = 8,
       .micro_batch = 1,
       .num_micro_batches = 8,
       .precision = Precision::kBf16,
       .zero = 1,
       .recompute = Recompute::kFull,
       .seq_parallel = true,
       .virtual_stages = 2,
       .flash_attention = true},
      {.tp = 1, .pp = 1, .dp = 64, .micro_batch = 2, .num_micro_batches = 4, .precision = Precision::kFp32},
      {.tp = 2,
       .pp = 4,
       .dp = 8,
       .micro_batch = 4,
       .num_micro_batches = 2,
       .precision = Precision::kFp16,
       .recompute = Recompute::kSelective,
       .seq_parallel = true},
      {.tp = 8, .pp = 1, .dp = 8, .micro_batch = 1, .num_micro_batches = 1, .flash_attention = true},
  };
  std::vector<TrialRecord> trials;
  for (size_t i = 0; i < layouts.size(); ++i) {
    trials.push_back(Trial(Study().id, "n0", static_cast<int64_t>(i) + 1));
    trials.back().layout = layouts[i];
  }
  return trials;
}

// What schema 6's migration writes into `knobs` for KnobTrials() (fixed: the migration is released).
const std::vector<std::string> kMigratedKnobs = {
    R"({"tp":"4","pp":"2","micro_batch":"1","precision":"bf16","zero":"1","recompute":"full",)"
    R"("seq_parallel":"on","virtual_stages":"2","flash_attention":"on"})",
    R"({"tp":"1","pp":"1","micro_batch":"2","precision":"fp32","zero":"0","recompute":"none",)"
    R"("seq_parallel":"off","virtual_stages":"1","flash_attention":"off"})",
    R"({"tp":"2","pp":"4","micro_batch":"4","precision":"fp16","zero":"0","recompute":"selective",)"
    R"("seq_parallel":"on","virtual_stages":"1","flash_attention":"off"})",
    R"({"tp":"8","pp":"1","micro_batch":"1","precision":"bf16","zero":"0","recompute":"none",)"
    R"("seq_parallel":"off","virtual_stages":"1","flash_attention":"on"})",
};

// Writes `trials` and the study through node n0's writer and publishes them.
void WriteAndPublish(const std::string& store, const std::vector<TrialRecord>& trials) {
  auto w = OpenWriter(store, "n0");
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->PutStudy(Study()).ok());
  ASSERT_TRUE(w->PutTrials(trials).ok());
  ASSERT_TRUE(w->Publish().ok());
}

// Every knob of the list, by name, holds the value knobs.h prints for `layout`, and nothing else.
void ExpectKnobsOf(Database& db, int64_t number, const Layout& layout) {
  const std::string where = fmt::format(" WHERE number = {}", number);
  for (Knob knob : Knobs()) {
    EXPECT_EQ(
        Query(db, fmt::format("SELECT json_extract(knobs, '$.{}') FROM trials{}", KnobName(knob), where)),
        std::vector<std::string>{KnobValue(knob, layout)})
        << KnobName(knob) << " of trial " << number;
  }
  EXPECT_EQ(Query(db, "SELECT COUNT(*) FROM trials, json_each(trials.knobs)" + where),
            std::vector<std::string>{std::to_string(NumKnobs())});
}

TEST(StoreKnobs, ATrialsFieldColumnsHoldWhatSchema5WroteAndItsKnobsEveryKnob) {
  TempDir dir;
  const std::string store = dir / "store";
  const std::vector<TrialRecord> trials = KnobTrials();
  WriteAndPublish(store, trials);
  const std::string published = SnapshotPath(store, "n0", Study().id);
  // What tunepars up to schema 5 read the layout from, in its types (precision and recompute as
  // words, switches as 0 / 1).
  EXPECT_EQ(Query(published,
                  "SELECT json_array(tp, pp, dp, micro_batch, num_micro_batches, precision, zero, recompute, "
                  "seq_parallel, virtual_stages, flash_attention) FROM trials ORDER BY number"),
            (std::vector<std::string>{
                R"([4,2,8,1,8,"bf16",1,"full",1,2,1])", R"([1,1,64,2,4,"fp32",0,"none",0,1,0])",
                R"([2,4,8,4,2,"fp16",0,"selective",1,1,0])", R"([8,1,8,1,1,"bf16",0,"none",0,1,1])"}));
  Result<Database> db = Database::Open(published, SQLITE_OPEN_READONLY, published);
  ASSERT_TRUE(db.ok());
  for (const TrialRecord& t : trials) ExpectKnobsOf(*db, t.number, t.layout);
  // The key stays what lookups are indexed by.
  EXPECT_EQ(Query(*db, "SELECT sql FROM sqlite_master WHERE name = 'trials_by_layout'"),
            std::vector<std::string>{"CREATE INDEX trials_by_layout ON trials (study_id, layout_key)"});
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->trials, trials);
}

// A shard published at schema 5 is read through a migrated copy: every checksum that matched
// matches, the layouts read as they were written, and a row damaged before stays damaged.
TEST(StoreKnobs, ASchema5ShardReadsTheSameLayoutsAndItsDamageStaysVisible) {
  TempDir dir;
  const std::string store = dir / "store";
  const std::vector<TrialRecord> trials = KnobTrials();
  WriteAndPublish(store, trials);
  const std::string published = SnapshotPath(store, "n0", Study().id);
  MakeSchema5(published);
  Sql(published, "UPDATE trials SET step_time_s = 99 WHERE number = 4");
  const std::string before = testing::ReadFile(published);

  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->trials, std::vector<TrialRecord>(trials.begin(), trials.begin() + 3));
  EXPECT_EQ(view->damaged_rows, (std::map<std::string, int64_t>{{published, 1}}));
  ASSERT_EQ(view->warnings.size(), 1u);
  EXPECT_NE(view->warnings[0].find("bad checksum in trial 4 of study " + Study().id + " (node n0)"),
            std::string::npos)
      << view->warnings[0];
  EXPECT_EQ(testing::ReadFile(published), before);  // read, not written

  Result<Database> migrated = OpenShardForReading(published);
  ASSERT_TRUE(migrated.ok()) << migrated.status().message();
  EXPECT_EQ(Query(*migrated, "SELECT knobs FROM trials ORDER BY number"), kMigratedKnobs);
  Result<std::string> bad = FindBadChecksums(*migrated);
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  EXPECT_EQ(*bad, "bad checksum in trial 4 of study " + Study().id +
                      " (node n0): the row changed after it was written");
}

// A node resuming on its schema 5 shards checks them (at schema 5), migrates its live shard in
// place and goes on; what it publishes is schema 6 with every checksum sound.
TEST(StoreKnobs, ANodesSchema5ShardsAreCheckedMigratedInPlaceAndWrittenOn) {
  TempDir dir;
  const std::string store = dir / "store";
  std::vector<TrialRecord> trials = KnobTrials();
  const TrialRecord fourth = trials.back();
  trials.pop_back();
  WriteAndPublish(store, trials);
  const std::string published = SnapshotPath(store, "n0", Study().id);
  const std::string work = WorkPath(store, "n0", Study().id, "");
  MakeSchema5(work);
  MakeSchema5(published);
  {
    auto w = OpenWriter(store, "n0");
    ASSERT_NE(w, nullptr);
    Result<std::vector<TrialRecord>> read = w->Trials(Study().id);
    ASSERT_TRUE(read.ok()) << read.status().message();
    EXPECT_EQ(*read, trials);
    ASSERT_TRUE(w->PutTrials({fourth}).ok());
    ASSERT_TRUE(w->Publish().ok());
  }
  trials.push_back(fourth);
  for (const std::string& path : {work, published}) {
    Result<Database> db = Database::Open(path, SQLITE_OPEN_READONLY, path);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(*db->PragmaInt("user_version"), kSchemaVersion) << path;
    Result<std::string> bad = FindBadChecksums(*db);
    ASSERT_TRUE(bad.ok()) << bad.status().message();
    EXPECT_EQ(*bad, "") << path;
    EXPECT_EQ(Query(*db, "SELECT knobs FROM trials WHERE number < 4 ORDER BY number"),
              std::vector<std::string>(kMigratedKnobs.begin(), kMigratedKnobs.begin() + 3))
        << path;
    ExpectKnobsOf(*db, 4, fourth.layout);
  }
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_TRUE(view->warnings.empty()) << view->warnings.front();
  EXPECT_EQ(view->trials, trials);
}

// The checksum covers the knobs and the key: either changed behind the store's back (the key to
// one that still parses) hides its row, named.
TEST(StoreKnobs, AKnobsOrLayoutKeyChangedBehindTheStoresBackFailsItsChecksum) {
  TempDir dir;
  const std::string store = dir / "store";
  const std::vector<TrialRecord> trials = KnobTrials();
  WriteAndPublish(store, trials);
  const std::string published = SnapshotPath(store, "n0", Study().id);
  Sql(published, R"(UPDATE trials SET knobs = replace(knobs, '"zero":"1"', '"zero":"0"') WHERE number = 1)");
  Sql(published, "UPDATE trials SET layout_key = replace(layout_key, '-mbs2-', '-mbs12-') WHERE number = 2");
  ASSERT_EQ(Query(published, "SELECT json_extract(knobs, '$.zero') FROM trials WHERE number = 1"),
            std::vector<std::string>{"0"});
  const std::vector<std::string> key = Query(published, "SELECT layout_key FROM trials WHERE number = 2");
  ASSERT_EQ(key.size(), 1u);
  ASSERT_NE(key[0].find("-mbs12-"), std::string::npos) << key[0];
  ASSERT_TRUE(ParseLayoutKey(key[0]).ok()) << key[0];

  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->trials, std::vector<TrialRecord>(trials.begin() + 2, trials.end()));
  EXPECT_EQ(view->damaged_rows, (std::map<std::string, int64_t>{{published, 2}}));
  ASSERT_EQ(view->warnings.size(), 1u);
  EXPECT_NE(
      view->warnings[0].find(fmt::format("bad checksum in trial 1 of study {0} (node n0), trial 2 of study "
                                         "{0} (node n0): the rows changed",
                                         Study().id)),
      std::string::npos)
      << view->warnings[0];
  Result<Database> db = Database::Open(published, SQLITE_OPEN_READONLY, published);
  ASSERT_TRUE(db.ok());
  Result<std::string> bad = FindBadChecksums(*db);
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  EXPECT_EQ(*bad, "bad checksum in trial 1 of study " + Study().id +
                      " (node n0) and 1 other row: the row changed after it was written");
}

// A key this tunepar cannot parse under a sound checksum (a newer tunepar's knob, say) leaves
// its row out, named with the key, the way a row with a bad checksum is; a writer's read of it
// fails, naming it.
TEST(StoreKnobs, ALayoutKeyThatDoesNotParseIsADamagedRowNamedWithItsKey) {
  TempDir dir;
  const std::string store = dir / "store";
  const std::vector<TrialRecord> trials = KnobTrials();
  WriteAndPublish(store, trials);
  const std::string published = SnapshotPath(store, "n0", Study().id);
  const std::string work = WorkPath(store, "n0", Study().id, "");
  for (const std::string& path : {work, published}) {
    Sql(path, "UPDATE trials SET layout_key = layout_key || '-xyz2' WHERE number = 2");
    Sql(path,
        fmt::format("UPDATE trials SET checksum = tunepar_row_checksum({}, knobs)", kSchema5TrialColumns));
  }
  const std::vector<std::string> key = Query(published, "SELECT layout_key FROM trials WHERE number = 2");
  ASSERT_EQ(key.size(), 1u);
  ASSERT_FALSE(ParseLayoutKey(key[0]).ok()) << key[0];
  {
    Result<Database> db = Database::Open(published, SQLITE_OPEN_READONLY, published);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(*FindBadChecksums(*db), "");  // the checksum holds: only the key does not read
  }

  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->trials, (std::vector<TrialRecord>{trials[0], trials[2], trials[3]}));
  EXPECT_EQ(view->damaged_rows, (std::map<std::string, int64_t>{{published, 1}}));
  ASSERT_EQ(view->warnings.size(), 1u);
  EXPECT_NE(view->warnings[0].find(
                fmt::format("{}: trial 2 of study {} (node n0) has an unreadable layout_key '{}'", published,
                            Study().id, key[0])),
            std::string::npos)
      << view->warnings[0];
  EXPECT_NE(view->warnings[0].find("its other 3 trials are read"), std::string::npos) << view->warnings[0];
  EXPECT_EQ(view->warnings[0].find("bad checksum"), std::string::npos) << view->warnings[0];

  auto w = OpenWriter(store, "n0");
  ASSERT_NE(w, nullptr);
  Result<std::vector<TrialRecord>> read = w->Trials(Study().id);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("trial 2 of study " + Study().id +
                                         " (node n0) has an unreadable layout_key '" + key[0] + "'"),
            std::string::npos)
      << read.status().message();
}

// The schema 1 shard (tests/data/v1-store/n0.sql), written by a tunepar that read layouts from
// their field columns: every layout read from its key is the one its columns held, and the
// migration's knobs say the same.
TEST(StoreKnobs, TheSchemaOneShardsLayoutsFromTheirKeysAreThoseOfTheirFieldColumns) {
  TempDir dir;
  const std::string store = dir / "store";
  fs::create_directories(ShardsDir(store));
  const std::string shard = LegacySnapshotPath(store, "n0");
  ASSERT_EQ(std::system(
                ("sqlite3 " + shard + " < " + std::string(TUNEPAR_SOURCE_DIR) + "/tests/data/v1-store/n0.sql")
                    .c_str()),
            0);
  const std::vector<std::string> columns =
      Query(shard,
            "SELECT json_array(study_id, number, tp, pp, dp, micro_batch, num_micro_batches, precision, "
            "zero, recompute, "
            "seq_parallel, virtual_stages, flash_attention) FROM trials ORDER BY node_id, number, study_id");
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  ASSERT_TRUE(view->warnings.empty()) << view->warnings.front();
  ASSERT_EQ(view->trials.size(), columns.size());
  ASSERT_GE(columns.size(), 6u);
  std::vector<std::string> read;
  for (const TrialRecord& t : view->trials) {
    const Layout& l = t.layout;
    read.push_back(fmt::format(R"(["{}",{},{},{},{},{},{},"{}",{},"{}",{},{},{}])", t.study_id, t.number,
                               l.tp, l.pp, l.dp, l.micro_batch, l.num_micro_batches, ToString(l.precision),
                               l.zero, ToString(l.recompute), l.seq_parallel ? 1 : 0, l.virtual_stages,
                               l.flash_attention ? 1 : 0));
  }
  std::sort(read.begin(), read.end());
  std::vector<std::string> expected = columns;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(read, expected);

  Result<Database> migrated = OpenShardForReading(shard);
  ASSERT_TRUE(migrated.ok()) << migrated.status().message();
  for (const TrialRecord& t : view->trials) {
    const std::vector<std::string> knobs =
        Query(*migrated, fmt::format("SELECT key || '=' || value FROM trials, json_each(trials.knobs) WHERE "
                                     "study_id = '{}' AND number = {}",
                                     t.study_id, t.number));
    EXPECT_EQ(knobs.size(), 9u);  // the knobs of schema 6's release
    for (const std::string& knob : knobs) {
      const size_t equals = knob.find('=');
      Result<Knob> parsed = ParseKnobName(knob.substr(0, equals));
      ASSERT_TRUE(parsed.ok()) << knob;
      EXPECT_EQ(knob.substr(equals + 1), KnobValue(*parsed, t.layout)) << "trial " << t.number;
    }
  }
}

}  // namespace
}  // namespace tunepar::store
