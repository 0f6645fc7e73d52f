// The store under faults and damage: a disk that fills up mid-publish, EIO on fsync, a failed
// rename, a crash between writing the copy and renaming it (through the FaultyFileSystem seam and
// once on a really full tmpfs), and shards damaged on disk (one changed byte in a value, half
// truncation, a random header). Whatever happens, the published copy that was sound stays intact
// and readable with all its trials, the error names the file and what is wrong, and no journal is
// left behind.
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "store/schema.h"
#include "store/shard_writer.h"
#include "store/store_layout.h"
#include "tests/support/faulty_file_system.h"
#include "store/store_reader.h"
#include "tests/test_support.h"

namespace tunepar::store {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr char kStudyId[] = "0123456789abcdef";

StudyRecord Study() {
  StudyRecord s;
  s.id = kStudyId;
  s.name = "study-0123";
  s.world = 8;
  s.model_name = "tiny";
  s.hardware_name = "local-cpu";
  s.space_name = "default";
  s.objective = "max_tokens_per_s";
  s.backend = "model";
  s.backend_settings = "{}";
  s.created_at = "2026-11-24T00:00:00Z";
  s.created_by = "n0";
  return s;
}

// The message tells a trial's bytes apart in the file: "marker-0007" is trial 7's.
std::string Marker(int64_t number) {
  return fmt::format("marker-{:04d}", number);
}

TrialRecord Trial(const std::string& node, int64_t number, size_t details_bytes = 0) {
  TrialRecord t;
  t.study_id = kStudyId;
  t.node_id = node;
  t.number = number;
  t.layout.tp = 1 << (number % 3);
  t.layout.pp = 1;
  t.layout.dp = 8 / t.layout.tp;
  t.layout.micro_batch = 1;
  t.layout.num_micro_batches = 1;
  t.status = TrialStatus::kOk;
  t.step_time_s = 1.0 + 0.01 * static_cast<double>(number);
  t.tokens_per_s = 1000.0 / *t.step_time_s;
  t.details = details_bytes == 0 ? "{}" : fmt::format(R"({{"pad": "{}"}})", std::string(details_bytes, 'p'));
  t.message = Marker(number);
  t.backend = "model";
  t.started_at = t.finished_at = t.heartbeat_at = t.lease_expires_at = "2026-11-24T00:00:01Z";
  return t;
}

std::vector<TrialRecord> Trials(const std::string& node, int64_t first, int64_t last,
                                size_t details_bytes = 0) {
  std::vector<TrialRecord> trials;
  for (int64_t i = first; i <= last; ++i) trials.push_back(Trial(node, i, details_bytes));
  return trials;
}

std::unique_ptr<ShardWriter> OpenWriter(const std::string& store, FileSystem* file_system = nullptr) {
  Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, "n0", kStudyId, "", file_system});
  EXPECT_TRUE(w.ok()) << w.status().message();
  return w.ok() ? std::move(*w) : nullptr;
}

// A store whose node n0 has published trials 1..`published`, and whose live shard holds
// 1..`live` (closed again).
void MakeStore(const std::string& store, int64_t published, int64_t live, size_t details_bytes = 0) {
  auto w = OpenWriter(store);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->PutStudy(Study()).ok());
  ASSERT_TRUE(w->PutTrials(Trials("n0", 1, published, details_bytes)).ok());
  ASSERT_TRUE(w->Publish().ok());
  if (live > published) {
    ASSERT_TRUE(w->PutTrials(Trials("n0", published + 1, live, details_bytes)).ok());
  }
}

// The published copy reads back whole: every one of its trials, no warning.
void ExpectPublishedTrials(const std::string& store, size_t count) {
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_TRUE(view->warnings.empty()) << view->warnings.front();
  ASSERT_EQ(view->trials.size(), count);
  for (size_t i = 0; i < count; ++i) EXPECT_EQ(view->trials[i], Trial("n0", static_cast<int64_t>(i) + 1));
}

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool AnyNameContains(const std::string& dir, const std::string& part) {
  for (const std::string& name : FilesIn(dir))
    if (name.find(part) != std::string::npos) return true;
  return false;
}

