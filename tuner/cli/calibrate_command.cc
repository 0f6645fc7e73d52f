// `tunepar calibrate`: fits a hardware profile's efficiency parameters to measured runs (a CSV
// file of published or measured runs, or a study's measured trials) and writes the profile.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/names.h"
#include "base/presets.h"
#include "base/provenance.h"
#include "runner/calibration.h"
#include "search/knob_shapley.h"
#include "tuner/backends/core_backend_config.h"
#include "tuner/cli/commands.h"
#include "tuner/loops/calibration_sweep.h"
#include "tuner/output/text_table.h"
#include "tuner/study/stored_study.h"

namespace tunepar {

namespace {

struct CalibrateOptions {
  std::string from;      // a CSV file, or a study in the store
  SweepOptions sweep;    // or: measure a sweep with tunepar-core (--backend local|slurm)
  std::string hardware;  // the profile to start from (its peaks, links and assumed values)
  std::string output;    // "" = print the fit only
  std::string fit;       // comma-separated parameter names; "" = DefaultFitSet
  std::string name;      // the new profile's name; "" = DerivedProfileName
  bool force = false;    // accept a failed fit: write it (with -o) and exit 0 with a warning
  int restarts = 12;
};

Result<std::vector<runner::EfficiencyKey>> ParseFitList(const std::string& list) {
  std::vector<runner::EfficiencyKey> keys;
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    const runner::EfficiencyParameter* p = runner::FindEfficiencyParameter(name);
    if (p == nullptr) {
      std::vector<std::string> known;
      for (const auto& q : runner::EfficiencyParameters()) known.emplace_back(q.name);
      return InvalidArgument(
          fmt::format("--fit: unknown parameter '{}' (known: {})", name, fmt::join(known, ", ")));
    }
    keys.push_back(p->key);
  }
  if (keys.empty()) return InvalidArgument("--fit names no parameter");
  return keys;
}

// Measured runs from a study: its ok trials that a measuring backend ran, each placed as its
// trial was (ranks per node, from the trial; else as most of the study's trials were).
Result<std::vector<runner::MeasuredRun>> RunsFromStudy(const std::string& store_dir, const std::string& name) {
  Result<StoredStudy> stored = ReadStoredStudy(store_dir, name);
  if (!stored.ok() && stored.status().code() == StatusCode::kNotFound) {
    return NotFound(fmt::format("--from '{}' is neither a readable file nor a study in store '{}'", name, store_dir));
  }
  if (!stored.ok()) return stored.status();
  const StudyContext& context = stored->context;
  std::vector<runner::MeasuredRun> runs;
  for (const store::TrialRecord& t : stored->trials) {
    if (t.status != TrialStatus::kOk || t.backend == "model" || !t.step_time_s) continue;
    runs.push_back({fmt::format("{}/{}", t.node_id, t.number), context.problem.model, t.layout, *t.step_time_s,
                    fmt::format("study {} trial {}/{}", context.study.name, t.node_id, t.number), "model",
                    t.ranks_per_node.value_or(context.ranks_per_node)});
  }
  if (runs.empty()) {
    return InvalidArgument(fmt::format(
        "study '{}' has no measured ok trials to fit (model-backend predictions cannot calibrate the model)", name));
  }
  return runs;
}

// How well predicted step times track measured ones.
struct Agreement {
  double spearman = 0;
  double median_abs_error = 0;
  // With runs of several model shapes: the mean of the Spearman correlations within each shape
  // of at least four runs (how well layouts are ranked, not shapes); 0 shapes: not computed.
  double spearman_within_shapes = 0;
  int shapes = 0;
};

Result<Agreement> AgreementOf(const std::vector<runner::RowFit>& rows) {
  if (rows.size() < 2) return InvalidArgument("too few runs");
  std::vector<double> measured, predicted, errors;
  for (const runner::RowFit& r : rows) {
    measured.push_back(r.measured_step_s);
    predicted.push_back(r.predicted_step_s);
    errors.push_back(std::abs(r.error));
  }
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  Agreement a{search::SpearmanCorrelation(measured, predicted),
              n % 2 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2])};
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by_shape;
  for (const runner::RowFit& r : rows) {
    by_shape[r.shape].first.push_back(r.measured_step_s);
    by_shape[r.shape].second.push_back(r.predicted_step_s);
  }
  if (by_shape.size() > 1) {
    double sum = 0;
    for (const auto& [shape, values] : by_shape) {
      if (values.first.size() < 4) continue;
      sum += search::SpearmanCorrelation(values.first, values.second);
      ++a.shapes;
    }
    if (a.shapes > 0) a.spearman_within_shapes = sum / a.shapes;
  }
  return a;
}

