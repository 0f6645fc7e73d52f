#include "base/no_follow.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

namespace tunepar {

namespace fs = std::filesystem;

namespace {

// The components of `relative`, refusing "..", "." and an absolute path.
Result<std::vector<std::string>> Components(std::string_view relative) {
  std::vector<std::string> parts;
  if (!relative.empty() && relative.front() == '/')
    return InternalError(fmt::format("'{}' is not a relative path", relative));
  size_t at = 0;
  while (at <= relative.size()) {
    const size_t slash = std::min(relative.find('/', at), relative.size());
    const std::string_view part = relative.substr(at, slash - at);
    if (part == "..") return InternalError(fmt::format("'{}' leaves its root ('..')", relative));
    if (!part.empty() && part != ".") parts.emplace_back(part);
    at = slash + 1;
  }
  return parts;
}

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  void Reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// What a component that cannot be opened as a directory without following links is.
Status NotADirectory(int parent, const std::string& name, const std::string& path) {
  struct stat st {};
  if (fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) return LinkRefused(path);
  if (fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
    return StoreError(fmt::format("'{}' is not a directory", path));
  return StoreError(fmt::format("cannot open directory '{}': {}", path, std::strerror(errno)));
}

// Walks `relative` below `root` by descriptors (openat with O_NOFOLLOW), creating what is
// missing when `create`.
Status Walk(const std::string& root, std::string_view relative, bool create) {
  Result<std::vector<std::string>> parts = Components(relative);
  if (!parts.ok()) return parts.status();
  if (create) {
    std::error_code ec;
    if (fs::exists(root, ec) && !fs::is_directory(root, ec)) return StoreError(fmt::format("'{}' is not a directory", root));
    fs::create_directories(root, ec);
    if (ec) return StoreError(fmt::format("cannot create '{}': {}", root, ec.message()));
  }
  Descriptor dir(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) {
    if (!create && errno == ENOENT) return Status::Ok();
    return StoreError(fmt::format("cannot open directory '{}': {}", root, std::strerror(errno)));
  }
  std::string path = root;
  for (const std::string& part : *parts) {
    path = (fs::path(path) / part).string();
    if (create && mkdirat(dir.get(), part.c_str(), 0777) != 0 && errno != EEXIST)
      return StoreError(fmt::format("cannot create '{}': {}", path, std::strerror(errno)));
    const int next = openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      if (!create && errno == ENOENT) return Status::Ok();
      return NotADirectory(dir.get(), part, path);
    }
    dir.Reset(next);
  }
  return Status::Ok();
}

}  // namespace

Status LinkRefused(const std::string& path) {
  return StoreError(fmt::format(
      "'{}' is a symbolic link: tunepar never follows links inside a store (remove it; the store's own path may be a "
      "link)",
      path));
}

Status MakeDirectoriesBelow(const std::string& root, std::string_view relative) {
  return Walk(root, relative, true);
}

Status CheckNoLinksBelow(const std::string& root, std::string_view relative) {
  return Walk(root, relative, false);
}

Result<int> OpenForWriting(const std::string& path, int flags) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | flags, 0644);
  if (fd >= 0) return fd;
  if (errno == ELOOP) return LinkRefused(path);
  return StoreError(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
}

Status WriteAllAndClose(int fd, const std::string& path, std::string_view content) {
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      return StoreError(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (close(fd) != 0) return StoreError(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  return Status::Ok();
}

Status WriteFileNoFollow(const std::string& path, std::string_view content) {
  Result<int> fd = OpenForWriting(path, O_TRUNC);
  if (!fd.ok()) return fd.status();
  return WriteAllAndClose(*fd, path, content);
}

Status CheckNoLinksIn(const std::string& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_symlink(type_ec)) return LinkRefused(it->path().string());
  }
  return Status::Ok();
}

}  // namespace tunepar
