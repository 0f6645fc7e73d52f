// The probability that a layout fits in device memory, learned like time: the performance
// model's memory breakdown is the prior, measured peaks are observations, and OOM and ok
// outcomes are censored ones (an OOM is information, not a missing value).
//
// Model: the true peak of a layout is
//   M(x) = exp(g) sum_c exp(t_c) P_c(x) exp(eps),
// with P_c the model's predicted bytes of component c (weights, gradients, optimizer states,
// activations, communication buffers, runtime overhead), t_c each component's log multiplier,
// g a log multiplier shared by all (an allocator overhead, a framework's habits), and eps ~
// N(0, scatter^2) the layout-to-layout error (its prior value, or, with measured peaks, the
// scatter they show around the fit, shrunk towards the prior's). Priors: g ~ N(0, shared_sd^2), t_c ~ N(0,
// component_sd^2). A measured peak y says log M(x) = log y (exactly when the trial ran; at
// least, when it ran out of memory: the peak it reached, or the device's memory); an ok trial
// without a peak says M(x) <= device memory, an OOM without one M(x) > device memory. The
// posterior of (g, t) is found by Newton's method on the log posterior and summarised by the
// Laplace approximation (mode and covariance S); then for any layout
//   P(fits | x) = Phi((log cap - L(x)) / sqrt(scatter^2 + d(x)' S d(x))),
// L(x) = log M(x) at the mode, d(x) = dL/d(g, t) = (1, share of each component).
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

namespace tunepar::search {

inline constexpr int kMemoryComponents = 6;
// Predicted bytes per device of: weights, gradients, optimizer states, activations,
// communication buffers, runtime overhead.
using MemoryComponents = std::array<double, kMemoryComponents>;
std::string_view MemoryComponentName(int component);  // "weights", "gradients", ...

// One trial as the memory model sees it.
struct MemoryEvidence {
  MemoryComponents predicted{};
  bool fitted = true;                // ran in the device's memory (ok), or ran out (oom)
  std::optional<double> peak_bytes;  // measured: exact when it fitted, a lower bound when not
};

// The priors are wide enough that a model 40% high or low is within reach of a few trials: an
// analytical memory model errs by that much in practice, either way (a profile's safety margin
// or a conservative fragmentation figure on one side; saved tensors and framework buffers it
// does not count on the other: the benchmark's truths span 0.6x-1.6x, and an independent A100
// model needed 30-40% less than tunepar predicts for its fastest layouts). A total multiplier's
// prior sd is sqrt(0.3^2 + 0.2^2) = 0.36: 1/1.4 is 0.9 sd away, 1/1.6 1.3 sd. (It was 0.21, and a
// model 40% high 3.4 sd away: only measured peaks could move it.)
struct FeasibilityOptions {
  double shared_sd = 0.3;      // prior of the multiplier shared by all components (log)
  double component_sd = 0.2;   // prior of each component's own multiplier (log)
  double scatter = 0.05;       // layout-to-layout error of the memory model (log)
};

// How far a layout's expected peak is above the device's memory, in log (negative: below), and
// the standard deviation of the peak's log (the layout's scatter and the multipliers' own).
struct MemoryMargin {
  double log_excess = 0;
  double sd = 0;
};

class FeasibilityModel {
 public:
  static FeasibilityModel Fit(double device_memory_bytes, const std::vector<MemoryEvidence>& evidence,
                              const FeasibilityOptions& options = {});

  double ProbabilityFits(const MemoryComponents& predicted) const;
  // The peak the fitted model expects, in bytes (at the posterior mode).
  double ExpectedPeak(const MemoryComponents& predicted) const;
  MemoryMargin Margin(const MemoryComponents& predicted) const;
  // exp(g + t_c): the fitted correction of each component.
  MemoryComponents Multipliers() const;
  // The posterior standard deviation of log(g + t_c): each multiplier's uncertainty (log).
  MemoryComponents MultiplierLogSd() const;

 private:
  static constexpr int kParameters = kMemoryComponents + 1;  // g, then t_c
  using Vector = Eigen::Matrix<double, kParameters, 1>;
  using Matrix = Eigen::Matrix<double, kParameters, kParameters>;
  struct Objective {  // the log posterior, its gradient and (Gauss-Newton) Hessian
    double value = 0;
    Vector gradient;
    Matrix hessian;
  };
  // A measured peak needs this many peaks before their scatter is estimated; the prior's
  // scatter counts like kScatterPriorWeight of them; the scatter is never below kMinScatter.
  static constexpr int kMinPeaksForScatter = 4;
  static constexpr double kScatterPriorWeight = 4;
  static constexpr double kMinScatter = 0.01;

  // log M(x) at `theta`, and its gradient with respect to theta.
  static double LogPeak(const Vector& theta, const MemoryComponents& predicted, Vector* gradient);
  static Objective Evaluate(const Vector& theta, const Vector& prior_precision, double log_capacity, double scatter,
                            const std::vector<MemoryEvidence>& evidence);
  static Objective Solve(const Vector& prior_precision, double log_capacity, double scatter,
                         const std::vector<MemoryEvidence>& evidence, Vector* theta);
  static double FittedScatter(const Vector& theta, const std::vector<MemoryEvidence>& evidence, double prior_scatter);

  double log_capacity_ = 0;
  double scatter_ = 0.05;
  Vector theta_ = Vector::Zero();
  Matrix covariance_ = Matrix::Zero();
};

}  // namespace tunepar::search
