#include "runner/command_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/byte_size.h"
#include "base/no_follow.h"
#include "base/provenance.h"
#include "runner/log_text.h"
#include "runner/performance_model.h"
#include "runner/process_trial.h"
#include "runner/torchtitan_models.h"

namespace tunepar::runner {

namespace {

constexpr std::pair<MetricKind, std::string_view> kKinds[] = {{MetricKind::kStepTimeS, "step_time_s"},
                                                              {MetricKind::kStepTimeMs, "step_time_ms"},
                                                              {MetricKind::kTokensPerS, "tokens_per_s"},
                                                              {MetricKind::kTokensPerSPerGpu, "tokens_per_s_per_gpu"},
                                                              {MetricKind::kSamplesPerS, "samples_per_s"},
                                                              {MetricKind::kTflopsPerGpu, "tflops_per_gpu"},
                                                              {MetricKind::kHigher, "higher"},
                                                              {MetricKind::kLower, "lower"}};

// A reading that can be a measurement: finite, positive and normal (a denormal such as 1e-320
// is no program's step time or throughput, and its reciprocal overflows).
bool IsMeasurement(double value) {
  return std::isfinite(value) && value > 0 && std::fpclassify(value) == FP_NORMAL;
}

double StepTime(MetricKind kind, double value, const ModelShape& model, int world) {
  const double tokens = model.TokensPerStep();
  switch (kind) {
    case MetricKind::kStepTimeS: return value;
    case MetricKind::kStepTimeMs: return value / 1e3;
    case MetricKind::kTokensPerS: return tokens / value;
    case MetricKind::kTokensPerSPerGpu: return tokens / (value * world);
    case MetricKind::kSamplesPerS: return model.global_batch / value;
    case MetricKind::kTflopsPerGpu: return ModelFlopsPerStep(model) / (value * 1e12 * world);
    case MetricKind::kHigher:
    case MetricKind::kLower: break;
  }
  return NAN;
}

class CommandTrial : public ProcessTrial {
 public:
  CommandTrial(const CommandBackendOptions& options, const std::vector<std::regex>& oom, const std::regex& metric,
               const std::regex& memory, ProcessOptions process, TrialContext context)
      : ProcessTrial({"command", options.timeout_s, options.stop_grace_s, "process"}, std::move(process)),
        options_(options),
        oom_(oom),
        metric_regex_(metric),
        memory_regex_(memory),
        context_(std::move(context)) {}

  using ProcessTrial::Launch;
  // The outcome of a trial that has ended, read from its log as it is now classified (for
  // CommandBackend::Reclassify).
  std::optional<TrialResult> ClassifyEnded(const ExitInfo& exit) { return Classify(exit); }

 private:
  // What the output says: the first OOM line, the last line, and the metric's last reading.
  struct OutputReading {
    std::string oom_line, last_line;
    std::optional<std::string> metric_text;  // the metric's last reading as printed
    std::optional<double> value;             // and as a number, when it is one
    std::optional<double> peak_memory;  // the largest reading of it
    std::optional<double> oom_bound;    // the largest lower bound an OOM message gives
  };

  OutputReading ReadOutput() const {
    OutputReading out;
    std::ifstream in(process().log_path, std::ios::binary);
    std::string line;
    while (std::getline(in, line)) {
      if (!Trim(line).empty()) out.last_line = Trim(line);
      if (out.oom_line.empty()) {
        for (const std::regex& re : oom_) {
          if (std::regex_search(line, re)) out.oom_line = Trim(line);
        }
      }
      if (std::optional<std::pair<std::string, std::optional<double>>> m = MetricIn(line)) {
        out.metric_text = m->first;
        out.value = m->second;
      }
      if (std::optional<double> m = MemoryIn(line)) out.peak_memory = std::max(out.peak_memory.value_or(0), *m);
      if (std::optional<double> b = OomLowerBound(line)) out.oom_bound = std::max(out.oom_bound.value_or(0), *b);
    }
    return out;
  }