// One changed byte in trial `number`'s message, in the file's bytes.
void ChangeOneByteOfTrial(const std::string& path, int64_t number) {
  std::string bytes = testing::ReadFile(path);
  const size_t at = bytes.find(Marker(number));
  ASSERT_NE(at, std::string::npos) << Marker(number) << " not in " << path;
  bytes[at] = 'M';
  testing::WriteFile(path, bytes);
}

void TruncateToHalf(const std::string& path) {
  fs::resize_file(path, fs::file_size(path) / 2);
}

void RandomHeader(const std::string& path) {
  std::string bytes = testing::ReadFile(path);
  std::mt19937 random(15);
  for (size_t i = 0; i < 100; ++i) bytes[i] = static_cast<char>(random() & 0xff);
  testing::WriteFile(path, bytes);
}

// ShardWriter::Open with what it says on stdout and stderr (spdlog's warning).
struct Opened {
  Result<std::unique_ptr<ShardWriter>> writer = InternalError("not opened");
  std::string said;
};
Opened OpenCapturing(const std::string& store) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Opened o;
  o.writer = ShardWriter::Open({store, "n0", kStudyId, ""});
  o.said = ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  return o;
}

// ---------------------------------------------------------------------------------------------
// Damage

TEST(StoreDamage, OneChangedByteInATrialValueIsCaughtOnReading) {
  TempDir dir;
  const std::string store = dir / "store";
  MakeStore(store, 5, 5);
  const std::string published = SnapshotPath(store, "n0", kStudyId);
  ChangeOneByteOfTrial(published, 3);
  {
    // What SQLite checks does not see it: the reason for the row checksums.
    Result<Database> db = Database::Open(published, SQLITE_OPEN_READONLY, published);
    ASSERT_TRUE(db.ok());
    Result<Statement> check = db->Prepare("PRAGMA integrity_check");
    ASSERT_TRUE(check.ok());
    ASSERT_TRUE(*check->Step());
    EXPECT_EQ(check->Text(0), "ok");
  }
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  // Issue 28 item 11: only the changed row is left out, and counted as such.
  std::vector<int64_t> numbers;
  for (const TrialRecord& t : view->trials) numbers.push_back(t.number);
  EXPECT_EQ(numbers, (std::vector<int64_t>{1, 2, 4, 5}));
  EXPECT_EQ(view->damaged_rows, (std::map<std::string, int64_t>{{published, 1}}));
  ASSERT_EQ(view->warnings.size(), 1u);
  EXPECT_NE(view->warnings[0].find(published), std::string::npos) << view->warnings[0];
  EXPECT_NE(view->warnings[0].find(fmt::format("bad checksum in trial 3 of study {}", kStudyId)),
            std::string::npos)
      << view->warnings[0];
}

struct LiveDamage {
  const char* name;
  void (*damage)(const std::string& path);
  const char* diagnosis;  // what the message must say
};

void PrintTo(const LiveDamage& damage, std::ostream* os) {
  *os << damage.name;
}

class DamagedLiveShard : public ::testing::TestWithParam<LiveDamage> {};

