#include "search/proposer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "base/knobs.h"
#include "search/acquisition.h"

namespace tunepar::search {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Repeats (measurements beyond each layout's first) before the noise is taken as known.
constexpr int kNoiseDegreesOfFreedom = 4;
// The smallest spread of residuals the surrogate assumes (log step time): two measurements
// that agree do not make the model certain everywhere.
constexpr double kMinResidualScale = 0.03;
// P(fits) of a layout an ok trial vouches for (it needs no more memory in any component), and
// of one an OOM condemns (it needs no less in every component): the model's scatter aside.
constexpr double kVouched = 0.99;
constexpr double kCondemned = 0.01;
// The probability of fitting and running a proposal needs (FeasibilityFloor).
constexpr double kLikelyToRun = 0.5;
// A probe past the predicted memory limit reaches no further than this many standard deviations
// of the memory model's uncertainty (P(fits) >= 2.3%; ProbeCandidate).
constexpr double kProbeReach = 2.0;
// The noise of one measurement (log step time) assumed before any layout was measured twice:
// run-to-run spread of a training step on a shared machine is a percent or two (the
// tunepar-core runs of docs/search.md repeat within 1-1.5%; published HPC step-time jitter is
// 1-3%), and a single measurement says nothing of it, however close the surrogate's fit.
constexpr double kPriorNoiseSd = 0.02;

// Each row's level in every column: its rank among the column's distinct values.
std::vector<std::vector<int>> ColumnLevels(const Eigen::MatrixXd& x, std::vector<int>* levels) {
  std::vector<std::vector<int>> level(static_cast<size_t>(x.cols()));
  levels->clear();
  for (Eigen::Index c = 0; c < x.cols(); ++c) {
    std::vector<double> values(x.col(c).data(), x.col(c).data() + x.rows());
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      level[c].push_back(static_cast<int>(std::lower_bound(values.begin(), values.end(), x(i, c)) - values.begin()));
    }
    levels->push_back(static_cast<int>(values.size()));
  }
  return level;
}

// Each row's tuple of the given columns as an id (dense, in order of first appearance), refined
// one column at a time; counts[k]: how many distinct tuples the first k columns make.
std::vector<int> TupleIds(const std::vector<std::vector<int>>& level, const std::vector<int>& levels,
                          const std::vector<int>& columns, size_t rows, std::vector<int>* counts = nullptr) {
  std::vector<int> id(rows, 0), relabel;
  int count = rows > 0 ? 1 : 0;
  if (counts != nullptr) counts->assign(1, count);
  for (int c : columns) {
    relabel.assign(static_cast<size_t>(count) * levels[c], -1);
    int next = 0;
    for (size_t i = 0; i < rows; ++i) {
      int& to = relabel[static_cast<size_t>(id[i]) * levels[c] + level[c][i]];
      if (to < 0) to = next++;
      id[i] = to;
    }
    count = next;
    if (counts != nullptr) counts->push_back(count);
  }
  return id;
}

// The coordinates [begin, end) of each tuple that `id` numbers (those of its first row), one per row.
Eigen::MatrixXd TupleCoordinates(const Eigen::MatrixXd& x, const std::vector<int>& id, int begin, int end) {
  const int count = id.empty() ? 0 : *std::max_element(id.begin(), id.end()) + 1;
  Eigen::MatrixXd tuples(count, end - begin);
  for (size_t i = id.size(); i-- > 0;) tuples.row(id[i]) = x.row(static_cast<Eigen::Index>(i)).segment(begin, end - begin);
  return tuples;
}

// RunProbability's Gaussian kernel is a product over the coordinates, exp(-|x - y|^2 / 2l^2) =
// exp(-|x_h - y_h|^2 / 2l^2) exp(-|x_t - y_t|^2 / 2l^2) for the leading coordinates h and the rest
// t, and the legal layouts have few distinct tuples of each (13,770 layouts of gpt-1t at 3072 have
// 140 and 180): a trial's weight on every layout costs an exp per distinct tuple and a product
// per layout. The split is where the two counts add up to the least.
void SplitCoordinates(const Eigen::MatrixXd& x, Eigen::MatrixXd* heads, Eigen::MatrixXd* tails,
                      std::vector<int>* head_of, std::vector<int>* tail_of) {
  const int d = static_cast<int>(x.cols());
  std::vector<int> levels;
  const std::vector<std::vector<int>> level = ColumnLevels(x, &levels);
  std::vector<int> forward(d), backward(d), leading, trailing;
  for (int c = 0; c < d; ++c) forward[c] = c, backward[c] = d - 1 - c;
  const size_t rows = static_cast<size_t>(x.rows());
  TupleIds(level, levels, forward, rows, &leading);
  TupleIds(level, levels, backward, rows, &trailing);
  int split = 0;
  for (int k = 1; k <= d; ++k) {
    if (leading[k] + trailing[d - k] < leading[split] + trailing[d - split]) split = k;
  }
  *head_of = TupleIds(level, levels, std::vector<int>(forward.begin(), forward.begin() + split), rows);
  *tail_of = TupleIds(level, levels, std::vector<int>(forward.begin() + split, forward.end()), rows);
  *heads = TupleCoordinates(x, *head_of, 0, split);
  *tails = TupleCoordinates(x, *tail_of, split, d);
}

}  // namespace

