// The Bayesian proposer: which layouts to try next, given the legal set and what the trials so
// far measured.
//
// The surrogate is a Gaussian process on log step time whose prior mean is the performance
// model's prediction (GaussianProcess learns an affine correction of it plus a Matern residual),
// so the search starts from the model's view of the landscape and spends trials on where the
// model is wrong; how wrong (the residual scale) is learned from the measurements with the
// prior's prior_sd counted as one more, so a few that agree do not end the exploration. Every untried legal layout is scored exactly (the legal set is finite) by
// log expected improvement (or a lower confidence bound) times the probability that it fits in
// memory and runs (FeasibilityModel: predicted memory corrected by the observed OOMs, refined
// near each finished trial by whether it ran, fitted or failed). Batches of q use
// the Kriging believer: each pick is conditioned on as if it had returned the posterior mean,
// which lowers the uncertainty around it and spreads the batch; hyper-parameters stay fixed
// within a batch. With no measurement yet, the first picks are the model's best layouts that
// are likely to fit, spread the same way. A sliced outcome (measured on part of the world, the
// rest estimated by the model) counts with extra noise. A layout below the feasibility floor
// that would win but for it may be proposed as a probe past the predicted memory limit (at most
// max_probes, while probes fit at least as often as they run out: Proposer::ProbeCandidate).
// Everything is deterministic for a seed and history.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <Eigen/Dense>

#include "search/encoding.h"
#include "search/feasibility.h"
#include "search/gaussian_process.h"
#include "base/layout.h"
#include "base/trial_status.h"

namespace tunepar::search {

// What the performance model says about a layout (search/ receives the model as a function).
struct PriorPrediction {
  double step_time_s = 0;
  double memory_bytes = 0;
  MemoryComponents memory_components{};  // its breakdown (all zero: none given)
};
using PriorModel = std::function<PriorPrediction(const Layout&)>;

enum class AcquisitionKind { kLogExpectedImprovement, kUpperConfidenceBound };

struct ProposerOptions {
  AcquisitionKind acquisition = AcquisitionKind::kLogExpectedImprovement;
  double ucb_beta = 2.0;           // LCB = mean - beta sd on log step time
  bool use_prior = true;           // false: a constant prior mean (the model's time is ignored)
  double device_memory_bytes = 0;  // 0: every layout is assumed to fit
  double tokens_per_step = 0;      // to report throughput; 0: not reported
  double prior_sd = 0.3;           // trust in the model before any measurement (log step time)
  // The residual scale (how far the model is off, log step time) is estimated from the
  // measurements with prior_sd worth this many of them: two or three that agree with the model
  // (layouts near its optimum, off by one shared factor) must not make it look right to 3%
  // everywhere, or the search never leaves the model's favourite region.
  double scale_prior_weight = 1.0;
  // The GP's signal amplitude in units of that scale: log-normal around 1 with this sd, so that
  // the scale, not a shrinking amplitude, says how far the model is trusted away from the data.
  double signal_log_sd = 0.3;
  // Crashes, hangs and unreadable output have no model: a finished trial informs whether the
  // layouts near it run (a Gaussian kernel on the encoded distance), counting like `weight`
  // observations at its own layout against the prior's one. (Memory has a model: feasibility.h,
  // with the evidence of physics, Proposer::MemoryFeasibility.)
  double failure_lengthscale = 0.7;
  double failure_weight = 5.0;
  double prior_run_probability = 0.95;  // that a layout which fits runs (no crash, hang, bad output)
  // Extra noise of a sliced outcome, as a standard deviation of log step time: the model's share
  // of the data-parallel communication may be off by about this much.
  double sliced_noise_sd = 0.1;
  // Trials the search may spend on layouts the memory model calls unlikely to fit, when they
  // promise enough to be worth the risk (a probe past the predicted limit; 0: never).
  int max_probes = 4;
  uint64_t seed = 0;
  GpOptions gp;
  FeasibilityOptions feasibility;
};

// A finished trial as the proposer sees it.
struct Outcome {
  Layout layout;
  TrialStatus status = TrialStatus::kOk;
  std::optional<double> step_time_s;  // for ok trials
  // Measured on a slice of the world, with the model's estimate of the rest added: less certain
  // than a whole measurement (ProposerOptions::sliced_noise_sd).
  bool sliced = false;
  // The peak device memory it measured: exact for an ok trial, a lower bound for an OOM.
  std::optional<double> peak_memory_bytes;
  // Proposed as a probe past the predicted memory limit (counts against max_probes).
  bool probe = false;
};

struct Proposal {
  Layout layout;
  double predicted_step_time_s = 0;   // the surrogate's posterior mean
  double predicted_tokens_per_s = 0;  // tokens_per_step / step time (0 when not reported)
  double uncertainty = 0;             // posterior standard deviation of log step time
  double feasibility = 1;             // probability that it fits in memory and runs
  double acquisition = 0;             // log EI + log feasibility, or log(feasibility exp(-LCB))
  // A probe past the predicted memory limit: the memory model thinks it unlikely to fit, and it
  // promises more than the best layout that is likely to (ProposerOptions::max_probes).
  bool probe = false;
};

// The surrogate's view of every legal layout after some history (for reports and Shapley values).
struct Surrogate {
  std::vector<double> log_step_time;  // posterior mean of the log step time (or the objective)
  std::vector<double> sd;             // its posterior standard deviation
  std::vector<double> feasibility;    // probability of fitting and running
  bool measured = false;              // false: no ok trial yet, the model's prior alone
  // The log step time an improvement is measured against: the surrogate's mean at the best
  // measured layout (infinite before any ok trial).
  double incumbent = 0;
};

// Which measured layout is the fastest, how sure the surrogate is, and whether to measure a
// leading layout again before naming it (a confirmation trial). Log step times are the
// surrogate's posterior of the layout's true (noise-free) value.
struct Standing {
  std::optional<Layout> best;    // the measured layout with the lowest posterior mean (none measured: nullopt)
  double log_step_time = 0;      // its posterior mean ...
  double sd = 0;                 // ... and standard deviation (relative uncertainty of its step time)
  int measurements = 0;          // its ok measurements
  double noise_sd = 0;           // the fitted noise of one measurement (log step time)
  int noise_degrees_of_freedom = 0;  // the repeats it was learned from (measurements beyond each layout's first)
  // P(no other measured layout is faster), the contenders taken as independent.
  double probability_best = 1;
  std::optional<Layout> runner_up;  // the contender most likely to be faster
  // Measure this layout again (the best or the runner-up, whichever is less certain), unless
  // probability_best reaches the confidence asked for.
  std::optional<Layout> remeasure;
};

struct StopAdvice {
  bool stop = false;
  double best_probability =
      0;  // the highest feasibility x P(throughput > best x (1 + gain)) of any untried layout
  std::optional<Layout> most_promising;
};

class Proposer {
 public:
  Proposer(std::vector<Layout> legal, const PriorModel& prior, ProposerOptions options);

