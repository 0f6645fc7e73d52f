// The one rule for names that tunepar turns into parts of paths, Slurm job names or words of
// the commands it prints: study names, node ids, and the names of models, hardware profiles and
// spaces. A name is 1 to 128 ASCII letters, digits, '.', '_' and '-', and starts with a letter, a
// digit or '_' (never '.', so never "..", a hidden file or a path; never '-', so never an option
// when pasted into a command). No unicode: a name reads the same in every locale, file system and
// shell. Paths the user gives (the store, --work-dir) are not names: they may hold anything and
// are quoted wherever they reach a shell.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace tunepar {

inline constexpr size_t kMaxNameLength = 128;

bool IsValidName(std::string_view name);

// Ok, or `code` with one line: "<what> '<name>' is not a valid name (<the rule>)"; the name is
// shown with its control characters escaped, so the line stays one line.
Status CheckName(std::string_view what, std::string_view name, StatusCode code);

// `text` with every character a name may not hold replaced by '_' (and a leading '.' or '-' too),
// cut to kMaxNameLength; "_" for an empty text. For names tunepar derives from something else
// (a host name, a file name).
std::string ToValidName(std::string_view text);

// `text` as one line for a message or a comment: control characters (newlines among them) as
// \n, \t or \xHH. Text from the user that goes into a script's comment must never start a line.
std::string OneLine(std::string_view text);

}  // namespace tunepar
