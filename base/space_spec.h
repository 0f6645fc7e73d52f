// A search space: the candidate values of every knob, and the options of the constraints.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/layout.h"

namespace tunepar {

// Candidate values of a parallel size: an explicit list, or every divisor of the world size.
struct SizeCandidates {
  bool divisors_of_world = false;
  std::vector<int> values;  // used when !divisors_of_world

  std::vector<int> For(int world) const;
};

struct SpaceSpec {
  std::string name;
  std::string description;
  SizeCandidates tp{true, {}};                  // default: every divisor of the world
  SizeCandidates pp{true, {}};                  // default: every divisor of the world
  std::vector<int> micro_batch = {1, 2, 4, 8};  // required in files
  std::vector<Precision> precision = {Precision::kBf16};
  std::vector<int> zero = {0};
  std::vector<Recompute> recompute = {Recompute::kNone};
  std::vector<bool> seq_parallel = {false};
  std::vector<int> virtual_stages = {1};
  std::vector<bool> flash_attention = {false};
  bool tp_cross_node = false;  // may a tensor-parallel group span nodes?
};

// Parses and validates a space TOML:
//   name = "default"
//   [knobs]   tp, pp ("divisors" or a list), micro_batch, precision, zero, recompute,
//             seq_parallel, virtual_stages, flash_attention (lists; absent = the default above)
//   [constraints]  tp_cross_node = false
// Without `name` the space is named after `file_stem` (a user's own file).
Result<SpaceSpec> ParseSpaceSpec(std::string_view toml_text, std::string_view source,
                                 std::string_view file_stem = {});

}  // namespace tunepar
