#include "base/layout.h"

#include <charconv>
#include <vector>

#include <fmt/format.h>

namespace tunepar {

std::string_view ToString(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

std::string_view ToString(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

Result<Precision> ParsePrecision(std::string_view text) {
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
    if (text == ToString(p)) return p;
  }
  return InvalidArgument(fmt::format("unknown precision '{}' (expected fp32, fp16 or bf16)", text));
}

Result<Recompute> ParseRecompute(std::string_view text) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (text == ToString(r)) return r;
  }
  return InvalidArgument(fmt::format("unknown recomputation '{}' (expected none, selective or full)", text));
}

std::string LayoutKey(const Layout& l) {
  return fmt::format("tp{}-pp{}-dp{}-mbs{}-nmb{}-{}-zero{}-rc{}-sp{}-vpp{}-fa{}", l.tp, l.pp, l.dp,
                     l.micro_batch, l.num_micro_batches, ToString(l.precision), l.zero, ToString(l.recompute),
                     l.seq_parallel ? 1 : 0, l.virtual_stages, l.flash_attention ? 1 : 0);
}

namespace {

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
  return ec == std::errc() && end == digits.data() + digits.size() && *out >= 0;
}

}  // namespace

Result<Layout> ParseLayoutKey(std::string_view key) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(
        fmt::format("layout key '{}' is malformed ({}); expected e.g. "
                    "tp4-pp16-dp48-mbs1-nmb64-bf16-zero1-rcfull-sp1-vpp2-fa1",
                    key, why));
  };
  std::vector<std::string_view> parts = SplitDashes(key);
  if (parts.size() != 11) return bad(fmt::format("{} fields, expected 11", parts.size()));
  Layout l;
  int sp = 0, fa = 0;
  if (!ParseField(parts[0], "tp", &l.tp) || l.tp < 1) return bad("tp");
  if (!ParseField(parts[1], "pp", &l.pp) || l.pp < 1) return bad("pp");
  if (!ParseField(parts[2], "dp", &l.dp) || l.dp < 1) return bad("dp");
  if (!ParseField(parts[3], "mbs", &l.micro_batch) || l.micro_batch < 1) return bad("mbs");
  if (!ParseField(parts[4], "nmb", &l.num_micro_batches) || l.num_micro_batches < 1) return bad("nmb");
  Result<Precision> precision = ParsePrecision(parts[5]);
  if (!precision.ok()) return bad("precision");
  l.precision = *precision;
  if (!ParseField(parts[6], "zero", &l.zero) || l.zero > 1) return bad("zero");
  if (parts[7].substr(0, 2) != "rc") return bad("rc");
  Result<Recompute> recompute = ParseRecompute(parts[7].substr(2));
  if (!recompute.ok()) return bad("recompute");
  l.recompute = *recompute;
  if (!ParseField(parts[8], "sp", &sp) || sp > 1) return bad("sp");
  if (!ParseField(parts[9], "vpp", &l.virtual_stages) || l.virtual_stages < 1) return bad("vpp");
  if (!ParseField(parts[10], "fa", &fa) || fa > 1) return bad("fa");
  l.seq_parallel = sp == 1;
  l.flash_attention = fa == 1;
  return l;
}

}  // namespace tunepar
