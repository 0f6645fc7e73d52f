#include "store/shard_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <tuple>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/no_follow.h"
#include "store/rows.h"
#include "store/schema.h"
#include "store/shard_check.h"
#include "store/store_layout.h"

namespace tunepar::store {

namespace fs = std::filesystem;

namespace {

// What a link where a shard should be is, as damage: set aside (the link itself), never followed.
constexpr std::string_view kLinkDamage = "a symbolic link (tunepar never follows links inside a store)";

// How to get trials back out of a damaged file by hand.
constexpr std::string_view kRecoverHint = "`sqlite3 FILE .recover` may save some of its trials";

// `relative` below `root` (links refused there: base/no_follow.h), created and writable.
Status MakeWritableDir(const std::string& root, const std::string& relative, std::string_view what) {
  const std::string dir = relative.empty() ? root : (fs::path(root) / relative).string();
  if (Status made = MakeDirectoriesBelow(root, relative); !made.ok())
    return StoreError(fmt::format("cannot create {} '{}': {}", what, dir, made.message()));
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return StoreError(fmt::format("{} '{}' is not writable: {}", what, dir, std::strerror(errno)));
  return Status::Ok();
}

Result<int64_t> PublishSeq(Database& db) {
  Result<Statement> st = db.Prepare("SELECT value FROM meta WHERE key = 'publish_seq'");
  if (!st.ok()) return st.status();
  Result<bool> row = st->Step();
  if (!row.ok()) return row.status();
  if (!*row) return 0;
  const std::string text = st->Text(0);
  int64_t seq = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seq);
  if (ec != std::errc() || end != text.data() + text.size())
    return StoreError(
        fmt::format("{}: damaged: publish_seq '{}' in the meta table is not a number", db.label(), text));
  return seq;
}

Status SetMeta(Database& db, std::string_view key, std::string_view value) {
  Result<Statement> st = db.Prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)");
  if (!st.ok()) return st.status();
  st->Bind(1, key).Bind(2, value);
  return st->Run();
}

std::string JournalPath(const std::string& path) {
  return path + "-journal";
}

struct ShardPaths {
  std::string node_id, study_id, work, snapshot;
};

// The live shard, open and locked, and what is wrong with it ("" when sound).
struct LiveShard {
  Database db;
  std::string damage;
  bool fresh = false;            // there was no shard yet (no file, or an empty one)
  bool created = false;          // this open created the file
  bool journal_existed = false;  // a rollback journal was there before this open
};

// A journal that holds no transaction to roll back (empty, or its header zeroed as SQLite's
// exclusive locking mode leaves it): removing it loses nothing. A hot one stays for SQLite.
bool JournalIsCold(const std::string& journal) {
  std::ifstream in(journal, std::ios::binary);
  char magic[8] = {};
  if (!in.read(magic, sizeof magic)) return true;
  return std::all_of(std::begin(magic), std::end(magic), [](char c) { return c == 0; });
}

// After a refused open: closes the live shard and removes what this open added (the file it
// created, a journal that was not there), so that a refused run leaves no trace.
void CloseRefused(LiveShard& live, const std::string& path, FileSystem& file_system) {
  live.db = Database();
  // A file this open created goes with whatever journal it has: a journal must never outlive its
  // database file, or SQLite would roll it into the next file of that name.
  if (live.created || (!live.journal_existed && JournalIsCold(JournalPath(path))))
    (void)file_system.Remove(JournalPath(path));
  if (live.created) (void)file_system.Remove(path);
}

