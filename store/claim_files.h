// The file operations the claims are made of: a file created at most once (link of a whole
// temporary file), a file of one owner replaced whole (rename), small key=value files, and the
// generations of the claims in a directory. Also what identifies a process on its host.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/status.h"

namespace tunepar::store {

// The error every claims operation gives once the claims it relies on are gone (a folder of
// claims/ or nodes/, this process's heartbeat or one of its claims deleted during a search): one
// line that says what vanished and what to do. The node stops there: with claims gone, going on
// could run a trial twice or overrun the budget.
Status ClaimsVanished(const std::string& what);

// Creates `path` with `content` unless it exists: true when this call created it. The content
// is written to a temporary file first and linked to `path`, so no reader ever sees it partial,
// and of any number of processes creating the same path exactly one wins. The temporary file has
// an unpredictable name (mkstemp, `tag` in it) and is created new (O_EXCL): a link planted in the
// folder is never written through. The folder must exist: a vanished folder is an error, never
// made again behind the protocol's back.
Result<bool> CreateOnce(const std::string& path, const std::string& content, const std::string& tag);

// Replaces a file this process owns with `content` (a temporary file as CreateOnce's, renamed
// over it). The folder must exist.
Status ReplaceFile(const std::string& path, const std::string& content);

// The whole content of a small file (kNotFound when it does not exist).
Result<std::string> ReadSmallFile(const std::string& path);

// "key=value" lines as a map (later lines win; lines without '=' are ignored).
std::map<std::string, std::string> ParseKeyValues(const std::string& text);

// For every "<name>.g<generation>" file in `dir`, the highest generation per name (an empty map
// when the directory does not exist).
Result<std::map<std::string, int>> LatestGenerations(const std::string& dir);

// <store>/claims/beats/<token>
std::string BeatPath(const std::string& store_dir, const std::string& token);

// `text` with every character a file name should not hold replaced by '_'.
std::string FileSafe(std::string text);

// This host's boot id ("" when the kernel does not say).
std::string BootId();

// When process `pid` started, in clock ticks after boot; nullopt when there is no such process.
std::optional<int64_t> ProcessStartTicks(int64_t pid);

}  // namespace tunepar::store
