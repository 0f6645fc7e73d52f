#include "store/store_layout.h"

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "base/names.h"
#include "base/provenance.h"
#include "store/sqlite.h"

namespace tunepar::store {

std::string ShardsDir(std::string_view store_dir) {
  return (std::filesystem::path(store_dir) / "shards").string();
}

std::string NodeShardsDir(std::string_view store_dir, std::string_view node_id) {
  return (std::filesystem::path(ShardsDir(store_dir)) / node_id).string();
}

std::string SnapshotPath(std::string_view store_dir, std::string_view node_id, std::string_view study_id) {
  return (std::filesystem::path(NodeShardsDir(store_dir, node_id)) / fmt::format("{}.sqlite", study_id)).string();
}

std::string StoreFormatPath(std::string_view store_dir) {
  return LegacySnapshotPath(store_dir, kStoreFormatNode);
}

std::string LegacySnapshotPath(std::string_view store_dir, std::string_view node_id) {
  return (std::filesystem::path(ShardsDir(store_dir)) / fmt::format("{}.sqlite", node_id)).string();
}

namespace {

// A node's work directory: <store>/work/<node>, or in a work directory given on the command line
// (node-local /tmp, say) that may serve several stores, <work_dir>/<node>-<hash of the store's
// absolute path> (FNV-1a, 64 bit).
std::string NodeWorkStem(std::string_view store_dir, std::string_view node_id, std::string_view work_dir) {
  if (work_dir.empty()) return (std::filesystem::path(store_dir) / "work" / node_id).string();
  std::error_code ec;
  std::string absolute = std::filesystem::weakly_canonical(std::filesystem::absolute(store_dir), ec).string();
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : absolute) hash = (hash ^ c) * 1099511628211ULL;
  return (std::filesystem::path(work_dir) / fmt::format("{}-{:016x}", node_id, hash)).string();
}

}  // namespace

std::string WorkPath(std::string_view store_dir, std::string_view node_id, std::string_view study_id,
                     std::string_view work_dir) {
  return (std::filesystem::path(NodeWorkStem(store_dir, node_id, work_dir)) / fmt::format("{}.sqlite", study_id))
      .string();
}

std::string LegacyWorkPath(std::string_view store_dir, std::string_view node_id, std::string_view work_dir) {
  return NodeWorkStem(store_dir, node_id, work_dir) + ".sqlite";
}

std::string TrialDirBelowStore(std::string_view folder, std::string_view node_id, int64_t number) {
  return fmt::format("trials/{}/{}-{}", folder, node_id, number);
}

std::string TrialDirPath(std::string_view store_dir, std::string_view folder, std::string_view node_id, int64_t number) {
  return (std::filesystem::path(store_dir) / TrialDirBelowStore(folder, node_id, number)).string();
}

std::string ImmutableUri(const std::string& path) {
  std::string uri = "file:";
  std::error_code ec;
  for (unsigned char c : std::filesystem::absolute(ResolvedShardPath(path), ec).string()) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-') {
      uri += static_cast<char>(c);
    } else {
      uri += fmt::format("%{:02X}", c);
    }
  }
  return uri + "?mode=ro&immutable=1";
}

Status ValidateNodeId(std::string_view node_id) {
  if (node_id == kStoreFormatNode)
    return InvalidArgument(fmt::format("node id '{}' is reserved: the store's format file has that name", node_id));
  return CheckName("node id", node_id, StatusCode::kInvalidArgument);
}

Status ValidateStudyId(std::string_view study_id) {
  return CheckName("study id", study_id, StatusCode::kInvalidArgument);
}

std::string DefaultNodeId() {
  const char* slurm = std::getenv("SLURMD_NODENAME");
  const std::string id = (slurm != nullptr && *slurm != '\0') ? slurm : HostName();
  return id.empty() ? "node" : ToValidName(id);
}

}  // namespace tunepar::store
