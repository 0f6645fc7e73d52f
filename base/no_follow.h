// File operations that never follow a symbolic link below a root the user gave. A store is a
// directory shared by nodes and often by users: a link planted inside it (a trial folder, a log,
// a shard) must not make tunepar write somewhere else. The root itself (the store, --work-dir)
// may be, or pass through, a link: that is the user's own choice of where things go.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace tunepar {

// Creates the directories of `relative` ("a/b/c": no "..", not absolute) below `root`, creating
// `root` too when it is missing. A component below `root` that is a symbolic link (or not a
// directory) is refused with a kStore error naming it; nothing below it is created.
Status MakeDirectoriesBelow(const std::string& root, std::string_view relative);

// The same check without creating anything: kStore when a component of `relative` below `root`
// is a link or not a directory; ok when all that exist are directories (some may be missing).
Status CheckNoLinksBelow(const std::string& root, std::string_view relative);

// Opens `path` for writing with `flags` added to O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC
// (mode 0644): a link at `path` is refused, never written through. A kStore error names the file.
Result<int> OpenForWriting(const std::string& path, int flags);

// Writes all of `content` to `fd` (retrying short writes) and closes it; kStore names `path`.
Status WriteAllAndClose(int fd, const std::string& path, std::string_view content);

// Writes `content` to `path` (created or truncated) without following a link at `path`.
Status WriteFileNoFollow(const std::string& path, std::string_view content);

// kStore naming the first entry of directory `dir` that is a symbolic link; ok when none is (or
// when `dir` does not exist).
Status CheckNoLinksIn(const std::string& dir);

// "'<path>' is a symbolic link: ..." for a path the caller found to be one.
Status LinkRefused(const std::string& path);

}  // namespace tunepar
