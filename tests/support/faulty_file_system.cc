#include "tests/support/faulty_file_system.h"

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace tunepar::store {

namespace {

// What SQLite allocates for a file opened through the shim: this header, then (at an 8-byte
// aligned offset) the real VFS's file, which does the I/O.
struct ShimFile {
  sqlite3_file base;  // first: SQLite sees a ShimFile as an sqlite3_file
  FaultyFileSystem* owner;
  const char* path;  // SQLite keeps the name valid until xClose; null for unnamed temp files
};
constexpr int kShimFileSize = (sizeof(ShimFile) + 7) & ~7;

ShimFile* Shim(sqlite3_file* file) {
  return reinterpret_cast<ShimFile*>(file);
}
sqlite3_file* Real(sqlite3_file* file) {
  return reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kShimFileSize);
}
const sqlite3_io_methods& RealIo(sqlite3_file* file) {
  return *Real(file)->pMethods;
}

// The io methods: each passes through to the real file; writes and syncs ask the owner first.
int ShimClose(sqlite3_file* f) {
  return RealIo(f).xClose(Real(f));
}
int ShimRead(sqlite3_file* f, void* buffer, int amount, sqlite3_int64 offset) {
  return RealIo(f).xRead(Real(f), buffer, amount, offset);
}
int ShimWrite(sqlite3_file* f, const void* buffer, int amount, sqlite3_int64 offset) {
  if (int rc = Shim(f)->owner->BeforeWrite(Shim(f)->path, amount); rc != SQLITE_OK) return rc;
  return RealIo(f).xWrite(Real(f), buffer, amount, offset);
}
int ShimTruncate(sqlite3_file* f, sqlite3_int64 size) {
  return RealIo(f).xTruncate(Real(f), size);
}
int ShimSync(sqlite3_file* f, int flags) {
  if (int rc = Shim(f)->owner->BeforeSync(Shim(f)->path); rc != SQLITE_OK) return rc;
  return RealIo(f).xSync(Real(f), flags);
}
int ShimFileSize(sqlite3_file* f, sqlite3_int64* size) {
  return RealIo(f).xFileSize(Real(f), size);
}
int ShimLock(sqlite3_file* f, int lock) {
  return RealIo(f).xLock(Real(f), lock);
}
int ShimUnlock(sqlite3_file* f, int lock) {
  return RealIo(f).xUnlock(Real(f), lock);
}
int ShimCheckReservedLock(sqlite3_file* f, int* out) {
  return RealIo(f).xCheckReservedLock(Real(f), out);
}
int ShimFileControl(sqlite3_file* f, int op, void* arg) {
  return RealIo(f).xFileControl(Real(f), op, arg);
}
int ShimSectorSize(sqlite3_file* f) {
  return RealIo(f).xSectorSize(Real(f));
}
int ShimDeviceCharacteristics(sqlite3_file* f) {
  return RealIo(f).xDeviceCharacteristics(Real(f));
}
int ShimShmMap(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
  if (RealIo(f).iVersion < 2) return SQLITE_IOERR;
  return RealIo(f).xShmMap(Real(f), page, size, extend, out);
}
int ShimShmLock(sqlite3_file* f, int offset, int n, int flags) {
  if (RealIo(f).iVersion < 2) return SQLITE_IOERR;
  return RealIo(f).xShmLock(Real(f), offset, n, flags);
}
void ShimShmBarrier(sqlite3_file* f) {
  if (RealIo(f).iVersion >= 2) RealIo(f).xShmBarrier(Real(f));
}
int ShimShmUnmap(sqlite3_file* f, int remove) {
  if (RealIo(f).iVersion < 2) return SQLITE_OK;
  return RealIo(f).xShmUnmap(Real(f), remove);
}
int ShimFetch(sqlite3_file* f, sqlite3_int64 offset, int amount, void** out) {
  *out = nullptr;
  if (RealIo(f).iVersion < 3) return SQLITE_OK;  // no memory map: SQLite reads instead
  return RealIo(f).xFetch(Real(f), offset, amount, out);
}
int ShimUnfetch(sqlite3_file* f, sqlite3_int64 offset, void* page) {
  if (RealIo(f).iVersion < 3) return SQLITE_OK;
  return RealIo(f).xUnfetch(Real(f), offset, page);
}

const sqlite3_io_methods kShimIo = {3,
                                    ShimClose,
                                    ShimRead,
                                    ShimWrite,
                                    ShimTruncate,
                                    ShimSync,
                                    ShimFileSize,
                                    ShimLock,
                                    ShimUnlock,
                                    ShimCheckReservedLock,
                                    ShimFileControl,
                                    ShimSectorSize,
                                    ShimDeviceCharacteristics,
                                    ShimShmMap,
                                    ShimShmLock,
                                    ShimShmBarrier,
                                    ShimShmUnmap,
                                    ShimFetch,
                                    ShimUnfetch};

FaultyFileSystem& Owner(sqlite3_vfs* vfs) {
  return *static_cast<FaultyFileSystem*>(vfs->pAppData);
}
sqlite3_vfs* RealVfs(sqlite3_vfs* vfs) {
  return Owner(vfs).real_vfs();
}

int ShimOpen(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  ShimFile* shim = Shim(file);
  shim->base.pMethods = nullptr;
  shim->owner = &Owner(vfs);
  shim->path = name;
  Real(file)->pMethods = nullptr;
  int rc = RealVfs(vfs)->xOpen(RealVfs(vfs), name, Real(file), flags, out_flags);
  // SQLite calls xClose whenever pMethods is set, even after a failed open: mirror the real file.
  if (Real(file)->pMethods != nullptr) shim->base.pMethods = &kShimIo;
  return rc;
}

// The rest of the VFS passes through to the real one, which must see itself as `vfs`.
int ShimDelete(sqlite3_vfs* v, const char* name, int sync) {
  return RealVfs(v)->xDelete(RealVfs(v), name, sync);
}
int ShimAccess(sqlite3_vfs* v, const char* name, int flags, int* out) {
  return RealVfs(v)->xAccess(RealVfs(v), name, flags, out);
}
int ShimFullPathname(sqlite3_vfs* v, const char* name, int size, char* out) {
  return RealVfs(v)->xFullPathname(RealVfs(v), name, size, out);
}
void* ShimDlOpen(sqlite3_vfs* v, const char* name) {
  return RealVfs(v)->xDlOpen(RealVfs(v), name);
}
void ShimDlError(sqlite3_vfs* v, int size, char* out) {
  RealVfs(v)->xDlError(RealVfs(v), size, out);
}
void (*ShimDlSym(sqlite3_vfs* v, void* handle, const char* symbol))(void) {
  return RealVfs(v)->xDlSym(RealVfs(v), handle, symbol);
}
void ShimDlClose(sqlite3_vfs* v, void* handle) {
  RealVfs(v)->xDlClose(RealVfs(v), handle);
}
int ShimRandomness(sqlite3_vfs* v, int size, char* out) {
  return RealVfs(v)->xRandomness(RealVfs(v), size, out);
}
int ShimSleep(sqlite3_vfs* v, int micros) {
  return RealVfs(v)->xSleep(RealVfs(v), micros);
}
int ShimCurrentTime(sqlite3_vfs* v, double* out) {
  return RealVfs(v)->xCurrentTime(RealVfs(v), out);
}
int ShimGetLastError(sqlite3_vfs* v, int size, char* out) {
  return RealVfs(v)->xGetLastError(RealVfs(v), size, out);
}
int ShimCurrentTimeInt64(sqlite3_vfs* v, sqlite3_int64* out) {
  return RealVfs(v)->xCurrentTimeInt64(RealVfs(v), out);
}
int ShimSetSystemCall(sqlite3_vfs* v, const char* name, sqlite3_syscall_ptr call) {
  return RealVfs(v)->xSetSystemCall(RealVfs(v), name, call);
}
sqlite3_syscall_ptr ShimGetSystemCall(sqlite3_vfs* v, const char* name) {
  return RealVfs(v)->xGetSystemCall(RealVfs(v), name);
}
const char* ShimNextSystemCall(sqlite3_vfs* v, const char* name) {
  return RealVfs(v)->xNextSystemCall(RealVfs(v), name);
}

std::atomic<int> shims_made{0};

}  // namespace

