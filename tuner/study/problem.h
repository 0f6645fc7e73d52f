// A tuning problem as the user gave it: the model, the hardware and the search space, each
// resolved from a preset or a file, parsed and validated.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "runner/hardware_profile.h"
#include "base/model_shape.h"
#include "search/space.h"
#include "base/space_spec.h"
#include "base/presets.h"

namespace tunepar {

struct Problem {
  ConfigText model_text, hardware_text, space_text;
  ModelShape model;
  runner::HardwareProfile hardware;
  SpaceSpec space;
};

// `knobs`: declared values of some knobs, as TOML lines under a [knobs] table ("tp = [1]",
// KnobDeclarations); they replace the space's candidates of those knobs, and the study records
// the space with them.
Result<Problem> LoadProblem(const std::string& model, const std::string& hardware, const std::string& space,
                            const std::string& knobs = "");

// The space's text with the declared knobs' lists (TOML lines, as for LoadProblem) in place of
// its own.
Result<ConfigText> WithDeclaredKnobs(ConfigText space, const std::string& knobs);

// --fix KNOB=VALUE[,VALUE...] (repeatable) as TOML lines for LoadProblem, after `declared` (a
// command config's [knobs]); a later declaration of a knob replaces an earlier one.
Result<std::string> KnobDeclarations(const std::string& declared, const std::vector<std::string>& fixes);

// Parses and validates the three configs (as LoadProblem, from texts already at hand).
Result<Problem> ParseProblem(ConfigText model, ConfigText hardware, ConfigText space);

// Checks the world size against the hardware: positive, and whole nodes once it spans more
// than one node (tensor-parallel groups are placed innermost, within a node).
Status CheckWorld(int64_t world, const runner::HardwareProfile& hardware);

// The model's, hardware profile's and space's names follow base/names.h (exit 3, naming the file):
// checked where a name becomes part of a path or a command (a new study, a calibration sweep).
Status CheckConfigNames(const Problem& problem);

// Usage error (exit 2) when the space offers only precisions the hardware cannot run (--fix
// precision=fp8 without an FP8 peak: rule fp8_needs_peak); a space offering others as well
// keeps them, fp8 excluded and counted by the enumeration.
Status CheckHardwareRunsPrecisions(const Problem& problem, int world);

search::SpaceQuery MakeSpaceQuery(const Problem& problem, int world);

}  // namespace tunepar
