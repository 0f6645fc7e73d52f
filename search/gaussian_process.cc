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

struct Parts {
  int d;
  Eigen::VectorXd lengthscales;
  double signal2, noise2, slope2;
};

// The points (rows of x) with each coordinate divided by its length-scale.
Eigen::MatrixXd Scaled(const Eigen::MatrixXd& x, const Eigen::VectorXd& lengthscales) {
  return x.array().rowwise() * lengthscales.cwiseInverse().transpose().array();
}

// Squared distances from the rows [begin, end) of `a` (scaled points) to the scaled point b, into
// out: sum_c (a_ic - b_c)^2, summed in the order of the coordinates.
// (__restrict: without it the loops are not vectorised.)
void SquaredDistances(const Eigen::MatrixXd& a, Eigen::Index begin, Eigen::Index end, const double* __restrict b,
                      double* __restrict out) {
  const Eigen::Index rows = end - begin;
  for (Eigen::Index i = 0; i < rows; ++i) out[i] = 0;
  for (Eigen::Index c = 0; c < a.cols(); ++c) {
    const double* __restrict column = a.data() + c * a.rows() + begin;
    const double bc = b[c];
    for (Eigen::Index i = 0; i < rows; ++i) {
      const double gap = column[i] - bc;
      out[i] += gap * gap;
    }
  }
}

// Matern-5/2 of `count` squared distances (r^2), in place, times `scale`, plus `slope` ua_i
// (when ua is given); with `factor`, also 5/3 (1 + sqrt5 r) exp(-sqrt5 r), the factor of the
// Matern's derivative in a log length-scale (times the scaled squared gap of that coordinate).
// In chunks: the square roots and the polynomials in loops of their own (vectorised), the exps
// (library calls) in one between.
void Matern52InPlace(double* __restrict d2, Eigen::Index count, double* __restrict factor = nullptr,
                     double scale = 1.0, const double* __restrict ua = nullptr, double slope = 0.0) {
  constexpr Eigen::Index kChunk = 256;
  double r[kChunk], decay[kChunk];
  for (Eigen::Index begin = 0; begin < count; begin += kChunk) {
    const Eigen::Index size = std::min(kChunk, count - begin);
    double* __restrict x = d2 + begin;
    // (Eigen's sqrt is vectorised and exact, as std::sqrt; a loop of std::sqrt is not vectorised:
    // errno.)
    Eigen::Map<Eigen::ArrayXd>(r, size) = Eigen::Map<const Eigen::ArrayXd>(x, size).sqrt();
    for (Eigen::Index i = 0; i < size; ++i) decay[i] = std::exp(-kSqrt5 * r[i]);
    if (factor != nullptr) {
      for (Eigen::Index i = 0; i < size; ++i) factor[begin + i] = 5.0 / 3.0 * (1.0 + kSqrt5 * r[i]) * decay[i];
    }
    for (Eigen::Index i = 0; i < size; ++i) x[i] = (1.0 + kSqrt5 * r[i] + 5.0 / 3.0 * x[i]) * decay[i] * scale;
    if (ua != nullptr) {
      for (Eigen::Index i = 0; i < size; ++i) x[i] += slope * ua[begin + i];
    }
  }
}

// sf^2 M52 + sb^2 ua_i ub, noise excluded, in place of the `count` Matern arguments r^2 in out.
void KernelInPlace(const Parts& p, bool use_feature, const double* ua, double ub, double* out, Eigen::Index count) {
  Matern52InPlace(out, count, nullptr, p.signal2, use_feature ? ua : nullptr, p.slope2 * ub);
}