struct Proposer::State {
  std::vector<char> tried;
  std::vector<double> feasibility;  // per legal layout: P(fits) x P(runs)
  std::vector<double> runs;         // P(runs), given that it fits
  std::vector<MemoryMargin> margin; // the memory model's expected excess over the device's memory
  std::vector<char> condemned;      // needs no less in every component than a trial that ran out
  std::vector<int> observed;        // legal index of each ok measurement (repeats repeat)
  Eigen::VectorXd log_time;         // its log step time
  GaussianProcess gp;
  double offset = 0;  // log step ~ prior + offset + scale z
  double scale = 1;
  // The residuals' own spread (scale without prior_sd's pseudo-measurements): probes past the
  // memory limit are weighed with it (ProbeCandidate).
  double residual_scale = 1;
  double best = kInf;  // incumbent log step time (surrogate mean at the best observed layout)
  bool random_design = false;
};

Proposer::Proposer(std::vector<Layout> legal, const PriorModel& prior, ProposerOptions options)
    : legal_(std::move(legal)), options_(std::move(options)), encoder_(LayoutEncoder::Fit(legal_)) {
  const Eigen::Index n = static_cast<Eigen::Index>(legal_.size());
  x_.resize(n, std::max(1, encoder_.Dimension()));
  x_.setZero();
  prior_log_time_.resize(n);
  memory_.resize(legal_.size());
  std::vector<double> row(encoder_.Dimension());
  for (Eigen::Index i = 0; i < n; ++i) {
    const Layout& l = legal_[i];
    encoder_.Encode(l, row);
    for (int j = 0; j < encoder_.Dimension(); ++j) x_(i, j) = row[j];
    const PriorPrediction p = prior(l);
    prior_log_time_[i] = std::log(std::max(p.step_time_s, 1e-300));
    memory_[i] = p.memory_components;
    // A prior without a breakdown: its whole memory as one component.
    if (std::all_of(memory_[i].begin(), memory_[i].end(), [](double b) { return b == 0; }))
      memory_[i][0] = p.memory_bytes;
    index_.emplace(LayoutKey(l), static_cast<int>(i));
  }
  const double mean = n > 0 ? prior_log_time_.mean() : 0.0;
  const double sd = n > 1 ? std::sqrt((prior_log_time_.array() - mean).square().mean()) : 1.0;
  feature_ = (prior_log_time_.array() - mean) / std::max(sd, 1e-9);
  SplitCoordinates(x_, &heads_, &tails_, &head_of_, &tail_of_);
}

int Proposer::IndexOf(const Layout& layout) const {
  auto it = index_.find(LayoutKey(layout));
  return it == index_.end() ? -1 : it->second;
}

// What a history says, per legal layout: which were tried, the ok measurements (sum of log
// step times and count, ordered by index: deterministic), how many of those were sliced, and the
// memory evidence of the layouts that ran or ran out of memory.
struct Proposer::Evidence {
  std::vector<char> tried;
  // Every ok measurement (a layout measured again counts again: repeats show the noise), in
  // legal order, then history order.
  struct Measurement {
    int index;
    double log_time;
    bool sliced;
  };
  std::vector<Measurement> measured;
  std::vector<MemoryEvidence> memory;
};

namespace {

// Whether layout a needs no less than layout b in every memory component.
bool Dominates(const MemoryComponents& a, const MemoryComponents& b) {
  for (int c = 0; c < kMemoryComponents; ++c) {
    if (a[c] < b[c]) return false;
  }
  return true;
}

}  // namespace

// P(fits) of every legal layout: the memory model's, then the evidence of physics: an ok trial
// vouches for every layout that needs no more in any component, an OOM condemns every layout
// that needs no less in every component (OOMs win a conflict). Keeps each layout's margin and
// whether it is condemned in `state` (for probes).
std::vector<double> Proposer::MemoryFeasibility(const FeasibilityModel& memory, const Evidence& e, State* s) const {
  std::vector<double> p(legal_.size(), 1.0);
  s->margin.assign(legal_.size(), MemoryMargin{});
  s->condemned.assign(legal_.size(), 0);
  if (options_.device_memory_bytes <= 0) return p;
  for (size_t i = 0; i < legal_.size(); ++i) {
    s->margin[i] = memory.Margin(memory_[i]);
    p[i] = NormalCdf(-s->margin[i].log_excess / s->margin[i].sd);
    for (size_t j = 0; j < e.memory.size(); ++j) {
      const MemoryComponents& tried = e.memory[j].predicted;
      if (e.memory[j].fitted && Dominates(tried, memory_[i])) p[i] = std::max(p[i], kVouched);
    }
    for (size_t j = 0; j < e.memory.size(); ++j) {
      const MemoryComponents& tried = e.memory[j].predicted;
      if (!e.memory[j].fitted && Dominates(memory_[i], tried)) {
        p[i] = std::min(p[i], kCondemned);
        s->condemned[i] = 1;
      }
    }
  }
  return p;
}

