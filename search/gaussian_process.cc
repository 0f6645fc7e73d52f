#include "search/gaussian_process.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <nlopt.hpp>

namespace tunepar::search {

namespace {

constexpr double kSqrt5 = 2.2360679774997896964;
constexpr double kLog2Pi = 1.8378770664093454836;

// Squared scaled distances between the rows of a and b: |a/l - b/l|^2, via one GEMM.
Eigen::MatrixXd ScaledSquaredDistances(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                                       const Eigen::VectorXd& lengthscales) {
  const Eigen::RowVectorXd inv = lengthscales.cwiseInverse().transpose();
  const Eigen::MatrixXd as = a.array().rowwise() * inv.array();
  const Eigen::MatrixXd bs = b.array().rowwise() * inv.array();
  Eigen::MatrixXd d2 = (-2.0 * as * bs.transpose()).eval();
  d2.colwise() += as.rowwise().squaredNorm();
  d2.rowwise() += bs.rowwise().squaredNorm().transpose();
  return d2.cwiseMax(0.0);
}

// Matern-5/2 of a matrix of squared distances, in place.
void Matern52InPlace(Eigen::MatrixXd& d2) {
  for (Eigen::Index i = 0; i < d2.size(); ++i) {
    const double r = std::sqrt(d2.data()[i]);
    d2.data()[i] = (1.0 + kSqrt5 * r + 5.0 / 3.0 * d2.data()[i]) * std::exp(-kSqrt5 * r);
  }
}

struct Parts {
  int d;
  Eigen::VectorXd lengthscales;
  double signal2, noise2, slope2;
};

// The kernel between the rows of a (features ua) and those of b (features ub), noise excluded.
Eigen::MatrixXd Kernel(const Parts& p, bool use_feature, const Eigen::MatrixXd& a, const Eigen::VectorXd& ua,
                       const Eigen::MatrixXd& b, const Eigen::VectorXd& ub) {
  Eigen::MatrixXd k = ScaledSquaredDistances(a, b, p.lengthscales);
  Matern52InPlace(k);
  k *= p.signal2;
  if (use_feature) k.noalias() += p.slope2 * ua * ub.transpose();
  return k;
}

Parts Unpack(const Eigen::VectorXd& theta) {
  const int d = static_cast<int>(theta.size()) - 3;
  return {d, theta.head(d).array().exp().matrix(), std::exp(2 * theta[d]), std::exp(2 * theta[d + 1]),
          std::exp(2 * theta[d + 2])};
}

// Cholesky of K with growing jitter when it is not numerically positive definite (`jittered`:
// whether it needed some).
bool Cholesky(Eigen::MatrixXd k, Eigen::MatrixXd* lower, bool* jittered = nullptr) {
  const double scale = std::max(1e-12, k.diagonal().mean());
  for (double jitter : {0.0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2}) {
    if (jitter > 0) k.diagonal().array() += jitter * scale;
    Eigen::LLT<Eigen::MatrixXd> llt(k);
    if (llt.info() == Eigen::Success) {
      *lower = llt.matrixL();
      if (jittered != nullptr) *jittered = jitter > 0;
      return true;
    }
  }
  return false;
}

// K^-1 b from the lower Cholesky factor of K.
template <typename Rhs>
Eigen::Matrix<double, Eigen::Dynamic, Rhs::ColsAtCompileTime> SolveCholesky(const Eigen::MatrixXd& lower,
                                                                            const Rhs& b) {
  using Result = Eigen::Matrix<double, Eigen::Dynamic, Rhs::ColsAtCompileTime>;
  const Result y = lower.triangularView<Eigen::Lower>().solve(b);
  return lower.transpose().triangularView<Eigen::Upper>().solve(y);
}

Eigen::VectorXd PriorMean(int d, const GpPrior& p) {
  Eigen::VectorXd m(d + 3);
  m.head(d).setConstant(p.log_lengthscale_mean);
  m[d] = p.log_signal_mean;
  m[d + 1] = p.log_noise_mean;
  m[d + 2] = p.log_slope_mean;
  return m;
}

Eigen::VectorXd PriorSd(int d, const GpPrior& p) {
  Eigen::VectorXd s(d + 3);
  s.head(d).setConstant(p.log_lengthscale_sd);
  s[d] = p.log_signal_sd;
  s[d + 1] = p.log_noise_sd;
  s[d + 2] = p.log_slope_sd;
  return s;
}

struct FitData {
  const Eigen::MatrixXd* x;
  const Eigen::VectorXd* u;
  const Eigen::VectorXd* z;
  bool use_feature;
  const GpPrior* prior;
  const Eigen::VectorXd* extra_noise;
};

double NegativeLogPosterior(const std::vector<double>& theta, std::vector<double>& grad, void* data) {
  const FitData& f = *static_cast<FitData*>(data);
  const Eigen::Map<const Eigen::VectorXd> t(theta.data(), static_cast<Eigen::Index>(theta.size()));
  Eigen::VectorXd g;
  const double value = GaussianProcess::LogPosterior(*f.x, *f.u, *f.z, t, f.use_feature, *f.prior,
                                                     grad.empty() ? nullptr : &g, f.extra_noise);
  if (!grad.empty()) {
    for (size_t i = 0; i < grad.size(); ++i) grad[i] = -g[static_cast<Eigen::Index>(i)];
  }
  return std::isfinite(value) ? -value : 1e30;
}

}  // namespace

double Matern52(const Eigen::RowVectorXd& a, const Eigen::RowVectorXd& b,
                const Eigen::VectorXd& lengthscales) {
  const double r = std::sqrt(((a - b).array() / lengthscales.transpose().array()).square().sum());
  return (1.0 + kSqrt5 * r + 5.0 / 3.0 * r * r) * std::exp(-kSqrt5 * r);
}

double GaussianProcess::LogPosterior(const Eigen::MatrixXd& x, const Eigen::VectorXd& u,
                                     const Eigen::VectorXd& z, const Eigen::VectorXd& theta, bool use_feature,
                                     const GpPrior& prior, Eigen::VectorXd* grad,
                                     const Eigen::VectorXd* extra_noise) {
  const Parts p = Unpack(theta);
  const Eigen::Index n = x.rows();
  const Eigen::VectorXd mu = PriorMean(p.d, prior), sd = PriorSd(p.d, prior);
  double log_prior = 0;
  for (Eigen::Index j = 0; j < theta.size(); ++j) {
    if (j == p.d + 2 && !use_feature) continue;
    log_prior -= 0.5 * std::pow((theta[j] - mu[j]) / sd[j], 2);
  }
  if (grad != nullptr) {
    grad->setZero(theta.size());
    for (Eigen::Index j = 0; j < theta.size(); ++j) {
      if (j == p.d + 2 && !use_feature) continue;
      (*grad)[j] = -(theta[j] - mu[j]) / (sd[j] * sd[j]);
    }
  }
  if (n == 0) return log_prior;

  const Eigen::MatrixXd d2 = ScaledSquaredDistances(x, x, p.lengthscales);
  // exp(-sqrt5 r), computed once for the kernel and its gradient (the exps are most of the cost).
  Eigen::MatrixXd decay(n, n), m52(n, n);
  for (Eigen::Index a = 0; a < n * n; ++a) {
    const double r = std::sqrt(d2.data()[a]);
    decay.data()[a] = std::exp(-kSqrt5 * r);
    m52.data()[a] = (1.0 + kSqrt5 * r + 5.0 / 3.0 * d2.data()[a]) * decay.data()[a];
  }
  Eigen::MatrixXd k = p.signal2 * m52;
  if (use_feature) k.noalias() += p.slope2 * u * u.transpose();
  k.diagonal().array() += p.noise2;
  if (extra_noise != nullptr && extra_noise->size() == n) k.diagonal() += *extra_noise;
  Eigen::MatrixXd l;
  if (!Cholesky(k, &l)) return -std::numeric_limits<double>::infinity();
  const Eigen::VectorXd alpha = SolveCholesky(l, z);
  const double lml = -0.5 * z.dot(alpha) - l.diagonal().array().log().sum() - 0.5 * n * kLog2Pi;
  if (grad == nullptr) return lml + log_prior;

  // d lml / d theta_j = 1/2 tr((alpha alpha^T - K^-1) dK/dtheta_j)   (R&W eq. 5.9)
  const Eigen::MatrixXd k_inv = SolveCholesky(l, Eigen::MatrixXd::Identity(n, n));
  const Eigen::MatrixXd w = alpha * alpha.transpose() - k_inv;
  // dK/dlog l_i = sf^2 5/3 (1 + sqrt5 r) exp(-sqrt5 r) (x_i - x'_i)^2 / l_i^2
  Eigen::MatrixXd wc(n, n);
  for (Eigen::Index a = 0; a < n * n; ++a) {
    const double r = std::sqrt(d2.data()[a]);
    wc.data()[a] = w.data()[a] * p.signal2 * 5.0 / 3.0 * (1.0 + kSqrt5 * r) * decay.data()[a];
  }
  // g_i = sum_ab wc_ab (x_ai - x_bi)^2, every dimension in one pass over the pairs (each sum in
  // the same order as one dimension at a time: d independent chains instead of one).
  const Eigen::MatrixXd xt = x.transpose();  // d x n: a point's coordinates contiguous
  Eigen::VectorXd g = Eigen::VectorXd::Zero(p.d);
  for (Eigen::Index b = 0; b < n; ++b) {
    for (Eigen::Index a = 0; a < n; ++a) {
      const double c = wc(a, b);
      for (int i = 0; i < p.d; ++i) {
        const double diff = xt(i, a) - xt(i, b);
        g[i] += c * diff * diff;
      }
    }
  }
  for (int i = 0; i < p.d; ++i) {
    const double inv_l2 = 1.0 / (p.lengthscales[i] * p.lengthscales[i]);
    (*grad)[i] += 0.5 * g[i] * inv_l2;
  }
  (*grad)[p.d] += 0.5 * (w.array() * m52.array()).sum() * 2 * p.signal2;
  (*grad)[p.d + 1] += 0.5 * w.trace() * 2 * p.noise2;
  if (use_feature) (*grad)[p.d + 2] += 0.5 * u.dot(w * u) * 2 * p.slope2;
  return lml + log_prior;
}

GaussianProcess GaussianProcess::WithHyperparameters(Eigen::MatrixXd x, Eigen::VectorXd u, Eigen::VectorXd z,
                                                     const Eigen::VectorXd& theta, bool use_feature,
                                                     Eigen::VectorXd extra_noise) {
  GaussianProcess gp;
  if (extra_noise.size() == x.rows()) gp.extra_noise_ = std::move(extra_noise);
  gp.x_ = std::move(x);
  gp.u_ = std::move(u);
  gp.z_ = std::move(z);
  gp.theta_ = theta;
  gp.use_feature_ = use_feature;
  gp.Factorize();
  return gp;
}

GaussianProcess GaussianProcess::Fit(Eigen::MatrixXd x, Eigen::VectorXd u, Eigen::VectorXd z,
                                     const GpOptions& options, Eigen::VectorXd extra_noise) {
  const int d = static_cast<int>(x.cols());
  if (extra_noise.size() != x.rows()) extra_noise.resize(0);
  const Eigen::VectorXd mode = PriorMean(d, options.prior), sd = PriorSd(d, options.prior);
  if (x.rows() < 2)
    return WithHyperparameters(std::move(x), std::move(u), std::move(z), mode, options.use_feature,
                               std::move(extra_noise));

  std::vector<double> lo(d + 3), hi(d + 3);
  for (int i = 0; i < d; ++i) {
    lo[i] = std::log(0.01);
    hi[i] = std::log(50.0);
  }
  lo[d] = std::log(0.01), hi[d] = std::log(20.0);
  lo[d + 1] = std::log(1e-4), hi[d + 1] = std::log(2.0);
  lo[d + 2] = std::log(1e-4), hi[d + 2] = std::log(20.0);
  if (!options.use_feature) lo[d + 2] = hi[d + 2] = mode[d + 2];

  FitData data{&x, &u, &z, options.use_feature, &options.prior,
               extra_noise.size() > 0 ? &extra_noise : nullptr};
  std::mt19937_64 rng(options.seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(x.rows())));
  std::normal_distribution<double> normal;
  Eigen::VectorXd best = mode;
  double best_value = std::numeric_limits<double>::infinity();
  for (int start = 0; start < std::max(1, options.restarts); ++start) {
    std::vector<double> theta(d + 3);
    for (int j = 0; j < d + 3; ++j) {
      const double draw = start == 0 ? mode[j] : mode[j] + sd[j] * normal(rng);
      theta[j] = std::clamp(draw, lo[j], hi[j]);
    }
    nlopt::opt opt(nlopt::LD_LBFGS, static_cast<unsigned>(d + 3));
    opt.set_lower_bounds(lo);
    opt.set_upper_bounds(hi);
    opt.set_min_objective(NegativeLogPosterior, &data);
    opt.set_maxeval(options.max_evaluations);
    opt.set_ftol_rel(1e-7);
    double value = 0;
    try {
      opt.optimize(theta, value);
    } catch (const std::exception&) {
      std::vector<double> unused;
      value = NegativeLogPosterior(theta, unused, &data);  // keep the point reached
    }
    if (value < best_value) {
      best_value = value;
      best = Eigen::Map<Eigen::VectorXd>(theta.data(), d + 3);
    }
  }
  return WithHyperparameters(std::move(x), std::move(u), std::move(z), best, options.use_feature,
                             std::move(extra_noise));
}

