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
  bool link = false, network = false;
  for (const MeasuredRun& r : runs) {
    const Layout& l = r.layout;
    const int per_node = std::max(profile.gpus_per_node, r.ranks_per_node);
    const bool spans_nodes = l.World() > per_node;
    link = link || l.tp > 1 || (!spans_nodes && (l.dp > 1 || l.pp > 1));
    network = network || (spans_nodes && (l.dp > 1 || l.pp > 1));
  }
  std::vector<EfficiencyKey> candidates = {EfficiencyKey::kGemmEfficiency};
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
  size_t calibration_at = 0, at = 0;
  std::string text =
      RemoveTable(RemoveTable(profile_toml, "calibration", &calibration_at), "efficiency", &at);
  const std::string fit =
      fmt::format("tunepar calibrate on {} ({}): {} runs, mean |error| {:.1f}%, worst {:.1f}%", data_name,
                  date, result.rows.size(), 100 * result.mean_abs_error, 100 * result.max_abs_error);
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
