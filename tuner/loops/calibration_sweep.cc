#include "tuner/loops/calibration_sweep.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/knobs.h"
#include "base/no_follow.h"

#include "runner/core/supported_knobs.h"

#include "runner/core_backend.h"
#include "search/space.h"
#include "tuner/study/problem.h"

namespace tunepar {

namespace fs = std::filesystem;

namespace {

// Spread over the (tp, pp, mbs) groups: the groups in an order that tries every value of each
// knob early (each next group is the one whose tp, pp and mbs values have been used least so
// far), taken round-robin; within a group a fixed pseudo-random order, so precision,
// recomputation and ZeRO vary too.
std::vector<Layout> SpreadLayouts(const std::vector<Layout>& legal, int count) {
  std::map<std::tuple<int, int, int>, std::vector<Layout>> groups;
  for (const Layout& l : legal) groups[{l.tp, l.pp, l.micro_batch}].push_back(l);
  for (auto& [key, members] : groups) {
    auto order = [](const Layout& l) {
      return std::hash<std::string>{}("sweep:" + LayoutKey(l));
    };
    std::sort(members.begin(), members.end(),
              [&](const Layout& a, const Layout& b) { return order(a) < order(b); });
  }
  std::vector<const std::vector<Layout>*> order;
  {
    std::map<int, int> tp_uses, pp_uses, mbs_uses;
    std::map<std::tuple<int, int, int>, const std::vector<Layout>*> left;
    for (const auto& [key, members] : groups) left[key] = &members;
    while (!left.empty()) {
      auto best = left.begin();
      int best_uses = INT32_MAX;
      for (auto it = left.begin(); it != left.end(); ++it) {
        const auto& [tp, pp, mbs] = it->first;
        const int uses = tp_uses[tp] + pp_uses[pp] + mbs_uses[mbs];
        if (uses < best_uses) {
          best = it;
          best_uses = uses;
        }
      }
      const auto& [tp, pp, mbs] = best->first;
      ++tp_uses[tp];
      ++pp_uses[pp];
      ++mbs_uses[mbs];
      order.push_back(best->second);
      left.erase(best);
    }
  }
  std::vector<Layout> chosen;
  for (size_t round = 0; static_cast<int>(chosen.size()) < count; ++round) {
    bool any = false;
    for (const std::vector<Layout>* members : order) {
      if (round < members->size() && static_cast<int>(chosen.size()) < count) {
        chosen.push_back((*members)[round]);
        any = true;
      }
    }
    if (!any) break;
  }
  return chosen;
}

}  // namespace

std::string MeasuredRunsCsv(const std::vector<runner::MeasuredRun>& runs) {
  std::vector<std::string> shape_columns, knob_columns;
  for (const ShapeRow& row : ShapeRows()) shape_columns.emplace_back(row.name);
  for (Knob k : Knobs()) knob_columns.emplace_back(KnobName(k));
  std::string s = fmt::format("label,{},gpus,{},ranks_per_node,source,step_time_s\n", fmt::join(shape_columns, ","),
                              fmt::join(knob_columns, ","));
  for (const runner::MeasuredRun& r : runs) {
    const Layout& l = r.layout;
    std::vector<std::string> shape;
    for (const ShapeRow& row : ShapeRows()) shape.push_back(ShapeFieldText(row, r.model));
    std::vector<std::string> knobs;
    for (Knob k : Knobs()) knobs.push_back(KnobPlaceholderText(k, KnobCode(k, l)));
    s += fmt::format("{},{},{},{},{},{},{:.6g}\n", r.label, fmt::join(shape, ","), l.World(), fmt::join(knobs, ","),
                     r.ranks_per_node, r.source, r.step_time_s);
  }
  return s;
}

std::vector<ModelShape> ShapeVariants(const ModelShape& m, int count) {
  std::vector<ModelShape> shapes = {m};
  auto add = [&](const std::string& suffix, auto change) {
    ModelShape v = m;
    change(v);
    v.name = m.name + suffix;
    shapes.push_back(v);
  };
  add("-batch" + std::to_string(2 * m.global_batch), [](ModelShape& v) { v.global_batch *= 2; });
  if (m.hidden % 2 == 0 && m.heads % 2 == 0 && (m.ffn_hidden == 0 || m.ffn_hidden % 2 == 0) &&
      m.KvHeads() % 2 == 0) {
    add("-hidden" + std::to_string(m.hidden / 2), [](ModelShape& v) {
      v.hidden /= 2;
      // The same head size (the attention shapes change with the sequence only) and query heads
      // per K/V head.
      v.kv_heads = v.KvHeads() / 2;
      v.heads /= 2;
      v.ffn_hidden /= 2;
    });
  }
  add("-seq" + std::to_string(2 * m.seq_len), [](ModelShape& v) { v.seq_len *= 2; });
  shapes.resize(std::min<size_t>(shapes.size(), static_cast<size_t>(std::max(1, count))));
  return shapes;
}

namespace {

struct Planned {
  ModelShape model;
  Layout layout;
};

// Each shape gets its share of the layouts; the runs alternate between shapes, so a drift in the
// machine's speed touches every shape alike. `legal` counts the legal layouts over all shapes.
Result<std::vector<Planned>> PlanSweep(const Problem& problem, const SweepOptions& o, size_t* legal) {
  const std::vector<ModelShape> shapes = ShapeVariants(problem.model, o.shapes);
  std::vector<std::vector<Layout>> per_shape;
  *legal = 0;
  for (size_t k = 0; k < shapes.size(); ++k) {
    Problem shaped = problem;
    shaped.model = shapes[k];
    Result<search::SpaceEnumeration> space = search::EnumerateSpace(MakeSpaceQuery(shaped, o.world));
    if (!space.ok()) return space.status();
    *legal += space->legal.size();
    const int share = o.layouts / static_cast<int>(shapes.size()) +
                      (static_cast<int>(k) < o.layouts % static_cast<int>(shapes.size()) ? 1 : 0);
    per_shape.push_back(SpreadLayouts(space->legal, share));
  }
  std::vector<Planned> plan;
  for (size_t round = 0;; ++round) {
    bool any = false;
    for (size_t k = 0; k < shapes.size(); ++k) {
      if (round < per_shape[k].size()) {
        plan.push_back({shapes[k], per_shape[k][round]});
        any = true;
      }
    }
    if (!any) break;
  }
  if (plan.empty()) return Status(StatusCode::kNoLegalLayout, "no legal layout to sweep");
  return plan;
}

// Runs each planned layout with tunepar-core (progress on stdout unless --json); the ok runs.
std::vector<runner::MeasuredRun> MeasureSweep(const GlobalOptions& global, const std::vector<Planned>& plan,
                                              const runner::CoreBackendOptions& core,
                                              const runner::HardwareProfile& hardware, int world,
                                              const std::string& name, const fs::path& dir) {
  std::vector<runner::MeasuredRun> runs;
  for (size_t i = 0; i < plan.size(); ++i) {
    const Layout& l = plan[i].layout;
    const ModelShape& model = plan[i].model;
    runner::CoreBackend backend(core, model, hardware);
    const fs::path trial_dir = dir / std::to_string(i + 1);
    // Below the store, never through a link; a folder that cannot be made fails the run as data.
    const Status made = MakeDirectoriesBelow(dir.string(), std::to_string(i + 1));
    runner::TrialContext context;
    context.trial_id = fmt::format("calibration/{}/{}/{}", name, i + 1, getpid());
    context.trial_dir = trial_dir.string();
    context.number = static_cast<int64_t>(i + 1);
    context.world = world;
    context.gpus_per_node = hardware.gpus_per_node;
    context.model = &model;
    runner::TrialResult r;
    if (made.ok()) {
      r = backend.Evaluate(l, context);
    } else {
      r.message = made.message();  // a crash: no run
    }
    const bool ok = r.status == TrialStatus::kOk && r.metrics.step_time_s;
    if (!global.json) {
      fmt::print("run {:>2}/{}  {:<16} {:<56} {:>7}  {}\n", i + 1, plan.size(), model.name, LayoutKey(l),
                 ToString(r.status), ok ? fmt::format("{:.4f} s/step", *r.metrics.step_time_s) : r.message);
      std::fflush(stdout);
    }
    if (ok) {
      runs.push_back({fmt::format("{}/run{}", model.name, i + 1), model, l, *r.metrics.step_time_s,
                      fmt::format("tunepar-core {} sweep", backend.Name()), "model", backend.RanksPerNode(world)});
    }
  }
  return runs;
}

}  // namespace

Result<std::vector<runner::MeasuredRun>> RunCalibrationSweep(const GlobalOptions& global, const SweepOptions& o) {
  if (o.layouts < 2) return InvalidArgument(fmt::format("--layouts must be at least 2, got {}", o.layouts));
  if (o.shapes < 1 || o.shapes > kMaxSweepShapes)
    return InvalidArgument(fmt::format("--shapes must be 1 to {}, got {}", kMaxSweepShapes, o.shapes));
  Result<Problem> problem = LoadProblem(o.model, o.hardware, "default");
  if (!problem.ok()) return problem.status();
  TUNEPAR_RETURN_IF_ERROR(CheckConfigNames(*problem));  // they name the sweep's folder
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(o.world, problem->hardware));
  std::string core_said;
  Result<runner::CoreBackendOptions> core =
      ResolveCoreOptions(o.core, o.backend == "slurm" ? runner::Launcher::kSlurm : runner::Launcher::kLocal,
                         problem->hardware, o.world, o.timeout_s, &core_said);
  if (!core.ok()) return core.status();
  Result<KnobSupport> support =
      runner::CoreBackend(*core, problem->model, problem->hardware).SupportedKnobs(problem->space, o.world);
  if (!support.ok()) return support.status();
  problem->space = Restrict(problem->space, *support, o.world);
  size_t legal = 0;
  Result<std::vector<Planned>> plan = PlanSweep(*problem, o, &legal);
  if (!plan.ok()) return plan.status();