// P(runs) of every legal layout, given that it fits: a kernel-weighted Beta estimate around
// each finished trial (crash, timeout and invalid did not run; ok and oom did), with the prior
// worth one observation: p = (prior + sum_j w_j s_j) / (1 + sum_j w_j), w_j = weight x
// exp(-|x - x_j|^2 / 2 l^2). A crash-prone region gets a low probability even where nothing
// models why.
std::vector<double> Proposer::RunProbability(const std::vector<Outcome>& history) const {
  std::vector<int> index;
  std::vector<bool> ran;
  for (const Outcome& o : history) {
    const int i = IndexOf(o.layout);
    if (i < 0 || !IsFinished(o.status)) continue;
    index.push_back(i);
    ran.push_back(o.status == TrialStatus::kOk || o.status == TrialStatus::kOom);
  }
  const double inv_2l2 = 1.0 / (2.0 * options_.failure_lengthscale * options_.failure_lengthscale);
  // Trial by trial, each layout's sums in history order; a trial's weights by its kernel's two
  // factors (SplitCoordinates).
  const Eigen::Index m = x_.rows(), split = heads_.cols();
  auto factors = [&](const Eigen::MatrixXd& tuples, const Eigen::RowVectorXd& trial, Eigen::VectorXd* out) {
    out->resize(tuples.rows());
    for (Eigen::Index t = 0; t < tuples.rows(); ++t) {
      (*out)[t] = std::exp(-(tuples.row(t) - trial).squaredNorm() * inv_2l2);
    }
  };
  Eigen::VectorXd w_sum = Eigen::VectorXd::Zero(m), s_sum = Eigen::VectorXd::Zero(m), w(m), head, tail;
  for (size_t j = 0; j < index.size(); ++j) {
    factors(heads_, x_.row(index[j]).head(split), &head);
    factors(tails_, x_.row(index[j]).tail(x_.cols() - split), &tail);
    for (Eigen::Index i = 0; i < m; ++i) w[i] = options_.failure_weight * (head[head_of_[i]] * tail[tail_of_[i]]);
    w_sum += w;
    if (ran[j]) s_sum += w;
  }
  std::vector<double> p(legal_.size());
  for (size_t i = 0; i < legal_.size(); ++i) {
    const Eigen::Index k = static_cast<Eigen::Index>(i);
    p[i] = (options_.prior_run_probability + s_sum[k]) / (1.0 + w_sum[k]);
  }
  return p;
}

Proposer::Evidence Proposer::Gather(const std::vector<Outcome>& history) const {
  Evidence e;
  e.tried.assign(legal_.size(), 0);
  for (const Outcome& o : history) {
    const int i = IndexOf(o.layout);
    if (i < 0) continue;  // not in this search space
    e.tried[i] = 1;
    if (o.status == TrialStatus::kOk && o.step_time_s && *o.step_time_s > 0)
      e.measured.push_back({i, std::log(*o.step_time_s), o.sliced});
    if (o.status == TrialStatus::kOk || o.status == TrialStatus::kOom) {
      // A slice's peak is the slice's, not the layout's.
      const std::optional<double> peak = o.sliced ? std::nullopt : o.peak_memory_bytes;
      e.memory.push_back({memory_[i], o.status == TrialStatus::kOk, peak});
    }
  }
  std::stable_sort(e.measured.begin(), e.measured.end(),
                   [](const Evidence::Measurement& a, const Evidence::Measurement& b) { return a.index < b.index; });
  return e;
}

// The GP on the residuals of the log step times against the prior: log step ~ prior + offset +
// scale z, one observation per measurement, so that repeats of a layout teach the GP its noise
// term (and a layout measured n times has its mean known to about noise / sqrt(n)); a sliced
// outcome has extra noise (sliced_noise_sd, in z's units).
void Proposer::FitGp(const Evidence& e, State* s) const {
  const Eigen::Index n = static_cast<Eigen::Index>(e.measured.size());
  s->log_time.resize(n);
  for (const Evidence::Measurement& m : e.measured) {
    s->log_time[static_cast<Eigen::Index>(s->observed.size())] = m.log_time;
    s->observed.push_back(m.index);
  }
  Eigen::MatrixXd x(n, x_.cols());
  Eigen::VectorXd u(n), residual(n);
  for (Eigen::Index k = 0; k < n; ++k) {
    const int i = s->observed[k];
    x.row(k) = x_.row(i);
    u[k] = feature_[i];
    residual[k] = s->log_time[k] - (options_.use_prior ? prior_log_time_[i] : 0.0);
  }
  s->scale = s->residual_scale = options_.prior_sd;
  if (n == 1) s->offset = residual[0];
  if (n >= 2) {
    s->offset = residual.mean();
    const double spread = (residual.array() - s->offset).square().mean();
    const double w = options_.scale_prior_weight, prior_variance = options_.prior_sd * options_.prior_sd;
    s->residual_scale = std::max(kMinResidualScale, std::sqrt(spread));
    s->scale = std::max(kMinResidualScale, std::sqrt((n * spread + w * prior_variance) / (n + w)));
  }
  s->random_design = !options_.use_prior && n < 2;
  Eigen::VectorXd z = (residual.array() - s->offset) / s->scale;
  Eigen::VectorXd extra;
  if (std::any_of(e.measured.begin(), e.measured.end(), [](const Evidence::Measurement& m) { return m.sliced; })) {
    extra.setZero(n);
    const double sd = options_.sliced_noise_sd / s->scale;
    for (Eigen::Index k = 0; k < n; ++k) {
      if (e.measured[static_cast<size_t>(k)].sliced) extra[k] = sd * sd;
    }
  }
  GpOptions gp = options_.gp;
  gp.seed = options_.seed;
  gp.use_feature = options_.use_prior;
  gp.prior.log_signal_sd = options_.signal_log_sd;
  InformNoisePrior(e, s->scale, &gp.prior);
  s->gp = GaussianProcess::Fit(std::move(x), std::move(u), std::move(z), gp, std::move(extra));
}

