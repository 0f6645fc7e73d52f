#include "base/knob_support.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

namespace tunepar {

namespace {

template <typename T>
void KeepSupported(std::vector<T>* candidates, const std::vector<int>& allowed) {
  if (allowed.empty()) return;
  std::erase_if(*candidates, [&](const T& v) {
    return std::find(allowed.begin(), allowed.end(), static_cast<int>(v)) == allowed.end();
  });
}

void KeepSupportedSizes(SizeCandidates* sizes, const std::vector<int>& allowed, int world) {
  if (allowed.empty()) return;
  std::vector<int> values = sizes->For(world);
  KeepSupported(&values, allowed);
  *sizes = SizeCandidates{false, std::move(values)};
}

}  // namespace

SpaceSpec Restrict(SpaceSpec space, const KnobSupport& s, int world) {
  KeepSupportedSizes(&space.tp, s.Of(Knob::kTp), world);
  KeepSupportedSizes(&space.pp, s.Of(Knob::kPp), world);
  KeepSupported(&space.micro_batch, s.Of(Knob::kMicroBatch));
  KeepSupported(&space.precision, s.Of(Knob::kPrecision));
  KeepSupported(&space.zero, s.Of(Knob::kZero));
  KeepSupported(&space.recompute, s.Of(Knob::kRecompute));
  KeepSupported(&space.seq_parallel, s.Of(Knob::kSeqParallel));
  KeepSupported(&space.virtual_stages, s.Of(Knob::kVirtualStages));
  KeepSupported(&space.flash_attention, s.Of(Knob::kFlashAttention));
  return space;
}

Status CheckSupported(const Layout& l, const KnobSupport& support, std::string_view program) {
  std::vector<std::string> missing;
  for (Knob k : kKnobs) {
    const std::vector<int>& allowed = support.Of(k);
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), KnobCode(k, l)) == allowed.end())
      missing.push_back(fmt::format("{} {}", KnobName(k), KnobValue(k, l)));
  }
  if (missing.empty()) return Status::Ok();
  return InvalidArgument(fmt::format("{} cannot run {}: it does not run {} (it runs {})", program, LayoutKey(l),
                                     fmt::join(missing, ", "), PinnedKnobs(support)));
}

std::string PinnedKnobs(const KnobSupport& support) {
  std::vector<std::string> fragments;
  for (Knob k : kKnobs) {
    for (int code : support.Of(k)) fragments.push_back(KnobFragment(k, code));
  }
  return fmt::format("{}", fmt::join(fragments, " "));
}

Result<KnobSupport> ParsePinnedKnobs(std::string_view text) {
  KnobSupport support;
  std::istringstream words{std::string(text)};
  for (std::string word; words >> word;) {
    Result<std::pair<Knob, int>> value = ParseKnobFragment(word);
    if (!value.ok()) return InvalidArgument(fmt::format("pinned knobs '{}': {}", text, value.status().message()));
    std::vector<int>& allowed = support.Of(value->first);
    if (std::find(allowed.begin(), allowed.end(), value->second) == allowed.end()) allowed.push_back(value->second);
  }
  return support;
}

std::string UnreceivedKnobs(const KnobSupport& support) {
  std::vector<std::string> fixed;
  for (Knob k : kKnobs) {
    if (support.Unreceived(k)) fixed.push_back(fmt::format("{} {}", KnobName(k), KnobValueText(k, support.Of(k)[0])));
  }
  return fmt::format("{}", fmt::join(fixed, ", "));
}

}  // namespace tunepar
