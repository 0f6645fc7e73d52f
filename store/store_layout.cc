#include "store/store_layout.h"

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "base/provenance.h"

namespace tunepar::store {

std::string ShardsDir(std::string_view store_dir) {
  return (std::filesystem::path(store_dir) / "shards").string();
}

std::string SnapshotPath(std::string_view store_dir, std::string_view node_id) {
  return (std::filesystem::path(ShardsDir(store_dir)) / fmt::format("{}.sqlite", node_id)).string();
}

std::string WorkPath(std::string_view store_dir, std::string_view node_id, std::string_view work_dir) {
  if (work_dir.empty()) {
    return (std::filesystem::path(store_dir) / "work" / fmt::format("{}.sqlite", node_id)).string();
  }
  // A shared work directory (node-local /tmp, say) may serve several stores: tell them apart by
  // a hash of the store's absolute path (FNV-1a, 64 bit).
  std::error_code ec;
  std::string absolute = std::filesystem::weakly_canonical(std::filesystem::absolute(store_dir), ec).string();
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : absolute) hash = (hash ^ c) * 1099511628211ULL;
  return (std::filesystem::path(work_dir) / fmt::format("{}-{:016x}.sqlite", node_id, hash)).string();
}

std::string ImmutableUri(const std::string& path) {
  std::string uri = "file:";
  for (unsigned char c : std::filesystem::absolute(path).string()) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-') {
      uri += static_cast<char>(c);
    } else {
      uri += fmt::format("%{:02X}", c);
    }
  }
  return uri + "?mode=ro&immutable=1";
}

Status ValidateNodeId(std::string_view node_id) {
  if (node_id.empty()) return InvalidArgument("node id must not be empty");
  if (node_id.front() == '.' || node_id.size() > 128 ||
      node_id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
          std::string_view::npos) {
    return InvalidArgument(
        fmt::format("node id '{}' is not usable as a file name (letters, digits, '.', '_', '-'; not starting "
                    "with '.')",
                    node_id));
  }
  return Status::Ok();
}

std::string DefaultNodeId() {
  const char* slurm = std::getenv("SLURMD_NODENAME");
  std::string id = (slurm != nullptr && *slurm != '\0') ? slurm : HostName();
  for (char& c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  }
  while (!id.empty() && id.front() == '.') id.erase(id.begin());
  return id.empty() ? "node" : id;
}

}  // namespace tunepar::store