// What repeats say of the noise: the pooled variance of the log step times of layouts measured
// more than once (whole measurements only), with its degrees of freedom.
std::pair<double, int> Proposer::PooledNoise(const Evidence& e) {
  const std::vector<Evidence::Measurement>& measured = e.measured;
  double squares = 0;
  int df = 0;
  for (size_t a = 0; a < measured.size();) {
    size_t b = a;
    double sum = 0;
    int n = 0;
    for (; b < measured.size() && measured[b].index == measured[a].index; ++b) {
      if (measured[b].sliced) continue;
      sum += measured[b].log_time;
      ++n;
    }
    const double mean = n > 0 ? sum / n : 0;
    for (size_t k = a; k < b; ++k) {
      if (!measured[k].sliced) squares += (measured[k].log_time - mean) * (measured[k].log_time - mean);
    }
    df += std::max(0, n - 1);
    a = b;
  }
  return {df > 0 ? squares / df : 0.0, df};
}

// The GP's noise prior centred on the repeats' pooled noise (in z's units), as sure of it as
// its degrees of freedom make it (the log of a sample sd has sd about 1 / sqrt(2 df)); without
// repeats the default prior stands, and the noise is hardly told from the function.
void Proposer::InformNoisePrior(const Evidence& e, double scale, GpPrior* prior) const {
  const auto [variance, df] = PooledNoise(e);
  if (df < 1 || !(variance > 0)) return;
  prior->log_noise_mean = std::log(std::sqrt(variance) / scale);
  prior->log_noise_sd = std::min(prior->log_noise_sd, 1.0 / std::sqrt(2.0 * df));
}

// Layouts that crashed, hung or printed no metric taught nothing about speed, but they are not
// unexplored either: condition on them as if they had returned the surrogate's mean there, so
// the uncertainty (and the exploration it invites) collapses around them. (OOMs are left to the
// memory model: the best layouts often sit right below the limit.)
void Proposer::ConditionOnFailures(const std::vector<Outcome>& history, State* s) const {
  std::vector<int> failed;
  for (const Outcome& o : history) {
    const int i = IndexOf(o.layout);
    if (i < 0 || !IsFinished(o.status) || o.status == TrialStatus::kOk || o.status == TrialStatus::kOom) continue;
    if (std::find(s->observed.begin(), s->observed.end(), i) == s->observed.end() &&
        std::find(failed.begin(), failed.end(), i) == failed.end()) {
      failed.push_back(i);
    }
  }
  for (int i : failed) {
    Eigen::VectorXd mz, vz;
    s->gp.Predict(x_.row(i), feature_.segment(i, 1), &mz, &vz);
    s->gp.AddObservation(x_.row(i), feature_[i], mz[0]);
  }
}

// The incumbent: the surrogate's mean at the best measured layout (robust to noise). And the
// surrogate on every legal layout, predicted once here: Score reads it, and BelievePick's
// pseudo-observations update it by rank one instead of predicting again.
void Proposer::SetIncumbent(State* s) const {
  s->gp.Track(x_, feature_);
  const Eigen::Index n = static_cast<Eigen::Index>(s->observed.size());
  if (n == 0) return;
  Eigen::MatrixXd xo(n, x_.cols());
  Eigen::VectorXd uo(n), mz, vz;
  for (Eigen::Index k = 0; k < n; ++k) {
    xo.row(k) = x_.row(s->observed[k]);
    uo[k] = feature_[s->observed[k]];
  }
  s->gp.Predict(xo, uo, &mz, &vz);
  for (Eigen::Index k = 0; k < n; ++k) {
    const double prior = options_.use_prior ? prior_log_time_[s->observed[k]] : 0.0;
    s->best = std::min(s->best, prior + s->offset + s->scale * mz[k]);
  }
}

FeasibilityModel Proposer::Memory(const std::vector<Outcome>& history) const {
  return FeasibilityModel::Fit(options_.device_memory_bytes, Gather(history).memory, options_.feasibility);
}

Proposer::State Proposer::Fit(const std::vector<Outcome>& history) const {
  const Evidence evidence = Gather(history);
  State s;
  s.tried = evidence.tried;
  const FeasibilityModel memory =
      FeasibilityModel::Fit(options_.device_memory_bytes, evidence.memory, options_.feasibility);
  const std::vector<double> fits = MemoryFeasibility(memory, evidence, &s);
  s.runs = RunProbability(history);
  s.feasibility.resize(legal_.size());
  for (size_t i = 0; i < legal_.size(); ++i) s.feasibility[i] = fits[i] * s.runs[i];
  FitGp(evidence, &s);
  ConditionOnFailures(history, &s);
  SetIncumbent(&s);
  return s;
}