double GaussianProcess::noise_variance() const {
  return std::exp(2 * theta_[theta_.size() - 2]);
}

void GaussianProcess::Factorize() {
  const Parts p = Unpack(theta_);
  const Eigen::Index n = x_.rows();
  if (n == 0) {
    chol_.resize(0, 0);
    alpha_.resize(0);
    return;
  }
  Eigen::MatrixXd k = ScaledSquaredDistances(x_, x_, p.lengthscales);
  Matern52InPlace(k);
  k *= p.signal2;
  if (use_feature_) k.noalias() += p.slope2 * u_ * u_.transpose();
  k.diagonal().array() += p.noise2;
  if (extra_noise_.size() == n) k.diagonal() += extra_noise_;
  jittered_ = false;
  if (!Cholesky(k, &chol_, &jittered_)) {
    // Unreachable with the jitter ladder; fall back to the diagonal so predictions stay finite.
    chol_ = k.diagonal().cwiseSqrt().asDiagonal();
    jittered_ = true;
  }
  // alpha = K^-1 z by the two triangular solves, keeping the first (AddObservation extends it).
  beta_ = chol_.triangularView<Eigen::Lower>().solve(z_);
  alpha_ = chol_.transpose().triangularView<Eigen::Upper>().solve(beta_);
}