// Where the runs came from: `name` for the profile's record, `stem` for the profile's name.
struct DataSource {
  std::string name;  // e.g. "megatron_table1.csv", "study gpt-22b-w64"
  std::string stem;  // e.g. "megatron_table1", "gpt-22b-w64", "small-w4"
};

// The measured runs to fit: a sweep measured now, a CSV file, or a study's trials.
Result<std::vector<runner::MeasuredRun>> ReadRuns(const GlobalOptions& global, const CalibrateOptions& o,
                                                  DataSource* data) {
  if (o.from.empty() == o.sweep.backend.empty())
    return InvalidArgument("give --from FILE|STUDY (measured runs) or --backend local|slurm (measure a sweep)");
  std::error_code ec;
  if (!o.sweep.backend.empty()) {
    SweepOptions sweep = o.sweep;
    sweep.hardware = o.hardware;
    data->name = fmt::format("tunepar-core {} sweep of {} at world {}", sweep.backend, sweep.model, sweep.world);
    data->stem = fmt::format("{}-w{}", sweep.model, sweep.world);
    return RunCalibrationSweep(global, sweep);
  }
  if (std::filesystem::is_regular_file(o.from, ec)) {
    std::ifstream in(o.from, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    data->name = std::filesystem::path(o.from).filename().string();
    data->stem = std::filesystem::path(o.from).stem().string();
    return runner::ParseMeasuredRuns(text.str(), o.from);
  }
  data->name = "study " + o.from;
  data->stem = o.from;
  return RunsFromStudy(global.store, o.from);
}

// Cross-validation needs this many runs; 2-fold from kTwoFoldRuns, leave-one-out below (a fit to
// half of fewer runs would leave most parameters unconstrained).
constexpr size_t kCrossValidatedRuns = 5;
constexpr size_t kTwoFoldRuns = 8;

// The fit, with how well it ranks and predicts the runs in sample and out of sample (each run
// predicted by a fit to runs it is not among: 2-fold, or leave-one-out for 5 to 7 runs).
struct Fit {
  runner::CalibrationResult result;
  Result<Agreement> in_sample = InvalidArgument("not computed");
  Result<Agreement> cross = InvalidArgument("not computed");
  std::string cross_scheme;  // how `cross` was made, for the output
};

// The held-out predictions: fold k of `folds` holds the runs i with i % folds == k.
Result<std::vector<runner::RowFit>> HeldOut(const std::vector<runner::MeasuredRun>& runs, size_t folds,
                                            const runner::HardwareProfile& profile,
                                            const runner::CalibrationOptions& options) {
  std::vector<runner::RowFit> held_out;
  for (size_t fold = 0; fold < folds; ++fold) {
    std::vector<runner::MeasuredRun> train, test;
    for (size_t i = 0; i < runs.size(); ++i) (i % folds == fold ? test : train).push_back(runs[i]);
    Result<runner::CalibrationResult> part = runner::Calibrate(train, profile, options);
    if (!part.ok()) return part.status();
    Result<std::vector<runner::RowFit>> rows = runner::EvaluateRuns(test, profile, part->efficiency);
    if (!rows.ok()) return rows.status();
    held_out.insert(held_out.end(), rows->begin(), rows->end());
  }
  return held_out;
}

Result<Fit> FitRuns(const std::vector<runner::MeasuredRun>& runs, const runner::HardwareProfile& profile,
                    const runner::CalibrationOptions& options) {
  Result<runner::CalibrationResult> fit = runner::Calibrate(runs, profile, options);
  if (!fit.ok()) return fit.status();
  Fit f;
  f.result = std::move(*fit);
  f.in_sample = AgreementOf(f.result.rows);
  if (runs.size() < kCrossValidatedRuns) return f;
  const bool two_fold = runs.size() >= kTwoFoldRuns;
  Result<std::vector<runner::RowFit>> held_out = HeldOut(runs, two_fold ? 2 : runs.size(), profile, options);
  if (!held_out.ok()) return held_out.status();
  f.cross = AgreementOf(*held_out);
  f.cross_scheme = two_fold ? "2-fold: each half predicted by a fit to the other"
                            : "leave-one-out: each run predicted by a fit to the others";
  return f;
}

// A fit that orders runs it did not see no better than chance (cross-validated Spearman at or
// below 0) would rank a search's layouts wrongly: it fails, like a parameter at a bound.
void JudgeRanking(const Fit& fit, size_t runs, runner::FitJudgement& judgement) {
  if (judgement.failed || !fit.cross.ok() || fit.cross->spearman > 0) return;
  judgement.failed = true;
  judgement.reason = fmt::format(
      "it ranks the runs it did not see no better than chance (cross-validated Spearman {:.2f} over {} runs, {}): "
      "the performance model cannot order these layouts with this profile; check the runs (are they of this "
      "hardware, and is each step time of the whole step?) or fit fewer parameters (--fit)",
      fit.cross->spearman, runs, fit.cross_scheme);
}

// The written profile's name when --name gives none: the original's (less the suffix of an
// earlier fit) and the data's, "dgx-a100-fit-megatron_table1", so that a fitted profile never
// passes for the profile it started from.
std::string DerivedProfileName(const std::string& original, const std::string& data_stem) {
  std::string base = original.substr(0, original.find("-fit-"));
  std::string stem;
  for (char c : data_stem) stem += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ? c : '-';
  return ToValidName(fmt::format("{}-fit-{}", base, stem.empty() ? "runs" : stem));
}

// Sets the top-level `name = "..."` line (the first key line before any table).
std::string WithProfileName(const std::string& text, const std::string& name) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    if (!line.empty() && line[0] == '[') break;
    const size_t after_key = line.rfind("name", 0) == 0 ? line.find_first_not_of(" \t", 4) : std::string::npos;
    if (after_key != std::string::npos && line[after_key] == '=') {
      std::string out = text;
      out.replace(at, end - at, fmt::format("name = \"{}\"", name));
      return out;
    }
    at = end + 1;
  }
  return text;
}