void Proposer::Score(const State& s, std::vector<double>* mean, std::vector<double>* sd) const {
  Eigen::VectorXd mz, vz;
  if (s.gp.tracking()) {
    s.gp.TrackedPosterior(&mz, &vz);
  } else {
    s.gp.Predict(x_, feature_, &mz, &vz);
  }
  mean->resize(legal_.size());
  sd->resize(legal_.size());
  for (size_t i = 0; i < legal_.size(); ++i) {
    const double prior = options_.use_prior ? prior_log_time_[i] : 0.0;
    (*mean)[i] = prior + s.offset + s.scale * mz[i];
    (*sd)[i] = s.scale * std::sqrt(vz[i]);
  }
}

Proposal Proposer::MakeProposal(size_t i, double mean, double sd, double feasibility, double acquisition) const {
  Proposal p;
  p.layout = legal_[i];
  p.predicted_step_time_s = std::exp(mean);
  p.predicted_tokens_per_s = options_.tokens_per_step > 0 ? options_.tokens_per_step / p.predicted_step_time_s : 0;
  p.uncertainty = sd;
  p.feasibility = feasibility;
  p.acquisition = acquisition;
  return p;
}

// Without the model's times and fewer than two measurements there is nothing to rank by: draw
// uniformly among the untried layouts likely to fit (all untried when none is).
std::vector<Proposal> Proposer::RandomDesign(const State& s, const std::vector<double>& mean,
                                             const std::vector<double>& sd, size_t history_size, int q) const {
  std::vector<size_t> pool;
  for (size_t i = 0; i < legal_.size(); ++i) {
    if (!s.tried[i] && s.feasibility[i] >= 0.5) pool.push_back(i);
  }
  if (pool.empty()) {
    for (size_t i = 0; i < legal_.size(); ++i) {
      if (!s.tried[i]) pool.push_back(i);
    }
  }
  std::vector<Proposal> out;
  std::mt19937_64 rng(options_.seed * 0x9e3779b97f4a7c15ULL + history_size);
  for (int k = 0; k < q && !pool.empty(); ++k) {
    const size_t pick = std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng);
    out.push_back(MakeProposal(pool[pick], mean[pool[pick]], sd[pool[pick]], s.feasibility[pool[pick]], 0.0));
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(pick));
  }
  return out;
}

// Only layouts likely to fit and run compete: at least kLikelyToRun, or 0.8 of the best
// untried one's probability when none is that likely, so that a layout very likely to run out
// of memory or crash never wins on its expected improvement alone. Until some trial has run ok
// and once one has failed, finding one that does comes first (constrained BO's rule, Gelbart et
// al. 2014): the floor is 0.8 of the best however likely that is.
double Proposer::FeasibilityFloor(const State& s, const std::vector<Outcome>& history) const {
  double max_feasibility = 0;
  for (size_t i = 0; i < legal_.size(); ++i) {
    if (!s.tried[i]) max_feasibility = std::max(max_feasibility, s.feasibility[i]);
  }
  const bool any_failure = std::any_of(history.begin(), history.end(), [](const Outcome& o) {
    return IsFinished(o.status) && o.status != TrialStatus::kOk;
  });
  if (s.observed.empty() && any_failure) return 0.8 * max_feasibility;
  return std::min(kLikelyToRun, 0.8 * max_feasibility);
}

// A layout's acquisition: log EI (or minus the lower confidence bound) plus log feasibility.
double Proposer::Acquisition(const State& s, double mean, double sd, double feasibility) const {
  const double log_p = std::log(std::max(feasibility, 1e-300));
  return options_.acquisition == AcquisitionKind::kLogExpectedImprovement
             ? LogExpectedImprovement(mean, sd, s.best) + log_p
             : -LowerConfidenceBound(mean, sd, options_.ucb_beta) + log_p;
}

// The untried layout with the best acquisition among those at or above the floor; -1 when none
// is left.
int Proposer::BestAcquisition(const State& s, const std::vector<double>& mean, const std::vector<double>& sd,
                              double min_feasibility, double* score) const {
  int chosen = -1;
  double chosen_score = -kInf;
  for (size_t i = 0; i < legal_.size(); ++i) {
    if (s.tried[i] || s.feasibility[i] < min_feasibility) continue;
    const double value = Acquisition(s, mean[i], sd[i], s.feasibility[i]);
    if (value > chosen_score || chosen < 0) {
      chosen = static_cast<int>(i);
      chosen_score = value;
    }
  }
  *score = chosen_score;
  return chosen;
}

