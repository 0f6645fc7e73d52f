#include "search/encoding.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace tunepar::search {

namespace {

double Raw(const EncodedDimension& d, const Layout& l) {
  const int code = KnobCode(d.knob_id, l);
  switch (d.kind) {
    case EncodedDimension::Kind::kLog2: return std::log2(code);
    case EncodedDimension::Kind::kOneHot: return KnobValueText(d.knob_id, code) == d.value ? 1 : 0;
    case EncodedDimension::Kind::kOrdinal:
    case EncodedDimension::Kind::kBinary: return code;
  }
  return 0.0;
}

}  // namespace

LayoutEncoder LayoutEncoder::Fit(const std::vector<Layout>& legal) {
  LayoutEncoder enc;
  using Kind = EncodedDimension::Kind;
  auto add_ranged = [&](Knob knob, Kind kind) {
    EncodedDimension d{std::string(KnobName(knob)), kind, "", 0.0, 0.0, knob};
    double lo = INFINITY, hi = -INFINITY;
    for (const Layout& l : legal) {
      double v = Raw(d, l);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    if (legal.empty() || hi <= lo) return;  // constant knob: no information
    d.lo = lo;
    d.hi = hi;
    enc.dims_.push_back(d);
  };
  for (Knob knob : Knobs()) {
    switch (RowOf(knob).encoding) {
      case KnobEncoding::kLog2: add_ranged(knob, Kind::kLog2); break;
      case KnobEncoding::kOrdinal: add_ranged(knob, Kind::kOrdinal); break;
      case KnobEncoding::kBinary: add_ranged(knob, Kind::kBinary); break;
      case KnobEncoding::kCategory: {
        std::set<int> codes;
        for (const Layout& l : legal) codes.insert(KnobCode(knob, l));
        if (codes.size() == 2) {
          add_ranged(knob, Kind::kBinary);
        } else if (codes.size() > 2) {
          for (int code : codes)
            enc.dims_.push_back({std::string(KnobName(knob)), Kind::kOneHot, KnobValueText(knob, code), 0, 1, knob});
        }
        break;
      }
    }
  }
  return enc;
}

void LayoutEncoder::Encode(const Layout& layout, std::span<double> out) const {
  for (size_t i = 0; i < dims_.size(); ++i) {
    const EncodedDimension& d = dims_[i];
    const double raw = Raw(d, layout);
    out[i] = std::clamp((raw - d.lo) / (d.hi - d.lo), 0.0, 1.0);
  }
}

std::vector<double> LayoutEncoder::Encode(const Layout& layout) const {
  std::vector<double> out(dims_.size());
  Encode(layout, out);
  return out;
}

}  // namespace tunepar::search