// Writes the calibrated profile to `output` as `name` (atomically, and only once it parses as a
// profile).
Status WriteProfile(const CalibrateOptions& o, const std::string& original_text, const runner::HardwareProfile& profile,
                    const Fit& fit, const DataSource& data, const std::string& name) {
  const std::string text = WithProfileName(
      runner::WriteCalibratedProfile(original_text, profile, fit.result, data.name, UtcNow().substr(0, 10)), name);
  Result<runner::HardwareProfile> check = runner::ParseHardwareProfile(text, o.output);
  if (!check.ok()) return InternalError("the calibrated profile does not parse: " + check.status().message());
  const std::string tmp = o.output + ".tmp";
  errno = 0;
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    const std::string reason = std::strerror(errno != 0 ? errno : EIO);
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return InvalidArgument(fmt::format("cannot write '{}': {}", o.output, reason));
  }
  std::error_code ec;
  if (std::filesystem::rename(tmp, o.output, ec), ec) {
    std::filesystem::remove(tmp, ec);
    return InvalidArgument(fmt::format("cannot write '{}': {}", o.output, ec.message()));
  }
  return Status::Ok();
}

std::vector<std::string> FittedNames(const runner::CalibrationResult& fit) {
  std::vector<std::string> names;
  for (runner::EfficiencyKey k : fit.fitted) names.emplace_back(runner::EfficiencyParameters()[static_cast<int>(k)].name);
  return names;
}

