// How many trials the Bayesian search needs to find a near-best layout, against peers, on truth
// functions it does not see (not a test: it prints tables and writes CSV).
//
// Truths (bench/truth.h, bench/measured_truth.h): on gpt-22b at 256 GCDs, gpt-175b at 1024 and
// gpt-1t at 3072 (frontier-mi250x, default space), a hidden machine per seed (every efficiency
// and bandwidth of the profile scaled by a log-uniform factor in [0.5, 2]) whose time or memory
// is, in all but the `model` truth, changed in structure (activations x1.6, a fixed overhead,
// random per-component memory factors, unoverlapped data-parallel communication, a GEMM
// efficiency curve of another shape, a larger pipeline bubble); or, on gpt-22b, gpt-175b and
// gpt-175b at 1024 on dgx-a100 (issue 31's case), whose memory is lower than the model's
// (gradients sharded over dp, activations x0.6, a smaller margin than the profile reserves: each
// once with trials that print their peak memory, once as NAME-nopeak without); 2%
// multiplicative noise on every measured step time. And a measured truth: tunepar-core on every
// layout of the small model at world 8 on this machine (bench/data/core-w8-small.csv), replayed
// with the noise its repeated runs showed. Layouts that do not fit are OOM trials (they count: they were
// launched). The optimum is known by exhaustive evaluation.
//
// tunepar sees only the performance model with the nominal profile (for the measured truth:
// local-cpu with the 8 ranks on one node) and the outcomes: status, a measured step time and
// peak memory for ok trials (none on the -nopeak truths); for an OOM, the peak where the run
// stopped when the program reports it (tunepar-core does; the model truths play a framework that
// does not).
//
//   search_bench truths DIR [--seeds N] [--structure-seeds M] [--core-truth CSV] [--only RE]
//       the truths, for the peers: DIR/truth_<problem>_<truth>_<seed>.csv (N seeds for the
//       `model` truth, M for the others and the measured one); prints, per truth, where its
//       optimum lies for tunepar's memory model (predicted / device memory, true / predicted)
//   search_bench run DIR [--seeds N] [--structure-seeds M] [--budget K] [--core-truth CSV] [--only RE]
//       on the same truths, tunepar (with and without the model prior, and the early stop) and
//       random search: DIR/curves_<method>_<problem>_<truth>.csv (per trial: regret, regret of
//       the truly best layout tried, status, whether the layout was tried before, whether it was
//       a probe past the predicted memory limit) and DIR/stops_<problem>_<truth>.csv (where
//       `--early-stop 0.02` would have stopped); --only: the cases ("problem truth") the regular
//       expression finds
//   search_bench report DIR     tables from every DIR/curves_*.csv (the Python peers write
//                               theirs there too) and DIR/stops_*.csv
//   search_bench latency        the time of one proposal on gpt-1t at 3072 after 30, 100 and 300
//                               observations with 0, 8 and 32 pending trials, against a fixed
//                               reference computation timed in the same run
//
// bench/search_benchmark.sh runs all three with the peers (Optuna TPE, scikit-learn GP + EI).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bench/measured_truth.h"
#include "bench/truth.h"
#include "base/knobs.h"
#include "runner/performance_model.h"
#include "search/proposer.h"
#include "search/space.h"
#include "tuner/study/problem.h"
#include "tuner/study/study_context.h"

namespace {

using namespace tunepar;
using bench::Truth;
namespace fs = std::filesystem;

template <typename T>
T OrDie(Result<T> r) {
  if (!r.ok()) {
    fmt::print(stderr, "search_bench: {}\n", r.status().message());
    std::exit(1);
  }
  return std::move(r).value();
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / v.size();
}

struct ProblemSpec {
  std::string name, model;
  int world;
  std::string hardware = "frontier-mi250x";
  bool existing = true;      // the truths of bench::Structures()
  bool lower_memory = true;  // those of bench::LowerMemoryStructures(), with and without peaks
};
const std::vector<ProblemSpec> kProblems = {
    {"gpt-22b@256", "gpt-22b", 256},
    {"gpt-175b@1024", "gpt-175b", 1024},
    // Not the lower-memory truths: the slowest problem to search, and its optima lie as gpt-175b's.
    {"gpt-1t@3072", "gpt-1t", 3072, "frontier-mi250x", true, false},
    // Issue 31's case: an A100 cluster whose fastest layouts needed less memory than predicted.
    {"gpt-175b@1024-a100", "gpt-175b", 1024, "dgx-a100", false, true},
    // Issue 33: a Llama-style shape (GQA 64/8, SwiGLU, rotary, RMSNorm, untied) on LUMI-G, with
    // the structural truths: the tuner must find its optima as it does a GPT's.
    {"llama3-70b@1024", "llama3-70b", 1024, "lumi-g", true, false}};
// The measured problem: tunepar-core's small model at world 8, all ranks on this machine.
const ProblemSpec kCoreProblem = {"core-small@8", "small", 8};

// A truth as a search sees it: the hidden machine's structure, and whether its trials print
// their peak memory (the lower-memory truths run twice: with peaks, and as `NAME-nopeak`
// without, as many training programs print no memory figure).
struct TruthCase {
  bench::Structure structure;
  std::string name;  // no '_' (file names are split on it)
  bool peaks = true;
};
std::vector<TruthCase> TruthCases(const ProblemSpec& spec) {
  std::vector<TruthCase> cases;
  if (spec.existing) {
    for (const bench::StructureName& s : bench::Structures()) cases.push_back({s.structure, s.name});
  }
  if (!spec.lower_memory) return cases;
  for (const bench::StructureName& s : bench::LowerMemoryStructures()) {
    cases.push_back({s.structure, s.name});
    cases.push_back({s.structure, std::string(s.name) + "-nopeak", false});
  }
  return cases;
}
constexpr char kMeasuredTruth[] = "measured";
// The CLI's defaults for --early-stop GAIN and --early-stop-probability.
constexpr double kStopGain = 0.02, kStopProbability = 0.05;
// OOM and duplicated trials are counted in the first kFixedRun trials.
constexpr int kFixedRun = 30;

// One search on one truth: per trial, the simple regret after it (1 - true throughput of the
// best-measured layout / optimum, the same for every method), the regret of the truly best
// layout tried so far (what a noise-free measurement would have picked), whether it ran out of
// memory, whether it measured a layout again (a duplicate, or one of tunepar's deliberate
// confirmation trials), and whether it was a probe past the predicted memory limit.
enum class Repeat { kNew = 0, kDuplicate = 1, kConfirmation = 2 };
class SearchRecord {
 public:
  explicit SearchRecord(const Truth& truth) : truth_(&truth), tried_(truth.step.size(), 0) {}
  void Record(int index, bool ok, double measured_step, bool confirmation = false, bool probe = false) {
    if (ok && measured_step < best_measured_) {
      best_measured_ = measured_step;
      incumbent_ = index;
    }
    if (ok && (best_tried_ < 0 || truth_->step[index] < truth_->step[best_tried_])) best_tried_ = index;
    regret_.push_back(RegretOf(incumbent_));
    tried_regret_.push_back(RegretOf(best_tried_));
    oom_.push_back(!ok);
    probe_.push_back(probe);
    repeat_.push_back(!tried_[index] ? Repeat::kNew
                      : confirmation ? Repeat::kConfirmation
                                     : Repeat::kDuplicate);
    tried_[index] = 1;
  }
  const std::vector<double>& regret() const { return regret_; }
  const std::vector<double>& tried_regret() const { return tried_regret_; }
  double RegretOf(int index) const {
    return index < 0 ? 1.0 : 1.0 - truth_->step[truth_->best] / truth_->step[index];
  }
  void Append(std::ofstream& out, int seed) const {
    for (size_t k = 0; k < regret_.size(); ++k) {
      out << fmt::format("{},{},{:.9g},{:.9g},{},{},{}\n", seed, k + 1, regret_[k], tried_regret_[k],
                         oom_[k] ? "oom" : "ok", static_cast<int>(repeat_[k]), probe_[k] ? 1 : 0);
    }
  }

