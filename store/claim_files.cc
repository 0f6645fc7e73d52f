#include "store/claim_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "base/no_follow.h"

namespace tunepar::store {

namespace fs = std::filesystem;

namespace {

// A new temporary file next to `path` holding `content`: mkstemp's unpredictable name, created
// with O_EXCL (never an existing file, never through a link planted under a guessed name).
Result<std::string> WriteTemporary(const std::string& path, const std::string& content, const std::string& tag) {
  const fs::path folder = fs::path(path).parent_path();
  std::string name = (folder / fmt::format(".tmp-{}-XXXXXX", FileSafe(tag))).string();
  const int fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return ClaimsVanished(fmt::format("the folder {} is gone", folder.string()));
  if (fd < 0) return StoreError(fmt::format("cannot create a temporary file next to '{}': {}", path, std::strerror(errno)));
  fchmod(fd, 0644);
  if (Status written = WriteAllAndClose(fd, name, content); !written.ok()) {
    unlink(name.c_str());
    return written;
  }
  return name;
}

}  // namespace

Status ClaimsVanished(const std::string& what) {
  return StoreError(fmt::format(
      "the store's claims vanished during the search ({}; deleted by hand?): this node stops so that no trial runs "
      "twice and the budget holds; run the search again, which rebuilds the claims from the shards",
      what));
}

Result<bool> CreateOnce(const std::string& path, const std::string& content, const std::string& tag) {
  Result<std::string> temporary = WriteTemporary(path, content, tag);
  if (!temporary.ok()) return temporary.status();
  const std::string& tmp = *temporary;
  bool created = link(tmp.c_str(), path.c_str()) == 0;
  const int err = errno;
  if (!created && err != EEXIST) {
    // Over NFS a link that succeeded can be reported failed (a retransmitted request): the
    // temporary file's link count tells.
    struct stat st {};
    created = stat(tmp.c_str(), &st) == 0 && st.st_nlink == 2;
    if (!created) {
      unlink(tmp.c_str());
      if (err == ENOENT) return ClaimsVanished(fmt::format("the folder {} is gone", fs::path(path).parent_path().string()));
      return StoreError(fmt::format("cannot create '{}': {}", path, std::strerror(err)));
    }
  }
  unlink(tmp.c_str());
  return created;
}

Status ReplaceFile(const std::string& path, const std::string& content) {
  Result<std::string> temporary = WriteTemporary(path, content, "replace");
  if (!temporary.ok()) return temporary.status();
  const std::string& tmp = *temporary;
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    if (err == ENOENT) return ClaimsVanished(fmt::format("the folder {} is gone", fs::path(path).parent_path().string()));
    return StoreError(fmt::format("cannot replace '{}': {}", path, std::strerror(err)));
  }
  return Status::Ok();
}

Result<std::string> ReadSmallFile(const std::string& path) {
  // Never through a link, never blocking on a FIFO planted in its place.
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ELOOP) return LinkRefused(path);
  if (fd < 0) return NotFound(fmt::format("'{}' does not exist", path));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return StoreError(fmt::format("'{}' is not a regular file", path));
  }
  std::string text;
  char buffer[4096];
  for (ssize_t n = read(fd, buffer, sizeof buffer); n != 0; n = read(fd, buffer, sizeof buffer)) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

std::map<std::string, std::string> ParseKeyValues(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

Result<std::map<std::string, int>> LatestGenerations(const std::string& dir) {
  std::map<std::string, int> latest;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return latest;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (file.empty() || file.front() == '.') continue;  // temporary files
    std::error_code type_ec;
    if (it->is_symlink(type_ec)) return LinkRefused(it->path().string());
    const size_t g = file.rfind(".g");
    if (g == std::string::npos || g + 2 >= file.size()) continue;
    const std::string digits = file.substr(g + 2);
    if (!std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); })) continue;
    int& generation = latest[file.substr(0, g)];
    generation = std::max(generation, std::atoi(digits.c_str()));
  }
  if (ec) return StoreError(fmt::format("cannot list '{}': {}", dir, ec.message()));
  return latest;
}

std::string BeatPath(const std::string& store_dir, const std::string& token) {
  return (fs::path(store_dir) / "claims" / "beats" / token).string();
}

std::string FileSafe(std::string text) {
  for (char& c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' && c != '@') c = '_';
  }
  if (!text.empty() && text.front() == '.') text.front() = '_';
  return text;
}

std::string BootId() {
  Result<std::string> id = ReadSmallFile("/proc/sys/kernel/random/boot_id");
  if (!id.ok()) return "";
  std::string s = *id;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::optional<int64_t> ProcessStartTicks(int64_t pid) {
  Result<std::string> stat = ReadSmallFile(fmt::format("/proc/{}/stat", pid));
  if (!stat.ok()) return std::nullopt;
  // The command name (field 2) may hold spaces and parentheses: count fields after the last ')'.
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(stat->substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(in >> field)) return std::nullopt;
    if (i == 3 && (field == "Z" || field == "X")) return std::nullopt;  // ended, not yet reaped
  }
  return std::atoll(field.c_str());
}

}  // namespace tunepar::store
