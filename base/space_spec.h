// A search space: the candidate values of every knob, and the options of the constraints.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/knobs.h"
#include "base/layout.h"

namespace tunepar {

class TomlFields;

// A rule between knobs: a layout whose value of every `when` knob is among the values listed
// there must have the value of every `then` knob among those listed there. A command config
// states the combinations its program cannot run this way (DeepSpeed's pipeline engine refuses
// ZeRO 2 and 3 with pp > 1); they reach the space with its [knobs] (tuner/study/problem.h).
struct KnobRule {
  std::vector<std::pair<Knob, std::vector<int>>> when, then;  // KnobCode values, by knob
  std::string why;                                            // the program's reason, for messages

  bool BrokenBy(const Layout& layout) const;
  std::string Text() const;  // "zero 2 or 3 needs pp 1"
  bool operator==(const KnobRule& other) const = default;
};

struct SpaceSpec {
  std::string name;
  std::string description;
  std::vector<KnobCandidates> knobs;  // by Knob; a knob past its end has its row's space_default
  bool tp_cross_node = false;         // may a tensor-parallel group span nodes?
  std::vector<KnobRule> rules;        // [[rules]]: combinations of values no layout may have

  const KnobCandidates& Of(Knob knob) const;
  KnobCandidates& Of(Knob knob);
  // `model`: the model's experts and sequence (ep's and cp's candidates when the space omits
  // them: base/knobs.h).
  std::vector<int> Values(Knob knob, int world, ModelExtent model = {}) const { return Of(knob).For(world, model); }
  void Set(Knob knob, std::vector<int> codes) { Of(knob) = KnobCandidates{false, std::move(codes)}; }
};

// Parses and validates a space TOML:
//   name = "default"
//   [knobs]   one list per knob of the table (base/knobs.h), by its name; "divisors" for the
//             sizes that may say so (tp, pp); absent = the row's space_default; micro_batch required
//   [constraints]  tp_cross_node = false
//   [[rules]]      when = { zero = [2, 3] }   then = { pp = [1] }   why = "..."   (KnobRule; any
//                  number, each with a non-empty when and then table of knob lists, and a why)
// Without `name` the space is named after `file_stem` (a user's own file).
// The space for one model: the candidates a space takes from the model when it omits a knob (ep:
// the divisors of its experts; cp: its sequence's splits) made explicit, so that everything given
// the space (the search, predict, a backend's knob support) sees the same lists.
SpaceSpec ForModel(SpaceSpec space, ModelExtent model);

Result<SpaceSpec> ParseSpaceSpec(std::string_view toml_text, std::string_view source,
                                 std::string_view file_stem = {});

// Reads the `rules` array of tables of `f`'s table (absent: none) into `rules`; an unknown knob,
// a value outside the knob's, a missing when, then or why is one line naming the file and the
// key ("rules[1].when.zero").
Status ReadKnobRules(TomlFields& f, std::vector<KnobRule>* rules);
// The rules as one TOML line of inline tables, "rules = [{ when = { zero = [2, 3] }, then =
// { pp = [1] }, why = \"...\" }]\n", in the spellings of a space file; "" when there are none.
std::string KnobRulesToml(const std::vector<KnobRule>& rules);
// The first of `rules` that `layout` breaks; nullptr when it breaks none.
const KnobRule* BrokenRule(const std::vector<KnobRule>& rules, const Layout& layout);

}  // namespace tunepar