 private:
  const Truth* truth_;
  std::vector<char> tried_;
  double best_measured_ = INFINITY;
  int incumbent_ = -1, best_tried_ = -1;
  std::vector<double> regret_, tried_regret_;
  std::vector<char> oom_, probe_;
  std::vector<Repeat> repeat_;
};

void WriteTruth(const fs::path& path, const std::vector<Layout>& legal, const Truth& t) {
  std::ofstream out(path);
  std::vector<std::string> columns;
  for (const LayoutField& f : LayoutFields()) columns.emplace_back(f.name);
  out << fmt::format("index,{},true_step_s,true_memory_bytes,fits,noise_sd\n", fmt::join(columns, ","));
  for (size_t i = 0; i < legal.size(); ++i) {
    std::vector<std::string> cells;
    for (const LayoutField& f : LayoutFields()) cells.push_back(LayoutFieldCell(f, legal[i]));
    out << fmt::format("{},{},{:.9g},{:.9g},{},{:.6g}\n", i, fmt::join(cells, ","), t.step[i], t.memory[i],
                       t.fits[i] ? 1 : 0, t.noise_sd);
  }
}

// Everything a problem's searches share: the legal set and the proposers built on the nominal
// model (the prior does not depend on the seed).
struct Bench {
  std::string name;
  std::vector<Layout> legal;
  std::unique_ptr<search::Proposer> with_prior, without_prior;
  bool oom_reports_peak = false;  // an OOM outcome carries the peak where the run stopped
  std::vector<double> predicted_memory;  // the nominal model's, per legal layout (bytes)
  double device_memory = 0;              // the nominal profile's (bytes)
};

struct Files {
  std::map<std::string, std::ofstream> curves;
  std::ofstream stops;
};

// tuner/loops/bayesian_search.cc's loop (batch 1) with the CLI's defaults: `budget` trials, the last
// fifth of them held for confirmation trials (a leading layout measured again while the best
// is less than 90% likely the fastest measured), and with --early-stop 0.02 (probability 0.05)
// a stop checked after every trial, which waits while a confirmation is due.
struct Protocol {
  int budget = 50;
  double confidence = 0.9;                    // --confidence
  int Reserve() const { return budget / 5; }  // --confirm -1
};

// One tunepar search in progress.
struct SearchState {
  explicit SearchState(const Truth& truth, uint64_t noise_seed) : rng(noise_seed), record(truth) {}
  std::mt19937_64 rng;
  SearchRecord record;
  std::vector<search::Outcome> history;
  bool confirming = false;  // Advise says stop on this history: confirm first, when one is due
  int trials = 0;
  std::optional<search::Standing> standing;  // Proposer::Stand of the history as it is (a cache)
};

// Proposer::Stand of the search's history, fitted once per history.
const search::Standing& StandingOf(const search::Proposer& proposer, const Protocol& protocol,
                                   SearchState& st) {
  if (!st.standing) st.standing = proposer.Stand(st.history, protocol.confidence);
  return *st.standing;
}

// A launched trial of legal layout `i`: OOM, or a step time with the truth's noise, and the peak
// when the truth's program prints one.
search::Outcome Measure(const Bench& b, const Truth& truth, int i, std::mt19937_64& rng) {
  search::Outcome o;
  o.layout = b.legal[i];
  o.status = TrialStatus::kOom;
  if (truth.fits[i]) {
    o.status = TrialStatus::kOk;
    o.step_time_s = truth.step[i] * std::exp(truth.noise_sd * std::normal_distribution<double>()(rng));
    if (truth.peaks) o.peak_memory_bytes = truth.memory[i];
  } else if (b.oom_reports_peak && truth.peaks) {
    o.peak_memory_bytes = truth.memory[i];
  }
  return o;
}

// The next trial of the loop (ProposeNextBatch with batch 1): a confirmation when one is due (in
// the reserve, or while Advise says stop), else a proposal, else (nothing untried is left) a
// confirmation; false when there is nothing to run.
bool Step(const Bench& b, const search::Proposer& proposer, const Truth& truth, const Protocol& protocol,
          SearchState& st, double* seconds, int* proposals) {
  std::optional<Layout> next;
  bool confirmation = false, probe = false;
  auto remeasure = [&]() { return StandingOf(proposer, protocol, st).remeasure; };
  if (protocol.budget - st.trials <= protocol.Reserve() || st.confirming) {
    next = remeasure();
    confirmation = next.has_value();
  }
  if (!next) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<search::Proposal> proposed = proposer.Propose(st.history, 1);
    *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++*proposals;
    if (!proposed.empty()) {
      next = proposed[0].layout;
      probe = proposed[0].probe;
    }
  }
  if (!next) {
    next = remeasure();
    confirmation = next.has_value();
  }
  if (!next) return false;
  const int i = proposer.IndexOf(*next);
  search::Outcome o = Measure(b, truth, i, st.rng);
  o.probe = probe;  // the history carries it back: the proposer counts the probes it spent
  st.record.Record(i, o.status == TrialStatus::kOk, o.step_time_s.value_or(0), confirmation, probe);
  st.history.push_back(o);
  st.standing.reset();
  ++st.trials;
  return true;
}

// CheckStop after a trial with --early-stop: true to stop. An advised stop waits while a
// confirmation is due, and while Advise says stop the next trial is a confirmation when one is
// due (ConfirmationDue asks Advise again on the same history).
bool CheckStop(const search::Proposer& proposer, const Protocol& protocol, SearchState& st) {
  st.confirming = proposer.Advise(st.history, kStopGain, kStopProbability).stop;
  if (!st.confirming) return false;
  return !(st.trials < protocol.budget && StandingOf(proposer, protocol, st).remeasure);
}

double NamedRegret(const search::Proposer& proposer, const Protocol& protocol, SearchState& st) {
  const search::Standing& standing = StandingOf(proposer, protocol, st);
  return standing.best ? st.record.RegretOf(proposer.IndexOf(*standing.best)) : 1.0;
}

struct TuneparRuns {
  explicit TuneparRuns(SearchState start) : full(std::move(start)) {}
  SearchState full;                 // the whole budget, without the early stop
  double named_regret = 1;          // of the layout it names best at the end (Proposer::Stand)
  int advised = 0;                  // the trial after which Advise first said stop (0: never)
  double advised_named_regret = 1;  // of the layout named best then (what --confirm 0 would stop with)
  double advised_tried_regret = 1;  // of the truly best layout tried by then
  // The same for the rule Advise had before this benchmark (stop when the single most promising
  // untried layout is below the probability), recomputed from Proposer::Posterior.
  int max_rule_advised = 0;
  double max_rule_named_regret = 1;
  std::optional<SearchState> stopped;  // the same run with --early-stop, from that trial on
  int stop_trial = 0;                  // where that run ended (0: it did not stop before the budget)
  double stop_named_regret = 1;
};

