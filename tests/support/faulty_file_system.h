// A FileSystem that fails on request, for tests: the faults a cluster's filesystems really show
// (a disk that fills up, EIO on fsync, a rename that fails). SQLite's own I/O reaches it through
// a VFS shim registered under its own name (SqliteVfs) that wraps SQLite's default unix VFS and
// passes every call through unless a fault is armed; tunepar's renames and fsyncs go through
// the FileSystem methods. A crash is the test's to simulate (a child process that _exits in
// Rename, say), since a crash cleans nothing up. Test support (library
// tunepar_faulty_file_system, tests/support/CMakeLists.txt): linked by tests only, never by the
// store library or a tunepar binary.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>

#include "store/file_system.h"

namespace tunepar::store {

class FaultyFileSystem : public FileSystem {
 public:
  // Registers the VFS shim (a name unique to this object).
  FaultyFileSystem();
  // Unregisters it: every Database opened through it must be closed first.
  ~FaultyFileSystem() override;
  FaultyFileSystem(const FaultyFileSystem&) = delete;
  FaultyFileSystem& operator=(const FaultyFileSystem&) = delete;

  // Disk full: once `bytes` more have been written to files whose path contains `path_part`,
  // SQLite's writes to them fail with SQLITE_FULL ("database or disk is full").
  void FailWritesAfter(int64_t bytes, std::string path_part);
  // EIO on SQLite's syncs of files whose path contains `path_part` (SQLITE_IOERR_FSYNC).
  void FailSqliteSyncs(std::string path_part);
  // EIO on tunepar's own Fsync of exactly `path` (a copy about to be published, the shards
  // directory after the rename).
  void FailFsyncOf(std::string path);
  // EIO on tunepar's own Fsync of every path that contains `path_part` (a copy in its
  // unpredictably named folder, say).
  void FailFsyncsOfPathsWith(std::string path_part);
  // Every rename fails with EIO.
  void FailRenames();
  // Clears every fault: the filesystem works again.
  void Clear();
  // How many operations failed on purpose so far.
  int faults_injected() const { return faults_injected_; }

  Status Rename(const std::string& from, const std::string& to) override;
  Status Fsync(const std::string& path) override;
  Status Remove(const std::string& path) override;
  std::string SqliteVfs() const override { return vfs_name_; }

  // The shim's hooks: the SQLite result code an operation on `path` gets (SQLITE_OK: do it).
  int BeforeWrite(const char* path, int bytes);
  int BeforeSync(const char* path);
  sqlite3_vfs* real_vfs() const { return real_vfs_; }

 private:
  bool Matches(const char* path, const std::string& part) const;

  std::string vfs_name_;
  sqlite3_vfs* real_vfs_ = nullptr;  // SQLite's default VFS, which does the I/O
  sqlite3_vfs shim_{};

  std::optional<int64_t> write_budget_;  // bytes still writable before SQLITE_FULL
  std::string write_path_part_;
  std::optional<std::string> sqlite_sync_path_part_;
  std::optional<std::string> fsync_path_;
  std::optional<std::string> fsync_path_part_;
  bool fail_renames_ = false;
  int faults_injected_ = 0;
};

}  // namespace tunepar::store
