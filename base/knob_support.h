// Which knob values a trial program can run. tunepar-core implements neither sequence
// parallelism, interleaved pipeline stages nor flash attention; a training command runs what
// its template passes on. A study's space is restricted to what its backend supports, so the
// search never proposes a layout that cannot be measured, and every reader of the study (report,
// launch-script, calibrate) sees the same legal set.
#pragma once

#include <string>
#include <string_view>

#include "base/layout.h"
#include "base/space_spec.h"
#include "base/status.h"

namespace tunepar {

struct KnobSupport {
  bool seq_parallel = true;     // sequence parallelism (sp1)
  bool interleaving = true;     // virtual pipeline stages > 1 (vppN)
  bool flash_attention = true;  // fused attention (fa1)

  bool operator==(const KnobSupport&) const = default;
};

// The space without the values the program cannot run: an unsupported knob keeps only its off
// value (sp0, vpp1, fa0).
SpaceSpec Restrict(SpaceSpec space, const KnobSupport& support);

// Ok, or one line naming what `program` cannot run of the layout.
Status CheckSupported(const Layout& layout, const KnobSupport& support, std::string_view program);

// The knobs pinned off, as a study's settings record them: "sp0 vpp1 fa0" for tunepar-core,
// "" when the program runs every value.
std::string PinnedKnobs(const KnobSupport& support);
// The inverse of PinnedKnobs.
Result<KnobSupport> ParsePinnedKnobs(std::string_view text);

}  // namespace tunepar
