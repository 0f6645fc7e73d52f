// Shapley values of a set function, exactly over all 2^d coalitions or by sampling.
//
//   phi_i = sum over S subset of N\{i} of |S|! (d-|S|-1)! / d! (v(S + i) - v(S))
//
// The coalitions are visited in Gray-code order (each differs from the previous one in one
// player), so a caller can update its value incrementally. Efficiency: sum_i phi_i = v(N) - v({}).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace tunepar::search {

// The value of each coalition, a bit mask over d players (bit i = player i). `flipped` is the
// player whose membership changed since the previous call (-1 for the first call, the empty set).
using CoalitionValue = std::function<double(uint32_t coalition, int flipped)>;

struct ShapleyResult {
  std::vector<double> phi;                       // per player
  std::vector<double> error;                     // standard error per player (0 when exact)
  std::vector<std::vector<double>> interaction;  // pairwise Shapley interaction index (exact only)
  double empty_value = 0;                        // v({})
  double full_value = 0;                         // v(N)
};

// Exact, for d <= 24: evaluates v on every coalition once (Gray-code order).
ShapleyResult ExactShapley(int d, const CoalitionValue& value, bool interactions = false);

// Antithetic permutation sampling (each random order and its reverse), for large d: `orders`
// pairs of orders; error = standard error of the mean per player. Deterministic for a seed.
// v is called with flipped = -1 (the order of calls is not a Gray code).
ShapleyResult SampledShapley(int d, const CoalitionValue& value, int orders, uint64_t seed);

// The Gray code of the k-th coalition: k ^ (k >> 1).
inline uint32_t GrayCode(uint32_t k) {
  return k ^ (k >> 1);
}

}  // namespace tunepar::search