// The rule Advise had before: stop when no single untried layout has feasibility x P(beating the
// incumbent by more than the gain) of at least the probability (normal predictive).
bool MaxRuleStops(const search::Proposer& proposer, const std::vector<search::Outcome>& history) {
  const search::Surrogate post = proposer.Posterior(history);
  if (!post.measured || !std::isfinite(post.incumbent)) return false;
  std::vector<char> tried(proposer.size(), 0);
  for (const search::Outcome& o : history) tried[proposer.IndexOf(o.layout)] = 1;
  const double target = post.incumbent - std::log1p(kStopGain);
  double most = 0;
  for (size_t i = 0; i < proposer.size(); ++i) {
    if (tried[i]) continue;
    const double z = post.sd[i] > 0 ? (target - post.log_step_time[i]) / post.sd[i]
                                    : (post.log_step_time[i] < target ? 99 : -99);
    most = std::max(most, post.feasibility[i] * 0.5 * std::erfc(-z / std::sqrt(2.0)));
  }
  return most < kStopProbability;
}

// `protocol.budget` trials of tunepar; with `early_stop`, also the same run with --early-stop
// 0.02: identical until Advise first says stop, then continued on its own (it stops, or confirms
// first), sharing the noise draws up to there.
TuneparRuns RunTunepar(const Bench& b, const search::Proposer& proposer, const Truth& truth,
                       uint64_t noise_seed, const Protocol& protocol, bool early_stop, double* seconds,
                       int* proposals) {
  TuneparRuns out(SearchState(truth, noise_seed));
  SearchState& st = out.full;
  while (st.trials < protocol.budget && Step(b, proposer, truth, protocol, st, seconds, proposals)) {
    if (early_stop && out.max_rule_advised == 0 && MaxRuleStops(proposer, st.history)) {
      out.max_rule_advised = st.trials;
      out.max_rule_named_regret = NamedRegret(proposer, protocol, st);
    }
    if (!early_stop || out.advised > 0 || !proposer.Advise(st.history, kStopGain, kStopProbability).stop)
      continue;
    out.advised = st.trials;
    out.advised_named_regret = NamedRegret(proposer, protocol, st);
    out.advised_tried_regret = st.record.tried_regret().back();
    SearchState fork = st;
    fork.confirming = true;
    bool stop = !(fork.trials < protocol.budget && StandingOf(proposer, protocol, fork).remeasure);
    while (!stop && fork.trials < protocol.budget &&
           Step(b, proposer, truth, protocol, fork, seconds, proposals))
      stop = CheckStop(proposer, protocol, fork);
    if (stop && fork.trials < protocol.budget) out.stop_trial = fork.trials;
    out.stop_named_regret = NamedRegret(proposer, protocol, fork);
    out.stopped.emplace(std::move(fork));
  }
  out.named_regret = NamedRegret(proposer, protocol, st);
  if (early_stop && !out.stopped) out.stop_named_regret = out.named_regret;
  return out;
}