// Resume after the live shard was damaged: the published copy stays intact, the damaged file is
// kept aside, the shard is restored from the copy, and the message names the file and the damage.
TEST_P(DamagedLiveShard, IsKeptAsideAndRestoredFromThePublishedCopy) {
  TempDir dir;
  const std::string store = dir / "store";
  MakeStore(store, 300, 300);
  const std::string work = WorkPath(store, "n0", kStudyId, ""), published = SnapshotPath(store, "n0", kStudyId);
  GetParam().damage(work);
  const std::string published_bytes = testing::ReadFile(published), damaged_bytes = testing::ReadFile(work);

  Opened opened = OpenCapturing(store);
  ASSERT_TRUE(opened.writer.ok()) << opened.writer.status().message();
  EXPECT_NE(opened.said.find(work), std::string::npos) << opened.said;
  EXPECT_NE(opened.said.find(GetParam().diagnosis), std::string::npos) << opened.said;
  EXPECT_NE(opened.said.find(published + " "), std::string::npos) << opened.said;
  EXPECT_EQ(opened.said.find("another tunepar process"), std::string::npos) << opened.said;
  EXPECT_EQ(testing::ReadFile(published), published_bytes);
  // The damaged file is kept as it was, next to the restored shard.
  std::string aside;
  for (const std::string& name : FilesIn(dir / "store/work/n0"))
    if (name.rfind(std::string(kStudyId) + ".sqlite.damaged-", 0) == 0) aside = dir / "store/work/n0/" + name;
  ASSERT_FALSE(aside.empty());
  EXPECT_EQ(testing::ReadFile(aside), damaged_bytes);

  ShardWriter& w = **opened.writer;
  Result<std::vector<TrialRecord>> trials = w.Trials(kStudyId);
  ASSERT_TRUE(trials.ok()) << trials.status().message();
  EXPECT_EQ(*trials, Trials("n0", 1, 300));
  ASSERT_TRUE(w.PutTrials({Trial("n0", 301)}).ok());
  ASSERT_TRUE(w.Publish().ok());
  ExpectPublishedTrials(store, 301);
  opened.writer->reset();
  EXPECT_FALSE(AnyNameContains(dir / "store/work/n0", "-journal"))
      << ::testing::PrintToString(FilesIn(dir / "store/work/n0"));
}

INSTANTIATE_TEST_SUITE_P(
    Store, DamagedLiveShard,
    ::testing::Values(LiveDamage{"OneChangedByte", [](const std::string& p) { ChangeOneByteOfTrial(p, 42); },
                                 "bad checksum in trial 42 of study 0123456789abcdef"},
                      LiveDamage{"HalfTruncated", TruncateToHalf, "truncated: file is "},
                      LiveDamage{"RandomHeader", RandomHeader, "not a database: header damaged"}),
    [](const ::testing::TestParamInfo<LiveDamage>& info) { return std::string(info.param.name); });

TEST(StoreDamage, TruncationSaysHowLongTheFileIsAndShouldBe) {
  TempDir dir;
  const std::string store = dir / "store";
  MakeStore(store, 300, 300);
  const std::string published = SnapshotPath(store, "n0", kStudyId);
  const uintmax_t size = fs::file_size(published);
  TruncateToHalf(published);
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->warnings.size(), 1u);
  EXPECT_NE(
      view->warnings[0].find(fmt::format(
          "truncated: file is {} bytes, the header says {} pages of 4096 bytes", size / 2, size / 4096)),
      std::string::npos)
      << view->warnings[0];
}

// Nothing sound to resume from: refused, naming the damage and what to do; nothing changed on
// disk, no journal left.
TEST(StoreDamage, DamagedLiveShardWithoutAPublishedCopyIsRefused) {
  TempDir dir;
  const std::string store = dir / "store";
  MakeStore(store, 300, 300);
  fs::remove(SnapshotPath(store, "n0", kStudyId));
  const std::string work = WorkPath(store, "n0", kStudyId, "");
  TruncateToHalf(work);
  const auto before = testing::SnapshotFiles(store);
  Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, "n0", kStudyId, ""});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kStore);
  const std::string& m = w.status().message();
  EXPECT_NE(m.find(work + " is damaged (truncated: file is "), std::string::npos) << m;
  EXPECT_NE(m.find("no published copy"), std::string::npos) << m;
  EXPECT_NE(m.find("move the damaged file aside"), std::string::npos) << m;
  EXPECT_EQ(testing::SnapshotFiles(store), before);
}

