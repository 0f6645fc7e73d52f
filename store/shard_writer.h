// The shard this node writes for one study. Only this process opens the work file (SQLite
// exclusive locking refuses a second writer on the same node id); other nodes and readers see
// only the copies that Publish() renames into <store>/shards/<node>/. One file per node and
// study keeps what a publish copies, and what a reader of the study reads, to that study: a
// store full of other studies costs a search nothing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/file_system.h"
#include "store/records.h"
#include "store/sqlite.h"
#include "store/store_reader.h"

namespace tunepar::store {

struct ShardOptions {
  std::string store_dir;              // the shared store directory
  std::string node_id;                // this node's name (see DefaultNodeId)
  std::string study_id;               // the study this shard holds (one StudyRecord and its trials)
  std::string work_dir;               // "" = <store>/work; else e.g. node-local /tmp
  FileSystem* file_system = nullptr;  // nullptr = DefaultFileSystem(); tests give a faulty one
};

class ShardWriter {
 public:
  // Creates the store if needed; resumes the node's work file of the study, or restores it from
  // the node's published copy when the work file is missing or older, or, for a study that a
  // tunepar before schema 4 stored in the node's one shard of every study, copies the study's rows
  // from there (that file is left as it is; readers skip what it holds of this study from now on). A damaged work file is kept as
  // <work>.damaged-<utc> and the shard restored from the published copy when that is sound (a
  // warning on stderr says so); a damaged published copy next to a sound work file is kept as
  // <snapshot>.damaged-<utc> and replaced at the next Publish(). When nothing sound is left the
  // open is refused, naming the damage and what to do, and leaves no file behind.
  static Result<std::unique_ptr<ShardWriter>> Open(const ShardOptions& options);

  // Records the study in this shard (no-op when present; refused for another study).
  Status PutStudy(const StudyRecord& study);
  // Inserts or replaces the study's trials (keyed by node, number) in one transaction.
  Status PutTrials(const std::vector<TrialRecord>& trials);
  // This shard's studies and trials.
  Result<std::vector<StudyRecord>> Studies();
  Result<std::vector<TrialRecord>> Trials(const std::string& study_id);

  // Writes a consistent copy of the work file to <store>/shards/<node>/<study>.sqlite atomically
  // (VACUUM INTO a temporary file, fsync, rename, fsync the directory). Checks the work file
  // first and the copy before the rename (structure, identity, every row's checksum): a damaged
  // shard never replaces the published copy, and the error names the damage.
  Status Publish();

  // Every other node's published copy of the study, merged with this node's live shard. Copies
  // unchanged since the last call are not read again.
  Result<StoreView> ReadMerged();

  const std::string& node_id() const { return options_.node_id; }
  const std::string& work_path() const { return work_path_; }
  const std::string& snapshot_path() const { return snapshot_path_; }

 private:
  ShardWriter(ShardOptions options, FileSystem& file_system, std::string work_path, std::string snapshot_path,
              Database db)
      : options_(std::move(options)),
        file_system_(file_system),
        work_path_(std::move(work_path)),
        snapshot_path_(std::move(snapshot_path)),
        db_(std::move(db)) {}

  Status CheckBeforePublishing();
  Status WriteCheckedCopy(const std::string& copy);

  ShardOptions options_;
  ShardCache others_;  // other nodes' copies of the study as last read
  FileSystem& file_system_;
  std::string work_path_;
  std::string snapshot_path_;
  Database db_;
};

}  // namespace tunepar::store
