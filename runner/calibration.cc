#include "runner/calibration.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlopt.hpp>

namespace tunepar::runner {

Result<std::vector<RowFit>> EvaluateRuns(const std::vector<MeasuredRun>& runs, const HardwareProfile& profile,
                                         const Efficiency& efficiency) {
  std::vector<RowFit> rows;
  for (const MeasuredRun& run : runs) {
    PerformanceModel model(run.model, profile, efficiency);
    model.set_ranks_per_node(run.ranks_per_node);
    TUNEPAR_RETURN_IF_ERROR(model.CheckLayout(run.layout).WithContext(run.label));
    const Prediction p = model.Predict(run.layout);
    RowFit r;
    r.label = run.label;
    const ModelShape& m = run.model;
    r.shape = fmt::format("L{} h{} a{} s{} V{} B{}", m.layers, m.hidden, m.heads, m.seq_len, m.vocab, m.global_batch);
    r.layout = run.layout;
    r.measured_step_s = run.step_time_s;
    r.predicted_step_s = p.step_time_s;
    r.error = p.step_time_s / run.step_time_s - 1.0;
    r.memory_gb = p.memory_bytes / 1e9;
    r.fits = p.fits;
    rows.push_back(r);
  }
  return rows;
}

std::vector<EfficiencyKey> DefaultFitSet(const std::vector<MeasuredRun>& runs,
                                         const HardwareProfile& profile) {
  bool link = false, network = false, flash = false;
  for (const MeasuredRun& r : runs) {
    const Layout& l = r.layout;
    flash = flash || l.flash_attention;  // the fused attention's rate, measured where it ran
    const int per_node = std::max(profile.gpus_per_node, r.ranks_per_node);
    const bool spans_nodes = l.World() > per_node;
    link = link || l.tp > 1 || (!spans_nodes && (l.dp > 1 || l.pp > 1));
    network = network || (spans_nodes && (l.dp > 1 || l.pp > 1));
  }
  std::vector<EfficiencyKey> candidates = {EfficiencyKey::kGemmEfficiency};
  if (flash) candidates.push_back(EfficiencyKey::kFlashEfficiency);
  if (link) candidates.push_back(EfficiencyKey::kLinkEfficiency);
  if (network) candidates.push_back(EfficiencyKey::kNetworkEfficiency);
  candidates.push_back(EfficiencyKey::kMemoryEfficiency);
  candidates.push_back(EfficiencyKey::kGemmHalfSize);
  if (link) candidates.push_back(EfficiencyKey::kLinkLatencyUs);
  const size_t keep = std::max<size_t>(1, runs.size() / 4);
  candidates.resize(std::min(keep, candidates.size()));
  return candidates;
}

namespace {

struct FitProblem {
  const std::vector<MeasuredRun>* runs;
  const HardwareProfile* profile;
  Efficiency base;
  std::vector<EfficiencyKey> free;
  int evaluations = 0;

  Efficiency At(const std::vector<double>& x) const {
    Efficiency e = base;
    for (size_t i = 0; i < free.size(); ++i) e[free[i]] = x[i];
    return e;
  }