  // Up to q distinct untried layouts (fewer when fewer are left), best first.
  std::vector<Proposal> Propose(const std::vector<Outcome>& history, int q) const;

  // Whether any untried layout can still improve the best measured throughput by more than
  // `gain` (e.g. 0.02) with probability at least `probability`.
  StopAdvice Advise(const std::vector<Outcome>& history, double gain, double probability) const;

  // The fastest measured layout, with its uncertainty, and the confirmation trial to run when
  // probability_best < `confidence`.
  Standing Stand(const std::vector<Outcome>& history, double confidence) const;

  // The memory model fitted to `history`'s peaks, OOMs and ok trials (its multipliers are what
  // the trials taught about the performance model's memory).
  FeasibilityModel Memory(const std::vector<Outcome>& history) const;

  // The surrogate fitted to `history`, evaluated on every legal layout.
  Surrogate Posterior(const std::vector<Outcome>& history) const;

  size_t size() const { return legal_.size(); }
  const std::vector<Layout>& legal() const { return legal_; }
  // Index of a layout in the legal set, or -1.
  int IndexOf(const Layout& layout) const;

  // The spread of repeated measurements: the pooled sd of log step time over layouts measured
  // more than once (whole measurements), with its degrees of freedom (0: no repeat).
  std::pair<double, int> RepeatNoise(const std::vector<Outcome>& history) const;

 private:
  struct State;     // the fitted surrogate for one history
  struct Evidence;  // what a history says, per legal layout
  State Fit(const std::vector<Outcome>& history) const;
  Evidence Gather(const std::vector<Outcome>& history) const;
  void FitGp(const Evidence& evidence, State* state) const;
  void InformNoisePrior(const Evidence& evidence, double scale, GpPrior* prior) const;
  static std::pair<double, int> PooledNoise(const Evidence& evidence);
  void ConditionOnFailures(const std::vector<Outcome>& history, State* state) const;
  void SetIncumbent(State* state) const;
  Proposal MakeProposal(size_t index, double mean, double sd, double feasibility, double acquisition) const;
  std::vector<Proposal> RandomDesign(const State& state, const std::vector<double>& mean, const std::vector<double>& sd,
                                     size_t history_size, int q) const;
  double FeasibilityFloor(const State& state, const std::vector<Outcome>& history) const;
  double Acquisition(const State& state, double mean, double sd, double feasibility) const;
  int BestAcquisition(const State& state, const std::vector<double>& mean, const std::vector<double>& sd,
                      double min_feasibility, double* score) const;
  void BelievePick(int chosen, State* state, std::vector<double>* mean, std::vector<double>* sd) const;
  std::vector<double> MemoryFeasibility(const FeasibilityModel& memory, const Evidence& evidence, State* state) const;
  bool ProbesLeft(const std::vector<Outcome>& history) const;
  int ProbeCandidate(const State& state, const std::vector<double>& mean, const std::vector<double>& sd,
                     double min_feasibility) const;
  std::vector<double> RunProbability(const std::vector<Outcome>& history) const;
  void Score(const State& state, std::vector<double>* mean, std::vector<double>* sd) const;

  std::vector<Layout> legal_;
  ProposerOptions options_;
  LayoutEncoder encoder_;
  Eigen::MatrixXd x_;               // encoded legal layouts, one per row
  Eigen::VectorXd prior_log_time_;  // log of the model's step time
  Eigen::VectorXd feature_;         // the prior, centred and scaled: the GP's linear feature
  std::vector<MemoryComponents> memory_;  // the prior's memory breakdown of each legal layout
  std::unordered_map<std::string, int> index_;
  // The encoded coordinates split in two, for RunProbability's kernel (a product over them): the
  // distinct tuples of the leading coordinates (heads_) and of the rest (tails_), one per row,
  // and which of them each legal layout has.
  Eigen::MatrixXd heads_, tails_;
  std::vector<int> head_of_, tail_of_;
};

}  // namespace tunepar::search
