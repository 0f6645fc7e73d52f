// The knobs of a layout, one by one: their names (as space files and --fix spell them), their
// values as small integer codes (to compare, restrict and pin them generically), and the
// fragment of the layout key each value is ("tp4", "bf16", "rcfull", "sp0", ...).
// dp and the micro-batch count are not knobs: they follow from tp, pp and micro_batch for a
// fixed world and global batch.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "base/layout.h"
#include "base/status.h"

namespace tunepar {

enum class Knob {
  kTp,
  kPp,
  kMicroBatch,
  kPrecision,
  kZero,
  kRecompute,
  kSeqParallel,
  kVirtualStages,
  kFlashAttention
};
inline constexpr int kNumKnobs = 9;
inline constexpr std::array<Knob, kNumKnobs> kKnobs = {
    Knob::kTp,   Knob::kPp,        Knob::kMicroBatch,    Knob::kPrecision,     Knob::kZero,
    Knob::kRecompute, Knob::kSeqParallel, Knob::kVirtualStages, Knob::kFlashAttention};

std::string_view KnobName(Knob knob);                    // "tp", "micro_batch", ... (as in space files)
std::string KnobValue(Knob knob, const Layout& layout);  // "8", "bf16", "on", "full", ...
Result<Knob> ParseKnobName(std::string_view name);

// A knob's value as an integer: sizes as themselves, precision and recomputation by their enum,
// booleans as 0 / 1.
int KnobCode(Knob knob, const Layout& layout);
// `layout` with the knob set to `code` (derived sizes left as they are).
Layout WithKnob(Layout layout, Knob knob, int code);
// The value's text as KnobValue prints it, and its layout-key fragment ("tp4", "bf16", "rcfull").
std::string KnobValueText(Knob knob, int code);
std::string KnobFragment(Knob knob, int code);
// The inverse of KnobFragment: which knob and value a fragment names.
Result<std::pair<Knob, int>> ParseKnobFragment(std::string_view fragment);
// A value as a user writes it ("4", "bf16", "full", "on"/"off"/"true"/"false"/"1"/"0").
Result<int> ParseKnobValue(Knob knob, std::string_view text);

// The value a program runs with when it is not told: 1 for sizes, off, no ZeRO, no
// recomputation; micro_batch and precision have none (-1).
int NeutralKnobCode(Knob knob);

}  // namespace tunepar
