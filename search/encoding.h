// The encoding of layouts as points of [0,1]^d for the Gaussian process.
//
// Only independent knobs are encoded, in table order, as their rows say (KnobRow::encoding): dp
// and the micro-batch count are functions of tp, pp and micro_batch (for a fixed world and global
// batch), so giving them dimensions would only add redundant coordinates. Knobs with one value in
// the legal set are dropped. Power-of-two sizes are ordinal on a log2 scale; recomputation is
// ordinal (none < selective < full: memory saved and compute added both grow in that order);
// switches are 0/1; precision with three values is one-hot (fp32 differs from the 16-bit formats
// in kind, fp16 from bf16 only in detail).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "base/knobs.h"
#include "base/layout.h"

namespace tunepar::search {

struct EncodedDimension {
  enum class Kind { kLog2, kOrdinal, kBinary, kOneHot };
  std::string knob;  // "tp", "pp", "micro_batch", "precision", ...
  Kind kind = Kind::kLog2;
  std::string value;  // for kOneHot: the category this coordinate indicates
  double lo = 0.0;    // raw range before scaling (log2 value, ordinal index, ...)
  double hi = 1.0;
  Knob knob_id = Knob::kTp;  // the row of `knob`
};

class LayoutEncoder {
 public:
  // Chooses the dimensions from the knob values that occur in `legal`.
  static LayoutEncoder Fit(const std::vector<Layout>& legal);

  int Dimension() const { return static_cast<int>(dims_.size()); }
  const std::vector<EncodedDimension>& Dimensions() const { return dims_; }

  // Writes Dimension() coordinates, each in [0,1], into `out`.
  void Encode(const Layout& layout, std::span<double> out) const;
  std::vector<double> Encode(const Layout& layout) const;

 private:
  std::vector<EncodedDimension> dims_;
};

}  // namespace tunepar::search
