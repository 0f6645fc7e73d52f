// `tunepar predict`: the performance model's view of one layout, with the breakdown of its
// step time and memory.
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/knobs.h"
#include "base/pipeline_split.h"
#include "runner/compute_terms.h"
#include "runner/model_backend.h"
#include "runner/performance_model.h"
#include "search/space.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/problem_options.h"
#include "tuner/output/text_table.h"
#include "tuner/study/problem.h"

namespace tunepar {

namespace {

struct PredictOptions {
  ProblemOptions problem;
  std::string layout_key;  // --layout KEY instead of the knobs
  // By Knob, each knob's option as given (or its default): numbers for sizes and stages, the name
  // of a choice, and a count of the flag for switches.
  std::vector<int64_t> numbers = std::vector<int64_t>(NumKnobs());
  std::vector<std::string> names = std::vector<std::string>(NumKnobs());
  std::vector<int> switches = std::vector<int>(NumKnobs());
  std::vector<bool> given = std::vector<bool>(NumKnobs());  // the knob's option was on the command line
  std::optional<int64_t> gbs;  // absent: the model's global batch
};

Status Positive(const char* flag, int64_t value) {
  if (value < 1 || value > (1 << 24))
    return InvalidArgument(fmt::format("{} must be a positive integer, got {}", flag, value));
  return Status::Ok();
}

// What predict assumes of a knob it is not given: the neutral value, else the space's default.
int DefaultCode(Knob knob) {
  const KnobRow& row = RowOf(knob);
  return row.neutral >= 0 ? row.neutral : row.space_default.For(1).front();
}

// The knob's code from its option.
Result<int> OptionCode(const PredictOptions& o, Knob knob) {
  const KnobRow& row = RowOf(knob);
  const size_t i = static_cast<size_t>(knob);
  switch (row.kind) {
    case KnobKind::kSwitch: return o.switches[i] > 0 ? 1 : 0;
    case KnobKind::kChoice: {
      Result<int> code = ParseKnobValue(knob, o.names[i]);
      if (!code.ok()) return code.status().WithContext(std::string(row.flag));
      return code;
    }
    case KnobKind::kStage:
      if (o.numbers[i] < row.min || o.numbers[i] > row.max)
        return InvalidArgument(fmt::format("{} must be {} or {}, got {}", row.flag, row.min, row.max, o.numbers[i]));
      return static_cast<int>(o.numbers[i]);
    case KnobKind::kSize: break;
  }
  TUNEPAR_RETURN_IF_ERROR(Positive(std::string(row.flag).c_str(), o.numbers[i]));
  return static_cast<int>(o.numbers[i]);
}

// A knob not given on the command line takes the one value the space (with its --fix) leaves it,
// else the default: `--fix uneven_stages=on` is enough to predict with uneven stages.
Result<int> KnobCodeFor(const PredictOptions& o, const SpaceSpec& space, int world, Knob k) {
  const std::vector<int> values = space.Values(k, world);
  if (!o.given[static_cast<size_t>(k)] && values.size() == 1) return values.front();
  return OptionCode(o, k);
}

Result<Layout> LayoutFromOptions(const PredictOptions& o, int world, const Problem& problem) {
  const ModelShape& model = problem.model;
  if (!o.layout_key.empty()) {
    Result<Layout> l = ParseLayoutKey(o.layout_key);
    if (!l.ok()) return l.status();
    if (l->World() != world)
      return InvalidArgument(
          fmt::format("--layout {} uses {} GPUs, not --world {}", o.layout_key, l->World(), world));
    return l;
  }
  Layout l;
  for (Knob k : Knobs()) {
    Result<int> code = KnobCodeFor(o, problem.space, world, k);
    if (!code.ok()) return code.status();
    l = WithKnob(std::move(l), k, *code);
  }
  if (world % (l.tp * l.cp * l.pp) != 0)
    return InvalidArgument(
        fmt::format("--tp {} x --cp {} x --pp {} does not divide --world {}", l.tp, l.cp, l.pp, world));
  l.dp = world / (l.tp * l.cp * l.pp);
  if (model.global_batch % (static_cast<int64_t>(l.micro_batch) * l.dp) != 0) {
    return InvalidArgument(fmt::format("global batch {} is not a multiple of --mbs {} x dp {}",
                                       model.global_batch, l.micro_batch, l.dp));
  }
  l.num_micro_batches = model.global_batch / (l.micro_batch * l.dp);
  return l;
}

// The legality check every command shares (search::CheckLegal: the space's values and the
// constraints, the first one failed named), with the way to widen a knob when the space is what
// refuses the layout.
Status CheckPredictable(const Problem& problem, int world, const Layout& layout) {
  const search::SpaceQuery query = MakeSpaceQuery(problem, world);
  Status legal = search::CheckLegal(query, layout);
  if (legal.ok() || search::ValueOutsideSpace(query, layout).empty()) return legal;
  return InvalidArgument(fmt::format("{} (--fix KNOB=VALUE, or a --space that lists it, admits it)", legal.message()));
}

std::string Seconds(double s) {
  return s >= 1 ? fmt::format("{:.3f} s", s) : fmt::format("{:.3f} ms", s * 1e3);
}

// "layers per stage 7 + 14 x 8 + 7 (uneven_stages: ...)": how the layers were split, for pp > 1.
std::string StageSplitLine(const ModelShape& model, const Layout& l) {
  if (l.pp == 1) return "";
  const StageSplit split = SplitLayers(model, l.pp, l.uneven_stages);
  if (!l.uneven_stages) return fmt::format("layers per stage {} (even)\n", split.Text());
  return fmt::format(
      "layers per stage {} (uneven_stages: Megatron-LM's first/last-stage counts, balanced against the embedding "
      "and the head; --decoder-first-pipeline-num-layers {} --decoder-last-pipeline-num-layers {})\n",
      split.Text(), split.First(), split.Last());
}

void PrintTimeTable(const Problem& problem, const Layout& layout, const runner::Prediction& p) {
  TextTable time;
  time.AddColumn("time per step", TextTable::Align::kLeft);
  time.AddColumn("seconds");
  time.AddColumn("share");
  auto add_time = [&](const std::string& what, double s) {
    time.AddRow({what, fmt::format("{:.4g}", s), fmt::format("{:.1f}%", 100 * s / p.step_time_s)});
  };
  add_time("compute (GEMMs, attention, element-wise, recompute)", p.time.compute);
  for (const runner::NamedTerm& term : runner::NamedComputeTerms(problem.model, p.compute_terms, layout.precision)) {
    if (term.seconds > 0) add_time("  " + term.label, term.seconds);
  }
  for (const runner::NamedTerm& term : runner::NamedTimeTerms(p.time, layout)) add_time(term.label, term.seconds);
  fmt::print("{}\n", time.Render());
}

void PrintMemoryTable(const Problem& problem, const Layout& layout, const runner::Prediction& p) {
  const double mem_gb = problem.hardware.memory_gb.value;
  TextTable mem;
  mem.AddColumn("memory per GPU (most loaded stage)", TextTable::Align::kLeft);
  mem.AddColumn("GB");
  auto add_mem = [&](const char* what, double bytes) {
    mem.AddRow({what, fmt::format("{:.2f}", bytes / 1e9)});
  };
  add_mem(layout.precision == Precision::kFp8 ? "weights (bf16, and the layers' FP8 copies and transposes)" : "weights",
          p.memory.weights);
  add_mem("gradients", p.memory.gradients);
  add_mem("optimizer states", p.memory.optimizer_states);
  add_mem("activations in flight", p.memory.activations);
  add_mem("communication buffers", p.memory.comm_buffers);
  add_mem("runtime overhead", p.memory.runtime_overhead);
  if (layout.zero >= 3) add_mem("gathered weights (FSDP: computing and prefetched unit)", p.memory.gathered_weights);
  fmt::print("{}", mem.Render());
  fmt::print("total {:.1f} GB of {:g} GB: {}\n", p.memory_bytes / 1e9, mem_gb,
             p.fits ? "fits" : "DOES NOT FIT (out of memory)");
}

void PrintPrediction(const Problem& problem, int world, const Layout& layout, const runner::Prediction& p) {
  fmt::print("tunepar predict: {} ({}) on {}, world {}, global batch {}\n", problem.model.name,
             ParametersText(problem.model.Parameters(), problem.model.ActiveParameters()), problem.hardware.name, world, problem.model.global_batch);
  fmt::print("shape {}\n", runner::ShapeFeatures(problem.model));
  fmt::print("layout {}\n{}\n", LayoutKey(layout), StageSplitLine(problem.model, layout));
  fmt::print("step time {}   tokens/s {}   TFLOP/s per GPU {}   MFU {:.1f}%\n", Seconds(p.step_time_s),
             WithCommas(static_cast<int64_t>(p.tokens_per_s)), TflopsText(p.tflops_per_gpu), 100 * p.mfu);
  fmt::print(
      "(model FLOPs per step as docs/flop-convention.md counts them, 72 B L s h^2 (1 + s/6h + V/12hL) for GPT;\n"
      " recomputation not counted; MFU against the {} dense peak of {:g} TFLOP/s)\n\n",
      ToString(layout.precision), problem.hardware.PeakFlops(layout.precision) / 1e12);
  PrintTimeTable(problem, layout, p);
  PrintMemoryTable(problem, layout, p);
}

Status RunPredict(const GlobalOptions& global, const PredictOptions& o) {
  Result<Problem> problem = o.problem.Load();
  if (!problem.ok()) return problem.status();
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(o.problem.world, problem->hardware));
  if (o.gbs) {
    TUNEPAR_RETURN_IF_ERROR(Positive("--gbs", *o.gbs));
    problem->model.global_batch = static_cast<int>(*o.gbs);
  }
  const int world = static_cast<int>(o.problem.world);
  Result<Layout> layout = LayoutFromOptions(o, world, *problem);
  if (!layout.ok()) return layout.status();
  TUNEPAR_RETURN_IF_ERROR(CheckPredictable(*problem, world, *layout));
  Result<runner::PerformanceModel> model =
      runner::PerformanceModel::Create(problem->model, problem->hardware);
  if (!model.ok()) return model.status();
  TUNEPAR_RETURN_IF_ERROR(model->CheckLayout(*layout));
  const runner::Prediction p = model->Predict(*layout);