TEST(StoreDamage, DamagedLiveShardAndPublishedCopyAreRefused) {
  TempDir dir;
  const std::string store = dir / "store";
  MakeStore(store, 300, 300);
  const std::string work = WorkPath(store, "n0", kStudyId, ""), published = SnapshotPath(store, "n0", kStudyId);
  RandomHeader(work);
  ChangeOneByteOfTrial(published, 7);
  const auto before = testing::SnapshotFiles(store);
  Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, "n0", kStudyId, ""});
  ASSERT_FALSE(w.ok());
  const std::string& m = w.status().message();
  EXPECT_NE(m.find(work + " is damaged (not a database: header damaged"), std::string::npos) << m;
  EXPECT_NE(m.find(published + " (bad checksum in trial 7"), std::string::npos) << m;
  EXPECT_EQ(testing::SnapshotFiles(store), before);
}

// The published copy damaged, the live shard sound: the copy is kept aside and the live shard
// published in its place.
TEST(StoreDamage, DamagedPublishedCopyIsReplacedByTheSoundLiveShard) {
  TempDir dir;
  const std::string store = dir / "store";
  MakeStore(store, 10, 12);
  const std::string published = SnapshotPath(store, "n0", kStudyId);
  ChangeOneByteOfTrial(published, 4);
  Opened opened = OpenCapturing(store);
  ASSERT_TRUE(opened.writer.ok()) << opened.writer.status().message();
  EXPECT_NE(opened.said.find(published + " is damaged (bad checksum in trial 4"), std::string::npos)
      << opened.said;
  EXPECT_TRUE(AnyNameContains(NodeShardsDir(store, "n0"), std::string(kStudyId) + ".sqlite.damaged-"));
  ASSERT_TRUE((*opened.writer)->Publish().ok());
  ExpectPublishedTrials(store, 12);
}

// Damage that appears while a node runs (its pages read again from disk once they left
// SQLite's cache) stops the publish: the published copy is left as it was.
TEST(StoreDamage, PublishRefusesADamagedLiveShard) {
  TempDir dir;
  const std::string store = dir / "store";
  constexpr int kTrials = 3000;  // with 2 KB of details each: several times SQLite's page cache
  {
    auto w = OpenWriter(store);
    ASSERT_TRUE(w->PutStudy(Study()).ok());
    ASSERT_TRUE(w->PutTrials(Trials("n0", 1, kTrials, 2048)).ok());
  }
  auto w = OpenWriter(store);
  ASSERT_TRUE(w);
  const auto publishing = std::chrono::steady_clock::now();
  ASSERT_TRUE(w->Publish().ok());
  std::printf("publishing a %d-trial shard (%.1f MB), checks included: %.3f s\n", kTrials,
              static_cast<double>(fs::file_size(w->work_path())) / 1e6,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - publishing).count());
  const std::string published = SnapshotPath(store, "n0", kStudyId);
  const std::string published_bytes = testing::ReadFile(published);
  ChangeOneByteOfTrial(w->work_path(), 1);
  ASSERT_TRUE(w->PutTrials({Trial("n0", kTrials + 1)}).ok());
  const auto started = std::chrono::steady_clock::now();
  Status s = w->Publish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not published: live shard " + w->work_path() +
                             " is damaged (bad checksum in trial 1 of"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("the published copy " + published + " is intact"), std::string::npos)
      << s.message();
  EXPECT_EQ(testing::ReadFile(published), published_bytes);
  EXPECT_FALSE(AnyNameContains(NodeShardsDir(store, "n0"), ".tmp-"));
  std::printf("checking a %d-trial live shard (%.1f MB) before publishing: %.3f s\n", kTrials,
              static_cast<double>(fs::file_size(w->work_path())) / 1e6, seconds);
}

// ---------------------------------------------------------------------------------------------
// Injected faults