Eigen::MatrixXd GaussianProcess::CrossKernel(const Eigen::MatrixXd& xs, const Eigen::VectorXd& us) const {
  return Kernel(Unpack(theta_), use_feature_, xs, us, x_, u_);
}

Eigen::VectorXd GaussianProcess::PriorVariance(const Eigen::VectorXd& us) const {
  const Parts p = Unpack(theta_);
  Eigen::VectorXd prior_variance = Eigen::VectorXd::Constant(us.size(), p.signal2);
  if (use_feature_) prior_variance.array() += p.slope2 * us.array().square();
  return prior_variance;
}

void GaussianProcess::Predict(const Eigen::MatrixXd& xs, const Eigen::VectorXd& us, Eigen::VectorXd* mean,
                              Eigen::VectorXd* variance) const {
  const Eigen::VectorXd prior_variance = PriorVariance(us);
  if (x_.rows() == 0) {
    mean->setZero(xs.rows());
    *variance = prior_variance;
    return;
  }
  const Eigen::MatrixXd ks = CrossKernel(xs, us);  // m x n
  *mean = ks * alpha_;
  const Eigen::MatrixXd v = chol_.triangularView<Eigen::Lower>().solve(ks.transpose());  // n x m
  *variance = (prior_variance - v.colwise().squaredNorm().transpose()).cwiseMax(1e-12);
}

