// A search space: the candidate values of every knob, and the options of the constraints.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/knobs.h"
#include "base/layout.h"

namespace tunepar {

struct SpaceSpec {
  std::string name;
  std::string description;
  std::vector<KnobCandidates> knobs;  // by Knob; a knob past its end has its row's space_default
  bool tp_cross_node = false;         // may a tensor-parallel group span nodes?

  const KnobCandidates& Of(Knob knob) const;
  KnobCandidates& Of(Knob knob);
  std::vector<int> Values(Knob knob, int world) const { return Of(knob).For(world); }
  void Set(Knob knob, std::vector<int> codes) { Of(knob) = KnobCandidates{false, std::move(codes)}; }
};

// Parses and validates a space TOML:
//   name = "default"
//   [knobs]   one list per knob of the table (base/knobs.h), by its name; "divisors" for the
//             sizes that may say so (tp, pp); absent = the row's space_default; micro_batch required
//   [constraints]  tp_cross_node = false
// Without `name` the space is named after `file_stem` (a user's own file).
Result<SpaceSpec> ParseSpaceSpec(std::string_view toml_text, std::string_view source,
                                 std::string_view file_stem = {});

}  // namespace tunepar