  // Mean squared log error of step time.
  double Loss(const std::vector<double>& x) {
    ++evaluations;
    const Efficiency e = At(x);
    double sum = 0;
    for (const MeasuredRun& run : *runs) {
      const double predicted = PerformanceModel(run.model, *profile, e)
                                   .set_ranks_per_node(run.ranks_per_node)
                                   .Predict(run.layout)
                                   .step_time_s;
      const double r = std::log(predicted / run.step_time_s);
      sum += r * r;
    }
    return sum / runs->size();
  }
};

double Objective(const std::vector<double>& x, std::vector<double>& /*grad*/, void* data) {
  return static_cast<FitProblem*>(data)->Loss(x);
}

}  // namespace

Result<CalibrationResult> Calibrate(const std::vector<MeasuredRun>& runs, const HardwareProfile& profile,
                                    const CalibrationOptions& options) {
  if (runs.empty()) return InvalidArgument("calibration needs at least one measured run");
  Result<Efficiency> base = Efficiency::FromProfile(profile);
  if (!base.ok()) return base.status();
  // Reject illegal rows before fitting.
  Result<std::vector<RowFit>> check = EvaluateRuns(runs, profile, *base);
  if (!check.ok()) return check.status();

  FitProblem problem{&runs, &profile, *base, options.free};
  CalibrationResult result;
  result.fitted = options.free;
  result.efficiency = *base;
  if (!options.free.empty()) {
    const size_t n = options.free.size();
    std::vector<double> lo(n), hi(n), start(n);
    for (size_t i = 0; i < n; ++i) {
      const EfficiencyParameter& p = EfficiencyParameters()[static_cast<int>(options.free[i])];
      lo[i] = p.lo;
      hi[i] = p.hi;
      start[i] = std::clamp((*base)[options.free[i]], p.lo, p.hi);
    }
    std::mt19937 rng(options.seed);
    std::vector<double> best = start;
    double best_loss = problem.Loss(start);
    for (int r = 0; r < std::max(1, options.restarts); ++r) {
      std::vector<double> x = start;
      if (r > 0) {
        for (size_t i = 0; i < n; ++i) x[i] = std::uniform_real_distribution<double>(lo[i], hi[i])(rng);
      }
      nlopt::opt opt(nlopt::LN_BOBYQA, static_cast<unsigned>(n));
      opt.set_lower_bounds(lo);
      opt.set_upper_bounds(hi);
      opt.set_min_objective(Objective, &problem);
      opt.set_xtol_rel(1e-6);
      opt.set_ftol_abs(1e-12);
      opt.set_maxeval(4000);
      double loss = 0;
      try {
        opt.optimize(x, loss);
      } catch (const std::exception&) {
        loss = problem.Loss(x);  // a roundoff-limited stop still leaves a usable point
      }
      if (loss < best_loss) {
        best_loss = loss;
        best = x;
      }
    }
    result.efficiency = problem.At(best);
  }
  result.evaluations = problem.evaluations;
  Result<std::vector<RowFit>> rows = EvaluateRuns(runs, profile, result.efficiency);
  if (!rows.ok()) return rows.status();
  result.rows = std::move(*rows);
  for (const RowFit& r : result.rows) {
    result.mean_abs_error += std::abs(r.error) / result.rows.size();
    result.max_abs_error = std::max(result.max_abs_error, std::abs(r.error));
  }
  return result;
}

namespace {

enum class Bound { kNone, kFloor, kCeiling };

// Which end of its range a fitted value sits at, counting only the ends that are limits of the
// search rather than values hardware has: a fraction of peak (its range ends at 1) cannot reach
// 0, so its range starts at a stand-in floor (0.05); a size, latency or overhead has no upper
// limit, so its range ends at a stand-in ceiling. 1.0 of peak and zero latency are physical.
Bound NonPhysicalBound(const EfficiencyParameter& p, double value) {
  const double tolerance = 1e-3 * (p.hi - p.lo);  // BOBYQA stops within its xtol of a bound
  const bool fraction = p.hi == 1.0;
  if (fraction && p.lo > 0 && value <= p.lo + tolerance) return Bound::kFloor;
  if (!fraction && value >= p.hi - tolerance) return Bound::kCeiling;
  return Bound::kNone;
}

}  // namespace

FitJudgement JudgeFit(const CalibrationResult& result) {
  FitJudgement j;
  // Names grouped by the bound they sit at: "gemm_efficiency and link_efficiency at the floor
  // of their range (0.05)".
  struct AtBound {
    Bound bound;
    double value;
    std::vector<std::string> names;
  };
  std::vector<AtBound> groups;
  for (EfficiencyKey k : result.fitted) {
    const EfficiencyParameter& p = EfficiencyParameters()[static_cast<int>(k)];
    const Bound b = NonPhysicalBound(p, result.efficiency[k]);
    if (b == Bound::kNone) continue;
    j.at_bound.push_back(k);
    const double value = b == Bound::kFloor ? p.lo : p.hi;
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const AtBound& a) { return a.bound == b && a.value == value; });
    if (g == groups.end()) g = groups.insert(groups.end(), AtBound{b, value, {}});
    g->names.emplace_back(p.name);
  }
  const bool floor =
      std::any_of(groups.begin(), groups.end(), [](const AtBound& g) { return g.bound == Bound::kFloor; });
  // A common factor: log(predicted / measured) of every run on one side of 0 and within half
  // its mean of the mean, the mean itself beyond what the error limit allows.
  const size_t n = result.rows.size();
  double mean_log = 0;
  double min_error = n > 0 ? result.rows[0].error : 0, max_error = min_error;
  for (const RowFit& r : result.rows) mean_log += std::log1p(r.error) / n;
  bool one_sign = n > 0;
  double spread = 0;
  for (const RowFit& r : result.rows) {
    one_sign = one_sign && (r.error > 0) == (mean_log > 0) && r.error != 0;
    spread = std::max(spread, std::abs(std::log1p(r.error) - mean_log));
    min_error = std::min(min_error, r.error);
    max_error = std::max(max_error, r.error);
  }
  j.common_factor = std::exp(mean_log);
  j.off_by_common_factor =
      one_sign && spread < 0.5 * std::abs(mean_log) && std::abs(mean_log) >= std::log1p(kMaxMeanAbsError);

  const bool inaccurate = result.mean_abs_error > kMaxMeanAbsError;
  j.failed = !j.at_bound.empty() || inaccurate;
  if (!j.failed) return j;
  std::vector<std::string> what;
  for (const AtBound& g : groups) {
    what.push_back(fmt::format("{} at the {} of {} range ({:g})", fmt::join(g.names, " and "),
                               g.bound == Bound::kFloor ? "floor" : "ceiling", g.names.size() > 1 ? "their" : "its",
                               g.value));
  }
  if (inaccurate) {
    what.push_back(fmt::format("mean |error| {:.1f}% (more than {:.0f}%)", 100 * result.mean_abs_error,
                               100 * kMaxMeanAbsError));
  }
  const size_t fitted = result.fitted.size();
  std::string cause;
  if (n < 2 * fitted) {
    cause = fmt::format(
        "likely too few runs: {} for {} fitted parameters (give at least {}, or fit fewer with --fit)", n,
        fitted, 2 * fitted);
  } else if (j.off_by_common_factor) {
    const bool fast = j.common_factor < 1;
    cause = fmt::format(
        "every prediction is about {:.3g}x too {}: likely a profile of another machine, or measurements in other "
        "units",
        fast ? 1 / j.common_factor : j.common_factor, fast ? "fast" : "slow");
  } else if (floor) {
    cause = "the runs are slower than this profile allows even there: likely a profile of another machine or "
            "measurements in other units, or runs that barely depend on it (fit fewer with --fit)";
  } else {
    cause = fmt::format(
        "the errors differ from run to run ({:+.0f}% to {:+.0f}%): the model with this profile does not explain "
        "these runs; check them, or fit other parameters (--fit)",
        100 * min_error, 100 * max_error);
  }
  j.reason = fmt::format("{}; {}", fmt::join(what, ", "), cause);
  return j;
}

