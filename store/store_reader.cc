#include "store/store_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "store/rows.h"
#include "store/schema.h"
#include "store/shard_check.h"
#include "store/store_layout.h"

namespace tunepar::store {

namespace fs = std::filesystem;

Result<Database> OpenShardForReading(const std::string& path, CheckDepth depth) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return StoreError(fmt::format("{}: a directory, not a shard file", path));
  const uintmax_t size = fs::file_size(path, ec);
  if (size == 0 && !ec) return StoreError(fmt::format("{}: empty (0 bytes): not a tunepar shard", path));
  Result<Database> db = Database::Open(ImmutableUri(path), SQLITE_OPEN_READONLY, path);
  if (!db.ok()) return db.status();
  // The schema check below keeps a stranger's views and triggers from ever running; this is the
  // last guard: 30 s, and a second for every 8 MB (a sound shard is read far faster).
  db->StopAfter(std::chrono::seconds(30 + static_cast<int64_t>(ec ? 0 : size >> 23)));
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
  std::string node;         // the folder it was found in (or, for a whole node's shard, its name)
  std::string study;        // the study its name says it holds ("" for a whole node's shard)
  bool whole_node = false;  // <store>/shards/<node>.sqlite, written before schema 4
};

// What is in the shards folder where a shard file should be: a link or a directory is named and
// skipped (never followed, never read as a shard).
std::string NotAShardFile(const fs::directory_entry& entry) {
  std::error_code ec;
  if (entry.is_symlink(ec))
    return fmt::format("skipping shard {}: a symbolic link (tunepar never follows links inside a store; remove it)",
                       entry.path().string());
  if (entry.is_directory(ec))
    return fmt::format("skipping shard {}: a directory, not a shard file (move it out of the store)", entry.path().string());
  return "";
}

struct ShardListing {
  std::vector<ShardFile> files;
  std::vector<std::string> warnings;
};

// The shard files of one node's folder that a read with `options` looks at.
Status ListNodeFolder(const fs::path& folder, const ReadOptions& options, ShardListing& listing) {
  const std::string node = folder.filename().string();
  if (!options.study_id.empty() && options.study_id != "-") {
    const fs::path study_file = folder / (options.study_id + ".sqlite");
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(study_file, ec);
    if (ec || status.type() == fs::file_type::not_found) return Status::Ok();
    const fs::directory_entry entry(study_file, ec);
    if (std::string refused = NotAShardFile(entry); !refused.empty()) {
      listing.warnings.push_back(refused);
    } else {
      listing.files.push_back({study_file.string(), node, options.study_id, false});
    }
    return Status::Ok();
  }
  std::error_code ec;
  for (fs::directory_iterator f(folder, ec), end; !ec && f != end; f.increment(ec)) {
    if (!IsShardFile(f->path())) continue;
    if (std::string refused = NotAShardFile(*f); !refused.empty()) {
      listing.warnings.push_back(refused);
      continue;
    }
    listing.files.push_back({f->path().string(), node, f->path().stem().string(), false});
  }
  if (ec) return StoreError(fmt::format("{}: cannot list shards: {}", folder.string(), ec.message()));
  return Status::Ok();
}