// Opens the live shard and holds it exclusively for the life of the writer. Taking the lock
// reads the header and rolls back a transaction a killed writer left behind; only SQLITE_BUSY
// there means another process holds the shard: other failures are damage, diagnosed from the
// file's bytes.
Result<LiveShard> OpenLiveShard(const ShardPaths& paths, FileSystem& file_system) {
  const std::string& path = paths.work;
  LiveShard live;
  std::error_code ec;
  // Set aside like any damage (RecoverFromDamage), never opened: SQLite would write through a link.
  const fs::file_status status = fs::symlink_status(path, ec);
  if (fs::is_directory(status) || fs::is_symlink(status)) {
    live.damage = fs::is_symlink(status) ? std::string(kLinkDamage) : "a directory, not a shard file";
    return live;
  }
  live.created = !fs::exists(path, ec);
  live.fresh = live.created || fs::file_size(path, ec) == 0;
  live.journal_existed = fs::exists(JournalPath(path), ec);
  Result<Database> db =
      Database::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, path, file_system.SqliteVfs());
  if (!db.ok()) return db.status();
  live.db = std::move(*db);
  auto refuse = [&](const Status& status) {
    CloseRefused(live, path, file_system);
    return status;
  };
  if (Status s = live.db.Exec("PRAGMA locking_mode = EXCLUSIVE"); !s.ok()) return refuse(s);
  Status lock = live.db.Exec("BEGIN EXCLUSIVE");
  if (lock.ok()) lock = live.db.Exec("COMMIT");
  if (!lock.ok()) {
    const int code = live.db.ErrorCode() & 0xff;
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {  // nothing to clean up: the files are the holder's
      return StoreError(
          fmt::format("shard '{}' is being written by another tunepar process on this node ({}); wait for it "
                      "or give this one another --node-id",
                      paths.node_id, path));
    }
    if (!IsDamageCode(code)) return refuse(lock.WithContext("cannot open the live shard"));
    const std::string header = HeaderDamage(live.db);
    live.damage = !header.empty() ? header : fmt::format("damaged: {}", sqlite3_errmsg(live.db.handle()));
    return live;
  }
  Result<std::string> damage = FindDamage(live.db, CheckDepth::kRows);
  if (!damage.ok()) return refuse(damage.status());
  live.damage = std::move(*damage);
  return live;
}

