#include "base/knob_support.h"

#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace tunepar {

SpaceSpec Restrict(SpaceSpec space, const KnobSupport& support) {
  if (!support.seq_parallel) space.seq_parallel = {false};
  if (!support.interleaving) space.virtual_stages = {1};
  if (!support.flash_attention) space.flash_attention = {false};
  return space;
}

Status CheckSupported(const Layout& l, const KnobSupport& support, std::string_view program) {
  std::vector<std::string> missing;
  if (l.seq_parallel && !support.seq_parallel) missing.emplace_back("sequence parallelism");
  if (l.virtual_stages != 1 && !support.interleaving) missing.emplace_back("interleaved stages");
  if (l.flash_attention && !support.flash_attention) missing.emplace_back("flash attention");
  if (missing.empty()) return Status::Ok();
  return InvalidArgument(fmt::format("{} cannot run {}: it implements no {} (it runs {})", program,
                                     LayoutKey(l), fmt::join(missing, ", "), PinnedKnobs(support)));
}

std::string PinnedKnobs(const KnobSupport& support) {
  std::vector<std::string> pinned;
  if (!support.seq_parallel) pinned.emplace_back("sp0");
  if (!support.interleaving) pinned.emplace_back("vpp1");
  if (!support.flash_attention) pinned.emplace_back("fa0");
  return fmt::format("{}", fmt::join(pinned, " "));
}

Result<KnobSupport> ParsePinnedKnobs(std::string_view text) {
  KnobSupport support;
  std::istringstream words{std::string(text)};
  for (std::string word; words >> word;) {
    if (word == "sp0") {
      support.seq_parallel = false;
    } else if (word == "vpp1") {
      support.interleaving = false;
    } else if (word == "fa0") {
      support.flash_attention = false;
    } else {
      return InvalidArgument(fmt::format("pinned knobs '{}': unknown '{}' (expected sp0, vpp1, fa0)", text, word));
    }
  }
  return support;
}

}  // namespace tunepar
