// A thin RAII layer over the SQLite C API: a connection and prepared statements that report
// failures as Status with the database path in the message.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tunepar::store {

class Statement;

class Database {
 public:
  Database() = default;
  ~Database();
  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // `target` is a path or a file: URI; `flags` are SQLITE_OPEN_* (URI is always enabled);
  // `vfs` names the SQLite VFS that does the file I/O ("" = SQLite's default; tests give a
  // FaultyFileSystem's). Every connection can compute row checksums (row_checksum.h). A file is
  // opened with SQLITE_OPEN_NOFOLLOW (a link there is refused, never written through) and
  // trusted_schema off.
  static Result<Database> Open(const std::string& target, int flags, std::string label,
                               const std::string& vfs = "");

  // From now on, a statement that runs past `limit` from now fails (SQLITE_INTERRUPT): a last
  // guard for reading a file whose content no one vouches for.
  void StopAfter(std::chrono::steady_clock::duration limit);

  Status Exec(std::string_view sql);
  Result<Statement> Prepare(std::string_view sql);
  Result<int64_t> PragmaInt(std::string_view pragma);  // e.g. "user_version"
  Status Error(std::string_view what) const;           // "<label>: <what>: <sqlite message>"
  // The extended result code of the last failed call (SQLITE_BUSY: the lock is held elsewhere).
  int ErrorCode() const { return sqlite3_extended_errcode(db_); }

  sqlite3* handle() const { return db_; }
  const std::string& label() const { return label_; }

 private:
  sqlite3* db_ = nullptr;
  std::string label_;  // the file, for messages
  std::unique_ptr<std::chrono::steady_clock::time_point> deadline_;  // StopAfter's, where SQLite's handler reads it
};

// `path` with its directory's links resolved and its last component as it is: the name under
// which SQLite's NOFOLLOW refuses exactly a link at the file itself.
std::string ResolvedShardPath(const std::string& path);

class Statement {
 public:
  Statement(sqlite3_stmt* stmt, const Database* db) : stmt_(stmt), db_(db) {}
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Statement& Bind(int index, double value);
  Statement& Bind(int index, std::string_view value);
  Statement& Bind(int index, const std::optional<double>& value);
  Statement& Bind(int index, const std::optional<int>& value);
  Statement& BindNull(int index);

  // Steps once: true when a row is available, false when done; errors become a Status.
  Result<bool> Step();
  Status Run();  // steps to completion, then resets for reuse
  void Reset();

  int64_t Int(int column) const;
  double Double(int column) const;
  std::optional<double> OptionalDouble(int column) const;
  std::optional<int64_t> OptionalInt(int column) const;
  std::string Text(int column) const;

 private:
  sqlite3_stmt* stmt_ = nullptr;
  const Database* db_ = nullptr;
};

}  // namespace tunepar::store
