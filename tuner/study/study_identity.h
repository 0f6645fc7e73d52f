// What makes two searches the same study: the same model, hardware, space, world, objective
// and backend settings. The study id is a hash of their canonical forms, so re-running a
// search finds (and resumes) its study, and a changed input starts a new one.
//
// The id rule for inputs added after issue 30 ("A knob is one row", item 3): a new model or
// hardware field, space knob, pinned knob or backend setting enters the id only when it says
// something. Absent or at its neutral value it is left out of what the id hashes, so the
// studies stored before it keep their ids; each such input is one row of LateInputs().
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/records.h"
#include "tuner/study/problem.h"

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

// Which of a study's inputs a late input belongs to.
enum class StudyInput {
  kModel,            // the model TOML
  kHardware,         // the hardware profile TOML
  kSpace,            // the space TOML (a knob: "knobs.<name>")
  kPinnedKnobs,      // the pinned-knobs text ("sp0 vpp1 fa0"): a knob's key prefix
  kBackendSettings,  // the backend settings JSON
};

// An input added after issue 30, and the value at which it says nothing (what a study made
// before it had): a stored study keeps its id through the build that adds it.
struct LateInput {
  StudyInput input;
  // A dotted key into the TOML or JSON ("experts", "knobs.cp", "core.overlap"); of the pinned
  // knobs, the knob's key prefix ("cp").
  std::string_view key;
  // The neutral value: TOML for the configs ("1", "[1]", "false"), JSON for the backend settings,
  // as the key writes it for a pinned knob ("1" for "cp1").
  std::string_view neutral;
};

// Every input added since issue 30, one row each: the knobs the table gains after it (base/knobs.h,
// KnobRow::in_every_key false) and the model-shape fields with a constant neutral value
// (base/model_shape.h, ShapeRow::neutral: mlp, positions, norm, linear_biases, patch_tokens,
// output_width), so today's ids hash what they always did. kv_heads has none: writing
// kv_heads = heads makes a new id.
std::span<const LateInput> LateInputs();

// TOML re-serialised from its parse (sorted keys; no comments, layout, descriptions or number
// sources; of a hardware profile's [launch], only what trials run with), so edits that do not
// change what a study measures do not change the study. With `input`, the late inputs of that
// input that are at their neutral value are left out too.
std::string CanonicalToml(std::string_view text);
std::string CanonicalToml(std::string_view text, StudyInput input, std::span<const LateInput> late = LateInputs());

// The pinned-knobs text as the id sees it: without the late knobs pinned at their neutral value.
std::string CanonicalPinnedKnobs(std::string_view pinned, std::span<const LateInput> late = LateInputs());

// 16 hex digits: FNV-1a 64 over the canonical inputs.
std::string StudyId(const Problem& problem, const StudySettings& settings);
// The id of a study's stored inputs (its model, hardware and space TOML, world, objective, backend
// and settings) under the late inputs `late`; `salt` as StudySettings::salt. A study stored
// without a salt has this id.
std::string StudyId(const store::StudyRecord& study, std::span<const LateInput> late = LateInputs(),
                    std::string_view salt = {});

// "<model>-w<world>-<first 8 digits of the id>", e.g. "gpt-1t-w3072-3fa9c1d2".
std::string DefaultStudyName(const Problem& problem, const StudySettings& settings, std::string_view id);

store::StudyRecord MakeStudyRecord(const Problem& problem, const StudySettings& settings, std::string id,
                                   std::string name, std::string node_id);

// A stored study of the same inputs (model, hardware, space, world, objective, backend and its
// settings) run by a build that fixed other knobs (e.g. fa0 before the build gained a fused
// attention): its id differs, so a search with this build starts a new study and names this one.
// `--study NAME` of such a study resumes it as it was made (its stored pinned knobs rule what it
// proposes; the build still runs them).
bool SameInputsOtherBuild(const store::StudyRecord& stored, const store::StudyRecord& proposed,
                          std::span<const LateInput> late = LateInputs());
const store::StudyRecord* SameInputsOtherBuild(const std::vector<store::StudyRecord>& studies,
                                               const store::StudyRecord& proposed);

// Which of the model, hardware and space of a stored study differ (canonically) from the
// proposed one's, when nothing else does but the pinned knobs (world, objective, backend and its
// settings): of a study made when a preset said something else, what changed since. nullopt when
// anything else differs.
std::optional<std::vector<StudyInput>> ConfigsThatDiffer(const store::StudyRecord& stored,
                                                         const store::StudyRecord& proposed);

}  // namespace tunepar