class StoreFaults : public ::testing::Test {
 protected:
  // n0 has published trials 1..50 through the faulty filesystem, which works so far.
  void SetUp() override {
    writer_ = OpenWriter(store_, &file_system_);
    ASSERT_TRUE(writer_);
    ASSERT_TRUE(writer_->PutStudy(Study()).ok());
    ASSERT_TRUE(writer_->PutTrials(Trials("n0", 1, 50)).ok());
    ASSERT_TRUE(writer_->Publish().ok());
    published_bytes_ = testing::ReadFile(SnapshotPath(store_, "n0", kStudyId));
    ASSERT_TRUE(writer_->PutTrials(Trials("n0", 51, 60)).ok());
  }
  void TearDown() override { writer_.reset(); }  // before the filesystem's VFS goes away

  // The fault left the published copy as it was, readable with its 50 trials, and no partial
  // copy behind; once the fault clears, the same writer goes on and publishes.
  void ExpectIntactAndRecovering() {
    EXPECT_EQ(testing::ReadFile(SnapshotPath(store_, "n0", kStudyId)), published_bytes_);
    ExpectPublishedTrials(store_, 50);
    EXPECT_FALSE(AnyNameContains(NodeShardsDir(store_, "n0"), ".tmp-"))
        << ::testing::PrintToString(FilesIn(NodeShardsDir(store_, "n0")));
    file_system_.Clear();
    ASSERT_TRUE(writer_->PutTrials({Trial("n0", 61)}).ok());
    Status s = writer_->Publish();
    ASSERT_TRUE(s.ok()) << s.message();
    ExpectPublishedTrials(store_, 61);
  }

  TempDir dir_;
  const std::string store_ = dir_ / "store";
  FaultyFileSystem file_system_;
  std::unique_ptr<ShardWriter> writer_;
  std::string published_bytes_;
};

TEST_F(StoreFaults, DiskFullMidPublish) {
  file_system_.FailWritesAfter(16384, ".tmp-");
  Status s = writer_->Publish();
  ASSERT_FALSE(s.ok());
  EXPECT_GT(file_system_.faults_injected(), 0);
  EXPECT_NE(s.message().find("cannot publish " + SnapshotPath(store_, "n0", kStudyId)), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("database or disk is full"), std::string::npos) << s.message();
  ExpectIntactAndRecovering();
}

TEST_F(StoreFaults, SqliteSyncOfTheCopyFailsWithEio) {
  file_system_.FailSqliteSyncs(".tmp-");
  Status s = writer_->Publish();
  ASSERT_FALSE(s.ok());
  EXPECT_GT(file_system_.faults_injected(), 0);
  EXPECT_NE(s.message().find("writing the copy " + NodeShardsDir(store_, "n0") + "/." + std::string(kStudyId) + ".sqlite.tmp-"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("disk I/O error (fsync failed)"), std::string::npos) << s.message();
  ExpectIntactAndRecovering();
}

TEST_F(StoreFaults, FsyncOfTheCopyFailsWithEio) {
  // The copy is written in a folder of its own with an unpredictable name: .<study>.sqlite.tmp-XXXXXX/
  const std::string copy_folder = fmt::format("{}/.{}.sqlite.tmp-", NodeShardsDir(store_, "n0"), kStudyId);
  file_system_.FailFsyncsOfPathsWith(copy_folder);
  Status s = writer_->Publish();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot sync '" + copy_folder), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("': Input/output error"), std::string::npos) << s.message();
  ExpectIntactAndRecovering();
}

// The rename done, the directory's fsync fails: the new copy is in place (whether it survives a
// power cut is not known), and the error says so.
TEST_F(StoreFaults, FsyncOfTheShardsDirectoryFailsAfterTheRename) {
  file_system_.FailFsyncOf(NodeShardsDir(store_, "n0"));
  Status s = writer_->Publish();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("published " + SnapshotPath(store_, "n0", kStudyId) + ", but: cannot sync '" +
                             NodeShardsDir(store_, "n0")),
            std::string::npos)
      << s.message();
  ExpectPublishedTrials(store_, 60);
  file_system_.Clear();
  ASSERT_TRUE(writer_->Publish().ok());
  ExpectPublishedTrials(store_, 60);
}

