#include "search/feasibility.h"

#include <algorithm>
#include <cmath>

#include "search/acquisition.h"

namespace tunepar::search {

FeasibilityModel FeasibilityModel::Fit(const std::vector<double>& headroom, const std::vector<bool>& fits,
                                       const FeasibilityOptions& options) {
  FeasibilityModel model;
  model.scatter_ = options.scatter;
  // Grid over delta wide enough for any prior draw and any evidence.
  const double lo = options.prior_mean - 8 * options.prior_sd - 1.0,
               hi = options.prior_mean + 8 * options.prior_sd + 1.0;
  constexpr int kPoints = 2001;
  std::vector<double> log_post(kPoints);
  double max_log = -INFINITY;
  for (int i = 0; i < kPoints; ++i) {
    const double delta = lo + (hi - lo) * i / (kPoints - 1);
    double lp = -0.5 * std::pow((delta - options.prior_mean) / options.prior_sd, 2);
    for (size_t j = 0; j < headroom.size(); ++j) {
      const double z = (headroom[j] - delta) / options.scatter;
      lp += fits[j] ? LogNormalCdf(z) : LogNormalCdf(-z);
    }
    log_post[i] = lp;
    max_log = std::max(max_log, lp);
  }
  double w_sum = 0, m1 = 0, m2 = 0;
  for (int i = 0; i < kPoints; ++i) {
    const double delta = lo + (hi - lo) * i / (kPoints - 1);
    const double w = std::exp(log_post[i] - max_log);
    w_sum += w;
    m1 += w * delta;
    m2 += w * delta * delta;
  }
  model.mean_ = m1 / w_sum;
  model.sd_ = std::sqrt(std::max(0.0, m2 / w_sum - model.mean_ * model.mean_));
  return model;
}

double FeasibilityModel::ProbabilityFits(double headroom) const {
  return NormalCdf((headroom - mean_) / std::sqrt(scatter_ * scatter_ + sd_ * sd_));
}

}  // namespace tunepar::search