// Whether the search may still probe past the predicted memory limit: probes left of
// max_probes (pending ones count), and the probes so far fitted at least as often as they ran
// out of memory. So a model that is right or low about memory costs at most one OOM probe more
// than the probes that fitted, and one that is high keeps probing while probing pays. A probe
// counts once per layout (a probe run again, by its node or another, has two records), by its
// last outcome.
bool Proposer::ProbesLeft(const std::vector<Outcome>& history) const {
  if (options_.device_memory_bytes <= 0) return false;
  std::map<std::string, TrialStatus> probes;
  for (const Outcome& o : history) {
    if (o.probe) probes[LayoutKey(o.layout)] = o.status;
  }
  int spent = static_cast<int>(probes.size()), fitted = 0, ran_out = 0;
  for (const auto& [key, status] : probes) {
    fitted += status == TrialStatus::kOk ? 1 : 0;
    ran_out += status == TrialStatus::kOom ? 1 : 0;
  }
  return spent < options_.max_probes && ran_out <= fitted;
}

// The probe past the predicted memory limit worth its risk, or -1. Candidates: the untried
// layouts the memory model calls unlikely to fit (below the floor), not condemned by an OOM,
// likely to run otherwise, whose expected excess over the device's memory is within kProbeReach
// sds of the memory model's uncertainty, whose surrogate mean beats the best layout likely to
// fit (measured or not), and whose acquisition (expected improvement times the probability of
// fitting) beats the best layout's above the floor: they would win but for the floor. Of those,
// the one with the smallest excess per gain: the most likely to fit for what it promises. Only
// once a trial has run ok: the surrogate's gains mean nothing before. Probe and rivals are
// weighed with the residuals' own spread (State::residual_scale), not the scale widened by
// prior_sd: that widening buys exploration among the layouts likely to fit, and would price every
// far one above a probe whose promise is its mean.
int Proposer::ProbeCandidate(const State& s, const std::vector<double>& mean, const std::vector<double>& wide_sd,
                             double min_feasibility) const {
  if (s.observed.empty()) return -1;
  std::vector<double> sd(wide_sd);
  for (double& v : sd) v *= s.residual_scale / s.scale;
  double regular = -kInf;
  if (BestAcquisition(s, mean, sd, min_feasibility, &regular) < 0) regular = -kInf;
  double best_feasible = s.best;
  for (size_t i = 0; i < legal_.size(); ++i) {
    if (!s.tried[i] && s.feasibility[i] >= min_feasibility) best_feasible = std::min(best_feasible, mean[i]);
  }
  int chosen = -1;
  double chosen_ratio = kInf;
  for (size_t i = 0; i < legal_.size(); ++i) {
    if (s.tried[i] || s.condemned[i] || s.feasibility[i] >= min_feasibility || s.runs[i] < kLikelyToRun) continue;
    const double gain = best_feasible - mean[i];
    const MemoryMargin& m = s.margin[i];
    if (gain <= 0 || m.log_excess > kProbeReach * m.sd) continue;
    if (Acquisition(s, mean[i], sd[i], s.feasibility[i]) <= regular) continue;
    const double ratio = std::max(m.log_excess, 0.0) / gain;
    if (ratio < chosen_ratio) {
      chosen = static_cast<int>(i);
      chosen_ratio = ratio;
    }
  }
  return chosen;
}

// The Kriging believer: pretend the pick returned the surrogate's mean, and score again.
void Proposer::BelievePick(int chosen, State* s, std::vector<double>* mean, std::vector<double>* sd) const {
  const double prior = options_.use_prior ? prior_log_time_[chosen] : 0.0;
  s->gp.AddObservation(x_.row(chosen), feature_[chosen], ((*mean)[chosen] - prior - s->offset) / s->scale);
  s->best = std::min(s->best, (*mean)[chosen]);
  Score(*s, mean, sd);
}

std::pair<double, int> Proposer::RepeatNoise(const std::vector<Outcome>& history) const {
  const auto [variance, df] = PooledNoise(Gather(history));
  return {std::sqrt(variance), df};
}

// An upper 90% bound on the noise sd from a pooled variance with `df` degrees of freedom
// (variance x df / the chi-square's 10% quantile, by Wilson-Hilferty): a handful of repeats that
// happen to agree must not make a gap look certain.
double UpperNoiseSd(double variance, int df) {
  if (df < 1) return 0;
  const double a = 2.0 / (9.0 * df);
  const double quantile = df * std::pow(std::max(1e-3, 1.0 - a - 1.2816 * std::sqrt(a)), 3);
  return std::sqrt(variance * df / quantile);
}

