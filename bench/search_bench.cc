// How many trials the Bayesian search needs to find a near-best layout, against peers, on truth
// functions it does not see (not a test: it prints tables and writes CSV).
//
// Truth: the performance model with a hidden, perturbed hardware profile: every efficiency
// parameter and every bandwidth of frontier-mi250x scaled by an independent log-uniform factor
// in [0.5, 2], and 2% multiplicative noise on every measured step time. Layouts that do not fit
// under the perturbed profile are OOM trials (they count: they were launched). The optimum is
// known by exhaustive evaluation. Problems: gpt-22b at 256 GCDs, gpt-175b at 1024, gpt-1t at
// 3072, default space; 20 perturbation seeds each.
//
//   search_bench run DIR [--seeds N] [--budget K]   truths to DIR/truth_*.csv, then tunepar
//                                                   (with and without the model prior) and
//                                                   random search; curves to DIR/curves_*.csv
//   search_bench report DIR                        tables from every DIR/curves_*.csv (the
//                                                   Python peers write theirs there too)
//   search_bench latency                           one proposal, 100 observations, gpt-1t at 3072
//
// bench/search_benchmark.sh runs all three with the peers (Optuna TPE, scikit-learn GP + EI).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "bench/truth.h"
#include "runner/performance_model.h"
#include "search/proposer.h"
#include "search/space.h"
#include "tuner/problem.h"
#include "tuner/study_context.h"

namespace {

using namespace tunepar;
using bench::MakeTruth;
using bench::Perturb;
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

struct ProblemSpec {
  std::string name, model;
  int world;
};
const std::vector<ProblemSpec> kProblems = {
    {"gpt-22b@256", "gpt-22b", 256}, {"gpt-175b@1024", "gpt-175b", 1024}, {"gpt-1t@3072", "gpt-1t", 3072}};
constexpr double kNoise = 0.02;

// Simple regret after each trial: 1 - true throughput of the best-measured layout / optimum.
class RegretCurve {
 public:
  RegretCurve(const Truth& truth) : truth_(truth) {}
  void Record(int index, bool ok, double measured_step) {
    if (ok && measured_step < best_measured_) {
      best_measured_ = measured_step;
      incumbent_ = index;
    }
    curve_.push_back(incumbent_ < 0 ? 1.0 : 1.0 - truth_.step[truth_.best] / truth_.step[incumbent_]);
  }
  const std::vector<double>& values() const { return curve_; }

 private:
  const Truth& truth_;
  double best_measured_ = INFINITY;
  int incumbent_ = -1;
  std::vector<double> curve_;
};

void WriteTruth(const fs::path& path, const std::vector<Layout>& legal, const Truth& t) {
  std::ofstream out(path);
  out << "index,tp,pp,dp,micro_batch,num_micro_batches,precision,zero,recompute,seq_parallel,virtual_stages,"
         "flash_attention,true_step_s,fits\n";
  for (size_t i = 0; i < legal.size(); ++i) {
    const Layout& l = legal[i];
    out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{:.9g},{}\n", i, l.tp, l.pp, l.dp, l.micro_batch,
                       l.num_micro_batches, ToString(l.precision), l.zero,
                       ToString(l.recompute), l.seq_parallel ? 1 : 0, l.virtual_stages,
                       l.flash_attention ? 1 : 0, t.step[i], t.fits[i] ? 1 : 0);
  }
}

void AppendCurve(std::ofstream& out, int seed, const std::vector<double>& curve) {
  for (size_t k = 0; k < curve.size(); ++k) out << fmt::format("{},{},{:.9g}\n", seed, k + 1, curve[k]);
}

