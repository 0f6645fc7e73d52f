// Whether a shard is sound, and if not, what is wrong with it in words: the diagnosis that
// readers print when they skip a shard, that Publish() gives when it refuses to replace a sound
// published copy, and that ShardWriter::Open() acts on.
#pragma once

#include <string>

#include "base/status.h"
#include "store/sqlite.h"

namespace tunepar::store {

enum class CheckDepth {
  kIdentity,    // the file header's bytes, application_id, schema version: what opening costs
  kStructure,   // application_id, schema version, PRAGMA quick_check
  kRows,        // kStructure, and every study and trial row's checksum
  kEverything,  // kRows with PRAGMA integrity_check (indexes against their tables too)
};

// The damage of the shard `db`: "" when sound, else what is wrong,
// e.g. "bad checksum in trial 3 of study 0123abcd (node n0): ...", "not a database: header
// damaged (...)", "truncated: file is 61440 bytes, the header says 30 pages of 4096 bytes
// (122880 bytes)". An error when the shard cannot be checked at all, which says nothing about
// its bytes: a newer schema (kSchemaTooNew), a file that cannot be read. An empty file (a shard
// SQLite has not written yet) is sound.
Result<std::string> FindDamage(Database& db, CheckDepth depth);

// The same for a file opened read-only and immutable (a published copy, a copy about to be
// published); "" also when the file does not exist.
Result<std::string> FindFileDamage(const std::string& path, CheckDepth depth);

// The damage that the bytes of SQLite's file header show (a header that is not SQLite's, a file
// shorter than the page count it records); "" when the header looks sound. Read through the
// connection's own file handle: opening and closing the file anew would drop the POSIX locks
// that the process holds on it.
std::string HeaderDamage(Database& db);

// True for SQLite result codes that mean the file's bytes are damaged, not that it cannot be
// reached.
bool IsDamageCode(int sqlite_code);

}  // namespace tunepar::store