// Random search over the legal layouts, without replacement.
SearchRecord RunRandom(const Truth& truth, int budget, int seed) {
  std::mt19937_64 rng(static_cast<uint64_t>(seed) * 31337);
  std::vector<int> order(truth.step.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::shuffle(order.begin(), order.end(), rng);
  std::normal_distribution<double> normal;
  SearchRecord record(truth);
  for (int k = 0; k < budget && k < static_cast<int>(order.size()); ++k) {
    const int i = order[k];
    record.Record(i, truth.fits[i], truth.step[i] * std::exp(truth.noise_sd * normal(rng)));
  }
  return record;
}

Files OpenFiles(const fs::path& dir, const std::string& problem, const std::string& truth,
                bool with_ablation) {
  Files f;
  for (const char* method : {"tunepar", "tunepar-no-prior", "random"}) {
    if (!with_ablation && std::string(method) == "tunepar-no-prior") continue;
    f.curves[method].open(dir / fmt::format("curves_{}_{}_{}.csv", method, problem, truth));
    f.curves[method] << "seed,trial,regret,tried_regret,status,repeat,probe\n";
  }
  f.stops.open(dir / fmt::format("stops_{}_{}.csv", problem, truth));
  // advised_trial: after which Advise first said stop (0: never), and the regrets of the layout
  // named best then and of the truly best layout tried by then; stop_trial: where the run with
  // the early stop ended (0: it did not stop before the budget). Regrets when it ended: of the
  // layout tunepar names best (the surrogate's best measured, after confirmations), of the best
  // single measurement, of the truly best layout tried; of the layout the run without the early
  // stop names at the end of its budget; and when the rule Advise had before would first have
  // said stop, with the regret of the layout named best then.
  f.stops << "seed,advised_trial,advised_named_regret,advised_tried_regret,stop_trial,named_regret,"
             "measured_regret,tried_regret,named_regret_at_budget,max_rule_advised_trial,"
             "max_rule_named_regret\n";
  return f;
}

// The nominal model's memory of the truth's optimum / device memory: above 1, tunepar's memory
// model says the optimum does not fit.
double PredictedShare(const Bench& b, const Truth& truth) {
  return b.predicted_memory[truth.best] / b.device_memory;
}

// tunepar (with the early stop alongside), random search and, with `with_ablation`, tunepar
// without the model prior, on one truth.
void RunTruth(const fs::path& dir, const Bench& b, const std::string& truth_name, const Truth& truth,
              int seed, int budget, bool with_ablation, Files* files, double* seconds, int* proposals) {
  if (files == nullptr) {  // the truths alone, for the peers
    WriteTruth(dir / fmt::format("truth_{}_{}_{}.csv", b.name, truth_name, seed), b.legal, truth);
    return;
  }
  const uint64_t noise_seed = static_cast<uint64_t>(seed) * 1000003;
  Protocol protocol;
  protocol.budget = budget;
  const TuneparRuns runs =
      RunTunepar(b, *b.with_prior, truth, noise_seed + 1, protocol, true, seconds, proposals);
  runs.full.record.Append(files->curves["tunepar"], seed);
  const SearchRecord& stopped = runs.stopped ? runs.stopped->record : runs.full.record;
  const size_t last = stopped.regret().size() - 1;
  files->stops << fmt::format("{},{},{:.9g},{:.9g},{},{:.9g},{:.9g},{:.9g},{:.9g},{},{:.9g}\n", seed,
                              runs.advised, runs.advised_named_regret, runs.advised_tried_regret,
                              runs.stop_trial, runs.stop_named_regret, stopped.regret()[last],
                              stopped.tried_regret()[last], runs.named_regret, runs.max_rule_advised,
                              runs.max_rule_named_regret);
  if (with_ablation) {
    RunTunepar(b, *b.without_prior, truth, noise_seed + 2, protocol, false, seconds, proposals)
        .full.record.Append(files->curves["tunepar-no-prior"], seed);
  }
  RunRandom(truth, budget, seed).Append(files->curves["random"], seed);
  int fitting = 0;
  for (char f : truth.fits) fitting += f;
  fmt::print(stderr,
             "{} {} seed {}: optimum {} ({:.4g} s/step, the model predicts {:.2f}x device memory); {} of {} "
             "layouts fit\n",
             b.name, truth_name, seed, LayoutKey(b.legal[truth.best]), truth.step[truth.best],
             PredictedShare(b, truth), fitting, truth.fits.size());
}

struct RunOptions {
  int seeds = 20;            // hidden machines of the `model` truth
  int structure_seeds = 10;  // hidden machines of each other truth, and noise seeds of the measured one
  int budget = 50;
  std::string core_truth = "bench/data/core-w8-small.csv";
  bool truths_only = false;  // write the truth files (for the peers) and run nothing
  std::string only;          // a regular expression: only the cases ("problem truth") it finds
  bool Selected(const std::string& problem, const std::string& truth) const {
    return only.empty() || std::regex_search(problem + " " + truth, std::regex(only));
  }
};

// The measured truth (first: it reads a file the others do not need).
void RunMeasuredTruth(const fs::path& dir, const RunOptions& options) {
  if (!options.Selected(kCoreProblem.name, kMeasuredTruth)) return;
  if (options.core_truth.empty() || !fs::exists(options.core_truth)) {
    fmt::print(stderr, "no measured truth ({} not found): skipped\n", options.core_truth);
    return;
  }
  // The measured problem, as `tunepar search --backend local` would see it: the layouts
  // tunepar-core runs, the local-cpu profile with every rank on this one node, and a device
  // memory equal to the cap the sweep ran under. tunepar-core counts its own buffers against
  // the cap, not the process's (MPI, the runtime): a profile for capped core runs has no
  // constant overhead, so the profile's memory_overhead_gb (0.2 GB of MPI and process memory,
  // which would put every layout over a 30 MB cap) is set to 0. Nothing else of the profile
  // changes; its fragmentation share stays.
  Problem problem = OrDie(LoadProblem(kCoreProblem.model, "local-cpu", "default"));
  Bench b;
  b.name = kCoreProblem.name;
  b.oom_reports_peak = true;
  for (const Layout& l : OrDie(search::EnumerateSpace(MakeSpaceQuery(problem, kCoreProblem.world))).legal) {
    if (!l.seq_parallel && l.virtual_stages == 1 && !l.flash_attention) b.legal.push_back(l);
  }
  const bench::MeasuredTruth measured = OrDie(bench::LoadMeasuredTruth(options.core_truth, b.legal));
  problem.hardware.memory_gb.value = measured.memory_cap_bytes / 1e9;
  problem.hardware.efficiency.at("memory_overhead_gb").value = 0;
  runner::PerformanceModel nominal = OrDie(runner::PerformanceModel::Create(problem.model, problem.hardware));
  nominal.set_ranks_per_node(kCoreProblem.world);
  const search::PriorModel prior = [&](const Layout& l) { return PriorOf(nominal.Predict(l)); };
  for (const Layout& l : b.legal) b.predicted_memory.push_back(nominal.Predict(l).memory_bytes);
  b.device_memory = measured.memory_cap_bytes;
  search::ProposerOptions with_prior;
  with_prior.device_memory_bytes = measured.memory_cap_bytes;
  search::ProposerOptions without = with_prior;
  without.use_prior = false;
  b.with_prior = std::make_unique<search::Proposer>(b.legal, prior, with_prior);
  b.without_prior = std::make_unique<search::Proposer>(b.legal, prior, without);
  Files files;
  if (!options.truths_only) {
    files = OpenFiles(dir, b.name, kMeasuredTruth, true);
    int fitting = 0;
    for (char f : measured.truth.fits) fitting += f;
    fmt::print(
        stderr,
        "{}: {} ({} runs; {} of {} layouts ran, the rest OOM; {} measured more than once: noise {:.1f}%)\n",
        b.name, options.core_truth, measured.runs, fitting, b.legal.size(), measured.repeated_layouts,
        100 * measured.truth.noise_sd);
  }
  double seconds = 0;
  int proposals = 0;
  for (int seed = 1; seed <= options.structure_seeds; ++seed) {
    RunTruth(dir, b, kMeasuredTruth, measured.truth, seed, options.budget, true,
             options.truths_only ? nullptr : &files, &seconds, &proposals);
  }
  if (!options.truths_only) {
    fmt::print(stderr, "{}: {} legal layouts; mean proposal time {:.1f} ms\n", b.name, b.legal.size(),
               1e3 * seconds / std::max(1, proposals));
  }
}

// A problem's legal layouts, the proposers on its nominal model (the prior does not depend on
// the seed), and the memory that model predicts.
Bench MakeBench(const ProblemSpec& spec, const Problem& problem) {
  Bench b;
  b.name = spec.name;
  b.legal = OrDie(search::EnumerateSpace(MakeSpaceQuery(problem, spec.world))).legal;
  const auto nominal = std::make_shared<runner::PerformanceModel>(
      OrDie(runner::PerformanceModel::Create(problem.model, problem.hardware)));
  const search::PriorModel prior = [nominal](const Layout& l) { return PriorOf(nominal->Predict(l)); };
  b.device_memory = problem.hardware.MemoryBytes();
  for (const Layout& l : b.legal) b.predicted_memory.push_back(nominal->Predict(l).memory_bytes);
  search::ProposerOptions with_prior;
  with_prior.device_memory_bytes = b.device_memory;
  search::ProposerOptions without = with_prior;
  without.use_prior = false;
  b.with_prior = std::make_unique<search::Proposer>(b.legal, prior, with_prior);
  b.without_prior = std::make_unique<search::Proposer>(b.legal, prior, without);
  return b;
}

// Where a truth's optimum lies for tunepar's memory model, per seed: the nominal model's
// memory of it / device memory (above 1: predicted not to fit), its true memory / the predicted,
// and the regret of the fastest layout that fits and is predicted to (where a search that never
// tries a layout predicted not to fit ends at best).
struct OptimumMemory {
  std::vector<double> predicted_share, true_share, floor_regret;
  void Add(const Bench& b, const Truth& truth) {
    predicted_share.push_back(PredictedShare(b, truth));
    true_share.push_back(truth.memory[truth.best] / b.predicted_memory[truth.best]);
    double fastest = INFINITY;
    for (size_t i = 0; i < truth.step.size(); ++i) {
      if (truth.fits[i] && b.predicted_memory[i] <= b.device_memory) fastest = std::min(fastest, truth.step[i]);
    }
    floor_regret.push_back(1.0 - truth.step[truth.best] / fastest);
  }
  void Print(const std::string& name) const {
    if (predicted_share.empty()) return;
    auto range = [](const std::vector<double>& v, double scale, const char* unit) {
      const auto [low, high] = std::minmax_element(v.begin(), v.end());
      return fmt::format("{:.2f}-{:.2f}{} (median {:.2f}{})", scale * *low, scale * *high, unit, scale * Median(v),
                         unit);
    };
    const auto above = std::count_if(predicted_share.begin(), predicted_share.end(), [](double v) { return v > 1; });
    fmt::print("{}: optimum predicted at {} device memory, {} of {} seeds above 1; it needs {} the predicted; the "
               "fastest layout predicted to fit is {} slower\n",
               name, range(predicted_share, 1, "x"), above, predicted_share.size(), range(true_share, 1, "x"),
               range(floor_regret, 100, "%"));
  }
};

// One truth of one problem, every seed.
void RunCase(const fs::path& dir, const Bench& b, const Problem& problem, const TruthCase& c,
             const RunOptions& options, double* seconds, int* proposals) {
  const bool model = c.structure == bench::Structure::kModel;
  Files files;
  if (!options.truths_only) files = OpenFiles(dir, b.name, c.name, model);
  OptimumMemory optimum;
  for (int seed = 1; seed <= (model ? options.seeds : options.structure_seeds); ++seed) {
    Truth truth = bench::MakeTruth(problem.model, problem.hardware, c.structure, static_cast<uint64_t>(seed), b.legal);
    truth.peaks = c.peaks;
    optimum.Add(b, truth);
    RunTruth(dir, b, c.name, truth, seed, options.budget, model, options.truths_only ? nullptr : &files, seconds,
             proposals);
  }
  if (options.truths_only) optimum.Print(b.name + " " + c.name);
}

// The model truths of every problem.
void RunModelTruths(const fs::path& dir, const RunOptions& options) {
  for (const ProblemSpec& spec : kProblems) {
    std::vector<TruthCase> cases;
    for (const TruthCase& c : TruthCases(spec)) {
      if (options.Selected(spec.name, c.name)) cases.push_back(c);
    }
    if (cases.empty()) continue;
    const Problem problem = OrDie(LoadProblem(spec.model, spec.hardware, "default"));
    const Bench b = MakeBench(spec, problem);
    double seconds = 0;
    int proposals = 0;
    for (const TruthCase& c : cases) RunCase(dir, b, problem, c, options, &seconds, &proposals);
    if (!options.truths_only) {
      fmt::print(stderr, "{}: {} legal layouts; mean proposal time {:.1f} ms\n", b.name, b.legal.size(),
                 1e3 * seconds / std::max(1, proposals));
    }
  }
}

int Run(const fs::path& dir, const RunOptions& options) {
  fs::create_directories(dir);
  RunMeasuredTruth(dir, options);
  RunModelTruths(dir, options);
  return 0;
}

// One search as read back: per trial, the regret after it, OOM, duplicate, confirmation, probe.
struct Trace {
  std::vector<double> regret;
  std::vector<char> oom, duplicate, confirmation, probe;
};
struct Stop {
  int advised = 0;  // 0: Advise never said stop
  double advised_named = 1, advised_tried = 1;
  int max_rule_advised = 0;
  double max_rule_named = 1;
  int trial = 0;                                                   // 0: did not stop before the budget
  double named = 1, measured = 1, tried = 1, named_at_budget = 1;  // regrets (stops_*.csv)
};
// Per case ("problem truth"), per method, per seed.
using Traces = std::map<std::string, std::map<std::string, std::map<int, Trace>>>;

// Splits "a_b_c" on '_'.
std::vector<std::string> Fields(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string f; std::getline(in, f, '_');) out.push_back(f);
  return out;
}