// The kernel between the scaled points a (rows; features ua) and the scaled points b (features
// ub), noise excluded: a block of a's rows at a time (it stays in the cache while every point of
// b passes), a column per point of b. With `weights` (one per point of b), also the kernel times
// them into `product`, while the block is in the cache.
Eigen::MatrixXd Kernel(const Parts& p, bool use_feature, const Eigen::MatrixXd& a, const Eigen::VectorXd& ua,
                       const Eigen::MatrixXd& b, const Eigen::VectorXd& ub, const Eigen::VectorXd* weights = nullptr,
                       Eigen::VectorXd* product = nullptr) {
  constexpr Eigen::Index kBlock = 256;
  Eigen::MatrixXd k(a.rows(), b.rows());
  if (weights != nullptr) product->setZero(a.rows());
  const Eigen::MatrixXd bt = b.transpose();  // a point's coordinates contiguous
  for (Eigen::Index begin = 0; begin < a.rows(); begin += kBlock) {
    const Eigen::Index end = std::min(a.rows(), begin + kBlock);
    for (Eigen::Index j = 0; j < b.rows(); ++j) {
      double* out = k.col(j).data() + begin;
      SquaredDistances(a, begin, end, bt.col(j).data(), out);
      KernelInPlace(p, use_feature, use_feature ? ua.data() + begin : nullptr, use_feature ? ub[j] : 0.0, out,
                    end - begin);
      if (weights == nullptr) continue;
      double* __restrict sum = product->data() + begin;
      const double* __restrict column = out;
      const double w = (*weights)[j];
      for (Eigen::Index i = 0; i < end - begin; ++i) sum[i] += column[i] * w;
    }
  }
  return k;
}

// The pairs a > b of n points, column by column of the lower triangle: pair (a, b) is row
// PairOffset(b, n) + a - b - 1.
Eigen::Index PairOffset(Eigen::Index b, Eigen::Index n) { return b * n - b * (b + 1) / 2; }

// The squared gap (x_ac - x_bc)^2 of every pair in every coordinate c (pairs x d): what the
// squared distances are made of whatever the length-scales, computed once per fit.
Eigen::MatrixXd PairGaps(const Eigen::MatrixXd& x) {
  const Eigen::Index n = x.rows();
  Eigen::MatrixXd gaps(n * (n - 1) / 2, x.cols());
  for (Eigen::Index c = 0; c < x.cols(); ++c) {
    for (Eigen::Index b = 0; b + 1 < n; ++b) {
      const Eigen::Index t = n - b - 1;
      gaps.col(c).segment(PairOffset(b, n), t) = (x.col(c).tail(t).array() - x(b, c)).square().matrix();
    }
  }
  return gaps;
}

// The kernel matrix of n points with themselves, noise excluded, from their pairs' squared gaps:
// r^2 = gaps l^-2, the lower triangle a column at a time, mirrored above. The Matern correlation
// of every pair into m52, and with `factor` its derivative factors (Matern52InPlace).
void KernelFromGaps(const Parts& p, bool use_feature, Eigen::Index n, const Eigen::MatrixXd& gaps,
                    const Eigen::VectorXd& u, Eigen::MatrixXd* k, Eigen::VectorXd* m52,
                    Eigen::VectorXd* factor = nullptr) {
  m52->noalias() = gaps * p.lengthscales.array().square().inverse().matrix();
  if (factor != nullptr) factor->resize(m52->size());
  Matern52InPlace(m52->data(), m52->size(), factor != nullptr ? factor->data() : nullptr);
  k->resize(n, n);
  for (Eigen::Index b = 0; b < n; ++b) {
    const Eigen::Index t = n - b - 1;
    (*k)(b, b) = p.signal2 + (use_feature ? p.slope2 * (u[b] * u[b]) : 0.0);
    k->col(b).tail(t) = p.signal2 * m52->segment(PairOffset(b, n), t);
    if (use_feature) k->col(b).tail(t).array() += p.slope2 * (u.tail(t).array() * u[b]);
  }
  k->triangularView<Eigen::StrictlyUpper>() = k->transpose();
}

