#include "store/shard_check.h"

#include <cstring>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "base/names.h"
#include "store/rows.h"
#include "store/schema.h"
#include "store/store_layout.h"

namespace tunepar::store {

namespace fs = std::filesystem;

namespace {

// SQLite's file header (https://www.sqlite.org/fileformat2.html#the_database_header).
constexpr size_t kHeaderSize = 100;
constexpr char kMagic[] = "SQLite format 3";  // with its terminating NUL: the first 16 bytes

uint32_t BigEndian(const unsigned char* bytes, int size) {
  uint32_t value = 0;
  for (int i = 0; i < size; ++i) value = (value << 8) | bytes[i];
  return value;
}

// A failed check: damage when SQLite says the bytes are bad, else the error itself.
Result<std::string> DamageOrError(Database& db, const Status& status) {
  if (!IsDamageCode(db.ErrorCode())) return status;
  return fmt::format("damaged: {}", sqlite3_errmsg(db.handle()));
}

// PRAGMA quick_check or integrity_check: "" when it says ok, else its first finding.
Result<std::string> StructureDamage(Database& db, std::string_view pragma) {
  Result<Statement> st = db.Prepare(fmt::format("PRAGMA {}", pragma));
  if (!st.ok()) return DamageOrError(db, st.status());
  std::string first;
  int findings = 0;
  for (Result<bool> row = st->Step();; row = st->Step()) {
    if (!row.ok()) return DamageOrError(db, row.status());
    if (!*row) break;
    if (findings++ == 0) first = st->Text(0);
  }
  if (findings == 0) return std::string("damaged: the structure check returned nothing");
  if (first == "ok") return std::string();
  return fmt::format(
      "damaged: {}{}", first,
      findings > 1 ? fmt::format(" (and {} more findings of PRAGMA {})", findings - 1, pragma) : "");
}

// What sqlite_master holds against what a shard of `version` holds (schema.h: SchemaObjects):
// "" when exactly those tables and indexes. Checked before any query of the shard's tables, so
// that nothing a stranger's file defines (a view whose query never ends, a trigger) ever runs.
Result<std::string> SchemaDamage(Database& db, int64_t version) {
  Result<Statement> st = db.Prepare("SELECT type, name, COALESCE(sql, '') FROM sqlite_master");
  if (!st.ok()) return DamageOrError(db, st.status());
  std::set<std::string> objects;
  for (Result<bool> row = st->Step();; row = st->Step()) {
    if (!row.ok()) return DamageOrError(db, row.status());
    if (!*row) break;
    const std::string type = st->Text(0), name = st->Text(1), sql = st->Text(2);
    if ((type != "table" && type != "index") || sql.rfind("CREATE VIRTUAL", 0) == 0) {
      return fmt::format("not a tunepar shard: it defines {} {} '{}', which a shard never holds (nothing of it is run)",
                         type == "index" ? "an" : "a", sql.rfind("CREATE VIRTUAL", 0) == 0 ? "virtual table" : type,
                         OneLine(name));
    }
    objects.insert(type + " " + name);
  }
  if (objects.empty()) return std::string();  // no tables (the store's format file): nothing to read, nothing to run
  const std::set<std::string>& expected = SchemaObjects(version);
  for (const std::string& object : objects) {
    if (!expected.contains(object))
      return fmt::format("not a tunepar shard of schema {}: it holds {} (nothing of it is read)", version, OneLine(object));
  }
  for (const std::string& object : expected) {
    if (!objects.contains(object)) return fmt::format("damaged: {} of schema {} is missing", object, version);
  }
  return std::string();
}

// What the shard's application_id and schema version say: "" when it is a tunepar shard this
// tunepar reads (or still empty).
Result<std::string> IdentityDamage(Database& db, bool* empty) {
  Result<int64_t> app = db.PragmaInt("application_id");
  if (!app.ok()) return DamageOrError(db, app.status());
  Result<int64_t> version = db.PragmaInt("user_version");
  if (!version.ok()) return DamageOrError(db, version.status());
  Result<Statement> tables = db.Prepare("SELECT COUNT(*) FROM sqlite_master");
  if (!tables.ok()) return DamageOrError(db, tables.status());
  Result<bool> row = tables->Step();
  if (!row.ok()) return DamageOrError(db, row.status());
  *empty = *app == 0 && *version == 0 && *row && tables->Int(0) == 0;
  if (*empty) return std::string();
  if (*app != kApplicationId || *version == 0) {
    return fmt::format(
        "not a tunepar shard (application_id {:#x}, schema version {}: empty, truncated or another "
        "program's file)",
        *app, *version);
  }
  TUNEPAR_RETURN_IF_ERROR(CheckVersionReadable(db, *version));
  return SchemaDamage(db, *version);
}

}  // namespace

bool IsDamageCode(int sqlite_code) {
  const int primary = sqlite_code & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

std::string HeaderDamage(Database& db) {
  sqlite3_file* file = nullptr;
  if (sqlite3_file_control(db.handle(), "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK ||
      file == nullptr || file->pMethods == nullptr) {
    return "";  // an in-memory database: no file
  }
  sqlite3_int64 signed_size = 0;
  if (file->pMethods->xFileSize(file, &signed_size) != SQLITE_OK || signed_size <= 0) return "";
  const uint64_t size = static_cast<uint64_t>(signed_size);
  if (size < kHeaderSize)
    return fmt::format("truncated: file is {} bytes, shorter than SQLite's 100-byte header", size);
  unsigned char header[kHeaderSize];
  if (file->pMethods->xRead(file, header, kHeaderSize, 0) != SQLITE_OK) return "";  // SQLite will say why
  if (std::memcmp(header, kMagic, sizeof kMagic) != 0)
    return "not a database: header damaged (the file does not start with \"SQLite format 3\")";
  const uint32_t stored_page_size = BigEndian(header + 16, 2);
  const uint64_t page_size = stored_page_size == 1 ? 65536 : stored_page_size;
  if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0)
    return fmt::format(
        "not a database: header damaged (page size {} is not a power of two from 512 to 65536)", page_size);
  // The page count in the header is valid when the "version-valid-for" number matches the
  // change counter (SQLite >= 3.7.0 keeps them equal).
  const uint64_t pages = BigEndian(header + 28, 4);
  if (pages > 0 && BigEndian(header + 92, 4) == BigEndian(header + 24, 4) && size < pages * page_size) {
    return fmt::format("truncated: file is {} bytes, the header says {} pages of {} bytes ({} bytes)", size,
                       pages, page_size, pages * page_size);
  }
  if (size % page_size != 0)
    return fmt::format("truncated: file is {} bytes, not a whole number of {}-byte pages", size, page_size);
  return "";
}

Result<std::string> FindDamage(Database& db, CheckDepth depth) {
  // The header's bytes name a damaged header or a truncation better than SQLite's "file is not
  // a database" or "database disk image is malformed".
  if (std::string header = HeaderDamage(db); !header.empty()) return header;
  bool empty = false;
  Result<std::string> identity = IdentityDamage(db, &empty);
  if (!identity.ok() || !identity->empty() || empty || depth == CheckDepth::kIdentity) return identity;
  Result<std::string> structure =
      StructureDamage(db, depth == CheckDepth::kEverything ? "integrity_check" : "quick_check");
  if (!structure.ok() || !structure->empty() || depth == CheckDepth::kStructure) return structure;
  Result<int64_t> version = db.PragmaInt("user_version");
  if (!version.ok()) return DamageOrError(db, version.status());
  // An older shard has no checksums yet: the migration that adds them computes them.
  if (*version < kFirstChecksummedVersion) return std::string();
  Result<std::string> rows = FindBadChecksums(db);
  if (!rows.ok()) return DamageOrError(db, rows.status());
  return rows;
}

Result<std::string> FindFileDamage(const std::string& path, CheckDepth depth) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(path, ec);
  if (status.type() == fs::file_type::not_found) return std::string();
  if (status.type() == fs::file_type::directory) return std::string("a directory, not a shard file");
  if (status.type() == fs::file_type::symlink)
    return std::string("a symbolic link (tunepar never follows links inside a store)");
  if (fs::file_size(path, ec) == 0 && !ec) return std::string("empty (0 bytes): not a tunepar shard");
  Result<Database> db = Database::Open(ImmutableUri(path), SQLITE_OPEN_READONLY, path);
  if (!db.ok()) return db.status();
  return FindDamage(*db, depth);
}

}  // namespace tunepar::store