void ReadCurves(const fs::path& path, std::map<int, Trace>& seeds, int* budget) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    int seed = 0, trial = 0, repeat = 0, probe = 0;  // files without the probe column: no probes
    double regret = 0, tried_regret = 0;
    char status[8] = {0};
    if (std::sscanf(line.c_str(), "%d,%d,%lf,%lf,%7[a-z],%d,%d", &seed, &trial, &regret, &tried_regret, status,
                    &repeat, &probe) < 6)
      continue;
    Trace& t = seeds[seed];
    if (static_cast<int>(t.regret.size()) < trial) {
      t.regret.resize(trial, 1.0);
      t.oom.resize(trial, 0);
      t.duplicate.resize(trial, 0);
      t.confirmation.resize(trial, 0);
      t.probe.resize(trial, 0);
    }
    t.regret[trial - 1] = regret;
    t.oom[trial - 1] = std::string(status) == "oom";
    t.duplicate[trial - 1] = repeat == static_cast<int>(Repeat::kDuplicate);
    t.confirmation[trial - 1] = repeat == static_cast<int>(Repeat::kConfirmation);
    t.probe[trial - 1] = probe == 1;
    *budget = std::max(*budget, trial);
  }
}

std::map<int, Stop> ReadStops(const fs::path& path) {
  std::map<int, Stop> out;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    int seed = 0;
    Stop s;
    if (std::sscanf(line.c_str(), "%d,%d,%lf,%lf,%d,%lf,%lf,%lf,%lf,%d,%lf", &seed, &s.advised,
                    &s.advised_named, &s.advised_tried, &s.trial, &s.named, &s.measured, &s.tried,
                    &s.named_at_budget, &s.max_rule_advised, &s.max_rule_named) == 11)
      out[seed] = s;
  }
  return out;
}

// The first trial at which the regret is at most `level`; budget + 1 when never.
int TrialsTo(const Trace& t, double level, int budget) {
  for (size_t k = 0; k < t.regret.size(); ++k) {
    if (t.regret[k] <= level) return static_cast<int>(k) + 1;
  }
  return budget + 1;
}

int CountIn(const std::vector<char>& v, int n) {
  return static_cast<int>(std::count(v.begin(), v.begin() + std::min<size_t>(n, v.size()), 1));
}

// The cases in a fixed order: the problems, then their truths in TruthCases() order.
std::vector<std::string> CaseOrder(const Traces& traces) {
  std::vector<std::string> order;
  for (const ProblemSpec& spec : kProblems) {
    for (const TruthCase& c : TruthCases(spec)) order.push_back(spec.name + " " + c.name);
  }
  order.push_back(kCoreProblem.name + " " + kMeasuredTruth);
  for (const auto& [name, methods] : traces) {
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
  }
  return order;
}

struct Results {
  Traces traces;
  std::map<std::string, std::map<int, Stop>> stops;
  int budget = 0;
};

Results ReadResults(const fs::path& dir) {
  Results r;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".csv") continue;
    const std::vector<std::string> f = Fields(e.path().stem().string());
    if (f.size() == 4 && f[0] == "curves") ReadCurves(e.path(), r.traces[f[2] + " " + f[3]][f[1]], &r.budget);
    if (f.size() == 3 && f[0] == "stops") r.stops[f[1] + " " + f[2]] = ReadStops(e.path());
  }
  return r;
}

const std::vector<int> kCheckpoints = {1, 3, 5, 10, 20, 30, 50};
// The width of a case's name ("problem truth") in the one-line tables.
constexpr int kCaseWidth = 40;

// One method's figures on one problem and truth, over its seeds.
struct MethodFigures {
  int trials = 0;  // the most trials a run made (the GP peer runs 30)
  std::vector<double> to5, to2, oom, dup, confirmations, probes, at10, at30;
  // A median trial count, ">trials" when past the method's trials.
  std::string Text(double t) const { return t > trials ? fmt::format(">{}", trials) : fmt::format("{:g}", t); }
};

