#include "base/layout.h"

#include <fmt/format.h>

namespace tunepar {

std::string_view ToString(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFp8: return "fp8";
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
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16, Precision::kFp8}) {
    if (text == ToString(p)) return p;
  }
  return InvalidArgument(fmt::format("unknown precision '{}' (expected fp32, fp16, bf16 or fp8)", text));
}

Result<Recompute> ParseRecompute(std::string_view text) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (text == ToString(r)) return r;
  }
  return InvalidArgument(fmt::format("unknown recomputation '{}' (expected none, selective or full)", text));
}

}  // namespace tunepar