// The published copies a read with `options` looks at, sorted by path (the merge is
// deterministic). A reader of one study looks only for that study's file in each node's folder.
Result<ShardListing> ListShardFiles(const std::string& shards_dir, const ReadOptions& options) {
  ShardListing listing;
  std::error_code ec;
  for (fs::directory_iterator it(shards_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string node = p.stem().string();
    if (p.filename().string().front() == '.' || (!options.skip_node.empty() && node == options.skip_node)) continue;
    std::error_code type_ec;
    if (it->is_symlink(type_ec)) {
      listing.warnings.push_back(fmt::format(
          "skipping {}: a symbolic link (tunepar never follows links inside a store; remove it)", p.string()));
    } else if (it->is_directory(type_ec)) {
      TUNEPAR_RETURN_IF_ERROR(ListNodeFolder(p, options, listing));
    } else if (IsShardFile(p) && node != kStoreFormatNode) {
      listing.files.push_back({p.string(), node, "", true});
    }
  }
  if (ec) return StoreError(fmt::format("{}: cannot list shards: {}", shards_dir, ec.message()));
  std::sort(listing.files.begin(), listing.files.end(),
            [](const ShardFile& a, const ShardFile& b) { return a.path < b.path; });
  std::sort(listing.warnings.begin(), listing.warnings.end());
  return listing;
}

std::optional<ShardCache::Stamp> StampOf(const std::string& path) {
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return ShardCache::Stamp{st.st_dev, st.st_ino, st.st_size, st.st_mtim};
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
  std::vector<DamagedTrial> damaged;  // trial rows left out of `trials` (rows.h)
};

// What a whole-node shard of the old layout holds of studies that the node has since given
// files of their own is superseded by those files: left out.
void DropSuperseded(const std::string& store_dir, const ShardFile& file, ShardContents& contents) {
  std::map<std::string, bool> superseded;  // by study id
  auto is_superseded = [&](const std::string& study_id) {
    auto [known, added] = superseded.try_emplace(study_id, false);
    std::error_code ec;
    if (added) known->second = fs::exists(SnapshotPath(store_dir, file.node, study_id), ec);
    return known->second;
  };
  std::erase_if(contents.studies, [&](const StudyRecord& s) { return is_superseded(s.id); });
  std::erase_if(contents.trials, [&](const TrialRecord& t) { return is_superseded(t.study_id); });
  std::erase_if(contents.damaged, [&](const DamagedTrial& d) { return is_superseded(d.trial.study_id); });
}

// How many damaged rows a warning names, of each kind.
constexpr size_t kNamedRows = 10;

// "trial 3 of study 0123abcd (node n0), trial 5 of ..." for the first kNamedRows of `rows`.
std::string NameRows(const std::vector<const TrialRecord*>& rows) {
  std::string names;
  for (size_t i = 0; i < rows.size() && i < kNamedRows; ++i)
    names += fmt::format("{}trial {} of study {} (node {})", i == 0 ? "" : ", ", rows[i]->number,
                         rows[i]->study_id, rows[i]->node_id);
  if (rows.size() > kNamedRows) names += fmt::format(" and {} other trials", rows.size() - kNamedRows);
  return names;
}

// The warning for the trial rows of `path` left out, each named as it reads: "skipping shard
// <path>'s damaged row only: <path>: bad checksum in trial 3 of study 0123abcd (node n0): the row
// changed after it was written; its other 41 trials are read". A row whose checksum holds but a
// value does not read (a layout key from a newer tunepar) is named with that value.
std::string DamagedRowsWarning(const std::string& path, const std::vector<DamagedTrial>& damaged,
                               size_t read) {
  std::vector<const TrialRecord*> changed;
  std::vector<const DamagedTrial*> unreadable;
  for (const DamagedTrial& d : damaged) {
    if (d.unreadable.empty()) {
      changed.push_back(&d.trial);
    } else {
      unreadable.push_back(&d);
    }
  }
  std::vector<std::string> clauses;
  if (!changed.empty()) {
    const bool one = changed.size() == 1;
    clauses.push_back(fmt::format("{}: bad checksum in {}: the row{} changed after {} written", path,
                                  NameRows(changed), one ? "" : "s", one ? "it was" : "they were"));
  }
  for (size_t i = 0; i < unreadable.size() && i < kNamedRows; ++i) {
    const TrialRecord& t = unreadable[i]->trial;
    clauses.push_back(fmt::format("{}: trial {} of study {} (node {}) has an unreadable {}", path, t.number,
                                  t.study_id, t.node_id, unreadable[i]->unreadable));
  }
  if (unreadable.size() > kNamedRows)
    clauses.push_back(
        fmt::format("and {} other trials with an unreadable value", unreadable.size() - kNamedRows));
  return fmt::format("skipping shard {}'s {} only: {}; its other {} {} read", path,
                     damaged.size() == 1 ? "damaged row" : fmt::format("{} damaged rows", damaged.size()),
                     fmt::join(clauses, "; "), read == 1 ? "1 trial" : fmt::format("{} trials", read),
                     read == 1 ? "is" : "are");
}

// The value of `key` in the shard's meta table ("" when it has none).
Result<std::string> MetaValue(Database& db, std::string_view key) {
  Result<Statement> st = db.Prepare("SELECT value FROM meta WHERE key = ?1");
  if (!st.ok()) return st.status();
  st->Bind(1, key);
  Result<bool> row = st->Step();
  if (!row.ok()) return row.status();
  return *row ? st->Text(0) : std::string();
}

// A shard counts only where it says it belongs: its meta table's node id (and, since shards
// record it, study id) must be those of the folder and file it was found as, and so must every
// row. A copy (cp -r shards/A shards/A-backup, a file from another store) is named, never counted.
Status CheckPlacement(Database& db, const ShardFile& file, const std::vector<StudyRecord>& studies,
                      const std::vector<TrialRecord>& trials) {
  Result<std::string> node = MetaValue(db, "node_id");
  if (!node.ok()) return node.status();
  Result<std::string> study = file.whole_node ? Result<std::string>(std::string()) : MetaValue(db, "study_id");
  if (!study.ok()) return study.status();
  std::string says = !node->empty() && *node != file.node ? fmt::format("node '{}'", *node) : "";
  if (says.empty() && !study->empty() && *study != file.study) says = fmt::format("study {}", *study);
  for (const StudyRecord& s : studies)
    if (says.empty() && !file.whole_node && s.id != file.study) says = fmt::format("study {}", s.id);
  for (const TrialRecord& t : trials)
    if (says.empty() && t.node_id != file.node) says = fmt::format("node '{}'", t.node_id);
  if (says.empty()) return Status::Ok();
  return StoreError(fmt::format(
      "it belongs to {} (its meta table or rows say so), not to {} where it lies: a copy or a file from elsewhere, not "
      "counted (move it out of shards/)",
      says, file.whole_node ? "node " + file.node : fmt::format("node '{}', study {}", file.node, file.study)));
}

// The studies and trials of one published copy; an error is the damage to report.
Result<ShardContents> ReadShardFile(const std::string& store_dir, const ShardFile& file, const ReadOptions& options) {
  Result<Database> db = OpenShardForReading(file.path, DepthFor(file, options));
  if (!db.ok()) return db.status();
  Result<std::vector<StudyRecord>> studies = SelectStudies(*db);
  if (!studies.ok()) return studies.status();
  // A changed trial row hides that row alone (its checksum names it); a changed study row, the
  // whole shard (its trials would belong to nothing sound).
  std::vector<DamagedTrial> damaged;
  Result<std::vector<TrialRecord>> trials =
      options.study_id == "-" ? Result<std::vector<TrialRecord>>(std::vector<TrialRecord>{})
                              : SelectTrials(*db, options.study_id, &damaged);
  if (!trials.ok()) return trials.status();
  TUNEPAR_RETURN_IF_ERROR(CheckPlacement(*db, file, *studies, *trials));
  ShardContents contents{std::move(*studies), std::move(*trials), std::move(damaged)};
  if (file.whole_node) DropSuperseded(store_dir, file, contents);
  return contents;
}

}  // namespace