nlohmann::json AgreementJson(const Agreement& a) {
  nlohmann::json j = {{"spearman", a.spearman}, {"median_abs_error", a.median_abs_error}};
  if (a.shapes > 0) j["spearman_within_shapes"] = a.spearman_within_shapes;
  return j;
}

// What was decided about the fit and the profile, for the output.
struct Outcome {
  runner::FitJudgement judgement;
  std::string name;     // the calibrated profile's name
  std::string written;  // the file written, "" if none
};

void PrintJson(const std::vector<runner::MeasuredRun>& runs, const runner::HardwareProfile& profile, const Fit& fit,
               const DataSource& data, const Outcome& outcome) {
  const runner::CalibrationResult& r = fit.result;
  nlohmann::json j = {{"data", data.name},        {"hardware", profile.name},
                      {"fitted", FittedNames(r)}, {"mean_abs_error", r.mean_abs_error},
                      {"max_abs_error", r.max_abs_error}, {"written", outcome.written},
                      {"name", outcome.name}};
  j["failed"] = outcome.judgement.failed ? nlohmann::json(outcome.judgement.reason) : nlohmann::json(nullptr);
  j["spearman"] = fit.in_sample.ok() ? fit.in_sample->spearman : 0.0;
  j["median_abs_error"] = fit.in_sample.ok() ? fit.in_sample->median_abs_error : 0.0;
  if (fit.in_sample.ok() && fit.in_sample->shapes > 0) {
    j["spearman_within_shapes"] = fit.in_sample->spearman_within_shapes;
    j["shapes"] = fit.in_sample->shapes;
  }
  nlohmann::json params = nlohmann::json::object();
  for (const auto& p : runner::EfficiencyParameters()) params[std::string(p.name)] = r.efficiency[p.key];
  j["efficiency"] = params;
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const runner::RowFit& row = r.rows[i];
    rows.push_back({{"label", row.label},
                    {"layout", LayoutKey(row.layout)},
                    {"ranks_per_node", std::max(runs[i].ranks_per_node, profile.gpus_per_node)},
                    {"measured_step_s", row.measured_step_s},
                    {"predicted_step_s", row.predicted_step_s},
                    {"error", row.error},
                    {"memory_gb", row.memory_gb},
                    {"fits", row.fits}});
  }
  j["rows"] = rows;
  if (fit.cross.ok()) j["cross_validated"] = AgreementJson(*fit.cross);
  fmt::print("{}\n", j.dump(2));
}

void PrintRows(const std::vector<runner::MeasuredRun>& runs, const runner::CalibrationResult& fit) {
  TextTable t;
  using A = TextTable::Align;
  t.AddColumn("run", A::kLeft);
  t.AddColumn("GPUs");
  t.AddColumn("layout", A::kLeft);
  t.AddColumn("measured s");
  t.AddColumn("predicted s");
  t.AddColumn("TFLOP/s meas");
  t.AddColumn("TFLOP/s pred");
  t.AddColumn("error");
  t.AddColumn("mem GB");
  for (size_t i = 0; i < fit.rows.size(); ++i) {
    const runner::RowFit& r = fit.rows[i];
    const double flops = runs[i].FlopsPerStep() / r.layout.World() / 1e12;
    t.AddRow({r.label, std::to_string(r.layout.World()), LayoutKey(r.layout), Fixed(r.measured_step_s, 3),
              Fixed(r.predicted_step_s, 3), TflopsText(flops / r.measured_step_s), TflopsText(flops / r.predicted_step_s),
              fmt::format("{:+.1f}%", 100 * r.error), fmt::format("{:.1f}{}", r.memory_gb, r.fits ? "" : " OOM")});
  }
  fmt::print("{}", t.Render());
}