MethodFigures Figures(const std::map<int, Trace>& runs, int fixed) {
  MethodFigures f;
  size_t length = 0;
  for (const auto& [seed, t] : runs) length = std::max(length, t.regret.size());
  f.trials = static_cast<int>(length);
  for (const auto& [seed, t] : runs) {
    f.to5.push_back(TrialsTo(t, 0.05, f.trials));
    f.to2.push_back(TrialsTo(t, 0.02, f.trials));
    f.oom.push_back(CountIn(t.oom, fixed));
    f.dup.push_back(CountIn(t.duplicate, fixed));
    f.confirmations.push_back(CountIn(t.confirmation, f.trials));
    f.probes.push_back(CountIn(t.probe, f.trials));
    f.at10.push_back(t.regret[std::min<size_t>(10, t.regret.size()) - 1]);
    f.at30.push_back(t.regret[std::min<size_t>(30, t.regret.size()) - 1]);
  }
  return f;
}

// One method's row of a regret table (and of summary.csv); a goal it misses goes to `misses`.
void PrintMethodRow(const std::string& name, const std::string& method, const std::map<int, Trace>& runs, int fixed,
                    std::ofstream& summary, std::vector<std::string>& misses) {
  fmt::print("{:<17}", method);
  const MethodFigures f = Figures(runs, fixed);
  for (int k : kCheckpoints) {
    std::vector<double> at;
    for (const auto& [seed, t] : runs) at.push_back(t.regret[std::min<size_t>(k, t.regret.size()) - 1]);
    if (k > f.trials)
      fmt::print(" {:>6}", "-");  // past the method's trials
    else
      fmt::print(" {:>5.1f}%", 100 * Median(at));
  }
  const double max_oom = *std::max_element(f.oom.begin(), f.oom.end());
  fmt::print(" {:>6} {:>6} {:>5g} {:>4.1f} {:>4g} {:>6.1f} {:>5.1f} {:>6.1f}\n", f.Text(Median(f.to5)),
             f.Text(Median(f.to2)), Median(f.oom), Mean(f.oom), max_oom, Mean(f.dup), Mean(f.confirmations),
             Mean(f.probes));
  const size_t space = name.find(' ');
  summary << fmt::format("{},{},{},{},{:g},{:g},{:g},{:.2f},{:g},{:.2f},{:.2f},{:.5f},{:.5f},{:.2f}\n",
                         name.substr(0, space), name.substr(space + 1), method, runs.size(), Median(f.to5),
                         Median(f.to2), Median(f.oom), Mean(f.oom), max_oom, Mean(f.dup), Mean(f.confirmations),
                         Median(f.at10), Median(f.at30), Mean(f.probes));
  if (method == "tunepar" && (Median(f.to2) > 10 || Median(f.oom) > 6)) {
    misses.push_back(fmt::format("{}: median {} trials to 2%, median {} OOM in {}", name, f.Text(Median(f.to2)),
                                 Median(f.oom), fixed));
  }
}

// Every problem and truth on one line: per method, the median trials to 2% regret / the median
// OOM trials in the first 30; and the probes tunepar spent (mean per run).
void PrintOverview(const Results& r) {
  const int fixed = std::min(kFixedRun, r.budget);
  const std::vector<std::string> methods = {"tunepar", "tunepar-no-prior", "optuna-tpe", "sklearn-gp-ei", "random"};
  fmt::print(
      "\nOverview: median trials to 2% regret / median OOM trials in the first {}, per method; tunepar's\n"
      "probes (mean per run)\n{:<{}}",
      fixed, "problem truth", kCaseWidth);
  for (const std::string& m : methods) fmt::print(" {:>16}", m);
  fmt::print(" {:>6}\n", "probes");
  for (const std::string& name : CaseOrder(r.traces)) {
    const auto it = r.traces.find(name);
    if (it == r.traces.end()) continue;
    fmt::print("{:<{}}", name, kCaseWidth);
    for (const std::string& m : methods) {
      const auto runs = it->second.find(m);
      if (runs == it->second.end()) {
        fmt::print(" {:>16}", "");
        continue;
      }
      const MethodFigures f = Figures(runs->second, fixed);
      fmt::print(" {:>16}", fmt::format("{} / {:g}", f.Text(Median(f.to2)), Median(f.oom)));
    }
    const auto tunepar = it->second.find("tunepar");
    if (tunepar != it->second.end()) fmt::print(" {:>6.1f}", Mean(Figures(tunepar->second, fixed).probes));
    fmt::print("\n");
  }
}

// The regret tables, one per problem and truth; the goals tunepar misses.
std::vector<std::string> PrintRegretTables(const Results& r, const fs::path& dir) {
  const int fixed = std::min(kFixedRun, r.budget);
  std::ofstream summary(dir / "summary.csv");
  summary << "problem,truth,method,seeds,median_trials_to_5pct,median_trials_to_2pct,median_oom_in_30,"
             "mean_oom_in_30,max_oom_in_30,mean_duplicates_in_30,mean_confirmations,median_regret_at_10,"
             "median_regret_at_30,mean_probes\n";
  fmt::print(
      "Per problem and truth: median simple regret after k trials (of the best single measurement,\n"
      "for every method), median trials to reach 5% / 2% regret, OOM trials in the first {} (median,\n"
      "mean, max over seeds), duplicated trials in the first {} (mean; a layout measured again\n"
      "unasked), tunepar's confirmation trials in the whole run (mean; leading layouts measured\n"
      "again on purpose, in the last fifth of the budget) and its probes in the whole run (mean;\n"
      "layouts its memory model predicted not to fit, tried on purpose).\n",
      fixed, fixed);
  std::vector<std::string> misses;
  for (const std::string& name : CaseOrder(r.traces)) {
    const auto it = r.traces.find(name);
    if (it == r.traces.end()) continue;
    const size_t seeds = it->second.empty() ? 0 : it->second.begin()->second.size();
    fmt::print("\n{} ({} seeds)\n{:<17}", name, seeds, "method");
    for (int k : kCheckpoints) fmt::print(" {:>6}", fmt::format("k={}", k));
    fmt::print(" {:>6} {:>6} {:>15} {:>6} {:>5} {:>6}\n", "to 5%", "to 2%", "OOM/30 md mn mx", "dup/30", "conf",
               "probes");
    for (const auto& [method, runs] : it->second) PrintMethodRow(name, method, runs, fixed, summary, misses);
  }
  return misses;
}

// What the early-stop runs of one problem and truth did, counted.
enum StopCount {
  kRuns,
  kAdvised,
  kAdvisedAbove,
  kAdvisedTried,
  kMaxAdvised,
  kMaxAbove,
  kStopped,
  kNamedAbove,
  kMeasuredAbove,
  kTriedAbove,
  kNoStopAbove,
  kPremature,
  kCounts
};
struct StopTally {
  std::array<int, kCounts> n{};
  std::vector<double> advised, at_advice, max_trial, trial;
};

StopTally TallyStops(const std::map<int, Stop>& runs) {
  StopTally t;
  for (const auto& [seed, s] : runs) {
    ++t.n[kRuns];
    t.n[kNoStopAbove] += s.named_at_budget > 0.02;
    if (s.advised > 0) {
      ++t.n[kAdvised];
      t.advised.push_back(s.advised);
      t.at_advice.push_back(s.advised_named);
      t.n[kAdvisedAbove] += s.advised_named > 0.02;
      t.n[kAdvisedTried] += s.advised_tried > 0.02;
    }
    if (s.max_rule_advised > 0) {
      ++t.n[kMaxAdvised];
      t.max_trial.push_back(s.max_rule_advised);
      t.n[kMaxAbove] += s.max_rule_named > 0.02;
    }
    if (s.trial == 0) continue;
    ++t.n[kStopped];
    t.trial.push_back(s.trial);
    t.n[kNamedAbove] += s.named > 0.02;
    t.n[kMeasuredAbove] += s.measured > 0.02;
    t.n[kTriedAbove] += s.tried > 0.02;
    t.n[kPremature] += s.named > 0.02 && s.named_at_budget <= 0.02;
  }
  return t;
}

