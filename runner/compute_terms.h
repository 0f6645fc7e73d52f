// The names of what a step's compute time is spent on, said in the model's own words: "Q/K/V
// projections (GQA: 64 query heads, 8 KV groups; K and V 1/8 of Q)", "MLP (SwiGLU: 3 matrices,
// f 28672)". `tunepar predict`, the model backend's dry run and the JSON read them from here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/model_shape.h"
#include "runner/performance_model.h"

namespace tunepar::runner {

struct NamedTerm {
  std::string_view key;  // JSON key: "qkv_projections_s"
  std::string label;     // for people, from the shape
  double seconds = 0;    // per step
};

// ComputeTerms' fields in order, labelled for `model`.
// `precision` names what fp8 adds to a term (its casts, in the element-wise kernels).
std::vector<NamedTerm> NamedComputeTerms(const ModelShape& model, const ComputeTerms& terms,
                                         Precision precision = Precision::kBf16);

// TimeBreakdown's fields beside compute, in order, labelled for people: "tensor-parallel
// communication", "context-parallel K/V exchange (ring, exposed)", ... (JSON keys as the model
// backend writes them). Terms a layout cannot have (FSDP gathers without ZeRO-3, the K/V exchange
// without cp, waiting for devices when none is shared) are left out.
std::vector<NamedTerm> NamedTimeTerms(const TimeBreakdown& time, const Layout& layout);

// One line naming the shape's features: "GQA 64/8, SwiGLU f 28672, rotary, RMSNorm, untied, no
// biases" (a GPT: "MHA 96 heads, GeLU f 49152, learned positions, LayerNorm, tied").
std::string ShapeFeatures(const ModelShape& model);

}  // namespace tunepar::runner