void PrintAgreement(const Fit& fit) {
  if (fit.in_sample.ok()) {
    fmt::print("predicted vs measured step time: Spearman rank correlation {:.3f}, median |error| {:.1f}%\n",
               fit.in_sample->spearman, 100 * fit.in_sample->median_abs_error);
    if (fit.in_sample->shapes > 0) {
      fmt::print("  ranking layouts within each model shape: mean Spearman {:.3f} over {} shapes\n",
                 fit.in_sample->spearman_within_shapes, fit.in_sample->shapes);
    }
  }
  if (!fit.cross.ok()) return;
  fmt::print("out of sample ({}): Spearman {:.3f}, median |error| {:.1f}%\n", fit.cross_scheme, fit.cross->spearman,
             100 * fit.cross->median_abs_error);
  if (fit.cross->shapes > 0) {
    fmt::print("  ranking layouts within each model shape: mean Spearman {:.3f} over {} shapes\n",
               fit.cross->spearman_within_shapes, fit.cross->shapes);
  }
}

void PrintText(const std::vector<runner::MeasuredRun>& runs, const runner::HardwareProfile& profile, const Fit& fit,
               const DataSource& data, const Outcome& outcome) {
  const runner::CalibrationResult& r = fit.result;
  fmt::print("Calibrating {} on {} ({} runs); fitting {}\n\n", profile.name, data.name, runs.size(),
             fmt::join(FittedNames(r), ", "));
  PrintRows(runs, r);
  fmt::print("\nstep-time error: mean |error| {:.2f}%, worst {:.2f}%\n", 100 * r.mean_abs_error,
             100 * r.max_abs_error);
  PrintAgreement(fit);
  fmt::print("(TFLOP/s by each run's own formula; error = predicted / measured step time - 1)\n\nParameters:\n");
  for (const auto& p : runner::EfficiencyParameters()) {
    const bool fitted = std::find(r.fitted.begin(), r.fitted.end(), p.key) != r.fitted.end();
    fmt::print("  {:<22} {:>10.4g}  {}\n", p.name, r.efficiency[p.key], fitted ? "fitted" : "kept");
  }
  if (!outcome.written.empty()) {
    fmt::print("\nwrote {} (profile {}{})\n", outcome.written, outcome.name,
               outcome.judgement.failed ? ", a failed fit" : "");
  } else if (outcome.judgement.failed) {
    fmt::print("\nthe fit failed (stderr says why)\n");
  } else {
    fmt::print("\n(use -o FILE.toml to write the calibrated profile as {})\n", outcome.name);
  }
}

