// Read-only merge of every published shard in a store directory. Readers take no locks (the
// snapshots are opened immutable), so they never block writers on any node. A corrupt or
// truncated shard is reported by name and skipped; the others are still read.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "store/records.h"
#include "store/sqlite.h"

namespace tunepar::store {

struct StoreView {
  bool exists = false;                // the store directory exists
  std::vector<StudyRecord> studies;   // unique by id, earliest creation kept
  std::vector<TrialRecord> trials;    // ordered by (node, number)
  std::vector<std::string> shards;    // snapshot files read
  std::vector<std::string> warnings;  // one line per skipped shard, naming it
};

struct ReadOptions {
  std::string study_id;   // only this study's trials ("" = all)
  std::string skip_node;  // a node whose snapshot to leave out (the caller has its live shard)
};

// Fails only when the directory cannot be listed or a shard comes from a newer schema.
Result<StoreView> ReadStore(const std::string& store_dir, const ReadOptions& options = {});

// Adds `studies` and `trials` to `view`, deduplicating studies by id.
void MergeInto(StoreView& view, std::vector<StudyRecord> studies, std::vector<TrialRecord> trials);

// kSchemaTooNew when any published shard in the store is newer than this tunepar (cheap: reads
// only the headers). Writers call it before creating anything, so a refused run leaves no trace.
Status CheckShardVersions(const std::string& store_dir);

// Opens a shard file for reading without taking locks: migrated into memory when it is older
// than this tunepar, kSchemaTooNew when newer, kStore when it is not a readable tunepar shard.
Result<Database> OpenShardForReading(const std::string& path);

}  // namespace tunepar::store
