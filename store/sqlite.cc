#include "store/sqlite.h"

#include <filesystem>

#include <fmt/format.h>

#include "base/no_follow.h"

#include "store/row_checksum.h"

namespace tunepar::store {

Database::~Database() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

Database::Database(Database&& other) noexcept
    : db_(other.db_), label_(std::move(other.label_)), deadline_(std::move(other.deadline_)) {
  other.db_ = nullptr;
}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = other.db_;
    label_ = std::move(other.label_);
    deadline_ = std::move(other.deadline_);
    other.db_ = nullptr;
  }
  return *this;
}

namespace {

// The path SQLite opens for `target`: its directory with every link in it resolved (SQLite's
// SQLITE_OPEN_NOFOLLOW refuses a link anywhere in the path, and the store's own path may pass
// through one), its last component as it is, so that NOFOLLOW refuses exactly a link there. Links
// further below the store are refused before (base/no_follow.h, the readers' listing). A URI
// (ImmutableUri) is built from such a path already; ":memory:" is no file.
std::string ResolvedTarget(const std::string& target) {
  if (target == ":memory:" || target.rfind("file:", 0) == 0) return target;
  return ResolvedShardPath(target);
}

}  // namespace

std::string ResolvedShardPath(const std::string& path) {
  const std::filesystem::path p(path);
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::canonical(p.has_parent_path() ? p.parent_path() : ".", ec);
  if (ec) return path;
  return (parent / p.filename()).string();
}

Result<Database> Database::Open(const std::string& target, int flags, std::string label, const std::string& vfs) {
  Database db;
  db.label_ = std::move(label);
  const std::string resolved = ResolvedTarget(target);
  if (resolved != ":memory:") flags |= SQLITE_OPEN_NOFOLLOW;
  int rc = sqlite3_open_v2(resolved.c_str(), &db.db_, flags | SQLITE_OPEN_URI, vfs.empty() ? nullptr : vfs.c_str());
  if (rc != SQLITE_OK) {
    const int extended = db.db_ != nullptr ? sqlite3_extended_errcode(db.db_) : rc;
    std::error_code ec;
    if (extended == SQLITE_CANTOPEN_SYMLINK) return LinkRefused(db.label_);
    if (std::filesystem::is_directory(db.label_, ec))
      return StoreError(fmt::format("'{}' is a directory, not a shard file", db.label_));
    std::string message = db.db_ != nullptr ? sqlite3_errmsg(db.db_) : sqlite3_errstr(rc);
    return StoreError(fmt::format("{}: cannot open: {}", db.label_, message));
  }
  sqlite3_extended_result_codes(db.db_, 1);
  if (RegisterRowChecksum(db.db_) != SQLITE_OK) return db.Error("cannot register the row checksum");
  // A shard's schema is data from whoever wrote the file: nothing in it (a view, a trigger) may
  // call a function with side effects (https://sqlite.org/security.html).
  TUNEPAR_RETURN_IF_ERROR(db.Exec("PRAGMA trusted_schema = OFF"));
  return db;
}

namespace {

int PastDeadline(void* deadline) {
  return std::chrono::steady_clock::now() > *static_cast<std::chrono::steady_clock::time_point*>(deadline) ? 1 : 0;
}

}  // namespace

void Database::StopAfter(std::chrono::steady_clock::duration limit) {
  deadline_ = std::make_unique<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now() + limit);
  sqlite3_progress_handler(db_, 10000, PastDeadline, deadline_.get());
}

namespace {

// Which I/O failed, for the extended codes SQLite's message ("disk I/O error") leaves unsaid.
std::string_view IoErrorDetail(int code) {
  switch (code) {
    case SQLITE_IOERR_READ: return " (read failed)";
    case SQLITE_IOERR_SHORT_READ: return " (short read)";
    case SQLITE_IOERR_WRITE: return " (write failed)";
    case SQLITE_IOERR_FSYNC: return " (fsync failed)";
    case SQLITE_IOERR_DIR_FSYNC: return " (fsync of the directory failed)";
    case SQLITE_IOERR_TRUNCATE: return " (truncate failed)";
    case SQLITE_IOERR_FSTAT: return " (fstat failed)";
    case SQLITE_IOERR_DELETE: return " (delete failed)";
    case SQLITE_IOERR_LOCK: return " (lock failed)";
    default: return "";
  }
}

}  // namespace

Status Database::Error(std::string_view what) const {
  return StoreError(fmt::format("{}: {}: {}{}", label_, what, sqlite3_errmsg(db_), IoErrorDetail(ErrorCode())));
}

Status Database::Exec(std::string_view sql) {
  char* message = nullptr;
  std::string text(sql);
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    std::string m = message != nullptr ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    return StoreError(fmt::format("{}: {}{}", label_, m, IoErrorDetail(ErrorCode())));
  }
  return Status::Ok();
}

Result<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return Error("cannot prepare a statement");
  return Statement(stmt, this);
}

Result<int64_t> Database::PragmaInt(std::string_view pragma) {
  Result<Statement> st = Prepare(fmt::format("PRAGMA {}", pragma));
  if (!st.ok()) return st.status();
  Result<bool> row = st->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Error(fmt::format("PRAGMA {} returned nothing", pragma));
  return st->Int(0);
}

Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept : stmt_(other.stmt_), db_(other.db_) {
  other.stmt_ = nullptr;
}

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Statement& Statement::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Statement& Statement::Bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::Bind(int index, const std::optional<double>& value) {
  return value ? Bind(index, *value) : BindNull(index);
}
Statement& Statement::Bind(int index, const std::optional<int>& value) {
  return value ? Bind(index, *value) : BindNull(index);
}
Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Result<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  if (rc == SQLITE_INTERRUPT)
    return StoreError(fmt::format("{}: stopped: reading it took longer than tunepar allows a shard (its queries may "
                                  "never end)",
                                  db_->label()));
  return db_->Error("statement failed");
}

Status Statement::Run() {
  Result<bool> row = Step();
  while (row.ok() && *row) row = Step();
  Reset();
  return row.ok() ? Status::Ok() : row.status();
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::Int(int column) const {
  return sqlite3_column_int64(stmt_, column);
}
double Statement::Double(int column) const {
  return sqlite3_column_double(stmt_, column);
}
std::optional<double> Statement::OptionalDouble(int column) const {
  if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(stmt_, column);
}
std::optional<int64_t> Statement::OptionalInt(int column) const {
  if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(stmt_, column);
}
std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  return text != nullptr ? std::string(reinterpret_cast<const char*>(text)) : std::string();
}

}  // namespace tunepar::store