const std::string kStopRow =
    "{:<40} {:>4} | {:>4} {:>5} {:>6} {:>6} {:>3} {:>5} | {:>4} {:>5} {:>3} | "
    "{:>4} {:>5} {:>3} {:>4} {:>5} {:>7} {:>5}\n";

std::string Percent(double v) { return std::isnan(v) ? std::string("-") : fmt::format("{:.1f}%", 100 * v); }
std::string Number(double v) { return std::isnan(v) ? std::string("-") : fmt::format("{:g}", v); }

void PrintStopRow(const std::string& name, const StopTally& t, std::ofstream& csv) {
  const auto& n = t.n;
  const double worst = t.at_advice.empty() ? NAN : *std::max_element(t.at_advice.begin(), t.at_advice.end());
  fmt::print(fmt::runtime(kStopRow), name, n[kRuns], n[kAdvised], Number(Median(t.advised)),
             Percent(Median(t.at_advice)), Percent(worst), n[kAdvisedAbove], n[kAdvisedTried], n[kMaxAdvised],
             Number(Median(t.max_trial)), n[kMaxAbove], n[kStopped], Number(Median(t.trial)), n[kNamedAbove],
             n[kMeasuredAbove], n[kTriedAbove], n[kNoStopAbove], n[kPremature]);
  const size_t space = name.find(' ');
  csv << fmt::format("{},{},{},{},{:g},{:.5f},{:.5f},{},{},{},{:g},{},{},{:g},{},{},{},{},{}\n", name.substr(0, space),
                     name.substr(space + 1), n[kRuns], n[kAdvised], Median(t.advised), Median(t.at_advice), worst,
                     n[kAdvisedAbove], n[kAdvisedTried], n[kMaxAdvised], Median(t.max_trial), n[kMaxAbove],
                     n[kStopped], Median(t.trial), n[kNamedAbove], n[kMeasuredAbove], n[kTriedAbove],
                     n[kNoStopAbove], n[kPremature]);
}

void PrintStopTotals(const StopTally& all, int budget) {
  const auto& n = all.n;
  fmt::print(fmt::runtime(kStopRow), "all", n[kRuns], n[kAdvised], Number(Median(all.advised)), "", "",
             n[kAdvisedAbove], n[kAdvisedTried], n[kMaxAdvised], Number(Median(all.max_trial)), n[kMaxAbove],
             n[kStopped], Number(Median(all.trial)), n[kNamedAbove], n[kMeasuredAbove], n[kTriedAbove],
             n[kNoStopAbove], n[kPremature]);
  if (n[kRuns] == 0) return;
  const double runs = n[kRuns];
  fmt::print(
      "runs stopping above 2% regret (goal <= 10%): {} of {} ({:.1f}%) as the CLI runs (with\n"
      "confirmations), {} of them too early; where Advise first says stop: {} ({:.1f}%) name a layout\n"
      "above 2%, in {} ({:.1f}%) the truly best tried is above 2%; the rule before: {} ({:.1f}%)\n"
      "above 2%; without the early stop {} of {} runs name a layout above 2% at trial {}\n",
      n[kNamedAbove], n[kRuns], 100 * n[kNamedAbove] / runs, n[kPremature], n[kAdvisedAbove],
      100 * n[kAdvisedAbove] / runs, n[kAdvisedTried], 100 * n[kAdvisedTried] / runs, n[kMaxAbove],
      100 * n[kMaxAbove] / runs, n[kNoStopAbove], n[kRuns], budget);
}

// The early stop: each tunepar run again with `--early-stop 0.02` (probability 0.05).
void PrintEarlyStop(const Results& r, const fs::path& dir) {
  fmt::print(
      "\nEarly stop (tunepar --early-stop {:g}, --early-stop-probability {:g}; otherwise the same\n"
      "runs). Per problem and truth: the runs; where Advise first said stop (runs, median trial) and\n"
      "the regret of the layout named best then (median, worst, runs above 2%: where --confirm 0\n"
      "would stop), runs whose truly best layout tried by then was above 2% (the rule's own miss),\n"
      "and the same for the rule before (the single most promising layout below the probability);\n"
      "then with the CLI's confirmations (an advised stop waits while a leader is to be measured\n"
      "again): the runs that stopped before trial {}, the median trial, the runs above 2% then by\n"
      "the layout named best, by the best single measurement and by the truly best layout tried;\n"
      "the runs naming a layout above 2% at trial {} without the early stop; and the runs stopped\n"
      "above 2% that would not have been at trial {} (too early)\n",
      kStopGain, kStopProbability, r.budget, r.budget, r.budget);
  fmt::print(fmt::runtime(kStopRow), "", "", "Advise", "", "named", "", "", "", "before", "", "",
             "with confirmations", "", "", "", "", "", "");
  fmt::print(fmt::runtime(kStopRow), "problem truth", "runs", "runs", "trial", "median", "worst", ">2%", "tried",
             "runs", "trial", ">2%", "runs", "trial", ">2%", "meas", "tried", "no-stop", "early");
  std::ofstream csv(dir / "early_stop.csv");
  csv << "problem,truth,runs,advised,median_advised_trial,median_named_regret_at_advice,max_named_regret_at_"
         "advice,named_above_2pct_at_advice,tried_above_2pct_at_advice,max_rule_advised,max_rule_median_"
         "trial,max_rule_named_above_2pct,stopped,median_stop_trial,named_above_2pct,measured_above_2pct,"
         "tried_above_2pct,no_stop_named_above_2pct,premature\n";
  StopTally all;
  for (const std::string& name : CaseOrder(r.traces)) {
    const auto it = r.stops.find(name);
    if (it == r.stops.end()) continue;
    const StopTally t = TallyStops(it->second);
    PrintStopRow(name, t, csv);
    for (size_t k = 0; k < all.n.size(); ++k) all.n[k] += t.n[k];
    all.advised.insert(all.advised.end(), t.advised.begin(), t.advised.end());
    all.max_trial.insert(all.max_trial.end(), t.max_trial.begin(), t.max_trial.end());
    all.trial.insert(all.trial.end(), t.trial.begin(), t.trial.end());
  }
  PrintStopTotals(all, r.budget);
}

int Report(const fs::path& dir) {
  const Results results = ReadResults(dir);
  const std::vector<std::string> misses = PrintRegretTables(results, dir);
  PrintOverview(results);
  PrintEarlyStop(results, dir);
  const int fixed = std::min(kFixedRun, results.budget);
  fmt::print("\nGoals for tunepar (median trials to 2% <= 10, median OOM trials in {} <= 6): ", fixed);
  if (misses.empty()) {
    fmt::print("met on every problem and truth\n");
  } else {
    fmt::print("missed on {}\n", misses.size());
    for (const std::string& m : misses) fmt::print("  {}\n", m);
  }
  fmt::print(
      "\n(regret = 1 - true throughput of the best measured layout / the optimum; OOM trials count\n"
      " as trials; a median above a method's trials prints as >{} (sklearn-gp-ei: >30, it runs 30);\n"
      " summaries in {} and {})\n",
      results.budget, (dir / "summary.csv").string(), (dir / "early_stop.csv").string());
  return 0;
}

