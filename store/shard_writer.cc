#include "store/shard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "store/rows.h"
#include "store/schema.h"
#include "store/store_layout.h"

namespace tunepar::store {

namespace fs = std::filesystem;

namespace {

Status MakeWritableDir(const std::string& dir, std::string_view what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return StoreError(fmt::format("cannot create {} '{}': {}", what, dir, ec.message()));
  if (!fs::is_directory(dir, ec)) return StoreError(fmt::format("{} '{}' is not a directory", what, dir));
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return StoreError(fmt::format("{} '{}' is not writable: {}", what, dir, std::strerror(errno)));
  return Status::Ok();
}

Status FsyncPath(const std::string& path, int flags) {
  int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return StoreError(fmt::format("cannot open '{}' to sync it: {}", path, std::strerror(errno)));
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) return StoreError(fmt::format("cannot sync '{}': {}", path, std::strerror(err)));
  return Status::Ok();
}

Result<int64_t> PublishSeq(Database& db) {
  Result<Statement> st = db.Prepare("SELECT value FROM meta WHERE key = 'publish_seq'");
  if (!st.ok()) return st.status();
  Result<bool> row = st->Step();
  if (!row.ok()) return row.status();
  return *row ? std::stoll(st->Text(0)) : 0;
}

Status SetMeta(Database& db, std::string_view key, std::string_view value) {
  Result<Statement> st = db.Prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)");
  if (!st.ok()) return st.status();
  st->Bind(1, key).Bind(2, value);
  return st->Run();
}

}  // namespace

Result<std::unique_ptr<ShardWriter>> ShardWriter::Open(const ShardOptions& options) {
  TUNEPAR_RETURN_IF_ERROR(ValidateNodeId(options.node_id));
  TUNEPAR_RETURN_IF_ERROR(CheckShardVersions(options.store_dir));
  TUNEPAR_RETURN_IF_ERROR(MakeWritableDir(options.store_dir, "store directory"));
  TUNEPAR_RETURN_IF_ERROR(MakeWritableDir(ShardsDir(options.store_dir), "store shard directory"));
  const std::string work_path = WorkPath(options.store_dir, options.node_id, options.work_dir);
  const std::string snapshot_path = SnapshotPath(options.store_dir, options.node_id);
  TUNEPAR_RETURN_IF_ERROR(MakeWritableDir(fs::path(work_path).parent_path().string(), "work directory"));

  // Open the work file normally (SQLite rolls back a transaction a killed writer left behind)
  // and hold it exclusively for the life of this writer.
  Result<Database> db = Database::Open(work_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, work_path);
  if (!db.ok()) return db.status();
  TUNEPAR_RETURN_IF_ERROR(db->Exec("PRAGMA locking_mode = EXCLUSIVE"));
  TUNEPAR_RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys = ON"));
  if (!db->Exec("BEGIN EXCLUSIVE").ok() || !db->Exec("COMMIT").ok()) {
    return StoreError(
        fmt::format("shard '{}' is being written by another tunepar process on this node ({}); wait for it "
                    "or give this one another --node-id",
                    options.node_id, work_path));
  }

  // The published snapshot is authoritative when the work file is new (a node-local disk wiped
  // between jobs) or older than it.
  std::error_code ec;
  if (fs::exists(snapshot_path, ec)) {
    Result<Database> snapshot = OpenShardForReading(snapshot_path);
    if (!snapshot.ok()) return snapshot.status().WithContext("this node's published shard");
    Result<int64_t> snapshot_seq = PublishSeq(*snapshot);
    if (!snapshot_seq.ok()) return snapshot_seq.status();
    Result<int64_t> work_version = db->PragmaInt("user_version");
    if (!work_version.ok()) return work_version.status();
    TUNEPAR_RETURN_IF_ERROR(CheckVersionReadable(*db, *work_version));
    int64_t work_seq = -1;
    if (*work_version > 0) {
      Result<int64_t> seq = PublishSeq(*db);
      if (!seq.ok()) return seq.status();
      work_seq = *seq;
    }
    if (work_seq < *snapshot_seq) {
      sqlite3_backup* backup = sqlite3_backup_init(db->handle(), "main", snapshot->handle(), "main");
      if (backup == nullptr) return db->Error("cannot restore the work shard from the published snapshot");
      sqlite3_backup_step(backup, -1);
      if (sqlite3_backup_finish(backup) != SQLITE_OK)
        return db->Error("cannot restore the work shard from the published snapshot");
    }
  }
  TUNEPAR_RETURN_IF_ERROR(Migrate(*db));
  {
    Result<Statement> st = db->Prepare("SELECT value FROM meta WHERE key = 'node_id'");
    if (!st.ok()) return st.status();
    Result<bool> row = st->Step();
    if (!row.ok()) return row.status();
    if (*row && st->Text(0) != options.node_id) {
      return StoreError(
          fmt::format("{}: belongs to node '{}', not '{}'", work_path, st->Text(0), options.node_id));
    }
  }
  TUNEPAR_RETURN_IF_ERROR(SetMeta(*db, "node_id", options.node_id));
  return std::unique_ptr<ShardWriter>(new ShardWriter(options, work_path, snapshot_path, std::move(*db)));
}

Status ShardWriter::PutStudy(const StudyRecord& study) {
  return InsertStudy(db_, study);
}

Status ShardWriter::PutTrials(const std::vector<TrialRecord>& trials) {
  for (const TrialRecord& t : trials) {
    if (t.node_id != options_.node_id) {
      return InternalError(
          fmt::format("trial {} of node '{}' written to shard '{}'", t.number, t.node_id, options_.node_id));
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

Status ShardWriter::Publish() {
  Result<int64_t> seq = PublishSeq(db_);
  if (!seq.ok()) return seq.status();
  TUNEPAR_RETURN_IF_ERROR(SetMeta(db_, "publish_seq", std::to_string(*seq + 1)));
  const std::string tmp =
      fmt::format("{}/.{}.sqlite.tmp-{}", ShardsDir(options_.store_dir), options_.node_id, getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  Result<Statement> vacuum = db_.Prepare("VACUUM INTO ?1");
  if (!vacuum.ok()) return vacuum.status();
  vacuum->Bind(1, tmp);
  if (Status s = vacuum->Run(); !s.ok()) {
    fs::remove(tmp, ec);
    return s.WithContext("publishing a snapshot");
  }
  if (Status s = FsyncPath(tmp, O_RDONLY); !s.ok()) {
    fs::remove(tmp, ec);
    return s;
  }
  fs::rename(tmp, snapshot_path_, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return StoreError(fmt::format("cannot publish '{}': {}", snapshot_path_, ec.message()));
  }
  return FsyncPath(ShardsDir(options_.store_dir), O_RDONLY | O_DIRECTORY);
}

Result<StoreView> ShardWriter::ReadMerged(const std::string& study_id) {
  Result<StoreView> view = ReadStore(options_.store_dir, {study_id, options_.node_id});
  if (!view.ok()) return view.status();
  Result<std::vector<StudyRecord>> studies = Studies();
  if (!studies.ok()) return studies.status();
  Result<std::vector<TrialRecord>> trials = Trials(study_id);
  if (!trials.ok()) return trials.status();
  MergeInto(*view, std::move(*studies), std::move(*trials));
  return view;
}

}  // namespace tunepar::store
