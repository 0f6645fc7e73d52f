// Finding a study in a store by what a user types (its name, its id, or a unique id prefix), and
// what the commands that read the store answer when damaged shards were skipped.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "store/store_reader.h"
#include "tuner/study/global_options.h"

namespace tunepar {

// "tunepar [--store DIR] WORD...": a command line printed for the user to paste, every word
// shell-quoted where it needs it (runner::ShellQuote), so that a store path, study name or file
// with spaces, quotes or `$(...)` pastes as the words meant. --store is left out for the default
// store: a pasted hint reads the same store.
std::string TuneparCommand(const GlobalOptions& global, const std::vector<std::string>& words);

// The fewest characters of a study id that a user may type for it.
inline constexpr size_t kMinIdPrefix = 4;

// The shortest prefix of study `id`, at least kMinIdPrefix characters, that FindStudy resolves
// to that study in a store of `studies`: shared with no other study's id, and not another
// study's name (a name is matched first). What `list` prints and ambiguity errors suggest.
std::string ShortStudyId(const std::vector<store::StudyRecord>& studies, const std::string& id);

// kNotFound (naming the store) when nothing matches; kInvalidArgument for an ambiguous prefix,
// naming each study it matches with the prefix that picks it.
Result<store::StudyRecord> FindStudy(const store::StoreView& view, const std::string& store_dir,
                                     const std::string& name_or_id);

// FindStudy, or with no name the store's only study; when there are several, the error lists
// them (kInvalidArgument), and an empty store says so, with `hint` (what to do instead).
Result<store::StudyRecord> FindStudyOrOnly(const store::StoreView& view, const std::string& store_dir,
                                           const std::string& name_or_id, const std::string& hint = "");

// What a reader of one study reads: every study (to find it by what the user typed; "" = the
// store's only one) from the studies' headers, and the trials of that study from its own files
// only, whatever else the store holds. Every skipped shard is named in a warning on stderr (unless
// `announce` is false); the view's `warnings` keep those that matter to the answer: the skipped
// files of the study, or, when it was not found, every skipped file (one may hold it).
Result<store::StoreView> ReadStudyView(const std::string& store_dir, const std::string& name_or_id,
                                       bool announce = true);

// A reader command's outcome (list, show, export, report) given the shards its read skipped and
// the damaged trial rows it left out, each already named in a warning: `status` itself when
// nothing was left out or `allow_damaged` (--allow-damaged); else kDamaged (exit code 9), so that
// a script never takes a partial result for a whole one. A study not found may be in a skipped
// shard: kDamaged too.
Status WithDamagedShards(const store::StoreView& view, bool allow_damaged, Status status);

}  // namespace tunepar
