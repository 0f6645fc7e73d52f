// The shard schema: its version (PRAGMA user_version) and the forward migrations.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/sqlite.h"

namespace tunepar::store {

inline constexpr int64_t kSchemaVersion = 7;
// The first schema whose study and trial rows carry checksums (row_checksum.h).
inline constexpr int64_t kFirstChecksummedVersion = 3;
// PRAGMA application_id of a tunepar shard ("tune"): tells our files from other SQLite files.
inline constexpr int64_t kApplicationId = 0x74756e65;

// Brings `db` from its user_version to kSchemaVersion, one step per transaction. Fails with
// kSchemaTooNew when the file is newer than this tunepar.
Status Migrate(Database& db);

// What a shard of `version` (1..kSchemaVersion) holds in sqlite_master: its tables and indexes
// as "table NAME" / "index NAME", made by running the migrations up to `version` in memory.
const std::set<std::string>& SchemaObjects(int64_t version);

// A column as the migrations declare it: its name and declared type ("INTEGER", "TEXT", "REAL").
struct DeclaredColumn {
  std::string name;
  std::string type;
};
// The columns of `table` in a shard of `version`, in the table's order (empty for a table the
// shard does not have), made by running the migrations up to `version` in memory.
std::vector<DeclaredColumn> DeclaredColumns(int64_t version, std::string_view table);

// The CREATE statement of `table` in a shard of `version` as sqlite_master holds it ("" for a
// table the shard does not have), made by running the migrations up to `version` in memory
// (tests make a shard of an older schema with it).
std::string TableSql(int64_t version, std::string_view table);

// kSchemaTooNew unless `version` <= kSchemaVersion.
Status CheckVersionReadable(const Database& db, int64_t version);

}  // namespace tunepar::store