  // The peak memory this line reports, when the program is asked to say it.
  std::optional<double> MemoryIn(const std::string& line) const {
    if (!options_.memory_regex.empty()) {
      std::smatch m;
      if (!std::regex_search(line, m, memory_regex_) || m.size() < 2) return std::nullopt;
      return ParseByteSize(m[1].str());
    }
    if (options_.memory_json.empty() || line.find('{') == std::string::npos) return std::nullopt;
    nlohmann::json j = nlohmann::json::parse(line.substr(line.find('{')), nullptr, false);
    if (j.is_object() && j.contains(options_.memory_json) && j[options_.memory_json].is_number() &&
        j[options_.memory_json].get<double>() > 0)
      return j[options_.memory_json].get<double>();
    return std::nullopt;
  }

  // The peak memory of the trial: its reading, or an OOM's lower bound; a note when it was asked
  // for and the output never said it.
  void RecordPeakMemory(const OutputReading& out, bool ran_out) {
    if (ran_out && out.oom_bound) metrics_.peak_memory_bytes = std::max(out.oom_bound.value_or(0), out.peak_memory.value_or(0));
    if (!ran_out && out.peak_memory) metrics_.peak_memory_bytes = out.peak_memory;
    const bool asked = !options_.memory_regex.empty() || !options_.memory_json.empty();
    if (asked && !ran_out && !out.peak_memory) {
      details_["memory_note"] = options_.memory_regex.empty()
                                    ? fmt::format("no --memory-json key '{}' in the output", options_.memory_json)
                                    : fmt::format("no match for --memory-regex '{}'", options_.memory_regex);
    }
  }

  // The metric on this line: the text that matched and its value, when that is a number.
  std::optional<std::pair<std::string, std::optional<double>>> MetricIn(const std::string& line) const {
    if (!options_.metric_regex.empty()) {
      std::smatch m;
      if (!std::regex_search(line, m, metric_regex_) || m.size() < 2) return std::nullopt;
      const std::string matched = m[1].str();
      std::string text = matched;
      // "1,234.5" as some programs print it (torchtitan's tps): the commas group thousands.
      std::erase(text, ',');
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (end == text.c_str()) return std::make_pair(matched, std::optional<double>());
      return std::make_pair(matched, std::optional<double>(v));
    }
    if (line.find('{') == std::string::npos) return std::nullopt;
    nlohmann::json j = nlohmann::json::parse(line.substr(line.find('{')), nullptr, false);
    if (!j.is_object() || !j.contains(options_.metric_json)) return std::nullopt;
    const nlohmann::json& value = j[options_.metric_json];
    if (!value.is_number()) return std::make_pair(value.dump(), std::optional<double>());
    return std::make_pair(value.dump(), std::optional<double>(value.get<double>()));
  }

  // The order: a program that exited 0 with its metric was measured, whatever else it printed
  // (an OOM pattern in a warning it recovered from is noted, not believed); else an OOM line
  // means out of memory; else a non-zero exit or a signal is a crash, told by the program's own
  // error line (ErrorLine); else the metric is missing or not positive.
  std::optional<TrialResult> Classify(const ExitInfo& exit) override {
    details_["exit"] = ExitText(exit);
    const OutputReading out = ReadOutput();
    const bool failed = exit.signaled || exit.code != 0;
    const bool measured = !failed && out.value && IsMeasurement(*out.value);
    const bool ran_out = !out.oom_line.empty() && !measured;
    RecordPeakMemory(out, ran_out);
    if (ran_out) return Finish(TrialStatus::kOom, "out of memory: " + Shorten(out.oom_line));
    if (failed) return Finish(TrialStatus::kCrash, FailureMessage(exit));
    if (!out.oom_line.empty()) {
      details_["oom_note"] = fmt::format(
          "the output matches an OOM pattern ({}), but the program exited 0 with its metric: measured", Shorten(out.oom_line));
    }
    const std::string source = options_.metric_regex.empty()
                                   ? fmt::format("--metric-json key '{}'", options_.metric_json)
                                   : fmt::format("--metric-regex '{}'", options_.metric_regex);
    if (!out.metric_text)
      return Finish(TrialStatus::kInvalid,
                    fmt::format("the program exited 0, but its output has no match for {}", source));
    if (!out.value || !IsMeasurement(*out.value)) {
      return Finish(TrialStatus::kInvalid, fmt::format("metric '{}' is not a finite positive number (read with {})",
                                                       Shorten(*out.metric_text), source));
    }
    return Measured(*out.value);
  }