FaultyFileSystem::FaultyFileSystem()
    : vfs_name_(fmt::format("tunepar-faulty-{}", shims_made.fetch_add(1))),
      real_vfs_(sqlite3_vfs_find(nullptr)) {
  shim_.iVersion = real_vfs_->iVersion < 3 ? real_vfs_->iVersion : 3;
  shim_.szOsFile = kShimFileSize + real_vfs_->szOsFile;
  shim_.mxPathname = real_vfs_->mxPathname;
  shim_.zName = vfs_name_.c_str();
  shim_.pAppData = this;
  shim_.xOpen = ShimOpen;
  shim_.xDelete = ShimDelete;
  shim_.xAccess = ShimAccess;
  shim_.xFullPathname = ShimFullPathname;
  shim_.xDlOpen = ShimDlOpen;
  shim_.xDlError = ShimDlError;
  shim_.xDlSym = ShimDlSym;
  shim_.xDlClose = ShimDlClose;
  shim_.xRandomness = ShimRandomness;
  shim_.xSleep = ShimSleep;
  shim_.xCurrentTime = ShimCurrentTime;
  shim_.xGetLastError = ShimGetLastError;
  shim_.xCurrentTimeInt64 = ShimCurrentTimeInt64;
  shim_.xSetSystemCall = ShimSetSystemCall;
  shim_.xGetSystemCall = ShimGetSystemCall;
  shim_.xNextSystemCall = ShimNextSystemCall;
  sqlite3_vfs_register(&shim_, 0);
}