Status CheckShardVersions(const std::string& store_dir, const std::string& node_id) {
  std::vector<std::string> paths = {StoreFormatPath(store_dir), LegacySnapshotPath(store_dir, node_id)};
  std::error_code ec;
  for (fs::directory_iterator it(NodeShardsDir(store_dir, node_id), ec), end; !ec && it != end; it.increment(ec))
    if (IsShardFile(it->path())) paths.push_back(it->path().string());
  for (const std::string& path : paths) {
    std::error_code type_ec;
    if (!fs::is_regular_file(fs::symlink_status(path, type_ec))) continue;
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
  for (TrialRecord& t : trials) (t.role == TrialRole::kForgotten ? view.forgotten : view.trials).push_back(std::move(t));
  std::sort(view.studies.begin(), view.studies.end(), [](const StudyRecord& a, const StudyRecord& b) {
    return std::tie(a.created_at, a.id) < std::tie(b.created_at, b.id);
  });
  for (std::vector<TrialRecord>* rows : {&view.trials, &view.forgotten}) {
    std::stable_sort(rows->begin(), rows->end(), [](const TrialRecord& a, const TrialRecord& b) {
      return std::tie(a.node_id, a.number) < std::tie(b.node_id, b.number);
    });
  }
}

Result<StoreView> ReadStore(const std::string& store_dir, const ReadOptions& options) {
  StoreView view;
  std::error_code ec;
  // One stat decides: a store that a writer creates between two calls is no file.
  const fs::file_status status = fs::status(store_dir, ec);
  if (!fs::is_directory(status)) {
    if (fs::exists(status)) return StoreError(fmt::format("store '{}' is not a directory", store_dir));
    return view;
  }
  view.exists = true;
  const std::string shards_dir = ShardsDir(store_dir);
  if (!fs::is_directory(shards_dir, ec)) return view;
  Result<ShardListing> listing = ListShardFiles(shards_dir, options);
  if (!listing.ok()) return listing.status();
  view.warnings = std::move(listing->warnings);

  std::map<std::string, ShardCache::Entry> seen;  // what the cache keeps for the next read
  for (const ShardFile& file : listing->files) {
    const std::optional<ShardCache::Stamp> stamp = StampOf(file.path);
    ShardCache::Entry entry;
    auto cached = options.cache != nullptr && stamp ? options.cache->entries.find(file.path)
                                                    : std::map<std::string, ShardCache::Entry>::iterator();
    if (options.cache != nullptr && stamp && cached != options.cache->entries.end() && cached->second.stamp == *stamp) {
      entry = std::move(cached->second);
    } else {
      // Damage of any kind, a newer schema included, is this file's alone: named and skipped,
      // the rest read (only a node's own shard stops its writer: CheckShardVersions).
      Result<ShardContents> contents = ReadShardFile(store_dir, file, options);
      if (options.cache != nullptr) ++options.cache->reads;
      if (contents.ok()) {
        if (!contents->damaged.empty()) {
          entry.damaged_rows = static_cast<int64_t>(contents->damaged.size());
          entry.damaged_rows_warning =
              DamagedRowsWarning(file.path, contents->damaged, contents->trials.size());
        }
        entry.studies = std::move(contents->studies);
        entry.trials = std::move(contents->trials);
      } else {
        entry.damage = fmt::format("skipping shard {}: {}", file.path, contents.status().message());
      }
      if (stamp) entry.stamp = *stamp;
    }
    if (!entry.damage.empty()) {
      view.warnings.push_back(entry.damage);
    } else {
      view.shards.push_back(file.path);
      if (entry.damaged_rows > 0) {
        view.warnings.push_back(entry.damaged_rows_warning);
        view.damaged_rows[file.path] = entry.damaged_rows;
      }
      MergeInto(view, entry.studies, entry.trials);
    }
    if (options.cache != nullptr && stamp) seen[file.path] = std::move(entry);
  }
  if (options.cache != nullptr) options.cache->entries = std::move(seen);
  return view;
}

}  // namespace tunepar::store
