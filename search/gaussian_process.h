// Gaussian-process regression with an ARD Matern-5/2 kernel and an optional linear feature.
//
//   k(x, x') = sf^2 M52(r) + sb^2 u(x) u(x'),   r^2 = sum_i (x_i - x'_i)^2 / l_i^2,
//   M52(r) = (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r)                    (Rasmussen & Williams 4.17)
//
// plus noise sn^2 on the diagonal. The linear term is a Bayesian linear regression on the
// feature u folded into the kernel (R&W 2.7): with u = log of the performance model's predicted
// step time, the GP learns an affine correction of the model, so a model that is off by a
// constant factor (or a power) costs nothing. Hyper-parameters theta = (log l_1..l_d, log sf,
// log sn, log sb) are set by maximising the log marginal likelihood plus a weak log-normal prior
// (MAP), with analytic gradients (R&W 5.9) and L-BFGS from several deterministic starts.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <Eigen/Dense>

namespace tunepar::search {

struct GpPrior {                       // log-normal priors: mean and standard deviation of the log
  double log_lengthscale_mean = -0.7;  // l ~ 0.5 of the unit cube
  double log_lengthscale_sd = 1.0;
  double log_signal_mean = 0.0;  // sf ~ 1 in standardised units
  double log_signal_sd = 1.0;
  double log_noise_mean = -3.0;  // sn ~ 0.05
  double log_noise_sd = 1.0;
  double log_slope_mean = -1.2;  // sb ~ 0.3
  double log_slope_sd = 1.0;
};

struct GpOptions {
  GpPrior prior;
  int restarts = 3;  // L-BFGS starts: the prior's mode, then seeded draws from the prior
  int max_evaluations = 80;
  uint64_t seed = 0;
  bool use_feature = true;  // the linear term sb^2 u u'
};

class GaussianProcess {
 public:
  // x: n x d inputs in [0,1]; u: n features (ignored without use_feature); z: n targets
  // (standardised by the caller).
  // `extra_noise` (empty, or one per point): noise variance a point has on top of the fitted
  // noise, in the units of z (e.g. a measurement part of which is a model's estimate).
  static GaussianProcess Fit(Eigen::MatrixXd x, Eigen::VectorXd u, Eigen::VectorXd z,
                             const GpOptions& options, Eigen::VectorXd extra_noise = {});
  // The same data with given hyper-parameters (no fitting).
  static GaussianProcess WithHyperparameters(Eigen::MatrixXd x, Eigen::VectorXd u, Eigen::VectorXd z,
                                             const Eigen::VectorXd& theta, bool use_feature,
                                             Eigen::VectorXd extra_noise = {});

  // Posterior mean and variance of the latent function (noise excluded) at m points.
  void Predict(const Eigen::MatrixXd& xs, const Eigen::VectorXd& us, Eigen::VectorXd* mean,
               Eigen::VectorXd* variance) const;

  // Conditions on one more pseudo-observation with the hyper-parameters fixed (the Kriging
  // believer of batched proposals): the Cholesky factor grows by a row, O(n^2), and a tracked
  // posterior (Track) is updated in O(m n).
  void AddObservation(const Eigen::RowVectorXd& x, double u, double z);

  // Predicts at m points once, as Predict does, and keeps that posterior up to date through
  // AddObservation (the points are kept): each added observation appends one row to
  // V = L^-1 K(X, xs) and updates the mean and variance by rank one, O(m n), where predicting
  // again would cost O(m n^2).
  void Track(const Eigen::MatrixXd& xs, const Eigen::VectorXd& us);
  bool tracking() const { return tracked_.has_value(); }
  // The tracked points' posterior mean and variance (as Predict gives them; Track first).
  void TrackedPosterior(Eigen::VectorXd* mean, Eigen::VectorXd* variance) const;

  // Log marginal likelihood plus the log prior of theta, and its gradient (for tests).
  static double LogPosterior(const Eigen::MatrixXd& x, const Eigen::VectorXd& u, const Eigen::VectorXd& z,
                             const Eigen::VectorXd& theta, bool use_feature, const GpPrior& prior,
                             Eigen::VectorXd* grad, const Eigen::VectorXd* extra_noise = nullptr);

  const Eigen::VectorXd& theta() const { return theta_; }
  int size() const { return static_cast<int>(z_.size()); }
  double noise_variance() const;

 private:
  // The posterior at fixed points (Track), with what updating it needs.
  struct Tracked {
    Eigen::MatrixXd scaled;  // the points, each coordinate over its length-scale
    Eigen::VectorXd us;
    Eigen::MatrixXd vt;                 // V^T = (L^-1 K(X, xs))^T for the observations at Track: m x n
    std::vector<Eigen::VectorXd> rows;  // V's further rows, one per observation added since
    Eigen::VectorXd mean, variance;     // the posterior (the variance not yet floored)
  };

  void Factorize();
  void TrackScaled(Eigen::MatrixXd scaled, Eigen::VectorXd us);
  bool ExtendFactor(const Eigen::RowVectorXd& x, double u, double z);
  Eigen::MatrixXd CrossKernel(const Eigen::MatrixXd& xs, const Eigen::VectorXd& us) const;
  Eigen::VectorXd PriorVariance(Eigen::Index m, const Eigen::VectorXd& us) const;

  Eigen::MatrixXd x_;
  Eigen::VectorXd u_, z_, theta_, alpha_;
  Eigen::VectorXd beta_;  // L^-1 z (alpha = L^-T beta)
  Eigen::MatrixXd chol_;  // lower Cholesky factor of K + sn^2 I (+ jitter)
  bool jittered_ = false;  // the factor needed jitter (or fell back to the diagonal)
  std::optional<Tracked> tracked_;
  bool use_feature_ = true;
  Eigen::VectorXd extra_noise_;  // empty, or per point (see Fit)
};

// The Matern-5/2 correlation of two points with length-scales l (tests use it directly).
double Matern52(const Eigen::RowVectorXd& a, const Eigen::RowVectorXd& b,
                const Eigen::VectorXd& lengthscales);

}  // namespace tunepar::search
