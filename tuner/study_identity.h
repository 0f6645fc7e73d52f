// What makes two searches the same study: the same model, hardware, space, world, objective
// and backend settings. The study id is a hash of their canonical forms, so re-running a
// search finds (and resumes) its study, and a changed input starts a new one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "store/records.h"
#include "tuner/problem.h"

namespace tunepar {

struct StudySettings {
  int world = 0;
  std::string objective = "max_tokens_per_s";
  std::string backend = "model";
  std::string backend_settings = "{}";  // JSON object, canonical (sorted keys)
  std::string salt;  // "" normally; "2", "3", ... for a fresh study of the same inputs (--new)
  // What the proposals depend on (backend_settings holds them too, for the id).
  int64_t seed = 0;
  std::string acquisition = "logei";
  std::string pinned_knobs;  // knob values the backend cannot run (PinnedKnobs, base/knob_support.h)
};

// TOML re-serialised from its parse (sorted keys; no comments, layout, descriptions or number
// sources; of a hardware profile's [launch], only what trials run with), so edits that do not
// change what a study measures do not change the study.
std::string CanonicalToml(std::string_view text);

// 16 hex digits: FNV-1a 64 over the canonical inputs.
std::string StudyId(const Problem& problem, const StudySettings& settings);

// "<model>-w<world>-<first 8 digits of the id>", e.g. "gpt-1t-w3072-3fa9c1d2".
std::string DefaultStudyName(const Problem& problem, const StudySettings& settings, std::string_view id);

store::StudyRecord MakeStudyRecord(const Problem& problem, const StudySettings& settings, std::string id,
                                   std::string name, std::string node_id);

// A stored study of the same inputs (model, hardware, space, world, objective, backend and its
// settings) run by a build that fixed other knobs (e.g. fa0 before the build gained a fused
// attention): its id differs, so a search with this build starts a new study and names this one.
// `--study NAME` of such a study resumes it as it was made (its stored pinned knobs rule what it
// proposes; the build still runs them).
bool SameInputsOtherBuild(const store::StudyRecord& stored, const store::StudyRecord& proposed);
const store::StudyRecord* SameInputsOtherBuild(const std::vector<store::StudyRecord>& studies,
                                               const store::StudyRecord& proposed);

}  // namespace tunepar