Parts Unpack(const Eigen::VectorXd& theta) {
  const int d = static_cast<int>(theta.size()) - 3;
  return {d, theta.head(d).array().exp().matrix(), std::exp(2 * theta[d]), std::exp(2 * theta[d + 1]),
          std::exp(2 * theta[d + 2])};
}

// Cholesky of K with growing jitter when it is not numerically positive definite (`jittered`:
// whether it needed some). Only the lower triangles are read and written: above the diagonal,
// `lower` keeps K's entries.
bool Cholesky(const Eigen::MatrixXd& k, Eigen::MatrixXd* lower, bool* jittered = nullptr) {
  const double scale = std::max(1e-12, k.diagonal().mean());
  Eigen::MatrixXd shifted;  // K with the jitter so far (made at the first failure)
  for (double jitter : {0.0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2}) {
    if (jitter > 0) {
      if (shifted.size() == 0) shifted = k;
      shifted.diagonal().array() += jitter * scale;
    }
    *lower = jitter > 0 ? shifted : k;
    Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>> llt(*lower);  // in place
    if (llt.info() == Eigen::Success) {
      if (jittered != nullptr) *jittered = jitter > 0;
      return true;
    }
  }
  return false;
}

// K^-1 b from the lower Cholesky factor of K.
Eigen::VectorXd SolveCholesky(const Eigen::MatrixXd& lower, const Eigen::VectorXd& b) {
  const Eigen::VectorXd y = lower.triangularView<Eigen::Lower>().solve(b);
  return lower.transpose().triangularView<Eigen::Upper>().solve(y);
}

// Below kLeaf rows the triangular inverse and product run as plain loops; above, they split in
// halves whose off-diagonal blocks are triangular solves and products (blocked, as fast as
// matrix products; the whole costs n^3/3 flops each, where two solves of the identity cost 2 n^3).
constexpr Eigen::Index kLeaf = 16;

// In place on the lower triangle (above it, nothing is read or written): L becomes L^-1.
// [A 0; B C]^-1 = [A^-1 0; -C^-1 B A^-1 C^-1].
void InvertLower(Eigen::Ref<Eigen::MatrixXd> a) {
  const Eigen::Index n = a.rows();
  if (n <= kLeaf) {
    for (Eigen::Index j = 0; j < n; ++j) {
      a(j, j) = 1.0 / a(j, j);
      for (Eigen::Index i = j + 1; i < n; ++i) {
        double sum = 0;
        for (Eigen::Index k = j; k < i; ++k) sum += a(i, k) * a(k, j);
        a(i, j) = -sum / a(i, i);
      }
    }
    return;
  }
  const Eigen::Index n1 = n / 2, n2 = n - n1;
  auto b = a.bottomLeftCorner(n2, n1);
  a.topLeftCorner(n1, n1).triangularView<Eigen::Lower>().solveInPlace<Eigen::OnTheRight>(b);
  a.bottomRightCorner(n2, n2).triangularView<Eigen::Lower>().solveInPlace(b);
  b = -b;
  InvertLower(a.topLeftCorner(n1, n1));
  InvertLower(a.bottomRightCorner(n2, n2));
}

// In place on the lower triangle: a lower-triangular M becomes the lower triangle of M^T M.
// [A 0; B C]^T [A 0; B C] = [A^T A + B^T B, .; C^T B, C^T C].
void LowerGram(Eigen::Ref<Eigen::MatrixXd> a, Eigen::MatrixXd* scratch) {
  const Eigen::Index n = a.rows();
  if (n <= kLeaf) {
    for (Eigen::Index j = 0; j < n; ++j) {
      for (Eigen::Index i = j; i < n; ++i) {
        double sum = 0;
        for (Eigen::Index k = i; k < n; ++k) sum += a(k, i) * a(k, j);
        a(i, j) = sum;
      }
    }
    return;
  }
  const Eigen::Index n1 = n / 2, n2 = n - n1;
  LowerGram(a.topLeftCorner(n1, n1), scratch);
  a.topLeftCorner(n1, n1).selfadjointView<Eigen::Lower>().rankUpdate(a.bottomLeftCorner(n2, n1).transpose());
  scratch->noalias() = a.bottomRightCorner(n2, n2).triangularView<Eigen::Lower>().transpose() * a.bottomLeftCorner(n2, n1);
  a.bottomLeftCorner(n2, n1) = *scratch;
  LowerGram(a.bottomRightCorner(n2, n2), scratch);
}