Standing Proposer::Stand(const std::vector<Outcome>& history, double confidence) const {
  const State s = Fit(history);
  Standing out;
  if (s.observed.empty() || s.random_design) return out;
  std::vector<double> mean, sd;
  Score(s, &mean, &sd);
  std::map<int, int> count;  // measurements per measured layout
  for (int i : s.observed) ++count[i];
  const auto [pooled, degrees_of_freedom] = PooledNoise(Gather(history));
  out.noise_sd = std::max(s.scale * std::sqrt(s.gp.noise_variance()), std::sqrt(pooled));
  // A measured layout's uncertainty: the surrogate's, but never below what its own measurements
  // allow (the upper noise bound over the root of their number): the surrogate's smoothness
  // lends certainty that a rugged machine does not have.
  // (With fewer repeats than that, the leaders are measured again anyway, and the bound of one
  // or two degrees of freedom is too loose to say anything.)
  out.noise_degrees_of_freedom = degrees_of_freedom;
  const double noise = degrees_of_freedom >= kNoiseDegreesOfFreedom
                           ? std::max(out.noise_sd, UpperNoiseSd(pooled, degrees_of_freedom))
                           : out.noise_sd;
  // Until a layout is measured twice its own measurements say nothing of the noise: its
  // uncertainty is at least the study's pooled noise of repeats, or before any repeat the prior.
  const double single_floor = degrees_of_freedom > 0 ? std::sqrt(pooled) : kPriorNoiseSd;
  auto uncertainty = [&](int i) {
    const double u = std::max(sd[i], noise / std::sqrt(count[i]));
    return count[i] < 2 ? std::max(u, single_floor) : u;
  };
  int best = -1;
  for (const auto& [i, n] : count) {
    if (best < 0 || mean[i] < mean[best]) best = i;
  }
  out.best = legal_[best];
  out.log_step_time = mean[best];
  out.sd = uncertainty(best);
  out.measurements = count[best];
  int runner_up = -1;
  double closest = kInf;
  for (const auto& [i, n] : count) {
    if (i == best) continue;
    const double z = (mean[i] - mean[best]) / std::hypot(uncertainty(i), out.sd);
    out.probability_best *= NormalCdf(z);
    if (z < closest) {
      closest = z;
      runner_up = i;
    }
  }
  if (runner_up < 0) return out;
  out.runner_up = legal_[runner_up];
  // Until repeats give the noise a few degrees of freedom, it is hardly told from real
  // differences: measure the leaders again in turn first; then whichever of the two is less
  // certain, while the best is not clearly the fastest.
  if (degrees_of_freedom < kNoiseDegreesOfFreedom) {
    out.remeasure = legal_[count[best] <= count[runner_up] ? best : runner_up];
  } else if (out.probability_best < confidence) {
    out.remeasure = legal_[uncertainty(runner_up) > out.sd ? runner_up : best];
  }
  return out;
}

std::vector<Proposal> Proposer::Propose(const std::vector<Outcome>& history, int q) const {
  State s = Fit(history);
  std::vector<double> mean, sd;
  Score(s, &mean, &sd);
  if (s.random_design) return RandomDesign(s, mean, sd, history.size(), q);
  // Without a measurement, the incumbent is the best layout the model expects to fit.
  if (!std::isfinite(s.best)) {
    double any = kInf;
    for (size_t i = 0; i < legal_.size(); ++i) {
      any = std::min(any, mean[i]);
      if (s.feasibility[i] >= 0.5) s.best = std::min(s.best, mean[i]);
    }
    if (!std::isfinite(s.best)) s.best = any;
  }
  // Layouts running (on other nodes) are pending: believed at their posterior mean, like a
  // batch's own picks, so that nodes spread instead of crowding one region.
  for (const Outcome& o : history) {
    const int i = o.status == TrialStatus::kRunning ? IndexOf(o.layout) : -1;
    if (i >= 0) BelievePick(i, &s, &mean, &sd);
  }
  const double min_feasibility = FeasibilityFloor(s, history);
  std::vector<Proposal> out;
  const int probe = q > 0 && ProbesLeft(history) ? ProbeCandidate(s, mean, sd, min_feasibility) : -1;
  if (probe >= 0) {
    out.push_back(MakeProposal(static_cast<size_t>(probe), mean[probe], sd[probe], s.feasibility[probe],
                               Acquisition(s, mean[probe], sd[probe], s.feasibility[probe])));
    out.back().probe = true;
    s.tried[probe] = 1;
    if (q > 1) BelievePick(probe, &s, &mean, &sd);
  }
  for (int k = static_cast<int>(out.size()); k < q; ++k) {
    double score = 0;
    const int chosen = BestAcquisition(s, mean, sd, min_feasibility, &score);
    if (chosen < 0) break;
    out.push_back(MakeProposal(static_cast<size_t>(chosen), mean[chosen], sd[chosen], s.feasibility[chosen], score));
    s.tried[chosen] = 1;
    if (k + 1 < q) BelievePick(chosen, &s, &mean, &sd);
  }
  return out;
}

Surrogate Proposer::Posterior(const std::vector<Outcome>& history) const {
  const State s = Fit(history);
  Surrogate out;
  Score(s, &out.log_step_time, &out.sd);
  out.feasibility = s.feasibility;
  out.measured = !s.observed.empty();
  out.incumbent = s.best;
  return out;
}

