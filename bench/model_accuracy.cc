// The performance model against published measurements (not a test: it prints the figures).
//   build/model_accuracy [DATA_DIR]      (DATA_DIR defaults to the source tree's bench/data)
// 1. Megatron-LM Table 1 on DGX A100 with the ONE dgx-a100 profile: TFLOP/s per GPU (the
//    paper's recompute-counted formula) predicted vs published; goal mean |error| <= 5%,
//    worst <= 10%, every row fits in 80 GB.
// 2. Frontier (Dash et al.) public 175B and 1T layouts with the frontier-mi250x profile:
//    % of the 191.5 TFLOP/s peak predicted vs reported; goal within 15%.
// 3. Layouts known not to fit are predicted not to fit.
// 4. Prediction speed on one core; goal >= 1 million predictions per second.
// 5. MosaicML llm-foundry MPT on H100 with PyTorch FSDP only (FULL_SHARD = zero 3,
//    SHARD_GRAD_OP = zero 2), with the dgx-h100 profile as committed (nothing fitted to these
//    rows): TFLOP/s per GPU by llm-foundry's formula predicted vs published, whether it fits in
//    80 GB, the predicted step's breakdown; mean and worst |error| per sharding strategy.
// 6. NVIDIA's FP8 DGX-H100 rows with cp 1 (profile dgx-h100, nothing fitted), and the same rows
//    predicted as bf16.
// 7. NVIDIA's FP8 DGX-H100 rows with cp 2 (profile dgx-h100, nothing fitted): TFLOP/s error per
//    row, the exposed K/V exchange's share of the step, and each layout predicted with cp 1 (dp
//    doubled, the same world and global batch).
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
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

// Section 5: every row of `runs` predicted on `hw`, its step time and memory broken down.
void CompareFsdp(const std::vector<runner::MeasuredRun>& runs, const runner::HardwareProfile& hw) {
  fmt::print("{:<12} {:>4} {:<21} {:>6} {:>6} {:>7} {:>6} | {:>6} {:>6} {:>6} {:>6} {:>6} {:>5} | {:>5} {:>5} {:>5} {:>5} {:>5}\n",
             "run", "GPUs", "layout", "publ.", "pred.", "error", "comp.", "step", "comp", "dp", "gather",
             "optim", "other", "mem", "state", "gathr", "act", "rest");
  fmt::print("{:<12} {:>4} {:<21} {:>6} {:>6} {:>7} {:>6} | {:>6} {:>6} {:>6} {:>6} {:>6} {:>5} | {:>5} {:>5} {:>5} {:>5} {:>5}\n",
             "", "", "", "TF/s", "TF/s", "", "TF/s", "s", "s", "s", "s", "s", "s", "GB", "GB", "GB", "GB", "GB");
  struct Stat {
    double sum = 0, worst = 0;
    int n = 0, fit = 0;
  };
  Stat by_stage[4];
  // Per model (the label without its GPU count), TFLOP/s published and predicted by GPU count.
  std::vector<std::pair<std::string, std::map<int, std::pair<double, double>>>> scaling;
  for (const runner::MeasuredRun& run : runs) {
    const runner::PerformanceModel model = OrDie(runner::PerformanceModel::Create(run.model, hw));
    if (const Status s = model.CheckLayout(run.layout); !s.ok()) {
      fmt::print(stderr, "model_accuracy: {}: {}\n", run.label, s.message());
      std::exit(1);
    }
    const runner::Prediction p = model.Predict(run.layout);
    const Layout& l = run.layout;
    const double flops = run.FlopsPerStep() / l.World() / 1e12;  // the run's formula (llm-foundry)
    const double published = flops / run.step_time_s, predicted = flops / p.step_time_s;
    const double error = predicted / published - 1.0;
    const runner::TimeBreakdown& t = p.time;
    const runner::MemoryBreakdown& m = p.memory;
    const double other = t.tp_comm + t.pp_p2p + t.bubble + t.device_sharing;
    fmt::print(
        "{:<12} {:>4} {:<21} {:>6.1f} {:>6.1f} {:>+6.1f}% {:>6.1f} | {:>6.3f} {:>6.3f} {:>6.3f} {:>6.3f} {:>6.3f} {:>5.3f} | "
        "{:>5.1f} {:>5.1f} {:>5.1f} {:>5.1f} {:>5.1f}{}\n",
        run.label, l.World(),
        fmt::format("dp{} mbs{} z{} rc{}", l.dp, l.micro_batch, l.zero,
                    l.recompute == Recompute::kFull ? "full" : l.recompute == Recompute::kSelective ? "sel" : "none"),
        published, predicted, 100 * error, flops / t.compute, p.step_time_s, t.compute, t.dp_comm_exposed,
        t.weight_gather_exposed, t.optimizer, other, p.memory_bytes / 1e9,
        (m.weights + m.gradients + m.optimizer_states) / 1e9, m.gathered_weights / 1e9, m.activations / 1e9,
        (m.comm_buffers + m.runtime_overhead) / 1e9, p.fits ? "" : " OOM");
    const std::string name = run.label.substr(0, run.label.rfind('-'));
    if (scaling.empty() || scaling.back().first != name) scaling.push_back({name, {}});
    scaling.back().second[l.World()] = {published, predicted};
    Stat& s = by_stage[l.zero];
    s.sum += std::abs(error);
    s.worst = std::max(s.worst, std::abs(error));
    s.n += 1;
    s.fit += p.fits ? 1 : 0;
  }
  for (int zero : {3, 2}) {
    const Stat& s = by_stage[zero];
    if (s.n == 0) continue;
    fmt::print("{} (zero {}): TFLOP/s error mean |error| {:.2f}%, worst {:.2f}% ({} rows); predicted to fit in {:g} GB: {} of {}\n",
               zero == 3 ? "FULL_SHARD" : "SHARD_GRAD_OP", zero, 100 * s.sum / s.n, 100 * s.worst, s.n,
               hw.memory_gb.value, s.fit, s.n);
  }
  fmt::print("Scaling out: TFLOP/s per GPU on the most GPUs / on the fewest\n");
  for (const auto& [name, by_gpus] : scaling) {
    if (by_gpus.size() < 2) continue;
    const std::pair<double, double>& few = by_gpus.begin()->second;
    const std::pair<double, double>& most = by_gpus.rbegin()->second;
    fmt::print("  {:<8} {:>3} -> {:>3} GPUs: published {:.3f}, predicted {:.3f}\n", name, by_gpus.begin()->first,
               by_gpus.rbegin()->first, most.first / few.first, most.second / few.second);
  }
}