// The lower triangle of K^-1 = L^-T L^-1 from the lower Cholesky factor L (LAPACK's potri).
void CholeskyInverse(const Eigen::MatrixXd& lower, Eigen::MatrixXd* inverse, Eigen::MatrixXd* scratch) {
  *inverse = lower;
  InvertLower(*inverse);
  LowerGram(*inverse, scratch);
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

// The buffers of a fit's evaluations of the log posterior, kept from one to the next
// (allocating a handful of n x n matrices each time cost page faults).
struct LogPosteriorWorkspace {
  Eigen::MatrixXd gaps;  // PairGaps of the points (made at the first evaluation)
  Eigen::VectorXd m52, factor, pair_weight;  // per pair
  Eigen::MatrixXd k, chol, inverse, scratch;
};

// The log-normal prior of theta, and its gradient into grad (when given, resized).
double LogPriorOf(const Eigen::VectorXd& theta, int d, bool use_feature, const GpPrior& prior,
                  Eigen::VectorXd* grad) {
  const Eigen::VectorXd mu = PriorMean(d, prior), sd = PriorSd(d, prior);
  double log_prior = 0;
  for (Eigen::Index j = 0; j < theta.size(); ++j) {
    if (j == d + 2 && !use_feature) continue;
    log_prior -= 0.5 * std::pow((theta[j] - mu[j]) / sd[j], 2);
  }
  if (grad != nullptr) {
    grad->setZero(theta.size());
    for (Eigen::Index j = 0; j < theta.size(); ++j) {
      if (j == d + 2 && !use_feature) continue;
      (*grad)[j] = -(theta[j] - mu[j]) / (sd[j] * sd[j]);
    }
  }
  return log_prior;
}

// Adds the log marginal likelihood's gradient to grad:
//   d lml / d theta_j = 1/2 tr(W dK/dtheta_j),  W = alpha alpha^T - K^-1      (R&W eq. 5.9)
// with dK/dlog l_i = sf^2 factor (x_i - x'_i)^2 / l_i^2, dK/dlog sf = 2 sf^2 M52,
// dK/dlog sn = 2 sn^2 I, dK/dlog sb = 2 sb^2 u u^T. Every matrix is symmetric: the sums run over
// the lower triangle, a column at a time, the pairs below the diagonal counted twice.
void AddLikelihoodGradient(const Parts& p, bool use_feature, const Eigen::VectorXd& u, const Eigen::VectorXd& alpha,
                           LogPosteriorWorkspace* ws, Eigen::VectorXd* grad) {
  const Eigen::Index n = alpha.size();
  CholeskyInverse(ws->chol, &ws->inverse, &ws->scratch);
  double signal = 0, noise = 0, slope = 0;
  Eigen::ArrayXd w_buffer(n);
  ws->pair_weight.resize(ws->m52.size());
  for (Eigen::Index b = 0; b < n; ++b) {
    const double diagonal = alpha[b] * alpha[b] - ws->inverse(b, b);
    signal += diagonal;  // M52(0) = 1
    noise += diagonal;
    if (use_feature) slope += diagonal * u[b] * u[b];
    const Eigen::Index t = n - b - 1;  // the pairs (a, b), a > b
    if (t == 0) continue;
    auto w = w_buffer.head(t);
    w = alpha.tail(t).array() * alpha[b] - ws->inverse.col(b).tail(t).array();
    const Eigen::Index offset = PairOffset(b, n);
    signal += 2 * (w * ws->m52.segment(offset, t).array()).sum();
    if (use_feature) slope += 2 * u[b] * (w * u.tail(t).array()).sum();
    ws->pair_weight.segment(offset, t) = (w * ws->factor.segment(offset, t).array()).matrix();
  }
  // sum over the pairs of W factor (x_ai - x_bi)^2, twice (a > b and b > a), for every i at once
  const Eigen::VectorXd lengthscale = 2 * (ws->gaps.transpose() * ws->pair_weight);
  grad->head(p.d).array() += 0.5 * p.signal2 * lengthscale.array() / p.lengthscales.array().square();
  (*grad)[p.d] += signal * p.signal2;
  (*grad)[p.d + 1] += noise * p.noise2;
  if (use_feature) (*grad)[p.d + 2] += slope * p.slope2;
}

// GaussianProcess::LogPosterior with the buffers of `ws`.
double LogPosteriorWith(const Eigen::MatrixXd& x, const Eigen::VectorXd& u, const Eigen::VectorXd& z,
                        const Eigen::VectorXd& theta, bool use_feature, const GpPrior& prior, Eigen::VectorXd* grad,
                        const Eigen::VectorXd* extra_noise, LogPosteriorWorkspace* ws) {
  const Parts p = Unpack(theta);
  const Eigen::Index n = x.rows();
  const double log_prior = LogPriorOf(theta, p.d, use_feature, prior, grad);
  if (n == 0) return log_prior;
  if (ws->gaps.rows() != n * (n - 1) / 2 || ws->gaps.cols() != x.cols()) ws->gaps = PairGaps(x);
  KernelFromGaps(p, use_feature, n, ws->gaps, u, &ws->k, &ws->m52, grad != nullptr ? &ws->factor : nullptr);
  ws->k.diagonal().array() += p.noise2;
  if (extra_noise != nullptr && extra_noise->size() == n) ws->k.diagonal() += *extra_noise;
  if (!Cholesky(ws->k, &ws->chol)) return -std::numeric_limits<double>::infinity();
  const Eigen::MatrixXd& l = ws->chol;
  const Eigen::VectorXd alpha = SolveCholesky(l, z);
  const double lml = -0.5 * z.dot(alpha) - l.diagonal().array().log().sum() - 0.5 * n * kLog2Pi;
  if (grad != nullptr) AddLikelihoodGradient(p, use_feature, u, alpha, ws, grad);
  return lml + log_prior;
}

struct FitData {
  const Eigen::MatrixXd* x;
  const Eigen::VectorXd* u;
  const Eigen::VectorXd* z;
  bool use_feature;
  const GpPrior* prior;
  const Eigen::VectorXd* extra_noise;
  LogPosteriorWorkspace* workspace;
};

double NegativeLogPosterior(const std::vector<double>& theta, std::vector<double>& grad, void* data) {
  const FitData& f = *static_cast<FitData*>(data);
  const Eigen::Map<const Eigen::VectorXd> t(theta.data(), static_cast<Eigen::Index>(theta.size()));
  Eigen::VectorXd g;
  const double value = LogPosteriorWith(*f.x, *f.u, *f.z, t, f.use_feature, *f.prior, grad.empty() ? nullptr : &g,
                                        f.extra_noise, f.workspace);
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
  LogPosteriorWorkspace workspace;
  return LogPosteriorWith(x, u, z, theta, use_feature, prior, grad, extra_noise, &workspace);
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

  LogPosteriorWorkspace workspace;
  FitData data{&x, &u, &z, options.use_feature, &options.prior,
               extra_noise.size() > 0 ? &extra_noise : nullptr, &workspace};
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
  jittered_ = false;
  if (n == 0) {
    chol_.resize(0, 0);
    alpha_.resize(0);
    beta_.resize(0);
    return;
  }
  Eigen::MatrixXd k;
  Eigen::VectorXd m52;
  KernelFromGaps(p, use_feature_, n, PairGaps(x_), u_, &k, &m52);
  k.diagonal().array() += p.noise2;
  if (extra_noise_.size() == n) k.diagonal() += extra_noise_;
  if (Cholesky(k, &chol_, &jittered_)) {
    chol_.triangularView<Eigen::StrictlyUpper>().setZero();
  } else {
    // Unreachable with the jitter ladder; fall back to the diagonal so predictions stay finite.
    chol_ = k.diagonal().cwiseSqrt().asDiagonal();
    jittered_ = true;
  }
  // alpha = K^-1 z by the two triangular solves, keeping the first (AddObservation extends it).
  beta_ = chol_.triangularView<Eigen::Lower>().solve(z_);
  alpha_ = chol_.transpose().triangularView<Eigen::Upper>().solve(beta_);
}

Eigen::MatrixXd GaussianProcess::CrossKernel(const Eigen::MatrixXd& xs, const Eigen::VectorXd& us) const {
  const Parts p = Unpack(theta_);
  return Kernel(p, use_feature_, Scaled(xs, p.lengthscales), us, Scaled(x_, p.lengthscales), u_);
}

Eigen::VectorXd GaussianProcess::PriorVariance(Eigen::Index m, const Eigen::VectorXd& us) const {
  const Parts p = Unpack(theta_);
  Eigen::VectorXd prior_variance = Eigen::VectorXd::Constant(m, p.signal2);
  if (use_feature_) prior_variance.array() += p.slope2 * us.array().square();
  return prior_variance;
}

void GaussianProcess::Predict(const Eigen::MatrixXd& xs, const Eigen::VectorXd& us, Eigen::VectorXd* mean,
                              Eigen::VectorXd* variance) const {
  const Eigen::VectorXd prior_variance = PriorVariance(xs.rows(), us);
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
  TrackScaled(Scaled(xs, Unpack(theta_).lengthscales), us);
}

void GaussianProcess::TrackScaled(Eigen::MatrixXd scaled, Eigen::VectorXd us) {
  Tracked t;
  t.variance = PriorVariance(scaled.rows(), us);
  if (x_.rows() == 0) {
    t.mean.setZero(scaled.rows());
    t.vt.resize(scaled.rows(), 0);
  } else {
    const Parts p = Unpack(theta_);
    t.vt = Kernel(p, use_feature_, scaled, us, Scaled(x_, p.lengthscales), u_, &alpha_, &t.mean);  // K(xs, X)
    // V^T = K(xs, X) L^-T
    chol_.transpose().triangularView<Eigen::Upper>().solveInPlace<Eigen::OnTheRight>(t.vt);
    Eigen::VectorXd explained = Eigen::VectorXd::Zero(t.vt.rows());  // |V^T row|^2, a column at a time
    for (Eigen::Index j = 0; j < t.vt.cols(); ++j) explained += t.vt.col(j).cwiseAbs2();
    t.variance -= explained;
  }
  t.scaled = std::move(scaled);
  t.us = std::move(us);
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
  const Eigen::MatrixXd xm = Scaled(x, p.lengthscales);
  const Eigen::VectorXd um = Eigen::VectorXd::Constant(1, u);
  Eigen::VectorXd l = Kernel(p, use_feature_, Scaled(x_, p.lengthscales), u_, xm, um);
  if (n > 0) chol_.triangularView<Eigen::Lower>().solveInPlace(l);
  const double d2 = Kernel(p, use_feature_, xm, um, xm, um)(0, 0) + p.noise2 - l.squaredNorm();
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
    const Eigen::Index n0 = t.vt.cols();
    Eigen::VectorXd r = Kernel(p, use_feature_, t.scaled, t.us, xm, um);
    r.noalias() -= t.vt * l.head(n0);
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
    TrackScaled(std::move(old.scaled), std::move(old.us));
  }
}

}  // namespace tunepar::search