// Stops only when the search is very likely done: when the probability that *some* untried
// layout beats the best measured step time by more than `gain` is below `probability`. The rule
// before (the single most promising layout below `probability`) stopped after a median of 3
// trials, and in bench/search_bench.cc named a layout above 2% regret there in 35 of 240 runs
// (in 6 of 72 runs of an earlier version, where going on would have reached 2%); it ignored
// three things, which this one counts.
//  - Jointly, not one layout at a time: P(some layout improves) <= sum_i P(i improves) (the union
//    bound) over every untried layout, each weighted by its probability of fitting and running.
//    A thousand layouts at 1% each are not "done".
//  - The surrogate's residual scale is estimated from its n measurements, not known:
//    integrated out (scaled inverse-chi^2 posterior, Jeffreys prior; Gelman et al., Bayesian Data
//    Analysis, 3.2) the normal predictive becomes a Student-t with n - 1 degrees of freedom, so a
//    few measurements that happen to agree with the model do not make it look certain everywhere.
//  - A knob value no ok trial has had (pp 8 when only pp 2 and 4 ran, a recomputation never
//    measured) is priced by extrapolation alone: the model's predicted change from the nearest
//    measured layout to such a layout is trusted only to within half (the model errs in
//    proportion to the terms a knob moves: a knob it says barely matters here moves little
//    physics), up to kLargestUncheckedChange. The layouts sharing an unmeasured value share its
//    unknown effect and move together, so each value counts once, by its most promising layout.
StopAdvice Proposer::Advise(const std::vector<Outcome>& history, double gain, double probability) const {
  constexpr double kUncheckedChangeShare = 0.5;     // sd of a predicted change no trial checked, as its share
  constexpr double kLargestUncheckedChange = 0.1;   // log step time: that sd is at most 0.05
  const int knobs = NumKnobs();
  const State s = Fit(history);
  StopAdvice advice;
  if (s.observed.empty() || s.random_design) return advice;  // nothing measured to improve on yet
  std::vector<double> mean, sd;
  Score(s, &mean, &sd);
  const double target = s.best - std::log1p(gain);
  // P(T <= x) for Student's t with nu degrees of freedom (Abramowitz & Stegun 26.7.3-4): with
  // theta = atan(|x| / sqrt nu), c = cos theta, A = sin theta sum_j b_j c^2j (nu even) or
  // (2/pi)(theta + sin theta c sum_j a_j c^2j) (nu odd), P = (1 +- A) / 2. With one measurement the
  // scale is the prior's, not estimated: the normal.
  const int nu = static_cast<int>(s.observed.size()) - 1;
  auto cdf = [nu](double x) {
    if (nu < 1 || nu > 400) return NormalCdf(x);
    const double theta = std::atan(std::abs(x) / std::sqrt(static_cast<double>(nu)));
    const double c2 = std::cos(theta) * std::cos(theta);
    double sum = 1, term = 1, a = 0;
    if (nu % 2 == 0) {
      for (int j = 1; 2 * j <= nu - 2; ++j) sum += (term *= c2 * (2.0 * j - 1) / (2.0 * j));
      a = std::sin(theta) * sum;
    } else {
      for (int j = 1; 2 * j <= nu - 3; ++j) sum += (term *= c2 * (2.0 * j) / (2.0 * j + 1));
      a = nu == 1 ? 2 * theta / M_PI : 2 / M_PI * (theta + std::sin(theta) * std::cos(theta) * sum);
    }
    return x >= 0 ? 0.5 * (1 + a) : 0.5 * (1 - a);
  };
  auto knob_values = [knobs](const Layout& l) {  // dp and the micro-batch count follow from these
    std::vector<int> codes(knobs);
    for (int k = 0; k < knobs; ++k) codes[k] = KnobCode(static_cast<Knob>(k), l);
    return codes;
  };
  std::set<std::pair<int, int>> measured;  // (knob, value) of some ok trial
  for (int i : s.observed) {
    const std::vector<int> v = knob_values(legal_[i]);
    for (int k = 0; k < knobs; ++k) measured.insert({k, v[k]});
  }
  double joint = 0;
  std::map<std::pair<int, int>, double> unmeasured;  // (knob, value) -> its most promising layout's P
  int best_index = -1;
  for (size_t i = 0; i < legal_.size(); ++i) {
    if (s.tried[i]) continue;
    const std::vector<int> v = knob_values(legal_[i]);
    bool explored = true;
    for (int k = 0; k < knobs; ++k) explored = explored && measured.count({k, v[k]}) > 0;
    double spread = sd[i];
    if (!explored) {
      double nearest_d2 = kInf, change = 0;
      for (int j : s.observed) {
        const double d2 = (x_.row(static_cast<Eigen::Index>(i)) - x_.row(j)).squaredNorm();
        if (d2 < nearest_d2) {
          nearest_d2 = d2;
          change = std::abs(prior_log_time_[static_cast<Eigen::Index>(i)] - prior_log_time_[j]);
        }
      }
      const double unchecked = kUncheckedChangeShare * std::min(change, kLargestUncheckedChange);
      spread = std::sqrt(spread * spread + unchecked * unchecked);
    }
    const double p = s.feasibility[i] *
                     (spread > 0 ? cdf((target - mean[i]) / spread) : (mean[i] < target ? 1.0 : 0.0));
    if (explored) joint += p;
    for (int k = 0; k < knobs && !explored; ++k) {
      if (measured.count({k, v[k]}) == 0) unmeasured[{k, v[k]}] = std::max(unmeasured[{k, v[k]}], p);
    }
    if (p > advice.best_probability || best_index < 0) {
      advice.best_probability = p;
      best_index = static_cast<int>(i);
    }
  }
  for (const auto& [value, p] : unmeasured) joint += p;
  if (best_index >= 0) advice.most_promising = legal_[best_index];
  advice.stop = joint < probability;
  return advice;
}

}  // namespace tunepar::search
