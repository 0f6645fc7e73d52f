// Where things live in a store directory:
//   <store>/shards/<node>/<study>.sqlite  published copies, one per node and study; replaced
//                                         atomically by rename, never modified in place, read
//                                         with immutable=1
//   <store>/work/<node>/<study>.sqlite    the shard a node is writing for a study (only that node
//                                         opens it), unless a work directory on node-local disk
//                                         is given
//   <store>/shards/<node>.sqlite          a whole node's published copy as tunepar wrote it
//   <store>/work/<node>.sqlite            before schema 4 (read, never written again)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tunepar::store {

std::string ShardsDir(std::string_view store_dir);
// <store>/shards/<node>: a node's published copies, one per study.
std::string NodeShardsDir(std::string_view store_dir, std::string_view node_id);
std::string SnapshotPath(std::string_view store_dir, std::string_view node_id, std::string_view study_id);
std::string WorkPath(std::string_view store_dir, std::string_view node_id, std::string_view study_id,
                     std::string_view work_dir);
// <store>/shards/store-format.sqlite: a shard with no tables whose schema version says which
// layout the store has (schema.cc, 3 -> 4). Not a node's shard: no node may be called so.
std::string StoreFormatPath(std::string_view store_dir);
inline constexpr std::string_view kStoreFormatNode = "store-format";
// Where a node's one shard of every study lived before each study got its own files.
std::string LegacySnapshotPath(std::string_view store_dir, std::string_view node_id);
std::string LegacyWorkPath(std::string_view store_dir, std::string_view node_id, std::string_view work_dir);

// Where a trial of a measuring search keeps its command, log and artefacts, relative to the store:
// "trials/<folder>/<node>-<number>", <folder> being a valid name (base/names.h) of the study.
std::string TrialDirBelowStore(std::string_view folder, std::string_view node_id, int64_t number);
std::string TrialDirPath(std::string_view store_dir, std::string_view folder, std::string_view node_id, int64_t number);

// A file: URI that opens `path` read-only and immutable: no locks, no journal, nothing written.
std::string ImmutableUri(const std::string& path);

// Node and study ids name files: the rule of base/names.h.
Status ValidateNodeId(std::string_view node_id);
Status ValidateStudyId(std::string_view study_id);

// The node id used when none is given: $SLURMD_NODENAME inside Slurm, else the host name,
// made a valid name (base/names.h: ToValidName).
std::string DefaultNodeId();

}  // namespace tunepar::store