TEST_F(StoreFaults, RenameFails) {
  file_system_.FailRenames();
  Status s = writer_->Publish();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot rename"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(SnapshotPath(store_, "n0", kStudyId)), std::string::npos) << s.message();
  ExpectIntactAndRecovering();
}

TEST_F(StoreFaults, DiskFullWhileWritingTheLiveShard) {
  file_system_.FailWritesAfter(0, "/work/");
  Status s = writer_->PutTrials({Trial("n0", 61)});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("database or disk is full"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(writer_->work_path()), std::string::npos) << s.message();
  ExpectIntactAndRecovering();
}

// The copy written and the process killed before the rename: readers see the previous copy, and
// the next run of the node removes the stale copy and publishes everything its live shard has.
class CrashingFileSystem : public FaultyFileSystem {
 public:
  Status Rename(const std::string&, const std::string&) override { _exit(kCrashed); }
  static constexpr int kCrashed = 42;
};

TEST(StoreCrash, BetweenWritingTheCopyAndRenamingIt) {
  TempDir dir;
  const std::string store = dir / "store";
  MakeStore(store, 50, 50);
  const std::string published = SnapshotPath(store, "n0", kStudyId);
  const std::string published_bytes = testing::ReadFile(published);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    CrashingFileSystem file_system;
    Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, "n0", kStudyId, "", &file_system});
    if (!w.ok() || !(*w)->PutTrials(Trials("n0", 51, 60)).ok()) _exit(1);
    (void)(*w)->Publish();
    _exit(2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), CrashingFileSystem::kCrashed);
  EXPECT_TRUE(AnyNameContains(NodeShardsDir(store, "n0"), fmt::format(".{}.sqlite.tmp-", kStudyId)));
  EXPECT_EQ(testing::ReadFile(published), published_bytes);
  ExpectPublishedTrials(store, 50);

  auto w = OpenWriter(store);
  ASSERT_TRUE(w);
  EXPECT_FALSE(AnyNameContains(NodeShardsDir(store, "n0"), ".tmp-"));
  EXPECT_EQ(*w->Trials(kStudyId), Trials("n0", 1, 60));
  ASSERT_TRUE(w->Publish().ok());
  ExpectPublishedTrials(store, 60);
}

// Once on a really full filesystem: a small tmpfs holds the store (the live shard is on the
// ordinary disk, as with --work-dir on node-local disk).
TEST(StoreFullDisk, PublishOnAFullTmpfs) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  TempDir dir;
  const std::string mount_point = dir / "small";
  fs::create_directories(mount_point);
  if (mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=2m") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{mount_point};
  const std::string store = mount_point + "/store", local = dir / "node-local";
  Result<std::unique_ptr<ShardWriter>> opened = ShardWriter::Open({store, "n0", kStudyId, local});
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  ShardWriter& w = **opened;
  ASSERT_TRUE(w.PutStudy(Study()).ok());
  ASSERT_TRUE(w.PutTrials(Trials("n0", 1, 50)).ok());
  ASSERT_TRUE(w.Publish().ok());
  const std::string published_bytes = testing::ReadFile(SnapshotPath(store, "n0", kStudyId));

  // Fill what is left of the tmpfs.
  const std::string filler = mount_point + "/filler";
  {
    std::ofstream out(filler, std::ios::binary);
    const std::string block(4096, 'f');
    while (out.write(block.data(), block.size()) && out.flush()) {
    }
  }
  ASSERT_TRUE(w.PutTrials(Trials("n0", 51, 60)).ok());
  Status s = w.Publish();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("database or disk is full"), std::string::npos) << s.message();
  EXPECT_EQ(testing::ReadFile(SnapshotPath(store, "n0", kStudyId)), published_bytes);
  ExpectPublishedTrials(store, 50);
  EXPECT_FALSE(AnyNameContains(NodeShardsDir(store, "n0"), ".tmp-"));

  fs::remove(filler);
  s = w.Publish();
  ASSERT_TRUE(s.ok()) << s.message();
  ExpectPublishedTrials(store, 60);
}

}  // namespace
}  // namespace tunepar::store
