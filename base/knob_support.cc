#include "base/knob_support.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

namespace tunepar {

namespace {

void KeepSupported(KnobCandidates* candidates, const std::vector<int>& allowed, int world) {
  if (allowed.empty()) return;
  std::vector<int> codes = candidates->For(world);
  std::erase_if(codes, [&](int v) { return std::find(allowed.begin(), allowed.end(), v) == allowed.end(); });
  *candidates = KnobCandidates{false, std::move(codes)};
}

}  // namespace

const std::vector<int>& KnobSupport::Of(Knob knob) const {
  static const std::vector<int> kEvery;
  const size_t i = static_cast<size_t>(knob);
  return i < values.size() ? values[i] : kEvery;
}

std::vector<int>& KnobSupport::Of(Knob knob) {
  if (values.size() <= static_cast<size_t>(knob)) values.resize(static_cast<size_t>(knob) + 1);
  return values[static_cast<size_t>(knob)];
}

bool KnobSupport::operator==(const KnobSupport& other) const {
  for (Knob k : Knobs()) {
    if (Of(k) != other.Of(k)) return false;
  }
  return true;
}

SpaceSpec Restrict(SpaceSpec space, const KnobSupport& s, int world) {
  for (Knob k : Knobs()) KeepSupported(&space.Of(k), s.Of(k), world);
  return space;
}

std::string KnobLeftWithoutValues(const SpaceSpec& space, const KnobSupport& s, int world) {
  for (Knob k : Knobs()) {
    const std::vector<int>& allowed = s.Of(k);
    const std::vector<int> asked = space.Values(k, world);
    if (allowed.empty() || asked.empty()) continue;
    auto runs = [&](int v) { return std::find(allowed.begin(), allowed.end(), v) != allowed.end(); };
    if (std::any_of(asked.begin(), asked.end(), runs)) continue;
    std::vector<std::string> asked_text, allowed_text;
    for (int v : asked) asked_text.push_back(KnobFragment(k, v));
    for (int v : allowed) allowed_text.push_back(KnobFragment(k, v));
    return fmt::format("{} (it runs {})", fmt::join(asked_text, " "), fmt::join(allowed_text, " "));
  }
  return "";
}

Status CheckSupported(const Layout& l, const KnobSupport& support, std::string_view program) {
  std::vector<std::string> missing;
  for (Knob k : Knobs()) {
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
  for (Knob k : Knobs()) {
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
  for (Knob k : Knobs()) {
    if (support.Unreceived(k)) fixed.push_back(fmt::format("{} {}", KnobName(k), KnobValueText(k, support.Of(k)[0])));
  }
  return fmt::format("{}", fmt::join(fixed, ", "));
}

}  // namespace tunepar
