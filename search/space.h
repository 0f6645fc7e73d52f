// The legal-layout space: every layout of a search space that can run a model on a world size.
//
// Candidates are the Cartesian product of the knob values (tp and pp as listed or every divisor
// of the world; dp and the micro-batch count follow from them). Each candidate is checked
// against the constraints in their order (base/layout_rules.h) and counted against the FIRST one
// it fails, so the exclusion counts add up to candidates - legal.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/layout.h"
#include "base/layout_rules.h"
#include "base/model_shape.h"
#include "base/space_spec.h"

namespace tunepar::search {

// The rules and the query live with the knob table (base/layout_rules.h).
using ::tunepar::CanonicalLayout;
using ::tunepar::Constraint;
using ::tunepar::ConstraintId;
using ::tunepar::ConstraintRule;
using ::tunepar::kNumConstraints;
using SpaceQuery = ::tunepar::LayoutQuery;

struct SpaceEnumeration {
  std::vector<Layout> legal;  // in enumeration order (the knobs nested by KnobRow::visit_rank)
  int64_t candidates = 0;
  std::array<int64_t, kNumConstraints> excluded{};  // indexed by Constraint

  int64_t Excluded(Constraint c) const { return excluded[static_cast<int>(c)]; }
};

// Fails only on a malformed query (world or gpus_per_node < 1); an empty legal set is a
// valid result that ExplainEmpty() describes.
Result<SpaceEnumeration> EnumerateSpace(const SpaceQuery& query);

// Ok when `layout` is one of the legal layouts EnumerateSpace lists for the query; else one line
// naming the first constraint it fails (as ConstraintRule says it), or the knob value the space
// does not list.
Status CheckLegal(const SpaceQuery& query, const Layout& layout);

// The first knob of `layout` whose value the space does not list, e.g. "micro_batch 32" ("" when
// every value is among the space's).
std::string ValueOutsideSpace(const SpaceQuery& query, const Layout& layout);

// Which constraints emptied the set, e.g. "global batch 3072 is not divisible by
// micro_batch * dp for any candidate (excluded 64 of 480; before it ...)".
std::string ExplainEmpty(const SpaceQuery& query, const SpaceEnumeration& enumeration);

}  // namespace tunepar::search