int Run(const fs::path& dir, int seeds, int budget) {
  fs::create_directories(dir);
  for (const ProblemSpec& spec : kProblems) {
    struct {
      ProblemSpec spec;
      tunepar::Problem problem;
    } p{spec, OrDie(LoadProblem(spec.model, "frontier-mi250x", "default"))};
    const search::SpaceEnumeration space =
        OrDie(search::EnumerateSpace(MakeSpaceQuery(p.problem, spec.world)));
    const runner::PerformanceModel nominal =
        OrDie(runner::PerformanceModel::Create(p.problem.model, p.problem.hardware));
    const search::PriorModel prior = [&](const Layout& l) {
      return PriorOf(nominal.Predict(l));
    };
    std::map<std::string, std::ofstream> curves;
    for (const char* method : {"tunepar", "tunepar-no-prior", "random"}) {
      curves[method].open(dir / fmt::format("curves_{}_{}.csv", method, spec.name));
      curves[method] << "seed,trial,regret\n";
    }
    // The proposers are built once per problem (the prior does not depend on the seed).
    search::ProposerOptions with_prior;
    with_prior.device_memory_bytes = p.problem.hardware.MemoryBytes();
    search::ProposerOptions without = with_prior;
    without.use_prior = false;
    const search::Proposer tunepar(space.legal, prior, with_prior), no_prior(space.legal, prior, without);
    double seconds = 0;
    int proposals = 0;
    for (int seed = 1; seed <= seeds; ++seed) {
      const runner::HardwareProfile hidden = Perturb(p.problem.hardware, static_cast<uint64_t>(seed));
      const Truth truth = MakeTruth(p.problem.model, hidden, space.legal);
      WriteTruth(dir / fmt::format("truth_{}_{}.csv", spec.name, seed), space.legal, truth);
      for (const auto& [method, proposer] : std::vector<std::pair<std::string, const search::Proposer*>>{
               {"tunepar", &tunepar}, {"tunepar-no-prior", &no_prior}}) {
        std::mt19937_64 noise(static_cast<uint64_t>(seed) * 1000003 + std::hash<std::string>()(method));
        std::normal_distribution<double> normal;
        RegretCurve curve(truth);
        std::vector<search::Outcome> history;
        for (int k = 0; k < budget; ++k) {
          const auto start = std::chrono::steady_clock::now();
          const std::vector<search::Proposal> next = proposer->Propose(history, 1);
          seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          ++proposals;
          if (next.empty()) break;
          const int i = proposer->IndexOf(next[0].layout);
          search::Outcome o{next[0].layout, TrialStatus::kOom, std::nullopt};
          if (truth.fits[i]) {
            o.status = TrialStatus::kOk;
            o.step_time_s = truth.step[i] * (1.0 + kNoise * normal(noise));
          }
          curve.Record(i, o.status == TrialStatus::kOk, o.step_time_s.value_or(0));
          history.push_back(o);
        }
        AppendCurve(curves[method], seed, curve.values());
      }
      // Random search over the legal layouts, without replacement.
      std::mt19937_64 rng(static_cast<uint64_t>(seed) * 31337);
      std::vector<int> order(space.legal.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
      std::shuffle(order.begin(), order.end(), rng);
      std::normal_distribution<double> normal;
      RegretCurve curve(truth);
      for (int k = 0; k < budget && k < static_cast<int>(order.size()); ++k) {
        const int i = order[k];
        curve.Record(i, truth.fits[i], truth.step[i] * (1.0 + kNoise * normal(rng)));
      }
      AppendCurve(curves["random"], seed, curve.values());
      fmt::print(stderr, "{} seed {}: optimum {} ({:.1f} s/step)\n", spec.name, seed,
                 LayoutKey(space.legal[truth.best]), truth.step[truth.best]);
    }
    fmt::print(stderr, "{}: {} legal layouts; mean proposal time {:.1f} ms\n", spec.name, space.legal.size(),
               1e3 * seconds / std::max(1, proposals));
  }
  return 0;
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int Report(const fs::path& dir) {
  // curves[problem][method][seed] = regret after each trial
  std::map<std::string, std::map<std::string, std::map<int, std::vector<double>>>> curves;
  int budget = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("curves_", 0) != 0 || e.path().extension() != ".csv") continue;
    const std::string stem = e.path().stem().string().substr(7);  // method_problem
    const size_t split = stem.rfind('_');
    const std::string method = stem.substr(0, split), problem = stem.substr(split + 1);
    std::ifstream in(e.path());
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      int seed = 0, trial = 0;
      double regret = 0;
      if (std::sscanf(line.c_str(), "%d,%d,%lf", &seed, &trial, &regret) != 3) continue;
      auto& c = curves[problem][method][seed];
      if (static_cast<int>(c.size()) < trial) c.resize(trial, 1.0);
      c[trial - 1] = regret;
      budget = std::max(budget, trial);
    }
  }
  std::ofstream summary(dir / "summary.csv");
  summary << "problem,method,seeds,median_trials_to_5pct,median_trials_to_2pct,median_regret_at_10,median_"
             "regret_at_50\n";
  const std::vector<int> checkpoints = {1, 2, 3, 5, 10, 20, 30, 50};
  for (const ProblemSpec& spec : kProblems) {
    auto it = curves.find(spec.name);
    if (it == curves.end()) continue;
    const size_t machines = it->second.empty() ? 0 : it->second.begin()->second.size();
    fmt::print(
        "\n{}: median simple regret after k trials ({} hidden machines), and median trials to reach 5% / "
        "2%\n",
        spec.name, machines);
    fmt::print("{:<18}", "method");
    for (int k : checkpoints) fmt::print(" {:>7}", fmt::format("k={}", k));
    fmt::print(" {:>8} {:>8}\n", "to 5%", "to 2%");
    for (const auto& [method, seeds] : it->second) {
      fmt::print("{:<18}", method);
      for (int k : checkpoints) {
        std::vector<double> at;
        for (const auto& [seed, c] : seeds)
          at.push_back(k <= static_cast<int>(c.size()) ? c[k - 1] : c.back());
        fmt::print(" {:>6.1f}%", 100 * Median(at));
      }
      // Trials to reach a regret level; a run that never reaches it counts as budget + 1 (">").
      auto trials_to = [&](double level) {
        std::vector<double> n;
        for (const auto& [seed, c] : seeds) {
          int first = budget + 1;
          for (size_t k = 0; k < c.size(); ++k) {
            if (c[k] <= level) {
              first = static_cast<int>(k) + 1;
              break;
            }
          }
          n.push_back(first);
        }
        return Median(n);
      };
      const double t5 = trials_to(0.05), t2 = trials_to(0.02);
      auto text = [&](double t) { return t > budget ? fmt::format(">{}", budget) : fmt::format("{:g}", t); };
      fmt::print(" {:>8} {:>8}\n", text(t5), text(t2));
      std::vector<double> at10, at50;
      for (const auto& [seed, c] : seeds) {
        at10.push_back(c[std::min<size_t>(9, c.size() - 1)]);
        at50.push_back(c.back());
      }
      summary << fmt::format("{},{},{},{:g},{:g},{:.5f},{:.5f}\n", spec.name, method, seeds.size(), t5, t2,
                             Median(at10), Median(at50));
    }
  }
  fmt::print(
      "\n(regret = 1 - true throughput of the best measured layout / the optimum; OOM trials count; a "
      "median\n"
      " above the budget prints as >{}; summary in {})\n",
      budget, (dir / "summary.csv").string());
  return 0;
}