  // "exit code 1: ValueError: precision fp16 not supported": how it ended, and the program's own
  // error line rather than the last line (a launcher's report after it reads the same for every
  // error).
  std::string FailureMessage(const ExitInfo& exit) const {
    const std::string how =
        exit.signaled ? fmt::format("killed by signal {}", exit.code) : fmt::format("exit code {}", exit.code);
    const std::string error = Shorten(ErrorLine(process().log_path));
    return error.empty() ? how + " (no output)" : fmt::format("{}: {}", how, error);
  }

  std::optional<TrialResult> Measured(double value) {
    const ModelShape& model = *context_.model;
    metric_ = CustomMetric{std::string(ToString(options_.metric)), value};
    objective_ = ObjectiveValue(options_.metric, value, model, context_.world);
    const double step = StepTime(options_.metric, value, model, context_.world);
    if (std::isfinite(step)) MeasuredStepTime(model, step, context_.world);
    return Finish(TrialStatus::kOk, fmt::format("{} = {:g}", ToString(options_.metric), value));
  }

  const CommandBackendOptions& options_;
  const std::vector<std::regex>& oom_;
  const std::regex& metric_regex_;
  const std::regex& memory_regex_;
  TrialContext context_;
};

}  // namespace

Result<MetricKind> ParseMetricKind(std::string_view text) {
  for (const auto& [kind, name] : kKinds) {
    if (name == text) return kind;
  }
  return InvalidArgument(fmt::format(
      "unknown metric '{}' (expected step_time_s, step_time_ms, tokens_per_s, tokens_per_s_per_gpu, samples_per_s, "
      "tflops_per_gpu, higher or lower)",
      text));
}

std::string_view ToString(MetricKind kind) {
  for (const auto& [k, name] : kKinds) {
    if (k == kind) return name;
  }
  return "?";
}

double ObjectiveValue(MetricKind kind, double value, const ModelShape& model, int world) {
  if (kind == MetricKind::kHigher) return 1.0 / value;
  if (kind == MetricKind::kLower) return value;
  return StepTime(kind, value, model, world);
}

std::optional<double> OomLowerBound(const std::string& line) {
  static const std::regex kTried("Tried to allocate ([0-9.]+ ?[KMGT]?i?B)", std::regex::icase);
  static const std::regex kInUse(
      "(?:([0-9.]+ ?[KMGT]?i?B) already allocated|this process has ([0-9.]+ ?[KMGT]?i?B) memory in use)",
      std::regex::icase);
  // The short form: "Of the allocated memory 75.10 GiB is allocated by PyTorch, and 2.12 GiB is
  // reserved by PyTorch but unallocated."
  static const std::regex kAllocated("Of the allocated memory ([0-9.]+ ?[KMGT]?i?B) is allocated by PyTorch",
                                     std::regex::icase);
  static const std::regex kReserved("([0-9.]+ ?[KMGT]?i?B) is reserved by PyTorch but unallocated", std::regex::icase);
  auto size = [&line](const std::regex& re, int group) -> std::optional<double> {
    std::smatch m;
    if (!std::regex_search(line, m, re) || !m[group].matched) return std::nullopt;
    return ParseByteSize(m[group].str());
  };
  std::optional<double> used = size(kInUse, 1);
  if (!used) used = size(kInUse, 2);
  if (!used) {
    const std::optional<double> allocated = size(kAllocated, 1);
    if (allocated) used = *allocated + size(kReserved, 1).value_or(0);
  }
  if (!used) return std::nullopt;
  return *used + size(kTried, 1).value_or(0);
}

namespace {

// A model whose layer count every probed pipeline divides ({layers_per_virtual_stage}).
ModelShape ProbeModel() {
  ModelShape m;
  m.name = "probe";
  m.layers = 5040;
  return m;
}

// The value a program runs with when the template never passes the knob: the space's only
// value, or the one a program runs with untold.
Result<int> UnreceivedValue(Knob knob, const std::vector<int>& candidates) {
  if (candidates.size() == 1) return candidates.front();
  const int neutral = NeutralKnobCode(knob);
  if (neutral >= 0 && std::find(candidates.begin(), candidates.end(), neutral) != candidates.end()) return neutral;
  std::vector<std::string> values;
  for (int code : candidates) values.push_back(KnobValueText(knob, code));
  return InvalidArgument(fmt::format(
      "the command never receives {0} (no placeholder of it in the template) and the space allows {1}: pass it "
      "in the template, or say which value the program runs with (--fix {0}=VALUE, or {0} = [VALUE] under "
      "[knobs] in the command config)",
      KnobName(knob), fmt::join(values, ", ")));
}

}  // namespace

// The text the program receives for `layout`, with the per-trial placeholders held fixed.
std::string CommandBackend::Rendering(const Layout& knobs, int world) const {
  static const ModelShape kModel = ProbeModel();
  Layout l = knobs;
  l.dp = std::max(1, world / std::max(1, l.tp * l.cp * l.pp));
  l.num_micro_batches = std::max(1, 1024 * world / std::max(1, l.micro_batch * l.dp));
  TrialContext fixed;
  fixed.trial_dir = "{trial_dir}";
  fixed.world = world;
  fixed.gpus_per_node = 8;
  fixed.model = &kModel;
  Result<std::string> command = ExpandCommand(options_.command, l, fixed);
  std::string text = command.ok() ? *command : command.status().message();
  if (options_.reads_layout_env) text += "\nTUNEPAR_LAYOUT=" + LayoutKey(l);
  // The DeepSpeed config the trial receives carries its ZeRO stage, precision and batch sizes.
  if (options_.command.find("{deepspeed_config}") != std::string::npos) text += "\n" + DeepSpeedConfig(l);
  return text;
}

Result<KnobSupport> CommandBackend::SupportedKnobs(const SpaceSpec& space, int world) const {
  KnobSupport support;
  const Layout base;
  for (Knob knob : Knobs()) {
    const std::vector<int> candidates = space.Values(knob, world);
    std::map<std::string, std::vector<int>> by_rendering;  // the candidates that render the same
    std::vector<std::string> order;
    for (int code : candidates) {
      const std::string text = Rendering(WithKnob(base, knob, code), world);
      if (!by_rendering.contains(text)) order.push_back(text);
      by_rendering[text].push_back(code);
    }
    std::set<std::string> probed;
    for (int code : ProbeCodes(knob)) probed.insert(Rendering(WithKnob(base, knob, code), world));
    for (const auto& [text, codes] : by_rendering) probed.insert(text);
    if (probed.size() == 1) {
      Result<int> fixed = UnreceivedValue(knob, candidates);
      if (!fixed.ok()) return fixed.status();
      support.Of(knob) = {*fixed};
    } else if (order.size() < candidates.size()) {
      for (const std::string& text : order) support.Of(knob).push_back(by_rendering[text].front());
    }
  }
  return support;
}

namespace {

// The model a program trains when a template tells it only the required fields: every other
// field at the value a model file gets by leaving it out (the shape's own defaults).
ModelShape Untold(const ModelShape& m) {
  ModelShape untold;
  for (const ShapeRow& row : ShapeRows())
    if (row.required || row.name == "vocab") row.set(untold, row.get(m));
  untold.kv_heads = untold.KvHeads();
  untold.ffn_hidden = untold.MlpWidth();
  return untold;
}

// The [shape] values: the first field whose value the program does not train.
Status CheckShapeValues(const CommandBackendOptions& o, const ModelShape& model) {
  for (const ShapeValues& allowed : o.shape) {
    for (const ShapeRow& row : ShapeRows()) {
      if (row.name != allowed.field) continue;
      const std::string value = ShapeFieldText(row, model);
      if (std::find(allowed.values.begin(), allowed.values.end(), value) != allowed.values.end()) break;
      return ConfigError(fmt::format("{} trains {} {} only (its [shape]); model {} has {} {}", o.source, row.name,
                                     fmt::join(allowed.values, ", "), model.name, row.name, value));
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckTrainsModel(const CommandBackendOptions& o, const ModelShape& model) {
  TUNEPAR_RETURN_IF_ERROR(CheckShapeValues(o, model));
  Result<std::set<std::string>> passed = TemplatePlaceholders(o.command);
  if (!passed.ok()) return passed.status();
  if (passed->contains("torchtitan_flavor") || passed->contains("torchtitan_model")) {
    if (TorchtitanModelOf(model)) return Status::Ok();
    return ConfigError(fmt::format(
        "{} passes the model as a torchtitan flavour ({{torchtitan_flavor}}): model {} has the shape of none of "
        "torchtitan's ({}; configs/models/llama3-8b.toml and its siblings have their shapes)",
        o.source, model.name, TorchtitanModelsKnown()));
  }
  if (passed->contains("model")) return Status::Ok();  // the program is told the model by name
  const ModelShape untold = Untold(model);
  for (const ShapeRow& row : ShapeRows()) {
    if (row.get(model) == row.get(untold) || passed->contains(std::string(row.name))) continue;
    return ConfigError(fmt::format(
        "{} does not pass {{{}}}: its program would train model {} with {} {} (what it takes untold), not {}",
        o.source, row.name, model.name, row.name, ShapeFieldText(row, untold), ShapeFieldText(row, model)));
  }
  return Status::Ok();
}

Status ValidateCommandOptions(const CommandBackendOptions& o) {
  if (o.command.empty()) return InvalidArgument("the command backend needs --command TEMPLATE");
  Layout layout;
  TrialContext context;
  if (Result<std::string> expanded = ExpandCommand(o.command, layout, context); !expanded.ok())
    return expanded.status();
  if (o.metric_regex.empty() == o.metric_json.empty())
    return InvalidArgument(
        "give exactly one of --metric-regex REGEX (first capture group) and --metric-json KEY");
  if (!o.metric_regex.empty()) {
    try {
      const std::regex re(o.metric_regex);
      if (re.mark_count() < 1)
        return InvalidArgument(
            fmt::format("--metric-regex '{}' has no capture group for the value", o.metric_regex));
    } catch (const std::regex_error& e) {
      return InvalidArgument(
          fmt::format("--metric-regex '{}' is not a valid regular expression: {}", o.metric_regex, e.what()));
    }
  }
  if (!o.memory_regex.empty() && !o.memory_json.empty())
    return InvalidArgument("give at most one of --memory-regex REGEX and --memory-json KEY");
  if (!o.memory_regex.empty()) {
    try {
      const std::regex re(o.memory_regex);
      if (re.mark_count() < 1)
        return InvalidArgument(fmt::format("--memory-regex '{}' has no capture group for the size", o.memory_regex));
    } catch (const std::regex_error& e) {
      return InvalidArgument(
          fmt::format("--memory-regex '{}' is not a valid regular expression: {}", o.memory_regex, e.what()));
    }
  }
  for (const std::string& p : o.oom_patterns) {
    try {
      std::regex re(p, std::regex::icase);
    } catch (const std::regex_error& e) {
      return InvalidArgument(
          fmt::format("--oom-pattern '{}' is not a valid regular expression: {}", p, e.what()));
    }
  }
  if (!(o.timeout_s > 0))
    return InvalidArgument(fmt::format("--timeout must be positive, got {}", o.timeout_s));
  return Status::Ok();
}

CommandBackend::CommandBackend(CommandBackendOptions options) : options_(std::move(options)) {
  for (const std::string& p : options_.oom_patterns) oom_.emplace_back(p, std::regex::icase);
  if (!options_.metric_regex.empty()) metric_ = std::regex(options_.metric_regex);
  if (!options_.memory_regex.empty()) memory_ = std::regex(options_.memory_regex);
}

namespace {

// The shell that runs a template: bash with pipefail, so that `train | tee log` fails when train
// does (/bin/sh may be dash, which has no pipefail, and a pipe's status is its last command's:
// a crash would read as a run that printed no metric). Without bash, /bin/sh as it is.
std::string ShellCommand(const std::string& command) {
  for (const char* bash : {"/bin/bash", "/usr/bin/bash"}) {
    if (access(bash, X_OK) != 0) continue;
    std::string quoted = "'";
    for (char c : command) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return fmt::format("exec {} -o pipefail -c {}'", bash, quoted);
  }
  return command;
}

}  // namespace

std::string DeepSpeedConfig(const Layout& l) {
  // DeepSpeed checks train_batch_size = micro batch x accumulation steps x data-parallel size,
  // the layout's global batch. fp16 takes DeepSpeed's dynamic loss scaling with its documented
  // defaults (loss_scale 0 = dynamic, from 2^16, halved after 2 overflows, raised after 1000
  // clean steps).
  nlohmann::json config = {
      {"train_batch_size", l.GlobalBatch()},
      {"train_micro_batch_size_per_gpu", l.micro_batch},
      {"gradient_accumulation_steps", l.num_micro_batches},
      {"zero_optimization", {{"stage", l.zero}}},
      {"bf16", {{"enabled", l.precision == Precision::kBf16}}},
      {"fp16",
       {{"enabled", l.precision == Precision::kFp16},
        {"loss_scale", 0},
        {"initial_scale_power", 16},
        {"loss_scale_window", 1000},
        {"hysteresis", 2},
        {"min_loss_scale", 1}}},
      {"gradient_clipping", 1.0},
      {"steps_per_print", 1},
      {"wall_clock_breakdown", false}};
  // Hybrid sharding as DeepSpeed's MiCS (deepspeed/runtime/zero/config.py `mics_shard_size`,
  // docs zero3.rst "MiCS Configurations"): the model states are sharded over groups of
  // mics_shard_size ranks and replicated across the dp_replicate groups. A ZeRO-3 feature
  // (DeepSpeed builds its MiCS optimizer for stage 3 only), so written for ZeRO 3 with
  // dp_replicate > 1 alone: every other layout's config stays as it was, and a template must
  // pass the knob itself (Megatron-DeepSpeed's --use-mics) for a program to receive it.
  if (l.zero == 3 && l.dp_replicate > 1) config["zero_optimization"]["mics_shard_size"] = l.dp / l.dp_replicate;
  return config.dump(2) + "\n";
}

std::unique_ptr<RunningTrial> CommandBackend::Start(const Layout& layout, const TrialContext& context) {
  Result<std::string> command = ExpandCommand(options_.command, layout, context);
  if (!command.ok()) return UnstartedTrial(Name(), TrialStatus::kInvalid, command.status().message());
  if (Status written = WriteFileNoFollow(context.trial_dir + "/command.txt", *command + "\n"); !written.ok())
    return UnstartedTrial(Name(), TrialStatus::kCrash, "could not write the trial's command: " + written.message());
  if (options_.command.find("{deepspeed_config}") != std::string::npos) {
    const std::string path = DeepSpeedConfigPath(context.trial_dir);
    if (Status written = WriteFileNoFollow(path, DeepSpeedConfig(layout)); !written.ok())
      return UnstartedTrial(Name(), TrialStatus::kCrash, "could not write the DeepSpeed config: " + written.message());
  }
  ProcessOptions p;
  p.command = ShellCommand(*command);
  p.env = options_.env;
  p.env.emplace_back("TUNEPAR_LAYOUT", LayoutKey(layout));
  p.env.emplace_back("TUNEPAR_TRIAL_DIR", context.trial_dir);
  p.log_path = context.trial_dir + "/output.log";
  p.workdir = options_.workdir;
  p.trial_id = context.trial_id;
  auto trial = std::make_unique<CommandTrial>(options_, oom_, metric_, memory_, std::move(p), context);
  if (Status s = trial->Launch(); !s.ok())
    return UnstartedTrial(Name(), TrialStatus::kCrash, "could not start the command: " + s.message());
  return trial;
}

std::optional<ExitInfo> ParseExitText(const std::string& text) {
  ExitInfo exit;
  char word[16] = {};
  if (std::sscanf(text.c_str(), "%15s %d", word, &exit.code) != 2) return std::nullopt;
  if (std::string(word) == "signal") exit.signaled = true;
  else if (std::string(word) != "code") return std::nullopt;
  return exit;
}

std::optional<TrialResult> CommandBackend::Reclassify(const std::string& log_path, const ExitInfo& exit,
                                                      const TrialContext& context) const {
  std::ifstream log(log_path);
  if (!log || context.model == nullptr) return std::nullopt;
  ProcessOptions p;
  p.log_path = log_path;
  CommandTrial trial(options_, oom_, metric_, memory_, std::move(p), context);
  return trial.ClassifyEnded(exit);
}

}  // namespace tunepar::runner
