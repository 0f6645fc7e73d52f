#include "base/knobs.h"

#include <charconv>
#include <optional>

#include <fmt/format.h>

namespace tunepar {

namespace {

constexpr std::array<std::string_view, kNumKnobs> kNames = {
    "tp", "pp", "micro_batch", "precision", "zero", "recompute", "seq_parallel", "virtual_stages", "flash_attention"};
// The layout key's prefix of each knob (precision has none: its value is the fragment).
constexpr std::array<std::string_view, kNumKnobs> kPrefixes = {"tp", "pp", "mbs", "", "zero", "rc", "sp", "vpp", "fa"};

bool IsSize(Knob knob) {
  return knob == Knob::kTp || knob == Knob::kPp || knob == Knob::kMicroBatch || knob == Knob::kVirtualStages;
}
bool IsSwitch(Knob knob) { return knob == Knob::kSeqParallel || knob == Knob::kFlashAttention; }

std::optional<int> PositiveInteger(std::string_view text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

std::string_view KnobName(Knob knob) { return kNames[static_cast<int>(knob)]; }

Result<Knob> ParseKnobName(std::string_view name) {
  for (Knob k : kKnobs) {
    if (KnobName(k) == name) return k;
  }
  if (name == "mbs") return Knob::kMicroBatch;
  if (name == "sp") return Knob::kSeqParallel;
  if (name == "vpp") return Knob::kVirtualStages;
  if (name == "flash") return Knob::kFlashAttention;
  return InvalidArgument(fmt::format(
      "unknown knob '{}' (expected tp, pp, micro_batch, precision, zero, recompute, seq_parallel, virtual_stages "
      "or flash_attention)",
      name));
}

int KnobCode(Knob knob, const Layout& l) {
  switch (knob) {
    case Knob::kTp: return l.tp;
    case Knob::kPp: return l.pp;
    case Knob::kMicroBatch: return l.micro_batch;
    case Knob::kPrecision: return static_cast<int>(l.precision);
    case Knob::kZero: return l.zero;
    case Knob::kRecompute: return static_cast<int>(l.recompute);
    case Knob::kSeqParallel: return l.seq_parallel ? 1 : 0;
    case Knob::kVirtualStages: return l.virtual_stages;
    case Knob::kFlashAttention: return l.flash_attention ? 1 : 0;
  }
  return 0;
}

Layout WithKnob(Layout l, Knob knob, int code) {
  switch (knob) {
    case Knob::kTp: l.tp = code; break;
    case Knob::kPp: l.pp = code; break;
    case Knob::kMicroBatch: l.micro_batch = code; break;
    case Knob::kPrecision: l.precision = static_cast<Precision>(code); break;
    case Knob::kZero: l.zero = code; break;
    case Knob::kRecompute: l.recompute = static_cast<Recompute>(code); break;
    case Knob::kSeqParallel: l.seq_parallel = code != 0; break;
    case Knob::kVirtualStages: l.virtual_stages = code; break;
    case Knob::kFlashAttention: l.flash_attention = code != 0; break;
  }
  return l;
}

std::string KnobValueText(Knob knob, int code) {
  if (knob == Knob::kPrecision) return std::string(ToString(static_cast<Precision>(code)));
  if (knob == Knob::kRecompute) return std::string(ToString(static_cast<Recompute>(code)));
  if (IsSwitch(knob)) return code != 0 ? "on" : "off";
  return std::to_string(code);
}

std::string KnobValue(Knob knob, const Layout& l) { return KnobValueText(knob, KnobCode(knob, l)); }

std::string KnobFragment(Knob knob, int code) {
  const std::string_view prefix = kPrefixes[static_cast<int>(knob)];
  if (knob == Knob::kPrecision || knob == Knob::kRecompute) return fmt::format("{}{}", prefix, KnobValueText(knob, code));
  return fmt::format("{}{}", prefix, code);
}

Result<std::pair<Knob, int>> ParseKnobFragment(std::string_view fragment) {
  for (Knob k : kKnobs) {
    const std::string_view prefix = kPrefixes[static_cast<int>(k)];
    if (fragment.substr(0, prefix.size()) != prefix) continue;
    const std::string_view rest = fragment.substr(prefix.size());
    if (k == Knob::kPrecision) {
      if (Result<Precision> p = ParsePrecision(rest); p.ok()) return std::pair{k, static_cast<int>(*p)};
      continue;
    }
    if (k == Knob::kRecompute) {
      if (Result<Recompute> r = ParseRecompute(rest); r.ok()) return std::pair{k, static_cast<int>(*r)};
      continue;
    }
    std::optional<int> v = PositiveInteger(rest);
    if (!v || (IsSwitch(k) && *v > 1) || (IsSize(k) && *v < 1)) continue;
    if (k == Knob::kPp && fragment.substr(0, 3) == "vpp") continue;
    return std::pair{k, *v};
  }
  return InvalidArgument(fmt::format("'{}' names no knob value (expected e.g. tp4, mbs2, bf16, zero1, rcfull, sp0, vpp1, fa0)", fragment));
}

Result<int> ParseKnobValue(Knob knob, std::string_view text) {
  if (knob == Knob::kPrecision) {
    Result<Precision> p = ParsePrecision(text);
    if (!p.ok()) return p.status();
    return static_cast<int>(*p);
  }
  if (knob == Knob::kRecompute) {
    Result<Recompute> r = ParseRecompute(text);
    if (!r.ok()) return r.status();
    return static_cast<int>(*r);
  }
  if (IsSwitch(knob)) {
    if (text == "on" || text == "true" || text == "1") return 1;
    if (text == "off" || text == "false" || text == "0") return 0;
    return InvalidArgument(fmt::format("{} is on or off, not '{}'", KnobName(knob), text));
  }
  std::optional<int> v = PositiveInteger(text);
  const int min = IsSize(knob) ? 1 : 0;
  if (!v || *v < min || (knob == Knob::kZero && *v > 1))
    return InvalidArgument(fmt::format("{} = '{}': expected {}", KnobName(knob), text,
                                       knob == Knob::kZero ? "0 or 1" : "a positive integer"));
  return *v;
}

int NeutralKnobCode(Knob knob) {
  switch (knob) {
    case Knob::kTp:
    case Knob::kPp:
    case Knob::kVirtualStages: return 1;
    case Knob::kZero: return 0;
    case Knob::kRecompute: return static_cast<int>(Recompute::kNone);
    case Knob::kSeqParallel:
    case Knob::kFlashAttention: return 0;
    case Knob::kMicroBatch:
    case Knob::kPrecision: return -1;
  }
  return -1;
}

}  // namespace tunepar
