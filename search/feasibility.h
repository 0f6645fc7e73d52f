// The probability that a layout fits in device memory, from the performance model's predicted
// memory and the trials observed so far (an OOM is information, not a missing value).
//
// Model: the true memory is the predicted memory times exp(delta) times a layout-to-layout
// scatter exp(eps), eps ~ N(0, scatter^2); delta (the model's systematic error) has a normal
// prior. Each ok trial says log(M / predicted) > delta + eps; each oom trial the opposite. The
// posterior of delta is computed exactly on a grid and summarised by its mean and spread, so
//   P(fits | x) = Phi((g(x) - mean) / sqrt(scatter^2 + spread^2)),  g(x) = log(M / predicted(x)).
#pragma once

#include <vector>

namespace tunepar::search {

struct FeasibilityOptions {
  double prior_mean = 0.0;  // of delta: the memory model is unbiased a priori
  double prior_sd = 0.2;    // ... within about 20%
  double scatter = 0.05;    // layout-to-layout error of the memory model (log)
};

class FeasibilityModel {
 public:
  // headroom: g = log(device memory / predicted memory) of each observed trial; fits: whether it
  // ran (ok) or ran out of memory (oom).
  static FeasibilityModel Fit(const std::vector<double>& headroom, const std::vector<bool>& fits,
                              const FeasibilityOptions& options = {});

  double ProbabilityFits(double headroom) const;
  double delta_mean() const { return mean_; }
  double delta_sd() const { return sd_; }

 private:
  double mean_ = 0, sd_ = 0.2, scatter_ = 0.05;
};

}  // namespace tunepar::search
