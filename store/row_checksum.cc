#include "store/row_checksum.h"

#include <cstring>
#include <string>

namespace tunepar::store {

namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ULL;
constexpr uint64_t kFnvPrime = 1099511628211ULL;

uint64_t Mix(uint64_t hash, const unsigned char* bytes, size_t size) {
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * kFnvPrime;
  return hash;
}

uint64_t MixWord(uint64_t hash, uint64_t word) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(word >> (8 * i));
  return Mix(hash, bytes, sizeof bytes);
}

uint64_t MixValue(uint64_t hash, sqlite3_value* value) {
  const int type = sqlite3_value_type(value);
  const unsigned char tag = static_cast<unsigned char>(type);
  hash = Mix(hash, &tag, 1);
  switch (type) {
    case SQLITE_INTEGER: return MixWord(hash, static_cast<uint64_t>(sqlite3_value_int64(value)));
    case SQLITE_FLOAT: {
      const double real = sqlite3_value_double(value);
      uint64_t bits;
      std::memcpy(&bits, &real, sizeof bits);
      return MixWord(hash, bits);
    }
    case SQLITE_TEXT:
    case SQLITE_BLOB: {
      const void* bytes = type == SQLITE_TEXT ? static_cast<const void*>(sqlite3_value_text(value))
                                              : sqlite3_value_blob(value);
      const int size = sqlite3_value_bytes(value);
      hash = MixWord(hash, static_cast<uint64_t>(size));
      return bytes != nullptr ? Mix(hash, static_cast<const unsigned char*>(bytes), size) : hash;
    }
    default: return hash;  // NULL: the tag says it all
  }
}

void RowChecksumFunction(sqlite3_context* context, int count, sqlite3_value** values) {
  sqlite3_result_int64(context, static_cast<sqlite3_int64>(RowChecksum(count, values)));
}

}  // namespace

uint64_t RowChecksum(int count, sqlite3_value** values) {
  uint64_t hash = kFnvOffset;
  for (int i = 0; i < count; ++i) hash = MixValue(hash, values[i]);
  return hash;
}

int RegisterRowChecksum(sqlite3* db) {
  const std::string name(kRowChecksumFunction);
  return sqlite3_create_function_v2(db, name.c_str(), -1,
                                    SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nullptr,
                                    RowChecksumFunction, nullptr, nullptr, nullptr);
}

}  // namespace tunepar::store
