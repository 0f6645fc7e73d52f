#include "store/store_reader.h"

#include <sys/stat.h>

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

Result<Database> OpenShardForReading(const std::string& path, CheckDepth depth) {
  std::error_code ec;
  if (fs::file_size(path, ec) == 0 && !ec)
    return StoreError(fmt::format("{}: empty (0 bytes): not a tunepar shard", path));
  Result<Database> db = Database::Open(ImmutableUri(path), SQLITE_OPEN_READONLY, path);
  if (!db.ok()) return db.status();
  // At most the structure: every row's checksum is checked as the row is read (rows.cc).
  Result<std::string> damage = FindDamage(*db, std::min(depth, CheckDepth::kStructure));
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

namespace {

bool IsShardFile(const fs::path& p) {
  return p.extension() == ".sqlite" && p.filename().string().front() != '.';
}

// A published copy: a node's copy of one study, or a whole node's shard of the old layout.
struct ShardFile {
  std::string path;
  std::string node;
  bool whole_node = false;  // <store>/shards/<node>.sqlite, written before schema 4
};

// The published copies a read with `options` looks at, sorted by path (the merge is
// deterministic). A reader of one study looks only for that study's file in each node's folder.
Result<std::vector<ShardFile>> ListShardFiles(const std::string& shards_dir, const ReadOptions& options) {
  const bool one_study = !options.study_id.empty() && options.study_id != "-";
  std::vector<ShardFile> files;
  std::error_code ec;
  for (fs::directory_iterator it(shards_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string node = p.stem().string();
    if (p.filename().string().front() == '.' || (!options.skip_node.empty() && node == options.skip_node)) continue;
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      const std::string node_dir = p.filename().string();
      if (one_study) {
        const fs::path study_file = p / (options.study_id + ".sqlite");
        if (fs::exists(study_file, type_ec)) files.push_back({study_file.string(), node_dir, false});
        continue;
      }
      std::error_code dir_ec;
      for (fs::directory_iterator f(p, dir_ec), f_end; !dir_ec && f != f_end; f.increment(dir_ec))
        if (IsShardFile(f->path())) files.push_back({f->path().string(), node_dir, false});
      if (dir_ec) return StoreError(fmt::format("{}: cannot list shards: {}", p.string(), dir_ec.message()));
    } else if (IsShardFile(p) && node != kStoreFormatNode) {
      files.push_back({p.string(), node, true});
    }
  }
  if (ec) return StoreError(fmt::format("{}: cannot list shards: {}", shards_dir, ec.message()));
  std::sort(files.begin(), files.end(), [](const ShardFile& a, const ShardFile& b) { return a.path < b.path; });
  return files;
}

std::optional<ShardCache::Stamp> StampOf(const std::string& path) {
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return ShardCache::Stamp{st.st_dev, st.st_ino, st.st_size, st.st_mtim};
}

// What a whole-node shard of the old layout holds of studies that the node has since given
// files of their own is superseded by those files: left out.
void DropSuperseded(const std::string& store_dir, const ShardFile& file, std::vector<StudyRecord>& studies,
                    std::vector<TrialRecord>& trials) {
  std::set<std::string> superseded;
  std::error_code ec;
  for (const StudyRecord& s : studies)
    if (fs::exists(SnapshotPath(store_dir, file.node, s.id), ec)) superseded.insert(s.id);
  for (const TrialRecord& t : trials)
    if (fs::exists(SnapshotPath(store_dir, file.node, t.study_id), ec)) superseded.insert(t.study_id);
  if (superseded.empty()) return;
  std::erase_if(studies, [&](const StudyRecord& s) { return superseded.count(s.id) != 0; });
  std::erase_if(trials, [&](const TrialRecord& t) { return superseded.count(t.study_id) != 0; });
}

// A read checks in full the structure of what it reads in full: a study's own files when it
// reads trials; only the identity for a listing of studies or a whole-node shard of the old
// layout, whose rows are checked one by one as they are read.
CheckDepth DepthFor(const ShardFile& file, const ReadOptions& options) {
  if (options.study_id == "-" || (file.whole_node && !options.study_id.empty())) return CheckDepth::kIdentity;
  return CheckDepth::kStructure;
}

struct ShardContents {
  std::vector<StudyRecord> studies;
  std::vector<TrialRecord> trials;
};

// The studies and trials of one published copy; kSchemaTooNew stops the read, other errors
// are damage to report.
Result<ShardContents> ReadShardFile(const std::string& store_dir, const ShardFile& file, const ReadOptions& options) {
  Result<Database> db = OpenShardForReading(file.path, DepthFor(file, options));
  if (!db.ok()) return db.status();
  Result<std::vector<StudyRecord>> studies = SelectStudies(*db);
  if (!studies.ok()) return studies.status();
  Result<std::vector<TrialRecord>> trials = SelectTrials(*db, options.study_id);
  if (!trials.ok()) return trials.status();
  ShardContents contents{std::move(*studies), std::move(*trials)};
  if (file.whole_node) DropSuperseded(store_dir, file, contents.studies, contents.trials);
  return contents;
}

}  // namespace

Status CheckShardVersions(const std::string& store_dir) {
  Result<std::vector<ShardFile>> files = ListShardFiles(ShardsDir(store_dir), {});
  if (!files.ok()) return Status::Ok();  // reported by ReadStore
  std::vector<std::string> paths = {StoreFormatPath(store_dir)};
  for (const ShardFile& f : *files) paths.push_back(f.path);
  std::error_code ec;
  for (const std::string& path : paths) {
    if (!fs::exists(path, ec)) continue;
    Result<Database> db = Database::Open(ImmutableUri(path), SQLITE_OPEN_READONLY, path);
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
  Result<std::vector<ShardFile>> files = ListShardFiles(shards_dir, options);
  if (!files.ok()) return files.status();

  std::map<std::string, ShardCache::Entry> seen;  // what the cache keeps for the next read
  for (const ShardFile& file : *files) {
    const std::optional<ShardCache::Stamp> stamp = StampOf(file.path);
    if (options.cache != nullptr && stamp) {
      auto cached = options.cache->entries.find(file.path);
      if (cached != options.cache->entries.end() && cached->second.stamp == *stamp) {
        view.shards.push_back(file.path);
        MergeInto(view, cached->second.studies, cached->second.trials);
        seen[file.path] = std::move(cached->second);
        continue;
      }
    }
    Result<ShardContents> contents = ReadShardFile(store_dir, file, options);
    if (options.cache != nullptr) ++options.cache->reads;
    if (!contents.ok() && contents.status().code() == StatusCode::kSchemaTooNew) return contents.status();
    if (!contents.ok()) {
      view.warnings.push_back(fmt::format("skipping shard {}: {}", file.path, contents.status().message()));
      continue;
    }
    view.shards.push_back(file.path);
    if (options.cache != nullptr && stamp) seen[file.path] = {*stamp, contents->studies, contents->trials};
    MergeInto(view, std::move(contents->studies), std::move(contents->trials));
  }
  if (options.cache != nullptr) options.cache->entries = std::move(seen);
  return view;
}

}  // namespace tunepar::store
