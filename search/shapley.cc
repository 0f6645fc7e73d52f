#include "search/shapley.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <unordered_map>

namespace tunepar::search {

namespace {

// |S|! (d - |S| - 1)! / d! for |S| = 0..d-1, computed in logs to stay finite for large d.
std::vector<double> Weights(int d) {
  std::vector<double> w(d);
  for (int s = 0; s < d; ++s)
    w[s] = std::exp(std::lgamma(s + 1.0) + std::lgamma(d - s + 0.0) - std::lgamma(d + 1.0));
  return w;
}

}  // namespace

ShapleyResult ExactShapley(int d, const CoalitionValue& value, bool interactions) {
  if (d < 0 || d > 24) throw std::invalid_argument("ExactShapley: d must be in [0, 24]");
  const uint32_t n = 1u << d;
  std::vector<double> v(n);
  uint32_t previous = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t mask = GrayCode(k);
    const int flipped = k == 0 ? -1 : std::countr_zero(mask ^ previous);
    v[mask] = value(mask, flipped);
    previous = mask;
  }
  ShapleyResult r;
  r.phi.assign(d, 0.0);
  r.error.assign(d, 0.0);
  r.empty_value = v[0];
  r.full_value = v[n - 1];
  const std::vector<double> w = Weights(d);
  for (uint32_t mask = 0; mask < n; ++mask) {
    const int size = std::popcount(mask);
    for (int i = 0; i < d; ++i) {
      if (mask & (1u << i)) continue;
      r.phi[i] += w[size] * (v[mask | (1u << i)] - v[mask]);
    }
  }
  if (interactions && d >= 2) {
    // Shapley interaction index: sum over S in N\{i,j} of |S|!(d-|S|-2)!/(d-1)! times the
    // second difference v(S+ij) - v(S+i) - v(S+j) + v(S).
    std::vector<double> w2(d - 1);
    for (int s = 0; s < d - 1; ++s)
      w2[s] = std::exp(std::lgamma(s + 1.0) + std::lgamma(d - s - 1.0) - std::lgamma(d + 0.0));
    r.interaction.assign(d, std::vector<double>(d, 0.0));
    for (uint32_t mask = 0; mask < n; ++mask) {
      const int size = std::popcount(mask);
      for (int i = 0; i < d; ++i) {
        if (mask & (1u << i)) continue;
        for (int j = i + 1; j < d; ++j) {
          if (mask & (1u << j)) continue;
          const double second =
              v[mask | (1u << i) | (1u << j)] - v[mask | (1u << i)] - v[mask | (1u << j)] + v[mask];
          r.interaction[i][j] += w2[size] * second;
        }
      }
    }
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < i; ++j) r.interaction[i][j] = r.interaction[j][i];
    }
  }
  return r;
}

ShapleyResult SampledShapley(int d, const CoalitionValue& value, int orders, uint64_t seed) {
  std::unordered_map<uint32_t, double> cache;
  auto v = [&](uint32_t mask) {
    auto it = cache.find(mask);
    if (it != cache.end()) return it->second;
    const double x = value(mask, -1);
    cache.emplace(mask, x);
    return x;
  };
  ShapleyResult r;
  r.phi.assign(d, 0.0);
  r.error.assign(d, 0.0);
  r.empty_value = v(0);
  r.full_value = d < 32 ? v(d == 0 ? 0 : static_cast<uint32_t>((1ull << d) - 1)) : 0;
  if (d == 0 || orders <= 0) return r;
  std::mt19937_64 rng(seed);
  std::vector<int> order(d);
  std::iota(order.begin(), order.end(), 0);
  // Each sample is the average of an order and its reverse (antithetic); the estimate is the
  // mean of the samples and its error their standard error.
  std::vector<double> sum(d, 0.0), sum2(d, 0.0);
  std::vector<double> contribution(d);
  for (int k = 0; k < orders; ++k) {
    std::shuffle(order.begin(), order.end(), rng);
    std::fill(contribution.begin(), contribution.end(), 0.0);
    for (int direction = 0; direction < 2; ++direction) {
      uint32_t mask = 0;
      double before = v(0);
      for (int t = 0; t < d; ++t) {
        const int player = direction == 0 ? order[t] : order[d - 1 - t];
        mask |= 1u << player;
        const double after = v(mask);
        contribution[player] += 0.5 * (after - before);
        before = after;
      }
    }
    for (int i = 0; i < d; ++i) {
      sum[i] += contribution[i];
      sum2[i] += contribution[i] * contribution[i];
    }
  }
  for (int i = 0; i < d; ++i) {
    r.phi[i] = sum[i] / orders;
    const double variance =
        orders > 1 ? std::max(0.0, (sum2[i] - orders * r.phi[i] * r.phi[i]) / (orders - 1)) : 0.0;
    r.error[i] = std::sqrt(variance / orders);
  }
  return r;
}

}  // namespace tunepar::search
