#include "store/file_system.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

namespace tunepar::store {

namespace {

class PosixFileSystem final : public FileSystem {
 public:
  Status Rename(const std::string& from, const std::string& to) override {
    if (std::rename(from.c_str(), to.c_str()) != 0)
      return StoreError(fmt::format("cannot rename '{}' to '{}': {}", from, to, std::strerror(errno)));
    return Status::Ok();
  }

  Status Fsync(const std::string& path) override {
    // O_RDONLY opens a directory as well as a file: both are synced the same way.
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return StoreError(fmt::format("cannot open '{}' to sync it: {}", path, std::strerror(errno)));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0) return StoreError(fmt::format("cannot sync '{}': {}", path, std::strerror(err)));
    return Status::Ok();
  }

  Status Remove(const std::string& path) override {
    if (unlink(path.c_str()) != 0 && errno != ENOENT)
      return StoreError(fmt::format("cannot remove '{}': {}", path, std::strerror(errno)));
    return Status::Ok();
  }
};

}  // namespace

FileSystem& DefaultFileSystem() {
  static PosixFileSystem file_system;
  return file_system;
}

}  // namespace tunepar::store
