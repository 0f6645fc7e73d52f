#include "store/store_reader.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "store/rows.h"
#include "store/schema.h"
#include "store/shard_check.h"
#include "store/store_layout.h"

namespace tunepar::store {

namespace fs = std::filesystem;

Result<Database> OpenShardForReading(const std::string& path) {
  std::error_code ec;
  if (fs::file_size(path, ec) == 0 && !ec)
    return StoreError(fmt::format("{}: empty (0 bytes): not a tunepar shard", path));
  Result<Database> db = Database::Open(ImmutableUri(path), SQLITE_OPEN_READONLY, path);
  if (!db.ok()) return db.status();
  // The structure only: every row's checksum is checked as the row is read (rows.cc).
  Result<std::string> damage = FindDamage(*db, CheckDepth::kStructure);
  if (!damage.ok()) return damage.status();
  if (!damage->empty()) return StoreError(fmt::format("{}: {}", path, *damage));
  Result<int64_t> version = db->PragmaInt("user_version");
  if (!version.ok()) return version.status();
  if (*version == kSchemaVersion) return db;
  // An older shard: copy it into memory and migrate the copy; the file stays as it is.
  Result<Database> memory = Database::Open(":memory:", SQLITE_OPEN_READWRITE, path + " (migrated copy)");
  if (!memory.ok()) return memory.status();
  sqlite3_backup* backup = sqlite3_backup_init(memory->handle(), "main", db->handle(), "main");
  if (backup == nullptr) return memory->Error("cannot copy an older shard into memory");
  sqlite3_backup_step(backup, -1);
  if (sqlite3_backup_finish(backup) != SQLITE_OK)
    return memory->Error("cannot copy an older shard into memory");
  TUNEPAR_RETURN_IF_ERROR(Migrate(*memory));
  return memory;
}

Status CheckShardVersions(const std::string& store_dir) {
  std::error_code ec;
  for (fs::directory_iterator it(ShardsDir(store_dir), ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".sqlite" || p.filename().string().front() == '.') continue;
    Result<Database> db = Database::Open(ImmutableUri(p.string()), SQLITE_OPEN_READONLY, p.string());
    if (!db.ok()) continue;  // unreadable shards are reported (and skipped) by ReadStore
    Result<int64_t> version = db->PragmaInt("user_version");
    if (version.ok()) TUNEPAR_RETURN_IF_ERROR(CheckVersionReadable(*db, *version));
  }
  return Status::Ok();
}

void MergeInto(StoreView& view, std::vector<StudyRecord> studies, std::vector<TrialRecord> trials) {
  for (StudyRecord& s : studies) {
    auto same = std::find_if(view.studies.begin(), view.studies.end(),
                             [&](const StudyRecord& o) { return o.id == s.id; });
    if (same == view.studies.end()) {
      view.studies.push_back(std::move(s));
    } else if (s.created_at < same->created_at) {
      *same = std::move(s);
    }
  }
  view.trials.insert(view.trials.end(), std::make_move_iterator(trials.begin()),
                     std::make_move_iterator(trials.end()));
  std::sort(view.studies.begin(), view.studies.end(), [](const StudyRecord& a, const StudyRecord& b) {
    return std::tie(a.created_at, a.id) < std::tie(b.created_at, b.id);
  });
  std::stable_sort(view.trials.begin(), view.trials.end(), [](const TrialRecord& a, const TrialRecord& b) {
    return std::tie(a.node_id, a.number) < std::tie(b.node_id, b.number);
  });
}

Result<StoreView> ReadStore(const std::string& store_dir, const ReadOptions& options) {
  StoreView view;
  std::error_code ec;
  if (!fs::is_directory(store_dir, ec)) return view;
  view.exists = true;
  const std::string shards_dir = ShardsDir(store_dir);
  if (!fs::is_directory(shards_dir, ec)) return view;

  std::set<std::string> paths;  // sorted: the merge is deterministic
  for (fs::directory_iterator it(shards_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".sqlite" || p.filename().string().front() == '.') continue;
    if (!options.skip_node.empty() && p.stem() == options.skip_node) continue;
    paths.insert(p.string());
  }
  if (ec) return StoreError(fmt::format("{}: cannot list shards: {}", shards_dir, ec.message()));

  for (const std::string& path : paths) {
    Result<Database> db = OpenShardForReading(path);
    if (!db.ok() && db.status().code() == StatusCode::kSchemaTooNew) return db.status();
    Result<std::vector<StudyRecord>> studies =
        db.ok() ? SelectStudies(*db) : Result<std::vector<StudyRecord>>(db.status());
    Result<std::vector<TrialRecord>> trials = studies.ok()
                                                  ? SelectTrials(*db, options.study_id)
                                                  : Result<std::vector<TrialRecord>>(studies.status());
    if (!trials.ok()) {
      view.warnings.push_back(fmt::format("skipping shard {}: {}", path, trials.status().message()));
      continue;
    }
    view.shards.push_back(path);
    MergeInto(view, std::move(*studies), std::move(*trials));
  }
  return view;
}

}  // namespace tunepar::store