int Latency() {
  const tunepar::Problem problem = OrDie(LoadProblem("gpt-1t", "frontier-mi250x", "default"));
  const search::SpaceEnumeration space = OrDie(search::EnumerateSpace(MakeSpaceQuery(problem, 3072)));
  const runner::PerformanceModel nominal =
      OrDie(runner::PerformanceModel::Create(problem.model, problem.hardware));
  const search::PriorModel prior = [&](const Layout& l) {
    return PriorOf(nominal.Predict(l));
  };
  search::ProposerOptions options;
  options.device_memory_bytes = problem.hardware.MemoryBytes();
  const auto build_start = std::chrono::steady_clock::now();
  const search::Proposer proposer(space.legal, prior, options);
  const double build = std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start).count();
  const runner::HardwareProfile hidden = Perturb(problem.hardware, 1);
  const Truth truth = MakeTruth(problem.model, hidden, space.legal);
  // 100 observations, all measured (the largest GP): a random sample of the layouts that fit
  // on the hidden machine.
  std::mt19937_64 rng(5);
  std::vector<int> order;
  for (size_t i = 0; i < space.legal.size(); ++i) {
    if (truth.fits[i]) order.push_back(static_cast<int>(i));
  }
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<search::Outcome> history;
  for (int k = 0; k < 100 && k < static_cast<int>(order.size()); ++k) {
    const int i = order[k];
    history.push_back({space.legal[i], TrialStatus::kOk, truth.step[i]});
  }
  int ok = 0;
  for (const auto& o : history) ok += o.status == TrialStatus::kOk;
  std::vector<double> times;
  for (int r = 0; r < 7; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const auto next = proposer.Propose(history, 1);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  fmt::print("proposal latency, gpt-1t at 3072 ({} legal layouts), {} measured observations, one core:\n",
             space.legal.size(), ok);
  fmt::print("  median {:.1f} ms over {} proposals (goal <= 100 ms); building the proposer once: {:.1f} ms\n",
             1e3 * Median(times), times.size(), 1e3 * build);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "run" && argc > 2) {
    int seeds = 20, budget = 50;
    for (int i = 3; i + 1 < argc; i += 2) {
      if (std::string(argv[i]) == "--seeds") seeds = std::atoi(argv[i + 1]);
      if (std::string(argv[i]) == "--budget") budget = std::atoi(argv[i + 1]);
    }
    return Run(argv[2], seeds, budget);
  }
  if (mode == "report" && argc > 2) return Report(argv[2]);
  if (mode == "latency") return Latency();
  fmt::print(stderr, "usage: search_bench run DIR [--seeds N] [--budget K] | report DIR | latency\n");
  return 2;
}