FaultyFileSystem::~FaultyFileSystem() {
  sqlite3_vfs_unregister(&shim_);
}

void FaultyFileSystem::FailWritesAfter(int64_t bytes, std::string path_part) {
  write_budget_ = bytes;
  write_path_part_ = std::move(path_part);
}

void FaultyFileSystem::FailSqliteSyncs(std::string path_part) {
  sqlite_sync_path_part_ = std::move(path_part);
}

void FaultyFileSystem::FailFsyncOf(std::string path) {
  fsync_path_ = std::move(path);
}

void FaultyFileSystem::FailFsyncsOfPathsWith(std::string path_part) {
  fsync_path_part_ = std::move(path_part);
}

void FaultyFileSystem::FailRenames() {
  fail_renames_ = true;
}

void FaultyFileSystem::Clear() {
  write_budget_.reset();
  sqlite_sync_path_part_.reset();
  fsync_path_.reset();
  fsync_path_part_.reset();
  fail_renames_ = false;
}

bool FaultyFileSystem::Matches(const char* path, const std::string& part) const {
  return path != nullptr && std::strstr(path, part.c_str()) != nullptr;
}

int FaultyFileSystem::BeforeWrite(const char* path, int bytes) {
  if (!write_budget_ || !Matches(path, write_path_part_)) return SQLITE_OK;
  if (*write_budget_ < bytes) {
    ++faults_injected_;
    return SQLITE_FULL;
  }
  *write_budget_ -= bytes;
  return SQLITE_OK;
}

int FaultyFileSystem::BeforeSync(const char* path) {
  if (!sqlite_sync_path_part_ || !Matches(path, *sqlite_sync_path_part_)) return SQLITE_OK;
  ++faults_injected_;
  return SQLITE_IOERR_FSYNC;
}

Status FaultyFileSystem::Rename(const std::string& from, const std::string& to) {
  if (fail_renames_) {
    ++faults_injected_;
    return StoreError(fmt::format("cannot rename '{}' to '{}': {} (injected)", from, to, std::strerror(EIO)));
  }
  return DefaultFileSystem().Rename(from, to);
}

Status FaultyFileSystem::Fsync(const std::string& path) {
  if ((fsync_path_ && path == *fsync_path_) || (fsync_path_part_ && Matches(path.c_str(), *fsync_path_part_))) {
    ++faults_injected_;
    return StoreError(fmt::format("cannot sync '{}': {} (injected)", path, std::strerror(EIO)));
  }
  return DefaultFileSystem().Fsync(path);
}

Status FaultyFileSystem::Remove(const std::string& path) {
  return DefaultFileSystem().Remove(path);
}

}  // namespace tunepar::store
