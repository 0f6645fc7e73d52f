#include "runner/core/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tunepar::core {

nlohmann::json CheckGradients(Trainer& trainer, int points, uint64_t seed) {
  const double step = sizeof(real) == 8 ? 1e-3 : 1e-2;
  trainer.ComputeGradients(0);
  const ParameterLayout& p = trainer.parameters();
  std::vector<std::pair<int64_t, double>> analytic;  // offset, gradient
  std::vector<std::string> names;
  for (const TensorSpec& t : p.tensors) {
    for (int k = 0; k < points && k < t.size; ++k) {
      const int64_t i = static_cast<int64_t>(Mix(Mix(seed, t.init_id), k) % static_cast<uint64_t>(t.size));
      analytic.emplace_back(t.offset + i, trainer.Gradient(t.offset + i));
      names.push_back(t.name + "[" + std::to_string(i) + "]");
    }
  }
  // The difference quotient's rounding error is about eps |loss| / step (1e-12 in fp64), so
  // gradients below 1e-4 of the largest (some are exactly zero: the key bias, by softmax's
  // shift invariance) are compared against that floor rather than their own size.
  double largest = 0;
  for (const auto& [offset, g] : analytic) largest = std::max(largest, std::abs(g));
  const double floor = 1e-4 * largest;
  nlohmann::json worst;
  double max_error = 0;
  for (size_t k = 0; k < analytic.size(); ++k) {
    const auto [offset, g] = analytic[k];
    const double value = trainer.Parameter(offset);
    auto loss_at = [&](double shift) {
      trainer.SetParameter(offset, value + shift);
      return trainer.ComputeGradients(0);
    };
    // Five-point central difference: error O(step^4).
    const double numeric =
        (-loss_at(2 * step) + 8 * loss_at(step) - 8 * loss_at(-step) + loss_at(-2 * step)) / (12 * step);
    trainer.SetParameter(offset, value);
    const double error = std::abs(numeric - g) / std::max({std::abs(numeric), std::abs(g), floor});
    if (error >= max_error) {
      max_error = error;
      worst = {{"element", names[k]}, {"analytic", g}, {"numeric", numeric}};
    }
  }
  return {{"points", analytic.size()},  {"step", step},  {"largest_gradient", largest}, {"floor", floor},
          {"max_rel_error", max_error}, {"worst", worst}};
}

}  // namespace tunepar::core