std::string UtcStamp() {
  return fmt::format("{:%Y%m%dT%H%M%SZ}",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
}

// Keeps a damaged file (and its journal, which belongs to it) as <path>.damaged-<utc>.
Result<std::string> MoveAside(const std::string& path, FileSystem& file_system) {
  const std::string aside = fmt::format("{}.damaged-{}", path, UtcStamp());
  TUNEPAR_RETURN_IF_ERROR(file_system.Rename(path, aside));
  std::error_code ec;
  if (fs::exists(JournalPath(path), ec))
    TUNEPAR_RETURN_IF_ERROR(file_system.Rename(JournalPath(path), JournalPath(aside)));
  return aside;
}

// A damaged live shard next to a sound published copy: keep the damaged file, start again from
// the copy (Open restores it). Refused when there is no sound copy to start from.
Status ReplaceDamagedLiveShard(LiveShard& live, const ShardPaths& paths, const std::string& published_damage,
                               FileSystem& file_system) {
  std::error_code ec;
  if (!fs::exists(paths.snapshot, ec)) {
    return StoreError(
        fmt::format("live shard {} is damaged ({}), and there is no published copy to restore it from: move "
                    "the damaged file aside "
                    "({}) and run again, which starts this node's shard empty",
                    paths.work, live.damage, kRecoverHint));
  }
  if (!published_damage.empty()) {
    return StoreError(
        fmt::format("live shard {} is damaged ({}), and so is the published copy {} ({}): nothing sound to "
                    "resume from; move both aside "
                    "({}) and run again",
                    paths.work, live.damage, paths.snapshot, published_damage, kRecoverHint));
  }
  const std::string damage = live.damage;
  live.db = Database();
  if (!live.journal_existed && JournalIsCold(JournalPath(paths.work)))
    (void)file_system.Remove(
        JournalPath(paths.work));  // ours; one that was there belongs to the damaged file
  Result<std::string> aside = MoveAside(paths.work, file_system);
  if (!aside.ok())
    return aside.status().WithContext(fmt::format("keeping the damaged live shard {}", paths.work));
  spdlog::warn(
      "live shard {} is damaged ({}); kept it as {} and restored this node's shard from the intact published "
      "copy {} "
      "(trials recorded after that copy was published run again)",
      paths.work, damage, *aside, paths.snapshot);
  Result<LiveShard> fresh = OpenLiveShard(paths, file_system);
  if (!fresh.ok()) return fresh.status();
  live = std::move(*fresh);
  if (!live.damage.empty())
    return StoreError(fmt::format("new live shard {} is damaged ({})", paths.work, live.damage));
  return Status::Ok();
}

// A damaged published copy next to a sound live shard: keep the damaged copy; the live shard is
// published in its place. Refused when there is no live shard (nothing would replace it).
Status ReplaceDamagedPublishedCopy(const LiveShard& live, const ShardPaths& paths,
                                   const std::string& published_damage, FileSystem& file_system) {
  if (live.fresh) {
    return StoreError(
        fmt::format("this node's published copy {} is damaged ({}), and there is no live shard to replace "
                    "it: move it aside ({}) and run "
                    "again, which starts this node's shard empty",
                    paths.snapshot, published_damage, kRecoverHint));
  }
  Result<std::string> aside = MoveAside(paths.snapshot, file_system);
  if (!aside.ok())
    return aside.status().WithContext(fmt::format("keeping the damaged published copy {}", paths.snapshot));
  spdlog::warn(
      "this node's published copy {} is damaged ({}); kept it as {}; the sound live shard {} is published in "
      "its place",
      paths.snapshot, published_damage, *aside, paths.work);
  return Status::Ok();
}

// Restores the live shard from the published copy when that is newer (a node-local disk wiped
// between jobs, or a damaged live shard set aside).
Status RestoreIfOlder(Database& db, const std::string& snapshot_path) {
  std::error_code ec;
  if (!fs::exists(snapshot_path, ec)) return Status::Ok();
  Result<Database> snapshot = OpenShardForReading(snapshot_path);
  if (!snapshot.ok()) return snapshot.status().WithContext("this node's published shard");
  Result<int64_t> snapshot_seq = PublishSeq(*snapshot);
  if (!snapshot_seq.ok()) return snapshot_seq.status();
  Result<int64_t> work_version = db.PragmaInt("user_version");
  if (!work_version.ok()) return work_version.status();
  int64_t work_seq = -1;
  if (*work_version > 0) {
    Result<int64_t> seq = PublishSeq(db);
    if (!seq.ok()) return seq.status();
    work_seq = *seq;
  }
  if (work_seq >= *snapshot_seq) return Status::Ok();
  sqlite3_backup* backup = sqlite3_backup_init(db.handle(), "main", snapshot->handle(), "main");
  if (backup == nullptr) return db.Error("cannot restore the work shard from the published snapshot");
  sqlite3_backup_step(backup, -1);
  if (sqlite3_backup_finish(backup) != SQLITE_OK)
    return db.Error("cannot restore the work shard from the published snapshot");
  return Status::Ok();
}

// Records in the shard who writes it (node id and study id: readers count a shard only where
// they say it belongs), refusing a shard that belongs to another node or study.
Status ClaimForNode(Database& db, const std::string& work_path, const std::string& node_id, const std::string& study_id) {
  for (const auto& [key, value, what] : {std::tuple<std::string_view, const std::string&, std::string_view>{
                                             "node_id", node_id, "node"},
                                         {"study_id", study_id, "study"}}) {
    Result<Statement> st = db.Prepare("SELECT value FROM meta WHERE key = ?1");
    if (!st.ok()) return st.status();
    st->Bind(1, key);
    Result<bool> row = st->Step();
    if (!row.ok()) return row.status();
    if (*row && st->Text(0) != value)
      return StoreError(fmt::format("{}: belongs to {} '{}', not '{}'", work_path, what, st->Text(0), value));
    TUNEPAR_RETURN_IF_ERROR(SetMeta(db, key, value));
  }
  return Status::Ok();
}

// A publish writes its copy in a folder of its own, made by mkdtemp next to the published copy:
// an unpredictable name, created new and private, so that no file or link planted in the node's
// shards folder is ever written through (VACUUM INTO follows links).
std::string CopyFolderPrefix(const std::string& study_id) {
  return fmt::format(".{}.sqlite.tmp-", study_id);
}

Result<std::string> MakeCopyFolder(const std::string& shards_dir, const std::string& study_id) {
  std::string pattern = (fs::path(shards_dir) / (CopyFolderPrefix(study_id) + "XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr)
    return StoreError(fmt::format("cannot create a folder for the copy in '{}': {}", shards_dir, std::strerror(errno)));
  return pattern;
}

// Copies that a publish killed between writing and renaming left behind: this node's, so stale
// once the node's live shard of the study is held.
void RemoveStaleCopies(const std::string& shards_dir, const std::string& study_id, FileSystem& file_system) {
  const std::string prefix = CopyFolderPrefix(study_id);
  std::error_code ec;
  for (fs::directory_iterator it(shards_dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind(prefix, 0) != 0) continue;
    std::error_code type_ec;
    if (it->is_directory(type_ec) && !it->is_symlink(type_ec)) {
      fs::remove_all(it->path(), type_ec);
    } else {
      (void)file_system.Remove(it->path().string());  // a copy file of a tunepar before copy folders
    }
  }
}

// Writes <store>/shards/store-format.sqlite when it is missing or older (store_layout.h): a
// shard with no tables and this tunepar's schema version, renamed into place.
Status WriteStoreFormat(const std::string& store_dir, FileSystem& file_system) {
  const std::string path = StoreFormatPath(store_dir);
  std::error_code ec;
  if (fs::exists(path, ec)) {
    Result<Database> existing = Database::Open(ImmutableUri(path), SQLITE_OPEN_READONLY, path);
    Result<int64_t> version = existing.ok() ? existing->PragmaInt("user_version") : Result<int64_t>(0);
    if (version.ok() && *version >= kSchemaVersion) return Status::Ok();
  }
  Result<std::string> folder = MakeCopyFolder(ShardsDir(store_dir), "store-format");
  if (!folder.ok()) return folder.status();
  const std::string copy = *folder + "/store-format.sqlite";
  {
    Result<Database> db = Database::Open(copy, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, copy);
    if (!db.ok()) return db.status();
    TUNEPAR_RETURN_IF_ERROR(db->Exec(fmt::format("PRAGMA application_id = {}", kApplicationId)));
    TUNEPAR_RETURN_IF_ERROR(db->Exec(fmt::format("PRAGMA user_version = {}", kSchemaVersion)));
  }
  Status renamed = file_system.Rename(copy, path);
  if (!renamed.ok()) (void)file_system.Remove(copy);
  fs::remove_all(*folder, ec);
  return renamed;
}

Status PrepareDirectories(const ShardOptions& options, FileSystem& file_system) {
  TUNEPAR_RETURN_IF_ERROR(ValidateNodeId(options.node_id));
  TUNEPAR_RETURN_IF_ERROR(ValidateStudyId(options.study_id));
  TUNEPAR_RETURN_IF_ERROR(CheckShardVersions(options.store_dir, options.node_id));
  const std::string& store = options.store_dir;
  TUNEPAR_RETURN_IF_ERROR(MakeWritableDir(store, "", "store directory"));
  TUNEPAR_RETURN_IF_ERROR(MakeWritableDir(store, "shards", "store shard directory"));
  TUNEPAR_RETURN_IF_ERROR(WriteStoreFormat(store, file_system));
  TUNEPAR_RETURN_IF_ERROR(MakeWritableDir(store, "shards/" + options.node_id, "node shard directory"));
  const std::string work_stem = fs::path(WorkPath(store, options.node_id, options.study_id, options.work_dir))
                                    .parent_path().filename().string();
  if (options.work_dir.empty()) return MakeWritableDir(store, "work/" + work_stem, "work directory");
  return MakeWritableDir(options.work_dir, work_stem, "work directory");
}

// A whole-node shard of the old layout (store_layout.h) that holds the study, and its publish
// sequence: the live one when it is newer than the published one.
std::optional<std::string> NewestWholeNodeShard(const ShardOptions& options) {
  std::optional<std::string> newest;
  int64_t newest_seq = -1;
  for (const std::string& path : {LegacyWorkPath(options.store_dir, options.node_id, options.work_dir),
                                  LegacySnapshotPath(options.store_dir, options.node_id)}) {
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    Result<Database> db = OpenShardForReading(path, CheckDepth::kIdentity);
    if (!db.ok()) continue;
    Result<int64_t> seq = PublishSeq(*db);
    if (seq.ok() && *seq > newest_seq) newest = path, newest_seq = *seq;
  }
  return newest;
}

// A study that a tunepar before schema 4 kept in the node's one shard of every study: its rows
// are copied into the study's new live shard, which is then published in their place. The old
// file stays as it is (readers leave out what it holds of this study from now on).
Status AdoptFromWholeNodeShard(Database& db, const ShardOptions& options) {
  Result<std::vector<StudyRecord>> own = SelectStudies(db);
  if (!own.ok()) return own.status();
  if (!own->empty()) return Status::Ok();
  const std::optional<std::string> whole = NewestWholeNodeShard(options);
  if (!whole) return Status::Ok();
  Result<Database> old = OpenShardForReading(*whole, CheckDepth::kIdentity);
  if (!old.ok()) return old.status();
  Result<std::vector<StudyRecord>> studies = SelectStudies(*old);
  if (!studies.ok()) return studies.status().WithContext(fmt::format("reading {}", *whole));
  auto study = std::find_if(studies->begin(), studies->end(),
                            [&](const StudyRecord& s) { return s.id == options.study_id; });
  if (study == studies->end()) return Status::Ok();
  Result<std::vector<TrialRecord>> trials = SelectTrials(*old, options.study_id);
  if (!trials.ok()) return trials.status().WithContext(fmt::format("reading {}", *whole));
  TUNEPAR_RETURN_IF_ERROR(InsertStudy(db, *study));
  TUNEPAR_RETURN_IF_ERROR(UpsertTrials(db, *trials));
  spdlog::info("study {}: {} trials of node {} taken from {} into a shard of the study's own", study->name,
               trials->size(), options.node_id, *whole);
  return Status::Ok();
}

// Settles which of the live shard and the published copy to go on from when one is damaged.
Status RecoverFromDamage(LiveShard& live, const ShardPaths& paths, FileSystem& file_system) {
  Result<std::string> published_damage = FindFileDamage(paths.snapshot, CheckDepth::kRows);
  if (!published_damage.ok()) return published_damage.status().WithContext("this node's published shard");
  if (!live.damage.empty()) return ReplaceDamagedLiveShard(live, paths, *published_damage, file_system);
  if (!published_damage->empty())
    return ReplaceDamagedPublishedCopy(live, paths, *published_damage, file_system);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<ShardWriter>> ShardWriter::Open(const ShardOptions& options) {
  FileSystem& file_system = options.file_system != nullptr ? *options.file_system : DefaultFileSystem();
  const ShardPaths paths{options.node_id, options.study_id,
                         WorkPath(options.store_dir, options.node_id, options.study_id, options.work_dir),
                         SnapshotPath(options.store_dir, options.node_id, options.study_id)};
  TUNEPAR_RETURN_IF_ERROR(PrepareDirectories(options, file_system));

  Result<LiveShard> live = OpenLiveShard(paths, file_system);
  if (!live.ok()) return live.status();
  Status opened = RecoverFromDamage(*live, paths, file_system);
  if (opened.ok()) opened = RestoreIfOlder(live->db, paths.snapshot);
  if (opened.ok()) opened = live->db.Exec("PRAGMA foreign_keys = ON");
  if (opened.ok()) opened = Migrate(live->db);
  if (opened.ok()) opened = ClaimForNode(live->db, paths.work, options.node_id, options.study_id);
  if (opened.ok()) opened = AdoptFromWholeNodeShard(live->db, options);
  if (!opened.ok()) {
    CloseRefused(*live, paths.work, file_system);
    return opened;
  }
  RemoveStaleCopies(NodeShardsDir(options.store_dir, options.node_id), options.study_id, file_system);
  return std::unique_ptr<ShardWriter>(
      new ShardWriter(options, file_system, paths.work, paths.snapshot, std::move(live->db)));
}

Status ShardWriter::PutStudy(const StudyRecord& study) {
  if (study.id != options_.study_id)
    return InternalError(fmt::format("study {} written to the shard of study {}", study.id, options_.study_id));
  return InsertStudy(db_, study);
}

Status ShardWriter::PutTrials(const std::vector<TrialRecord>& trials) {
  for (const TrialRecord& t : trials) {
    if (t.node_id != options_.node_id || t.study_id != options_.study_id) {
      return InternalError(fmt::format("trial {} of node '{}', study {} written to shard '{}' of study {}",
                                       t.number, t.node_id, t.study_id, options_.node_id, options_.study_id));
    }
  }
  return UpsertTrials(db_, trials);
}

Result<std::vector<StudyRecord>> ShardWriter::Studies() {
  return SelectStudies(db_);
}

Result<std::vector<TrialRecord>> ShardWriter::Trials(const std::string& study_id) {
  return SelectTrials(db_, study_id);
}

// A damaged live shard is not published: the published copy stays as it was, and the next run
// restores the live shard from it (Open).
Status ShardWriter::CheckBeforePublishing() {
  Result<std::string> damage = FindDamage(db_, CheckDepth::kRows);
  if (!damage.ok()) return damage.status().WithContext(fmt::format("cannot publish {}", snapshot_path_));
  if (damage->empty()) return Status::Ok();
  Result<std::string> published_damage = FindFileDamage(snapshot_path_, CheckDepth::kRows);
  std::error_code ec;
  const bool published_sound =
      published_damage.ok() && published_damage->empty() && fs::exists(snapshot_path_, ec);
  return StoreError(fmt::format(
      "not published: live shard {} is damaged ({}); {}", work_path_, *damage,
      published_sound
          ? fmt::format("the published copy {} is intact and left as it was: stop this run, and the next "
                        "one keeps the damaged file aside and restores the live shard from the copy",
                        snapshot_path_)
          : fmt::format("there is no sound published copy to restore it from: move it aside ({}) and "
                        "run again, which starts this node's shard empty",
                        kRecoverHint)));
}

// VACUUM INTO `copy`, then checks what was written (structure, indexes, every row's checksum)
// and syncs it.
Status ShardWriter::WriteCheckedCopy(const std::string& copy) {
  Result<Statement> vacuum = db_.Prepare("VACUUM INTO ?1");
  if (!vacuum.ok()) return vacuum.status();
  // Its directory's links resolved: VACUUM INTO inherits SQLITE_OPEN_NOFOLLOW from this
  // connection, which refuses a link anywhere in the path (the store's own path may be one).
  vacuum->Bind(1, ResolvedShardPath(copy));
  if (Status s = vacuum->Run(); !s.ok()) return s.WithContext(fmt::format("writing the copy {}", copy));
  Result<std::string> damage = FindFileDamage(copy, CheckDepth::kEverything);
  if (!damage.ok()) return damage.status().WithContext(fmt::format("checking the copy {}", copy));
  if (!damage->empty())
    return StoreError(fmt::format("the copy written to {} is damaged ({})", copy, *damage));
  return file_system_.Fsync(copy);
}

Status ShardWriter::Publish() {
  TUNEPAR_RETURN_IF_ERROR(CheckBeforePublishing());
  Result<int64_t> seq = PublishSeq(db_);
  if (!seq.ok()) return seq.status();
  TUNEPAR_RETURN_IF_ERROR(SetMeta(db_, "publish_seq", std::to_string(*seq + 1)));
  const std::string shards_dir = NodeShardsDir(options_.store_dir, options_.node_id);
  const std::string context =
      fmt::format("cannot publish {} (the published copy is left as it was)", snapshot_path_);
  Result<std::string> folder = MakeCopyFolder(shards_dir, options_.study_id);
  if (!folder.ok()) return folder.status().WithContext(context);
  const std::string copy = *folder + "/" + fs::path(snapshot_path_).filename().string();
  Status written = WriteCheckedCopy(copy);
  if (written.ok()) written = file_system_.Rename(copy, snapshot_path_);
  // A failed VACUUM INTO may leave the copy and its journal behind: the folder goes with them.
  std::error_code ec;
  fs::remove_all(*folder, ec);
  if (!written.ok()) return written.WithContext(context);
  return file_system_.Fsync(shards_dir).WithContext(fmt::format("published {}, but", snapshot_path_));
}

Result<StoreView> ShardWriter::ReadMerged() {
  Result<StoreView> view = ReadStore(options_.store_dir, {options_.study_id, options_.node_id, &others_});
  if (!view.ok()) return view.status();
  Result<std::vector<StudyRecord>> studies = Studies();
  if (!studies.ok()) return studies.status();
  Result<std::vector<TrialRecord>> trials = Trials(options_.study_id);
  if (!trials.ok()) return trials.status();
  MergeInto(*view, std::move(*studies), std::move(*trials));
  return view;
}

}  // namespace tunepar::store
