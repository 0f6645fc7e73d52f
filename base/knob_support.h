// Which knob values a trial program can run and tell apart. tunepar-core does not implement
// interleaved pipeline stages (nor, in its HIP build, sequence parallelism or flash attention;
// with grouped-query attention it runs only the tp sizes that split the K/V heads:
// runner/core/supported_knobs.h); a training command
// receives only what its template passes on (runner/command_backend.h). A study's space is
// restricted to what its backend supports, so the search never proposes a layout that cannot be
// measured or that would run the same program as another, and every reader of the study (report,
// launch-script, calibrate) sees the same legal set.
//
// Per knob: every value (no entry), or the values the program tells apart. One value means the
// program does not receive the knob at all: it runs with that value whatever a layout says, so
// the knob is fixed and not measured. Several values (e.g. recompute none and full, when the
// template passes only {recompute=full?...}) stand each for the values it cannot tell from it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/knobs.h"
#include "base/layout.h"
#include "base/space_spec.h"
#include "base/status.h"

namespace tunepar {

struct KnobSupport {
  std::vector<std::vector<int>> values;  // by Knob: KnobCode values; empty (or past the end) = every value

  const std::vector<int>& Of(Knob knob) const;
  std::vector<int>& Of(Knob knob);
  // The knob is not received by the program: it runs with one value, not measured.
  bool Unreceived(Knob knob) const { return Of(knob).size() == 1; }
  bool operator==(const KnobSupport& other) const;
};

// The space without the values the program cannot run or tell apart.
SpaceSpec Restrict(SpaceSpec space, const KnobSupport& support, int world);
// "tp4 (it runs tp1 tp2)": the first knob whose values in `space` (non-empty) the program runs
// none of, so that Restrict leaves it empty; "" when every knob keeps a value.
std::string KnobLeftWithoutValues(const SpaceSpec& space, const KnobSupport& support, int world);

// Ok, or one line naming what `program` cannot run of the layout.
Status CheckSupported(const Layout& layout, const KnobSupport& support, std::string_view program);

// As a study records it: the layout-key fragments of the allowed values, in knob order, e.g.
// "vpp1" for tunepar-core ("sp0 vpp1 fa0" for its HIP build), "rcnone rcfull vpp1" for a
// command that receives {recompute=full?...} but not {vpp}; "" when the program runs and tells
// apart every value.
std::string PinnedKnobs(const KnobSupport& support);
// The inverse of PinnedKnobs.
Result<KnobSupport> ParsePinnedKnobs(std::string_view text);

// "vpp 1, flash_attention off": the knobs the program does not receive, with the value it runs
// with; "" when it receives every knob.
std::string UnreceivedKnobs(const KnobSupport& support);

}  // namespace tunepar
