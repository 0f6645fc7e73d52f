#include "search/encoding.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace tunepar::search {

namespace {

double Raw(const EncodedDimension& d, const Layout& l) {
  const std::string& k = d.knob;
  if (k == "tp") return std::log2(l.tp);
  if (k == "pp") return std::log2(l.pp);
  if (k == "micro_batch") return std::log2(l.micro_batch);
  if (k == "virtual_stages") return std::log2(l.virtual_stages);
  if (k == "zero") return l.zero;
  if (k == "recompute") return static_cast<int>(l.recompute);
  if (k == "seq_parallel") return l.seq_parallel ? 1 : 0;
  if (k == "flash_attention") return l.flash_attention ? 1 : 0;
  if (k == "precision") {
    if (d.kind == EncodedDimension::Kind::kOneHot) return ToString(l.precision) == d.value ? 1 : 0;
    return static_cast<int>(l.precision);
  }
  return 0.0;
}

}  // namespace

LayoutEncoder LayoutEncoder::Fit(const std::vector<Layout>& legal) {
  LayoutEncoder enc;
  using Kind = EncodedDimension::Kind;
  auto add_ranged = [&](const std::string& knob, Kind kind) {
    EncodedDimension d{knob, kind, "", 0.0, 0.0};
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
  add_ranged("tp", Kind::kLog2);
  add_ranged("pp", Kind::kLog2);
  add_ranged("micro_batch", Kind::kLog2);
  std::set<Precision> precisions;
  for (const Layout& l : legal) precisions.insert(l.precision);
  if (precisions.size() == 2) {
    add_ranged("precision", Kind::kBinary);
  } else if (precisions.size() > 2) {
    for (Precision p : precisions)
      enc.dims_.push_back({"precision", Kind::kOneHot, std::string(ToString(p)), 0, 1});
  }
  add_ranged("zero", Kind::kBinary);
  add_ranged("recompute", Kind::kOrdinal);
  add_ranged("seq_parallel", Kind::kBinary);
  add_ranged("virtual_stages", Kind::kLog2);
  add_ranged("flash_attention", Kind::kBinary);
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
