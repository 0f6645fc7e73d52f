// A checksum of each study and trial row. SQLite checks its pages' structure but keeps no
// checksum of their content, so one changed byte in a value passes PRAGMA integrity_check; the
// checksum column catches it on every read.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string_view>

namespace tunepar::store {

// The SQL function that computes a row's checksum from its other columns, in the order of the
// table's column list (rows.cc): tunepar_row_checksum(c1, ..., cN). Registered on every
// connection (Database::Open), so INSERTs, SELECTs and migrations compute it the same way.
inline constexpr std::string_view kRowChecksumFunction = "tunepar_row_checksum";

// FNV-1a, 64 bit, over the canonical encoding of `values`: per value a type tag, then an
// integer or a real as 8 little-endian bytes, a text or blob as its length (8 bytes) and its
// bytes, NULL as the tag alone. FNV-1a maps each byte through a bijection of the state, so a
// change confined to one byte always changes the checksum.
uint64_t RowChecksum(int count, sqlite3_value** values);

// Registers kRowChecksumFunction on `db`; an SQLite result code.
int RegisterRowChecksum(sqlite3* db);

}  // namespace tunepar::store
