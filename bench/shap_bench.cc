// Does the search's surrogate know which knobs matter? After 30 trials of the Bayesian search
// on a hidden machine, the knobs ranked by the surrogate's Shapley importance are compared with
// the knobs ranked by the exact Shapley importance of the hidden machine itself, both with the
// same constraint treatment (search::KnobShapley) and background. The truths are those of the
// search benchmark (bench/truth.h): the performance model with a perturbed profile ("model"),
// and the structurally different truths (other memory accounting, serial data-parallel
// communication, another GEMM-shape curve, a larger pipeline bubble). Spearman rank correlation
// per hidden machine, and its median per truth; goal >= 0.9 for gpt-175b at 1024 and gpt-1t at
// 3072.
//   build/shap_bench [SEEDS] [TRIALS] [STRUCTURE_SEEDS]
#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "bench/truth.h"
#include "search/knob_shapley.h"
#include "search/proposer.h"
#include "search/space.h"
#include "tuner/study/problem.h"
#include "tuner/study/study_context.h"

namespace {

using namespace tunepar;

template <typename T>
T OrDie(Result<T> r) {
  if (!r.ok()) {
    fmt::print(stderr, "shap_bench: {}\n", r.status().message());
    std::exit(1);
  }
  return std::move(r).value();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string Ranking(const search::KnobImportance& g) {
  std::vector<size_t> order(g.knobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return g.mean_abs_phi[a] > g.mean_abs_phi[b]; });
  std::string s;
  for (size_t k : order) s += fmt::format("{}{}", s.empty() ? "" : " > ", search::KnobName(g.knobs[k]));
  return s;
}

// One hidden machine: 30 trials of the search on `truth`, then the two rankings.
double CompareRankings(const search::Proposer& proposer, const std::vector<Layout>& legal, const bench::Truth& truth,
                       int trials, int seed, std::string* text) {
  std::mt19937_64 noise(seed * 977);
  std::normal_distribution<double> normal;
  std::vector<search::Outcome> history;
  for (int k = 0; k < trials; ++k) {
    const std::vector<search::Proposal> next = proposer.Propose(history, 1);
    if (next.empty()) break;
    const int i = proposer.IndexOf(next[0].layout);
    search::Outcome o;
    o.layout = next[0].layout;
    o.status = truth.fits[i] ? TrialStatus::kOk : TrialStatus::kOom;
    if (truth.fits[i]) o.step_time_s = truth.step[i] * (1 + 0.02 * normal(noise));
    history.push_back(o);
  }
  const search::Surrogate s = proposer.Posterior(history);
  std::vector<double> f_true(legal.size()), f_surrogate(legal.size()), runnable(legal.size(), NAN);
  for (size_t i = 0; i < legal.size(); ++i) {
    f_true[i] = -std::log(truth.step[i]);
    f_surrogate[i] = -s.log_step_time[i];
    if (truth.fits[i]) runnable[i] = f_true[i];
  }
  // The same background for both: 100 layouts that run on the hidden machine.
  std::vector<int> background;
  for (size_t i = 0; i < runnable.size(); ++i) {
    if (std::isfinite(runnable[i])) background.push_back(static_cast<int>(i));
  }
  std::mt19937_64 rng(seed);
  std::shuffle(background.begin(), background.end(), rng);
  if (background.size() > 100) background.resize(100);
  std::sort(background.begin(), background.end());
  const search::KnobImportance gt = search::KnobShapley(legal, f_true, background).Global();
  const search::KnobImportance gs = search::KnobShapley(legal, f_surrogate, background).Global();
  const double rho = search::SpearmanCorrelation(gt.mean_abs_phi, gs.mean_abs_phi);
  *text = fmt::format("Spearman {:+.3f}   truth: {}\n                                       surrogate: {}", rho,
                      Ranking(gt), Ranking(gs));
  return rho;
}

}  // namespace

int main(int argc, char** argv) {
  const int seeds = argc > 1 ? std::atoi(argv[1]) : 10;
  const int trials = argc > 2 ? std::atoi(argv[2]) : 30;
  const int structure_seeds = argc > 3 ? std::atoi(argv[3]) : 5;
  struct Problem {
    std::string name, model;
    int world;
  };
  std::vector<std::string> summary;
  for (const Problem& spec :
       {Problem{"gpt-175b@1024", "gpt-175b", 1024}, Problem{"gpt-1t@3072", "gpt-1t", 3072}}) {
    const tunepar::Problem p = OrDie(LoadProblem(spec.model, "frontier-mi250x", "default"));
    const search::SpaceEnumeration space = OrDie(search::EnumerateSpace(MakeSpaceQuery(p, spec.world)));
    const runner::PerformanceModel nominal = OrDie(runner::PerformanceModel::Create(p.model, p.hardware));
    search::ProposerOptions po;
    po.device_memory_bytes = p.hardware.MemoryBytes();
    const search::Proposer proposer(
        space.legal, [&](const Layout& l) { return PriorOf(nominal.Predict(l)); }, po);
    fmt::print("\n{}: {} legal layouts, {} trials of the Bayesian search per hidden machine\n", spec.name,
               space.legal.size(), trials);
    for (const bench::StructureName& structure : bench::Structures()) {
      const bool model = structure.structure == bench::Structure::kModel;
      std::vector<double> rhos;
      for (int seed = 1; seed <= (model ? seeds : structure_seeds); ++seed) {
        const bench::Truth truth =
            model ? bench::MakeTruth(p.model, bench::Perturb(p.hardware, static_cast<uint64_t>(seed)), space.legal)
                  : bench::MakeTruth(p.model, p.hardware, structure.structure, static_cast<uint64_t>(seed), space.legal);
        std::string text;
        rhos.push_back(CompareRankings(proposer, space.legal, truth, trials, seed, &text));
        fmt::print("  {:<12} machine {:>2}: {}\n", structure.name, seed, text);
      }
      summary.push_back(fmt::format("{:<14} {:<12} median Spearman {:.3f} over {:>2} hidden machines (min {:.3f})",
                                    spec.name, structure.name, Median(rhos), rhos.size(),
                                    *std::min_element(rhos.begin(), rhos.end())));
    }
  }
  fmt::print("\nSummary (goal: median >= 0.9)\n");
  for (const std::string& line : summary) fmt::print("{}\n", line);
  return 0;
}
