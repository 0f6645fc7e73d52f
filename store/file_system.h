// The store's file operations, as one small interface that tests can make fail (in the spirit
// of leveldb's Env). SQLite does its own I/O: it reaches the same seam through the VFS a
// FileSystem names (SqliteVfs); tunepar's own renames, fsyncs and removals of published copies
// go through the methods below.
#pragma once

#include <string>

#include "base/status.h"

namespace tunepar::store {

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Atomically replaces `to` by `from` (rename(2)).
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Flushes a file, or a directory's entries, to stable storage (fsync(2)).
  virtual Status Fsync(const std::string& path) = 0;
  // Removes a file; a file that is not there is not an error.
  virtual Status Remove(const std::string& path) = 0;
  // The SQLite VFS that shard files are opened with ("" = SQLite's default).
  virtual std::string SqliteVfs() const { return ""; }
};

// The real filesystem (POSIX calls; SQLite's default VFS). What production code uses.
FileSystem& DefaultFileSystem();

}  // namespace tunepar::store
