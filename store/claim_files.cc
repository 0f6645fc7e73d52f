#include "store/claim_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace tunepar::store {

namespace fs = std::filesystem;

namespace {

std::atomic<int64_t> temporary_counter{0};

Status WriteWholeFile(const std::string& path, const std::string& content) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return StoreError(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      unlink(path.c_str());
      return StoreError(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (close(fd) != 0) {
    const int err = errno;
    unlink(path.c_str());
    return StoreError(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
  }
  return Status::Ok();
}

std::string TemporaryPath(const std::string& path, const std::string& tag) {
  const fs::path p(path);
  return (p.parent_path() / fmt::format(".tmp-{}-{}-{}", tag, getpid(), temporary_counter++)).string();
}

Status MakeParent(const std::string& path) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return StoreError(fmt::format("cannot create '{}': {}", fs::path(path).parent_path().string(), ec.message()));
  return Status::Ok();
}

}  // namespace

Result<bool> CreateOnce(const std::string& path, const std::string& content, const std::string& tag) {
  TUNEPAR_RETURN_IF_ERROR(MakeParent(path));
  const std::string tmp = TemporaryPath(path, tag);
  TUNEPAR_RETURN_IF_ERROR(WriteWholeFile(tmp, content));
  bool created = link(tmp.c_str(), path.c_str()) == 0;
  const int err = errno;
  if (!created && err != EEXIST) {
    // Over NFS a link that succeeded can be reported failed (a retransmitted request): the
    // temporary file's link count tells.
    struct stat st {};
    created = stat(tmp.c_str(), &st) == 0 && st.st_nlink == 2;
    if (!created) {
      unlink(tmp.c_str());
      return StoreError(fmt::format("cannot create '{}': {}", path, std::strerror(err)));
    }
  }
  unlink(tmp.c_str());
  return created;
}

Status ReplaceFile(const std::string& path, const std::string& content) {
  TUNEPAR_RETURN_IF_ERROR(MakeParent(path));
  const std::string tmp = TemporaryPath(path, "replace");
  TUNEPAR_RETURN_IF_ERROR(WriteWholeFile(tmp, content));
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return StoreError(fmt::format("cannot replace '{}': {}", path, std::strerror(err)));
  }
  return Status::Ok();
}

Result<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("'{}' does not exist", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
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