Status RunCalibrate(const GlobalOptions& global, const CalibrateOptions& o) {
  // The name goes into the written profile, and from there into studies' paths and commands.
  if (!o.name.empty()) TUNEPAR_RETURN_IF_ERROR(CheckName("--name", o.name, StatusCode::kInvalidArgument));
  Result<ConfigText> hw_text = ResolveConfig("hardware", o.hardware);
  if (!hw_text.ok()) return hw_text.status();
  Result<runner::HardwareProfile> profile = runner::ParseHardwareProfile(hw_text->text, hw_text->origin, hw_text->name);
  if (!profile.ok()) return profile.status();
  DataSource data;
  Result<std::vector<runner::MeasuredRun>> runs = ReadRuns(global, o, &data);
  if (!runs.ok()) return runs.status();
  runner::CalibrationOptions options;
  options.restarts = o.restarts;
  if (o.fit.empty()) {
    options.free = runner::DefaultFitSet(*runs, *profile);
  } else {
    Result<std::vector<runner::EfficiencyKey>> keys = ParseFitList(o.fit);
    if (!keys.ok()) return keys.status();
    options.free = *keys;
  }
  Result<Fit> fit = FitRuns(*runs, *profile, options);
  if (!fit.ok()) return fit.status();
  Outcome outcome;
  outcome.judgement = runner::JudgeFit(fit->result);
  JudgeRanking(*fit, runs->size(), outcome.judgement);
  outcome.name = o.name.empty() ? DerivedProfileName(profile->name, data.stem) : o.name;
  if (!o.output.empty() && (!outcome.judgement.failed || o.force)) {
    TUNEPAR_RETURN_IF_ERROR(WriteProfile(o, hw_text->text, *profile, *fit, data, outcome.name));
    outcome.written = o.output;
  }
  if (global.json) {
    PrintJson(*runs, *profile, *fit, data, outcome);
  } else {
    PrintText(*runs, *profile, *fit, data, outcome);
  }
  if (!outcome.judgement.failed) return Status::Ok();
  const std::string failure =
      fmt::format("calibration of {} on {} failed: {}", profile->name, data.name, outcome.judgement.reason);
  if (o.force) {
    spdlog::warn("{}; {} (--force)", failure,
                 outcome.written.empty() ? "accepted" : "written anyway as " + outcome.name);
    return Status::Ok();
  }
  const std::string unwritten =
      o.output.empty() ? "" : fmt::format("; nothing written to {} (--force writes it)", o.output);
  return Status(StatusCode::kFitFailed, failure + unwritten);
}

}  // namespace

void AddCalibrateCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd =
      app.add_subcommand("calibrate", "Fit a hardware profile's efficiency parameters to measured runs");
  cmd->add_option("--from", o->from,
                  "A CSV of measured runs (see bench/data/), or a study with measured trials");
  cmd->add_option("--hardware", o->hardware, "The profile to start from (preset or TOML path)")->required();
  cmd->add_option("-o,--output", o->output, "Write the calibrated profile here");
  cmd->add_option("--fit", o->fit, "Parameters to fit, comma-separated (default: chosen from the data)");
  cmd->add_option("--name", o->name,
                  "Name of the written profile (default: the original's and the data's, e.g. dgx-a100-fit-runs)");
  cmd->add_flag("--force", o->force,
                "Accept a failed fit (a parameter at a non-physical bound, or mean |error| over 25%): write it "
                "with -o and exit 0 with a warning, where it would exit 10 and write nothing");
  cmd->add_option("--restarts", o->restarts, "Optimizer starts")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  auto* sweep = cmd->add_option_group("Measure a sweep with tunepar-core (instead of --from)");
  sweep
      ->add_option("--backend", o->sweep.backend,
                   "local (mpirun here) or slurm (job steps of this allocation)")
      ->check(CLI::IsMember({"local", "slurm"}));
  sweep->add_option("--model,-m", o->sweep.model, "Model of the sweep")->capture_default_str();
  sweep->add_option("--world,-w", o->sweep.world, "Ranks per run")->capture_default_str();
  sweep->add_option("--layouts", o->sweep.layouts, "Layouts to measure (over all shapes)")->capture_default_str();
  sweep
      ->add_option("--shapes", o->sweep.shapes,
                   "Shapes of the model to measure: 1 as given; 2 adds twice the global batch; 3 half the "
                   "hidden size; 4 twice the sequence")
      ->capture_default_str();
  sweep->add_option("--steps", o->sweep.core.steps, "Measured steps per run")->capture_default_str();
  sweep->add_option("--warmup", o->sweep.core.warmup, "Warm-up steps per run")->capture_default_str();
  sweep->add_option("--core", o->sweep.core.core, kCoreOptionHelp);
  sweep->add_option("--threads", o->sweep.core.threads, "Threads per rank (default: automatic)");
  sweep->add_option("--timeout", o->sweep.timeout_s, "Seconds per run (default 600)")->check(CLI::PositiveNumber);
  sweep->add_option("--runs-csv", o->sweep.runs_csv, "Write the measured runs here (default: in the store)");
  cmd->callback([&global, result, o] { *result = RunCalibrate(global, *o); });
}

}  // namespace tunepar