// Section 6: NVIDIA's FP8 rows, and the same layouts predicted as bf16 (what tunepar could say
// before fp8 was a precision).
void CompareFp8(const std::vector<runner::MeasuredRun>& fp8_runs, const runner::HardwareProfile& h100) {
  fmt::print(
      "\n6. NVIDIA NeMo / Megatron-Bridge FP8 pre-training, DGX-H100, cp 1 dense rows, profile dgx-h100 (nothing "
      "fitted to these rows; TFLOP/s by each row's formula)\n");
  const Summary fp8 = Compare(fp8_runs, h100, 0);
  std::vector<runner::MeasuredRun> as_bf16 = fp8_runs;
  for (runner::MeasuredRun& run : as_bf16) run.layout.precision = Precision::kBf16;
  const std::vector<runner::RowFit> bf16_rows =
      OrDie(runner::EvaluateRuns(as_bf16, h100, OrDie(runner::Efficiency::FromProfile(h100))));
  double bf16_mean = 0;
  for (const runner::RowFit& r : bf16_rows) bf16_mean += std::abs(r.measured_step_s / r.predicted_step_s - 1) / bf16_rows.size();
  fmt::print("FP8 TFLOP/s error: mean |error| {:.2f}%, worst {:.2f}% ({} rows; all fit in 80 GB: {}); the same rows "
             "predicted as bf16: mean |error| {:.2f}%\n",
             100 * fp8.mean, 100 * fp8.worst, fp8_runs.size(), fp8.all_fit ? "yes" : "NO", 100 * bf16_mean);
}

// One layout of `run` on `hw`: TFLOP/s by the run's formula, memory, the exposed K/V exchange's
// share of the step; nothing when the layout is illegal (its reason in `why`).
struct CpPrediction {
  double tflops = 0, memory_gb = 0, cp_share = 0;
  bool fits = false;
};

std::optional<CpPrediction> PredictLayout(const runner::MeasuredRun& run, const Layout& l,
                                          const runner::HardwareProfile& hw, std::string* why) {
  const runner::PerformanceModel model = OrDie(runner::PerformanceModel::Create(run.model, hw));
  if (const Status s = model.CheckLayout(l); !s.ok()) {
    *why = s.message();
    return std::nullopt;
  }
  const runner::Prediction p = model.Predict(l);
  return CpPrediction{run.FlopsPerStep() / l.World() / 1e12 / p.step_time_s, p.memory_bytes / 1e9,
                      p.time.cp_comm / p.step_time_s, p.fits};
}

std::string LayoutText(const Layout& l) {
  return fmt::format("tp{} pp{} cp{} dp{} mbs{}{}{}", l.tp, l.pp, l.cp, l.dp, l.micro_batch,
                     l.virtual_stages > 1 ? fmt::format(" v{}", l.virtual_stages) : "", l.uneven_stages ? " uneven" : "");
}