  const std::string name = fmt::format("{}-{}-w{}", problem->hardware.name, problem->model.name, o.world);
  const fs::path dir = fs::path(global.store) / "calibration" / name;
  TUNEPAR_RETURN_IF_ERROR(MakeDirectoriesBelow(global.store, "calibration/" + name));
  const size_t shapes = ShapeVariants(problem->model, o.shapes).size();
  if (!global.json) {
    fmt::print("core: {}\n", core_said);
    fmt::print("Sweeping {} layouts of {} in {} shape{} at world {} with tunepar-core ({} backend; {} legal layouts)\n",
               plan->size(), problem->model.name, shapes, shapes == 1 ? "" : "s", o.world,
               o.backend == "slurm" ? "slurm" : "local", legal);
  }
  std::vector<runner::MeasuredRun> runs = MeasureSweep(global, *plan, *core, problem->hardware, o.world, name, dir);
  if (runs.size() < 2) {
    return Status(StatusCode::kTrialsFailed, fmt::format("only {} of {} sweep runs succeeded: see the logs under {}",
                                                         runs.size(), plan->size(), dir.string()));
  }
  const std::string csv = o.runs_csv.empty() ? (dir / "runs.csv").string() : o.runs_csv;
  if (Status written = WriteFileNoFollow(csv, "# tunepar-core sweep: " + name + "\n" + MeasuredRunsCsv(runs)); !written.ok())
    return written;
  if (!global.json) fmt::print("measured runs written to {} (tunepar calibrate --from it refits them)\n\n", csv);
  return runs;
}

}  // namespace tunepar
