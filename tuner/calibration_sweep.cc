#include "tuner/calibration_sweep.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "runner/core_backend.h"
#include "search/space.h"
#include "tuner/problem.h"

namespace tunepar {

namespace fs = std::filesystem;

namespace {

// Spread over (tp, pp, mbs) groups round-robin; within a group a fixed pseudo-random order, so
// precision, recomputation and ZeRO vary too.
std::vector<search::Layout> SpreadLayouts(const std::vector<search::Layout>& legal, int count) {
  std::map<std::tuple<int, int, int>, std::vector<search::Layout>> groups;
  for (const search::Layout& l : legal) groups[{l.tp, l.pp, l.micro_batch}].push_back(l);
  for (auto& [key, members] : groups) {
    auto order = [](const search::Layout& l) {
      return std::hash<std::string>{}("sweep:" + search::LayoutKey(l));
    };
    std::sort(members.begin(), members.end(),
              [&](const search::Layout& a, const search::Layout& b) { return order(a) < order(b); });
  }
  std::vector<search::Layout> chosen;
  for (size_t round = 0; static_cast<int>(chosen.size()) < count; ++round) {
    bool any = false;
    for (auto& [key, members] : groups) {
      if (round < members.size() && static_cast<int>(chosen.size()) < count) {
        chosen.push_back(members[round]);
        any = true;
      }
    }
    if (!any) break;
  }
  return chosen;
}

}  // namespace

std::string MeasuredRunsCsv(const std::vector<runner::MeasuredRun>& runs) {
  std::string s =
      "label,layers,hidden,heads,seq_len,vocab,global_batch,gpus,tp,pp,micro_batch,virtual_stages,precision,"
      "recompute,zero,seq_parallel,flash_attention,source,step_time_s\n";
  for (const runner::MeasuredRun& r : runs) {
    const search::Layout& l = r.layout;
    s += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6g}\n", r.label,
                     r.model.layers, r.model.hidden, r.model.heads, r.model.seq_len, r.model.vocab,
                     r.model.global_batch, l.World(), l.tp, l.pp, l.micro_batch, l.virtual_stages,
                     search::ToString(l.precision), search::ToString(l.recompute), l.zero,
                     l.seq_parallel ? 1 : 0, l.flash_attention ? 1 : 0, r.source, r.step_time_s);
  }
  return s;
}

Result<std::vector<runner::MeasuredRun>> RunCalibrationSweep(const GlobalOptions& global,
                                                             const SweepOptions& o) {
  if (o.layouts < 2) return InvalidArgument(fmt::format("--layouts must be at least 2, got {}", o.layouts));
  Result<Problem> problem = LoadProblem(o.model, o.hardware, "default");
  if (!problem.ok()) return problem.status();
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(o.world, problem->hardware));
  problem->space.seq_parallel = {false};
  problem->space.virtual_stages = {1};
  problem->space.flash_attention = {false};
  Result<search::SpaceEnumeration> space = search::EnumerateSpace(MakeSpaceQuery(*problem, o.world));
  if (!space.ok()) return space.status();
  if (space->legal.empty()) return Status(StatusCode::kNoLegalLayout, "no legal layout to sweep");
  Result<runner::CoreBackendOptions> core =
      ResolveCoreOptions(o.core, o.backend == "slurm" ? runner::Launcher::kSlurm : runner::Launcher::kLocal,
                         problem->hardware, o.world, o.timeout_s);
  if (!core.ok()) return core.status();
  runner::CoreBackend backend(*core, problem->model, problem->hardware);

  const std::string name = fmt::format("{}-{}-w{}", problem->hardware.name, problem->model.name, o.world);
  const fs::path dir = fs::path(global.store) / "calibration" / name;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return StoreError(fmt::format("cannot create '{}': {}", dir.string(), ec.message()));
  const std::vector<search::Layout> layouts = SpreadLayouts(space->legal, o.layouts);
  if (!global.json) {
    fmt::print("Sweeping {} layouts of {} at world {} with tunepar-core ({} backend; {} legal layouts)\n",
               layouts.size(), problem->model.name, o.world, backend.Name(), space->legal.size());
  }
  std::vector<runner::MeasuredRun> runs;
  for (size_t i = 0; i < layouts.size(); ++i) {
    const search::Layout& l = layouts[i];
    const fs::path trial_dir = dir / std::to_string(i + 1);
    fs::create_directories(trial_dir, ec);
    runner::TrialContext context;
    context.trial_id = fmt::format("calibration/{}/{}/{}", name, i + 1, getpid());
    context.trial_dir = trial_dir.string();
    context.number = static_cast<int64_t>(i + 1);
    context.world = o.world;
    context.gpus_per_node = problem->hardware.gpus_per_node;
    context.model = &problem->model;
    const runner::TrialResult r = backend.Evaluate(l, context);
    const bool ok = r.status == search::TrialStatus::kOk && r.metrics.step_time_s;
    if (!global.json) {
      fmt::print("run {:>2}/{}  {:<56} {:>7}  {}\n", i + 1, layouts.size(), search::LayoutKey(l),
                 search::ToString(r.status),
                 ok ? fmt::format("{:.4f} s/step", *r.metrics.step_time_s) : r.message);
      std::fflush(stdout);
    }
    if (ok) {
      runs.push_back({fmt::format("run{}", i + 1), problem->model, l, *r.metrics.step_time_s,
                      fmt::format("tunepar-core {} sweep", backend.Name()), "model"});
    }
  }
  if (runs.size() < 2) {
    return Status(StatusCode::kTrialsFailed,
                  fmt::format("only {} of {} sweep runs succeeded: see the logs under {}", runs.size(),
                              layouts.size(), dir.string()));
  }
  const std::string csv = o.runs_csv.empty() ? (dir / "runs.csv").string() : o.runs_csv;
  std::ofstream(csv) << "# tunepar-core sweep: " << name << "\n" << MeasuredRunsCsv(runs);
  if (!global.json)
    fmt::print("measured runs written to {} (tunepar calibrate --from it refits them)\n\n", csv);
  return runs;
}

}  // namespace tunepar