// Section 7: NVIDIA's cp 2 rows as published, and each layout with cp 1 and dp doubled (the same
// world and global batch), so a reader sees what the K/V ring costs and the memory it saves.
void CompareCp(const std::vector<runner::MeasuredRun>& cp_runs, const runner::HardwareProfile& h100) {
  fmt::print(
      "\n7. NVIDIA NeMo / Megatron-Bridge FP8 pre-training with context parallelism, DGX-H100, profile dgx-h100 "
      "(nothing fitted to these rows; TFLOP/s by each row's formula); K/V: the predicted exposed K/V ring "
      "exchange's share of the step; cp 1: the same layout with cp 1 and dp doubled\n");
  fmt::print("{:<14} {:>5} {:<29} {:>6} {:>6} {:>7} {:>10} {:>5} | {:<29} {:>6} {:>7} {:>6}\n", "run", "GPUs",
             "layout (as published)", "publ.", "pred.", "error", "mem", "K/V", "cp 1 layout", "pred.", "error", "mem");
  fmt::print("{:<14} {:>5} {:<29} {:>6} {:>6} {:>7} {:>10} {:>5} | {:<29} {:>6} {:>7} {:>6}\n", "", "", "", "TF/s",
             "TF/s", "", "GB", "", "", "TF/s", "", "GB");
  double mean = 0, worst = 0, cp1_mean = 0;
  int fit = 0, cp1_rows = 0;
  for (const runner::MeasuredRun& run : cp_runs) {
    std::string why;
    const std::optional<CpPrediction> p = PredictLayout(run, run.layout, h100, &why);
    if (!p) {
      fmt::print(stderr, "model_accuracy: {}: {}\n", run.label, why);
      std::exit(1);
    }
    const double published = run.FlopsPerStep() / run.layout.World() / 1e12 / run.step_time_s;
    const double error = p->tflops / published - 1;
    Layout cp1 = run.layout;
    cp1.dp *= cp1.cp;
    cp1.num_micro_batches /= cp1.cp;  // the same global batch
    cp1.cp = 1;
    const std::optional<CpPrediction> q = PredictLayout(run, cp1, h100, &why);
    const std::string cp1_text =
        q ? fmt::format("{:>6.1f} {:>+6.1f}% {:>6.1f}{}", q->tflops, 100 * (q->tflops / published - 1), q->memory_gb,
                        q->fits ? "" : " OOM")
          : "illegal: " + why;
    fmt::print("{:<14} {:>5} {:<29} {:>6.1f} {:>6.1f} {:>+6.1f}% {:>10} {:>4.1f}% | {:<29} {}\n", run.label,
               run.layout.World(), LayoutText(run.layout), published, p->tflops, 100 * error,
               fmt::format("{:.1f}{}", p->memory_gb, p->fits ? "" : " OOM"), 100 * p->cp_share, LayoutText(cp1),
               cp1_text);
    mean += std::abs(error) / cp_runs.size();
    worst = std::max(worst, std::abs(error));
    fit += p->fits ? 1 : 0;
    if (q) cp1_mean += std::abs(q->tflops / published - 1), ++cp1_rows;
  }
  fmt::print("CP TFLOP/s error: mean |error| {:.2f}%, worst {:.2f}% ({} rows; predicted to fit in {:g} GB: {} of {}); "
             "the same layouts with cp 1: mean |error| {:.2f}% ({} legal)\n",
             100 * mean, 100 * worst, cp_runs.size(), h100.memory_gb.value, fit, cp_runs.size(),
             cp1_rows ? 100 * cp1_mean / cp1_rows : 0.0, cp1_rows);
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

  const runner::HardwareProfile h100 = Profile("dgx-h100");
  fmt::print(
      "\n5. MosaicML llm-foundry MPT, PyTorch FSDP only (tp1 pp1, dp = GPUs), H100 80GB, profile dgx-h100 "
      "(nothing fitted to these rows)\n"
      "TFLOP/s per GPU by llm-foundry's formula (6 N s + 12 L h s^2 per sequence); comp.: the predicted compute "
      "alone; step = comp + dp (gradient reduce-scatter, zero 2's weight gather) + gather (zero 3's per-layer "
      "gathers) + optim + other; mem: state = weights + gradients + Adam, gathr = zero 3's whole layers, act, "
      "rest = buffers + runtime overhead\n");
  CompareFsdp(Runs(data + "/mpt-fsdp-h100.csv"), h100);

  CompareFp8(Runs(data + "/nvidia-h100-fp8.csv"), h100);
  CompareCp(Runs(data + "/nvidia-h100-cp.csv"), h100);
  return 0;
}