// The proposal latency benchmark: one proposal (q = 1) on gpt-1t at 3072 (the default space,
// frontier-mi250x) after n measured observations and `pending` running trials, which the
// proposer believes at their posterior mean. Each figure is also given as a ratio to a fixed
// reference computation timed in the same run, interleaved with the proposals: a shared
// machine's speed varies 2-3x from day to day, the ratio much less.
constexpr std::array<int, 3> kLatencyObservations = {30, 100, 300};
constexpr std::array<int, 3> kLatencyPending = {0, 8, 32};
constexpr int kLatencyRepeats = 7;  // proposals per cell (the median is reported)
constexpr int kReferenceSize = 384;  // the reference: a dense 384 x 384 matrix product (Eigen)

struct LatencySetup {
  std::vector<Layout> legal;
  std::unique_ptr<search::Proposer> proposer;
  double build_s = 0;       // constructing the proposer once
  std::vector<int> order;   // the layouts that fit on the hidden machine, shuffled (fixed seed)
  std::vector<double> step;  // their true step time, per legal layout
};

LatencySetup MakeLatencySetup() {
  const Problem problem = OrDie(LoadProblem("gpt-1t", "frontier-mi250x", "default"));
  LatencySetup setup;
  setup.legal = OrDie(search::EnumerateSpace(MakeSpaceQuery(problem, 3072))).legal;
  const runner::PerformanceModel nominal =
      OrDie(runner::PerformanceModel::Create(problem.model, problem.hardware));
  const search::PriorModel prior = [&](const Layout& l) { return PriorOf(nominal.Predict(l)); };
  search::ProposerOptions options;
  options.device_memory_bytes = problem.hardware.MemoryBytes();
  const auto start = std::chrono::steady_clock::now();
  setup.proposer = std::make_unique<search::Proposer>(setup.legal, prior, options);
  setup.build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Truth truth =
      bench::MakeTruth(problem.model, problem.hardware, bench::Structure::kModel, 1, setup.legal);
  setup.step = truth.step;
  for (size_t i = 0; i < setup.legal.size(); ++i) {
    if (truth.fits[i]) setup.order.push_back(static_cast<int>(i));
  }
  std::mt19937_64 rng(5);
  std::shuffle(setup.order.begin(), setup.order.end(), rng);
  return setup;
}

// n measured observations (the first n of the shuffle, each at its noise-free true step time:
// every trial ran ok, the GP's largest case) and `pending` running trials (the layouts after the
// largest history's in the shuffle: the same for every n).
std::vector<search::Outcome> LatencyHistory(const LatencySetup& setup, int n, int pending) {
  const int first_pending = kLatencyObservations.back();
  std::vector<search::Outcome> history;
  for (int k = 0; k < first_pending + pending && k < static_cast<int>(setup.order.size()); ++k) {
    if (k >= n && k < first_pending) continue;
    search::Outcome o;
    o.layout = setup.legal[setup.order[k]];
    if (k < n) {
      o.step_time_s = setup.step[setup.order[k]];
    } else {
      o.status = TrialStatus::kRunning;
    }
    history.push_back(o);
  }
  return history;
}

// The reference computation: a fixed dense matrix product, timed once (seconds).
double TimeReference() {
  static const Eigen::MatrixXd a = Eigen::MatrixXd::NullaryExpr(
      kReferenceSize, kReferenceSize, [](Eigen::Index i, Eigen::Index j) { return std::sin(1.0 + i + 2.0 * j); });
  static const Eigen::MatrixXd b = a.transpose() + Eigen::MatrixXd::Identity(kReferenceSize, kReferenceSize);
  static volatile double sink = 0;
  const auto start = std::chrono::steady_clock::now();
  const Eigen::MatrixXd c = a * b;
  sink = sink + c(7, 11);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The median seconds of kLatencyRepeats proposals on `history`; each proposal is preceded by a
// reference computation, whose times are appended to `reference`.
double TimeProposals(const search::Proposer& proposer, const std::vector<search::Outcome>& history,
                     std::vector<double>* reference) {
  std::vector<double> times;
  for (int r = 0; r < kLatencyRepeats; ++r) {
    reference->push_back(TimeReference());
    const auto start = std::chrono::steady_clock::now();
    const std::vector<search::Proposal> next = proposer.Propose(history, 1);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (next.empty()) fmt::print(stderr, "search_bench: no proposal\n");
  }
  return Median(times);
}

int Latency() {
  const LatencySetup setup = MakeLatencySetup();
  std::vector<double> reference;
  for (int r = 0; r < 3; ++r) TimeReference();  // warm up (the allocator, the caches)
  std::vector<std::vector<double>> cells;
  for (int n : kLatencyObservations) {
    cells.emplace_back();
    for (int pending : kLatencyPending) {
      cells.back().push_back(TimeProposals(*setup.proposer, LatencyHistory(setup, n, pending), &reference));
    }
  }
  const double ref = Median(reference);
  fmt::print("proposal latency, gpt-1t at 3072 ({} legal layouts, default space, frontier-mi250x), one proposal,\n"
             "one core: median ms of {} proposals, and (in brackets) as a ratio to the reference\n",
             setup.legal.size(), kLatencyRepeats);
  fmt::print("  reference: a {} x {} dense matrix product (Eigen), median {:.2f} ms of {} runs interleaved "
             "with the proposals\n",
             kReferenceSize, kReferenceSize, 1e3 * ref, reference.size());
  fmt::print("  building the proposer once: {:.1f} ms ({:.2f})\n", 1e3 * setup.build_s, setup.build_s / ref);
  std::string header = "  observations";
  for (int pending : kLatencyPending) header += fmt::format("  {:>18}", fmt::format("{} pending", pending));
  fmt::print("{}\n", header);
  for (size_t row = 0; row < cells.size(); ++row) {
    std::string line = fmt::format("  n = {:<8}", kLatencyObservations[row]);
    for (double t : cells[row]) line += fmt::format("  {:>18}", fmt::format("{:.1f} ({:.2f})", 1e3 * t, t / ref));
    fmt::print("{}\n", line);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if ((mode == "run" || mode == "truths") && argc > 2) {
    RunOptions o;
    o.truths_only = mode == "truths";
    for (int i = 3; i + 1 < argc; i += 2) {
      const std::string flag = argv[i];
      if (flag == "--seeds") o.seeds = std::atoi(argv[i + 1]);
      if (flag == "--structure-seeds") o.structure_seeds = std::atoi(argv[i + 1]);
      if (flag == "--budget") o.budget = std::atoi(argv[i + 1]);
      if (flag == "--core-truth") o.core_truth = argv[i + 1];
      if (flag == "--only") o.only = argv[i + 1];
    }
    return Run(argv[2], o);
  }
  if (mode == "report" && argc > 2) return Report(argv[2]);
  if (mode == "latency") return Latency();
  fmt::print(stderr,
             "usage: search_bench truths|run DIR [--seeds N] [--structure-seeds M] [--budget K]\n"
             "                    [--core-truth CSV] [--only REGEX] | report DIR | latency\n");
  return 2;
}
