// The performance model against published measurements (not a test: it prints the figures).
//   build/model_accuracy [DATA_DIR]      (DATA_DIR defaults to the source tree's bench/data)
// 1. Megatron-LM Table 1 on DGX A100 with the ONE dgx-a100 profile: TFLOP/s per GPU (the
//    paper's recompute-counted formula) predicted vs published; goal mean |error| <= 5%,
//    worst <= 10%, every row fits in 80 GB.
// 2. Frontier (Dash et al.) public 175B and 1T layouts with the frontier-mi250x profile:
//    % of the 191.5 TFLOP/s peak predicted vs reported; goal within 15%.
// 3. Layouts known not to fit are predicted not to fit.
// 4. Prediction speed on one core; goal >= 1 million predictions per second.
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "runner/calibration.h"
#include "runner/performance_model.h"
#include "search/space.h"
#include "base/presets.h"
#include "tuner/study/problem.h"

namespace {

using namespace tunepar;

template <typename T>
T OrDie(Result<T> r) {
  if (!r.ok()) {
    fmt::print(stderr, "model_accuracy: {}\n", r.status().message());
    std::exit(1);
  }
  return std::move(r).value();
}

std::vector<runner::MeasuredRun> Runs(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return OrDie(runner::ParseMeasuredRuns(text.str(), path));
}

runner::HardwareProfile Profile(const std::string& name) {
  const ConfigText text = OrDie(ResolveConfig("hardware", name));
  return OrDie(runner::ParseHardwareProfile(text.text, text.origin));
}

struct Summary {
  double mean = 0, worst = 0;
  bool all_fit = true;
};

// Prints each run's published and predicted TFLOP/s (by the run's own formula), as TFLOP/s or as
// % of `peak_tflops` when given.
Summary Compare(const std::vector<runner::MeasuredRun>& runs, const runner::HardwareProfile& hw,
                double peak_tflops) {
  const std::vector<runner::RowFit> rows =
      OrDie(runner::EvaluateRuns(runs, hw, OrDie(runner::Efficiency::FromProfile(hw))));
  const bool pct = peak_tflops > 0;
  fmt::print("{:<18} {:>5} {:<22} {:>10} {:>10} {:>7} {:>8}\n", "run", "GPUs", "layout",
             pct ? "published" : "published", pct ? "predicted" : "predicted", "error", "mem GB");
  fmt::print("{:<18} {:>5} {:<22} {:>10} {:>10} {:>7} {:>8}\n", "", "", "", pct ? "% of peak" : "TFLOP/s",
             pct ? "% of peak" : "TFLOP/s", "", "");
  Summary s;
  for (size_t i = 0; i < rows.size(); ++i) {
    const runner::RowFit& r = rows[i];
    const double flops = runs[i].FlopsPerStep() / r.layout.World() / 1e12;
    double published = flops / r.measured_step_s, predicted = flops / r.predicted_step_s;
    const double error = predicted / published - 1.0;
    if (pct) {
      published *= 100 / peak_tflops;
      predicted *= 100 / peak_tflops;
    }
    const Layout& l = r.layout;
    fmt::print("{:<18} {:>5} {:<22} {:>10.2f} {:>10.2f} {:>+6.1f}% {:>7.1f}{}\n", r.label, l.World(),
               fmt::format("tp{} pp{} dp{} mbs{}{}", l.tp, l.pp, l.dp, l.micro_batch,
                           l.virtual_stages > 1 ? fmt::format(" v{}", l.virtual_stages) : ""),
               published, predicted, 100 * error, r.memory_gb, r.fits ? "" : " OOM");
    s.mean += std::abs(error) / rows.size();
    s.worst = std::max(s.worst, std::abs(error));
    s.all_fit = s.all_fit && r.fits;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string data = argc > 1 ? argv[1] : std::string(TUNEPAR_SOURCE_DIR) + "/bench/data";
  fmt::print("tunepar performance model ({})\n\n", runner::kPerformanceModelId);

  const runner::HardwareProfile a100 = Profile("dgx-a100");
  fmt::print("1. Megatron-LM Table 1 (Narayanan et al. 2021), DGX A100, one profile (dgx-a100{})\n",
             a100.calibration
                 ? fmt::format(", fitted on this table: {}", fmt::join(a100.calibration->fitted, ", "))
                 : "");
  const Summary t1 = Compare(Runs(data + "/megatron_table1.csv"), a100, 0);
  fmt::print(
      "TFLOP/s error: mean |error| {:.2f}% (goal <= 5%), worst {:.2f}% (goal <= 10%); all rows fit in 80 GB: "
      "{}\n\n",
      100 * t1.mean, 100 * t1.worst, t1.all_fit ? "yes" : "NO");

  const runner::HardwareProfile mi250x = Profile("frontier-mi250x");
  fmt::print("2. Frontier (Dash et al. 2023), MI250X GCDs, profile frontier-mi250x{}\n",
             mi250x.calibration
                 ? fmt::format(" (fitted on these rows: {})", fmt::join(mi250x.calibration->fitted, ", "))
                 : "");
  const Summary fr = Compare(Runs(data + "/frontier_dash2023.csv"), mi250x, mi250x.peak_tflops_bf16.value);
  fmt::print("%-of-peak error: mean |error| {:.2f}%, worst {:.2f}% (goal: 175B and 1T within 15%)\n\n",
             100 * fr.mean, 100 * fr.worst);

  fmt::print("3. Known-infeasible layouts\n");
  const ModelShape t1t =
      OrDie(ParseModelShape(OrDie(ResolveConfig("models", "gpt-1t")).text, "gpt-1t"));
  for (const char* hw_name : {"dgx-a100", "dgx-h100", "frontier-mi250x"}) {
    const runner::HardwareProfile hw = Profile(hw_name);
    const runner::PerformanceModel model = OrDie(runner::PerformanceModel::Create(t1t, hw));
    Layout l;
    l.dp = t1t.global_batch;
    l.num_micro_batches = 1;
    const runner::Prediction p = model.Predict(l);
    fmt::print("gpt-1t tp1 pp1 dp{} on {:<16} needs {:>8.0f} GB of {:g} GB: {}\n", l.dp, hw_name,
               p.memory_bytes / 1e9, hw.memory_gb.value, p.fits ? "FITS (wrong)" : "does not fit");
  }

  fmt::print("\n4. Speed: every legal layout of gpt-1t at world 3072 (default space), one core\n");
  const Problem problem = OrDie(LoadProblem("gpt-1t", "frontier-mi250x", "default"));
  const search::SpaceEnumeration space = OrDie(search::EnumerateSpace(MakeSpaceQuery(problem, 3072)));
  const runner::PerformanceModel model =
      OrDie(runner::PerformanceModel::Create(problem.model, problem.hardware));
  double sink = 0;
  int64_t predictions = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < 1.0) {
    for (const Layout& l : space.legal) sink += model.Predict(l).step_time_s;
    predictions += static_cast<int64_t>(space.legal.size());
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  fmt::print("{:.1f} million predictions per second (goal >= 1); {} layouts in {:.2f} ms{}\n",
             predictions / elapsed / 1e6, space.legal.size(),
             1e3 * elapsed * space.legal.size() / predictions, sink > 0 ? "" : " ");
  return 0;
}