namespace {

// Removes the table `name` (its header line and every line up to the next table header);
// *at is where it stood (the text's end when absent).
std::string RemoveTable(const std::string& text, const std::string& name, size_t* at) {
  std::istringstream in(text);
  std::string line, out;
  bool skipping = false;
  *at = std::string::npos;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(" \t");
    const bool header = first != std::string::npos && line[first] == '[';
    if (header) {
      skipping = line.substr(first) == "[" + name + "]";
      if (skipping && *at == std::string::npos) *at = out.size();
    }
    if (!skipping) out += line + "\n";
  }
  if (*at == std::string::npos) *at = out.size();
  return out;
}

std::string TomlString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string WriteCalibratedProfile(const std::string& profile_toml, const HardwareProfile& profile,
                                   const CalibrationResult& result, const std::string& data_name,
                                   const std::string& date) {
  const FitJudgement judgement = JudgeFit(result);
  size_t calibration_at = 0, at = 0;
  std::string text =
      RemoveTable(RemoveTable(profile_toml, "calibration", &calibration_at), "efficiency", &at);
  const std::string fit =
      fmt::format("tunepar calibrate on {} ({}): {} runs, mean |error| {:.1f}%, worst {:.1f}%", data_name,
                  date, result.rows.size(), 100 * result.mean_abs_error, 100 * result.max_abs_error) +
      (judgement.failed ? "; failed: " + judgement.reason : "");
  std::string table = "[efficiency]\n";
  table += fmt::format("# {}\n", fit);
  for (const EfficiencyParameter& p : EfficiencyParameters()) {
    const bool fitted = std::find(result.fitted.begin(), result.fitted.end(), p.key) != result.fitted.end();
    std::string origin = "fitted", source = fit;
    if (!fitted) {
      auto it = profile.efficiency.find(std::string(p.name));
      origin = it != profile.efficiency.end() ? std::string(ToString(it->second.origin)) : "assumed";
      source = it != profile.efficiency.end() ? it->second.source : "default";
    }
    table += fmt::format("{} = {{ value = {:.6g}, origin = \"{}\", source = {} }}\n", p.name,
                         result.efficiency[p.key], origin, TomlString(source));
  }
  std::vector<std::string> names;
  for (EfficiencyKey k : result.fitted)
    names.push_back(TomlString(std::string(EfficiencyParameters()[static_cast<int>(k)].name)));
  table += "\n[calibration]\n";
  if (judgement.failed) table += fmt::format("# failed: {}\n", judgement.reason);
  table += fmt::format("data = {}\n", TomlString(data_name));
  table += fmt::format("date = {}\n", TomlString(date));
  table += fmt::format("runs = {}\n", result.rows.size());
  table += fmt::format("fitted = [{}]\n", fmt::join(names, ", "));
  table += fmt::format("mean_abs_error_pct = {:.2f}\n", 100 * result.mean_abs_error);
  table += fmt::format("max_abs_error_pct = {:.2f}\n\n", 100 * result.max_abs_error);
  if (at == text.size() && !text.empty() && text.back() == '\n' && text.size() >= 2 &&
      text[text.size() - 2] != '\n') {
    text += "\n";
    at = text.size();
  }
  text.insert(at, table);
  while (text.size() >= 2 && text[text.size() - 1] == '\n' && text[text.size() - 2] == '\n') text.pop_back();
  return text;
}

}  // namespace tunepar::runner
