#include "search/feasibility.h"

#include <algorithm>
#include <cmath>

#include "search/acquisition.h"

namespace tunepar::search {

namespace {

// phi(z) / Phi(z), stably for z << 0 (where it approaches -z).
double InverseMillsRatio(double z) {
  return std::exp(-0.5 * z * z - LogNormalCdf(z)) / std::sqrt(2 * M_PI);
}

}  // namespace

std::string_view MemoryComponentName(int c) {
  static constexpr std::string_view kNames[kMemoryComponents] = {
      "weights", "gradients", "optimizer_states", "activations", "comm_buffers", "runtime_overhead"};
  return c >= 0 && c < kMemoryComponents ? kNames[c] : "?";
}

double FeasibilityModel::LogPeak(const Vector& theta, const MemoryComponents& predicted, Vector* gradient) {
  double total = 0;
  for (int c = 0; c < kMemoryComponents; ++c) total += std::exp(theta[c + 1]) * predicted[c];
  total = std::max(total, 1.0);
  if (gradient != nullptr) {
    (*gradient)[0] = 1.0;
    for (int c = 0; c < kMemoryComponents; ++c) (*gradient)[c + 1] = std::exp(theta[c + 1]) * predicted[c] / total;
  }
  return theta[0] + std::log(total);
}

// The log posterior at theta, its gradient, and its Gauss-Newton Hessian: each trial's
// curvature in log M times d d' (the term with the second derivative of log M itself is left
// out, so the Hessian is negative definite everywhere and Newton's steps go uphill). Each trial
// bounds log M from above (it fitted) or below (it ran out); a measured peak of a trial that
// fitted pins it, within the scatter s.
FeasibilityModel::Objective FeasibilityModel::Evaluate(const Vector& theta, const Vector& prior_precision, double log_capacity, double s,
                                     const std::vector<MemoryEvidence>& evidence) {
  Objective f;
  f.value = -0.5 * theta.cwiseProduct(prior_precision).dot(theta);
  f.gradient = -prior_precision.cwiseProduct(theta);
  f.hessian = -Matrix(prior_precision.asDiagonal());
  for (const MemoryEvidence& e : evidence) {
    Vector d;
    const double log_m = LogPeak(theta, e.predicted, &d);
    double first = 0, curvature = 0;  // d ll / d log M and d^2 ll / d log M^2
    if (e.fitted && e.peak_bytes && *e.peak_bytes > 0) {
      const double r = std::log(*e.peak_bytes) - log_m;
      f.value += -0.5 * r * r / (s * s);
      first = r / (s * s);
      curvature = -1.0 / (s * s);
    } else {
      const bool bounded = !e.fitted && e.peak_bytes && *e.peak_bytes > 0;
      const double bound = bounded ? std::max(log_capacity, std::log(*e.peak_bytes)) : log_capacity;
      const double sign = e.fitted ? 1.0 : -1.0;  // fitted: Phi((bound - L)/s); ran out: Phi((L - bound)/s)
      const double z = sign * (bound - log_m) / s;
      const double lambda = InverseMillsRatio(z);
      f.value += LogNormalCdf(z);
      first = -sign * lambda / s;
      curvature = -lambda * (z + lambda) / (s * s);
    }
    f.gradient += first * d;
    f.hessian += curvature * d * d.transpose();
  }
  return f;
}

// The posterior mode by Newton's method with a backtracking step; the Hessian there.
FeasibilityModel::Objective FeasibilityModel::Solve(const Vector& prior_precision, double log_capacity, double s,
                                  const std::vector<MemoryEvidence>& evidence, Vector* theta) {
  *theta = Vector::Zero();
  Objective f = Evaluate(*theta, prior_precision, log_capacity, s, evidence);
  for (int iteration = 0; iteration < 100; ++iteration) {
    const Vector step = (-f.hessian).ldlt().solve(f.gradient);
    double scale = 1.0;
    Objective next = Evaluate(*theta + step, prior_precision, log_capacity, s, evidence);
    while (next.value < f.value && scale > 1e-6) {
      scale *= 0.5;
      next = Evaluate(*theta + scale * step, prior_precision, log_capacity, s, evidence);
    }
    if (next.value < f.value) break;
    *theta += scale * step;
    f = next;
    if ((scale * step).cwiseAbs().maxCoeff() < 1e-8) break;
  }
  return f;
}

// The scatter the measured peaks show around the fitted model, shrunk towards the prior's
// (worth kScatterPriorWeight peaks): a model that predicts the peaks well is trusted more.
double FeasibilityModel::FittedScatter(const Vector& theta, const std::vector<MemoryEvidence>& evidence,
                                       double prior_scatter) {
  double squares = 0;
  int peaks = 0;
  for (const MemoryEvidence& e : evidence) {
    if (!e.fitted || !e.peak_bytes || *e.peak_bytes <= 0) continue;
    const double r = std::log(*e.peak_bytes) - LogPeak(theta, e.predicted, nullptr);
    squares += r * r;
    ++peaks;
  }
  if (peaks < kMinPeaksForScatter) return prior_scatter;
  const double s2 = (squares + kScatterPriorWeight * prior_scatter * prior_scatter) / (peaks + kScatterPriorWeight);
  return std::max(kMinScatter, std::sqrt(s2));
}

FeasibilityModel FeasibilityModel::Fit(double device_memory_bytes, const std::vector<MemoryEvidence>& evidence,
                                       const FeasibilityOptions& o) {
  FeasibilityModel model;
  model.log_capacity_ = std::log(std::max(device_memory_bytes, 1.0));
  Vector prior_precision;
  prior_precision[0] = 1.0 / (o.shared_sd * o.shared_sd);
  for (int c = 1; c < kParameters; ++c) prior_precision[c] = 1.0 / (o.component_sd * o.component_sd);
  Vector theta;
  Objective f = Solve(prior_precision, model.log_capacity_, o.scatter, evidence, &theta);
  model.scatter_ = FittedScatter(theta, evidence, o.scatter);
  if (model.scatter_ != o.scatter) f = Solve(prior_precision, model.log_capacity_, model.scatter_, evidence, &theta);
  model.theta_ = theta;
  model.covariance_ = (-f.hessian).inverse();
  return model;
}

MemoryMargin FeasibilityModel::Margin(const MemoryComponents& predicted) const {
  Vector d;
  const double log_m = LogPeak(theta_, predicted, &d);
  return {log_m - log_capacity_, std::sqrt(scatter_ * scatter_ + d.dot(covariance_ * d))};
}

double FeasibilityModel::ProbabilityFits(const MemoryComponents& predicted) const {
  const MemoryMargin m = Margin(predicted);
  return NormalCdf(-m.log_excess / m.sd);
}

double FeasibilityModel::ExpectedPeak(const MemoryComponents& predicted) const {
  return std::exp(LogPeak(theta_, predicted, nullptr));
}

MemoryComponents FeasibilityModel::Multipliers() const {
  MemoryComponents m{};
  for (int c = 0; c < kMemoryComponents; ++c) m[c] = std::exp(theta_[0] + theta_[c + 1]);
  return m;
}

MemoryComponents FeasibilityModel::MultiplierLogSd() const {
  MemoryComponents sd{};
  for (int c = 0; c < kMemoryComponents; ++c) {
    const double v = covariance_(0, 0) + covariance_(c + 1, c + 1) + 2 * covariance_(0, c + 1);
    sd[c] = std::sqrt(std::max(v, 0.0));
  }
  return sd;
}

}  // namespace tunepar::search
