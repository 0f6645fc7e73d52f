// Read-only merge of the published shards in a store directory. Readers take no locks (the
// copies are opened immutable), so they never block writers on any node. A corrupt or truncated
// shard is reported by name and skipped; the others are still read. A reader of one study reads
// only that study's files (one per node), whatever else the store holds.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/records.h"
#include "store/shard_check.h"
#include "store/sqlite.h"

namespace tunepar::store {

struct StoreView {
  bool exists = false;                // the store directory exists
  std::vector<StudyRecord> studies;   // unique by id, earliest creation kept
  std::vector<TrialRecord> trials;    // ordered by (node, number); not the forgotten ones
  // Trials their nodes forgot (role kForgotten, `tunepar forget`): kept in the shards, counted
  // nowhere; export lists them, and a node numbers its next trials after them.
  std::vector<TrialRecord> forgotten;
  std::vector<std::string> shards;    // snapshot files read
  std::vector<std::string> warnings;  // one line per skipped shard, naming it
  // Shards read without the trial rows whose checksum fails (path -> how many rows were left
  // out): each shard is one line of `warnings` too, naming its rows; only those rows are hidden.
  std::map<std::string, int64_t> damaged_rows;
};

// Published copies as last read, by path: a copy whose file is unchanged is not read again. A
// publish renames a new file into place, so a changed copy has another inode, size or time.
struct ShardCache {
  struct Stamp {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    timespec modified{};
    bool operator==(const Stamp& o) const {
      return device == o.device && inode == o.inode && size == o.size && modified.tv_sec == o.modified.tv_sec &&
             modified.tv_nsec == o.modified.tv_nsec;
    }
  };
  struct Entry {
    Stamp stamp;
    std::vector<StudyRecord> studies;
    std::vector<TrialRecord> trials;
    std::string damage;  // the warning that skipped it ("" when it was read)
    std::string damaged_rows_warning;  // the warning naming the rows left out ("" when none was)
    int64_t damaged_rows = 0;
  };
  std::map<std::string, Entry> entries;
  int reads = 0;  // files read (not served from the cache) so far
};

struct ReadOptions {
  std::string study_id;         // only this study's files and trials ("" = all, "-" = studies only)
  std::string skip_node;        // a node whose copies to leave out (the caller has its live shard)
  ShardCache* cache = nullptr;  // keeps what was read for the next call with the same options
};

// Fails only when the directory cannot be listed. A shard that cannot be counted (damaged, from
// a newer tunepar, a link or a directory where a shard file should be, a copy found where its
// header says it does not belong, a schema with objects a shard never holds) is named in a
// warning and skipped. A trial row whose checksum fails is left out alone, named in a warning
// (damaged_rows); the shard's other rows are read.
Result<StoreView> ReadStore(const std::string& store_dir, const ReadOptions& options = {});

// Adds `studies` and `trials` to `view`, deduplicating studies by id.
void MergeInto(StoreView& view, std::vector<StudyRecord> studies, std::vector<TrialRecord> trials);

// kSchemaTooNew when the store's format file, or a published shard of node `node_id`, is newer
// than this tunepar (cheap: reads only the headers): that node's writer must not go on. Another
// node's newer shard is only skipped by readers. Writers call it before creating anything, so a
// refused run leaves no trace.
Status CheckShardVersions(const std::string& store_dir, const std::string& node_id);

// Opens a shard file for reading without taking locks, after checking it to `depth` (rows are
// checked as they are read): migrated into memory when it is older than this tunepar,
// kSchemaTooNew when newer, kStore when it is not a readable tunepar shard.
Result<Database> OpenShardForReading(const std::string& path, CheckDepth depth = CheckDepth::kStructure);

}  // namespace tunepar::store
