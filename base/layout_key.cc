// The layout key (LayoutKey, ParseLayoutKey: declared in layout.h, where every module looks for
// it). Its fields are spelled by the knob table (knobs.h), which itself describes Layout's fields,
// so the key is defined here rather than in layout.cc: layout.h <- knobs.h <- this file, and the
// layout and the knob table do not include each other.
#include <charconv>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/knobs.h"
#include "base/layout.h"

namespace tunepar {

namespace {

// The key's fields in order: every knob of 2026-11, with dp after pp and the micro-batch count
// after micro_batch; then each later knob that is not at its neutral value.
std::vector<std::string> KeyFields(const Layout& l) {
  std::vector<std::string> fields;
  for (Knob k : Knobs()) {
    if (!RowOf(k).in_every_key) continue;
    fields.push_back(KnobFragment(k, KnobCode(k, l)));
    if (k == Knob::kPp) fields.push_back(fmt::format("dp{}", l.dp));
    if (k == Knob::kMicroBatch) fields.push_back(fmt::format("nmb{}", l.num_micro_batches));
  }
  for (Knob k : Knobs()) {
    const int code = KnobCode(k, l);
    if (!RowOf(k).in_every_key && code != NeutralKnobCode(k)) fields.push_back(KnobFragment(k, code));
  }
  return fields;
}

std::vector<std::string_view> SplitDashes(std::string_view key) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t dash = key.find('-', start);
    parts.push_back(key.substr(start, dash - start));
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  return parts;
}

// Parses "<prefix><positive integer>" into *out.
bool ParseField(std::string_view part, std::string_view prefix, int* out) {
  if (part.substr(0, prefix.size()) != prefix) return false;
  std::string_view digits = part.substr(prefix.size());
  if (digits.empty()) return false;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
  return ec == std::errc() && end == digits.data() + digits.size() && *out >= 1;
}

}  // namespace

std::string LayoutKey(const Layout& l) { return fmt::format("{}", fmt::join(KeyFields(l), "-")); }

Result<Layout> ParseLayoutKey(std::string_view key) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(
        fmt::format("layout key '{}' is malformed ({}); expected e.g. "
                    "tp4-pp16-dp48-mbs1-nmb64-bf16-zero1-rcfull-sp1-vpp2-fa1",
                    key, why));
  };
  const std::vector<std::string_view> parts = SplitDashes(key);
  size_t fixed = 2;  // dp and the micro-batch count
  for (Knob k : Knobs()) fixed += RowOf(k).in_every_key ? 1 : 0;
  if (parts.size() < fixed) return bad(fmt::format("{} fields, expected {}", parts.size(), fixed));
  Layout l;
  size_t at = 0;
  for (Knob k : Knobs()) {
    if (!RowOf(k).in_every_key) continue;
    Result<std::pair<Knob, int>> value = ParseKnobFragment(parts[at++]);
    if (!value.ok() || value->first != k) return bad(RowOf(k).key_prefix.empty() ? KnobName(k) : RowOf(k).key_prefix);
    l = WithKnob(std::move(l), k, value->second);
    if (k == Knob::kPp && !ParseField(parts[at++], "dp", &l.dp)) return bad("dp");
    if (k == Knob::kMicroBatch && !ParseField(parts[at++], "nmb", &l.num_micro_batches)) return bad("nmb");
  }
  // Later knobs: each at most once, in table order, never at its neutral value (keys are canonical).
  int last = -1;
  for (; at < parts.size(); ++at) {
    Result<std::pair<Knob, int>> value = ParseKnobFragment(parts[at]);
    if (!value.ok() || RowOf(value->first).in_every_key)
      return bad(fmt::format("{} fields, expected {}", parts.size(), fixed));
    const int index = static_cast<int>(value->first);
    if (index <= last) return bad(fmt::format("'{}' out of order", parts[at]));
    if (value->second == NeutralKnobCode(value->first))
      return bad(fmt::format("'{}' is the neutral value, which keys leave out", parts[at]));
    last = index;
    l = WithKnob(std::move(l), value->first, value->second);
  }
  return l;
}

}  // namespace tunepar