  if (global.json) {
    nlohmann::json j = nlohmann::json::parse(runner::PredictionJson(p, problem->model));
    j["layout"] = LayoutKey(*layout);
    j["world"] = world;
    j["model"] = problem->model.name;
    j["hardware"] = problem->hardware.name;
    j["global_batch"] = problem->model.global_batch;
    j["performance_model"] = runner::kPerformanceModelVersion;
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }
  PrintPrediction(*problem, world, *layout, p);
  return Status::Ok();
}

}  // namespace

void AddPredictCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto o = std::make_shared<PredictOptions>();
  CLI::App* cmd = app.add_subcommand("predict", "Predict one layout's step time and memory, with breakdowns");
  o->problem.AddTo(cmd);
  CLI::Option* layout = cmd->add_option(
      "--layout", o->layout_key,
      "A layout key (instead of the options below); like every layout, it must be legal under --space");
  std::vector<CLI::Option*> knobs;
  for (Knob k : Knobs()) {
    const KnobRow& row = RowOf(k);
    const size_t i = static_cast<size_t>(k);
    const std::string flag(row.flag), help(row.help);
    if (row.kind == KnobKind::kSwitch) {
      knobs.push_back(cmd->add_flag(flag, o->switches[i], help));
    } else if (row.kind == KnobKind::kChoice) {
      o->names[i] = KnobValueText(k, DefaultCode(k));
      std::vector<std::string> choices(row.choices.begin(), row.choices.end());
      knobs.push_back(cmd->add_option(flag, o->names[i], fmt::format("{}: {}", help, fmt::join(choices, ", ")))
                          ->capture_default_str());
    } else {
      o->numbers[i] = DefaultCode(k);
      knobs.push_back(cmd->add_option(flag, o->numbers[i], help)->capture_default_str());
    }
  }
  for (CLI::Option* knob : knobs) layout->excludes(knob);
  cmd->add_option("--gbs", o->gbs, "Global batch (default: the model's)");
  cmd->callback([&global, result, o, knobs] {
    for (size_t i = 0; i < knobs.size(); ++i) o->given[i] = knobs[i]->count() > 0;
    *result = RunPredict(global, *o);
  });
}

}  // namespace tunepar