void GaussianProcess::Track(const Eigen::MatrixXd& xs, const Eigen::VectorXd& us) {
  Tracked t;
  t.xs = xs;
  t.us = us;
  t.variance = PriorVariance(us);
  if (x_.rows() == 0) {
    t.mean.setZero(xs.rows());
    t.v.resize(0, xs.rows());
  } else {
    const Eigen::MatrixXd ks = CrossKernel(xs, us);  // m x n
    t.mean = ks * alpha_;
    t.v = chol_.triangularView<Eigen::Lower>().solve(ks.transpose());  // n x m
    t.variance -= t.v.colwise().squaredNorm().transpose();
  }
  tracked_ = std::move(t);
}

void GaussianProcess::TrackedPosterior(Eigen::VectorXd* mean, Eigen::VectorXd* variance) const {
  *mean = tracked_->mean;
  *variance = tracked_->variance.cwiseMax(1e-12);
}

// Grows the Cholesky factor by the row of a new observation at x (noise: the fitted noise
// alone): with l = L^-1 k(X, x) and d^2 = k(x, x) + sn^2 - |l|^2, L' = [L 0; l^T d] and
// beta' = (beta, (z - l.beta) / d), the factor of the matrix with the observation added. A
// tracked posterior gains the row r = (k(x, xs) - l^T V) / d of V = L^-1 K(X, xs): its mean moves
// by beta'_n r and its variance falls by r^2. False, changing nothing, where the factor needed
// jitter or the new pivot is not positive: factorising again from scratch decides then.
bool GaussianProcess::ExtendFactor(const Eigen::RowVectorXd& x, double u, double z) {
  if (jittered_) return false;
  const Parts p = Unpack(theta_);
  const Eigen::Index n = x_.rows();
  const Eigen::MatrixXd xm = x;
  const Eigen::VectorXd um = Eigen::VectorXd::Constant(1, u);
  Eigen::VectorXd l = CrossKernel(xm, um).transpose();
  if (n > 0) chol_.triangularView<Eigen::Lower>().solveInPlace(l);
  Eigen::MatrixXd self = ScaledSquaredDistances(xm, xm, p.lengthscales);
  Matern52InPlace(self);
  double kxx = p.signal2 * self(0, 0);
  if (use_feature_) kxx += p.slope2 * u * u;
  const double d2 = kxx + p.noise2 - l.squaredNorm();
  if (!(d2 > 0)) return false;
  const double d = std::sqrt(d2);
  const double b = (z - l.dot(beta_)) / d;
  chol_.conservativeResize(n + 1, n + 1);
  chol_.row(n).head(n) = l.transpose();
  chol_.col(n).setZero();
  chol_(n, n) = d;
  beta_.conservativeResize(n + 1);
  beta_[n] = b;
  alpha_ = chol_.transpose().triangularView<Eigen::Upper>().solve(beta_);
  if (tracked_) {
    Tracked& t = *tracked_;
    const Eigen::Index n0 = t.v.rows();
    Eigen::VectorXd r = Kernel(p, use_feature_, t.xs, t.us, xm, um);
    r.noalias() -= t.v.transpose() * l.head(n0);
    for (size_t j = 0; j < t.rows.size(); ++j) r -= l[n0 + static_cast<Eigen::Index>(j)] * t.rows[j];
    r /= d;
    t.mean += b * r;
    t.variance -= r.cwiseAbs2();
    t.rows.push_back(std::move(r));
  }
  return true;
}

void GaussianProcess::AddObservation(const Eigen::RowVectorXd& x, double u, double z) {
  const bool extended = ExtendFactor(x, u, z);
  x_.conservativeResize(x_.rows() + 1, x.size());
  x_.row(x_.rows() - 1) = x;
  u_.conservativeResize(u_.size() + 1);
  u_[u_.size() - 1] = u;
  z_.conservativeResize(z_.size() + 1);
  z_[z_.size() - 1] = z;
  if (extra_noise_.size() > 0) {
    extra_noise_.conservativeResize(extra_noise_.size() + 1);
    extra_noise_[extra_noise_.size() - 1] = 0.0;
  }
  if (extended) return;
  Factorize();
  if (tracked_) {
    Tracked old = std::move(*tracked_);
    Track(old.xs, old.us);
  }
}

}  // namespace tunepar::search
