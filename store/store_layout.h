// Where things live in a store directory:
//   <store>/shards/<node>.sqlite   published snapshots, one per node; replaced atomically by
//                                  rename, never modified in place, read with immutable=1
//   <store>/work/<node>.sqlite     the shard a node is writing (only that node opens it), unless
//                                  a work directory on node-local disk is given
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace tunepar::store {

std::string ShardsDir(std::string_view store_dir);
std::string SnapshotPath(std::string_view store_dir, std::string_view node_id);
std::string WorkPath(std::string_view store_dir, std::string_view node_id, std::string_view work_dir);

// A file: URI that opens `path` read-only and immutable: no locks, no journal, nothing written.
std::string ImmutableUri(const std::string& path);

// Node ids name files: letters, digits, '.', '_' and '-', not starting with '.'.
Status ValidateNodeId(std::string_view node_id);

// The node id used when none is given: $SLURMD_NODENAME inside Slurm, else the host name,
// reduced to the characters ValidateNodeId accepts.
std::string DefaultNodeId();

}  // namespace tunepar::store
