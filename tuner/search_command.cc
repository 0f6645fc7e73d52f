// `tunepar search`: evaluates the legal layouts of a problem and records every trial in this
// node's shard of the store. With the `model` backend the whole legal space is evaluated
// (exhaustive is exact and cheap there); a study found in the store is resumed, never re-run.
#include <chrono>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/provenance.h"
#include "runner/model_backend.h"
#include "search/space.h"
#include "store/shard_writer.h"
#include "store/store_layout.h"
#include "tuner/commands.h"
#include "tuner/problem.h"
#include "tuner/problem_options.h"
#include "tuner/study_identity.h"
#include "tuner/trial_output.h"

namespace tunepar {

namespace {

struct SearchOptions {
  ProblemOptions problem;
  std::string backend = "model";
  std::string study;     // "" = the default name
  std::string node_id;   // "" = DefaultNodeId()
  std::string work_dir;  // "" = <store>/work
  int top = 10;
};

// A trial as the store keeps it: the backend's result plus the performance model's prediction
// for the same layout (for the `model` backend the two agree by construction).
store::TrialRecord ToRecord(const std::string& study_id, const std::string& node_id, int64_t number,
                            const search::Layout& layout, const runner::TrialResult& r,
                            const runner::Prediction& predicted) {
  store::TrialRecord t;
  t.study_id = study_id;
  t.node_id = node_id;
  t.number = number;
  t.layout = layout;
  t.status = r.status;
  t.step_time_s = r.metrics.step_time_s;
  t.tokens_per_s = r.metrics.tokens_per_s;
  t.tflops_per_gpu = r.metrics.tflops_per_gpu;
  t.peak_memory_bytes = r.metrics.peak_memory_bytes;
  t.predicted_step_time_s = predicted.step_time_s;
  t.predicted_tokens_per_s = predicted.tokens_per_s;
  t.predicted_memory_bytes = predicted.memory_bytes;
  t.details = r.details_json.empty() ? "{}" : r.details_json;
  t.message = r.message;
  t.log_path = r.log_path;
  t.backend = r.backend;
  t.hosts = r.hosts;
  t.tunepar_version = std::string(Version());
  t.git_revision = std::string(GitRevision());
  t.host = r.hosts;
  t.pid = getpid();
  t.started_at = r.started_at;
  t.finished_at = r.finished_at;
  t.heartbeat_at = r.finished_at;
  t.lease_expires_at = r.finished_at;
  return t;
}

Status RunSearch(const GlobalOptions& global, const SearchOptions& o) {
  Result<Problem> problem = LoadProblem(o.problem.model, o.problem.hardware, o.problem.space);
  if (!problem.ok()) return problem.status();
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(o.problem.world, problem->hardware));
  const int world = static_cast<int>(o.problem.world);
  const search::SpaceQuery query = MakeSpaceQuery(*problem, world);
  Result<search::SpaceEnumeration> space = search::EnumerateSpace(query);
  if (!space.ok()) return space.status();
  if (space->legal.empty()) return {StatusCode::kNoLegalLayout, search::ExplainEmpty(query, *space)};

  StudySettings settings;
  settings.world = world;
  settings.backend = o.backend;
  settings.backend_settings = nlohmann::json{{"performance_model", runner::kPerformanceModelId}}.dump();
  const std::string study_id = StudyId(*problem, settings);

  const std::string node_id = o.node_id.empty() ? store::DefaultNodeId() : o.node_id;
  Result<std::unique_ptr<store::ShardWriter>> writer =
      store::ShardWriter::Open({global.store, node_id, o.work_dir});
  if (!writer.ok()) return writer.status();
  Result<store::StoreView> merged = (*writer)->ReadMerged(study_id);
  if (!merged.ok()) return merged.status();
  for (const std::string& w : merged->warnings) spdlog::warn("{}", w);

  std::string name = o.study.empty() ? DefaultStudyName(*problem, settings, study_id) : o.study;
  bool resumed = false;
  for (const store::StudyRecord& s : merged->studies) {
    if (s.id == study_id) {
      resumed = true;
      name = s.name;
    } else if (s.name == name) {
      return InvalidArgument(
          fmt::format("study '{}' already exists with a different model, hardware, space, world or backend; "
                      "choose another "
                      "--study name",
                      name));
    }
  }
  TUNEPAR_RETURN_IF_ERROR((*writer)->PutStudy(MakeStudyRecord(*problem, settings, study_id, name, node_id)));

  std::set<std::string> finished;
  int64_t next_number = 1;
  for (const store::TrialRecord& t : merged->trials) {
    if (search::IsFinished(t.status)) finished.insert(search::LayoutKey(t.layout));
    if (t.node_id == node_id) next_number = std::max(next_number, t.number + 1);
  }

  const auto start = std::chrono::steady_clock::now();
  Result<runner::PerformanceModel> model =
      runner::PerformanceModel::Create(problem->model, problem->hardware);
  if (!model.ok()) return model.status();
  runner::ModelBackend backend(*model, problem->hardware.memory_gb.value);
  std::vector<store::TrialRecord> fresh;
  for (const search::Layout& layout : space->legal) {
    if (finished.count(search::LayoutKey(layout)) != 0) continue;
    fresh.push_back(
        ToRecord(study_id, node_id, next_number++, layout, backend.Evaluate(layout), model->Predict(layout)));
  }
  const double eval_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!fresh.empty()) {
    TUNEPAR_RETURN_IF_ERROR((*writer)->PutTrials(fresh));
    TUNEPAR_RETURN_IF_ERROR((*writer)->Publish());
  }
  spdlog::debug("evaluated {} layouts in {:.3f} s; shard {}", fresh.size(), eval_s, (*writer)->work_path());

  std::vector<store::TrialRecord> all = std::move(merged->trials);
  all.insert(all.end(), fresh.begin(), fresh.end());
  const std::vector<const store::TrialRecord*> ranked = RankByThroughput(all);
  std::vector<const store::TrialRecord*> best(ranked.begin(),
                                              ranked.begin() + std::min<size_t>(ranked.size(), o.top));
  const std::map<std::string, int64_t> counts = CountByStatus(all);
  auto count = [&](const char* s) {
    auto it = counts.find(s);
    return it == counts.end() ? int64_t{0} : it->second;
  };

  if (global.json) {
    nlohmann::json j = {{"study", name},
                        {"study_id", study_id},
                        {"resumed", resumed},
                        {"store", global.store},
                        {"shard", (*writer)->snapshot_path()},
                        {"world", world},
                        {"model", problem->model.name},
                        {"hardware", problem->hardware.name},
                        {"space", problem->space.name},
                        {"backend", o.backend},
                        {"performance_model", runner::kPerformanceModelVersion},
                        {"candidates", space->candidates},
                        {"legal_layouts", space->legal.size()},
                        {"evaluated_now", fresh.size()},
                        {"trials", all.size()},
                        {"status_counts", counts}};
    nlohmann::json top = nlohmann::json::array();
    for (const store::TrialRecord* t : best) top.push_back(TrialJson(*t));
    j["best"] = top;
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }

  const int nodes = (world + query.gpus_per_node - 1) / query.gpus_per_node;
  fmt::print("tunepar search: model {} ({} parameters), hardware {}, world {} ({} node{} x {}), space {}\n",
             problem->model.name, HumanCount(problem->model.Parameters()), problem->hardware.name, world,
             nodes, nodes == 1 ? "" : "s", std::min(world, query.gpus_per_node), problem->space.name);
  fmt::print("backend model: {}\n", runner::kPerformanceModelVersion);
  fmt::print("legal layouts {} of {} candidates (tunepar space --world {} shows the exclusions)\n",
             WithCommas(static_cast<int64_t>(space->legal.size())), WithCommas(space->candidates), world);
  fmt::print("evaluated {} layouts now in {:.2f} s, {} already in the store\n",
             WithCommas(static_cast<int64_t>(fresh.size())), eval_s,
             WithCommas(static_cast<int64_t>(all.size() - fresh.size())));
  fmt::print("predicted to fit in {:g} GB: {}; predicted not to fit (oom): {}\n\n",
             problem->hardware.memory_gb.value, WithCommas(count("ok")), WithCommas(count("oom")));
  if (best.empty()) {
    fmt::print("No layout is predicted to fit in device memory.\n");
  } else {
    fmt::print(
        "Best {} layouts by predicted throughput (TFLOP/s/GPU counts model FLOPs, no recompute):\n{}\n",
        best.size(), TrialTable(best, false).Render());
  }
  fmt::print("Study {} ({}) in store {}, shard {}\n", name, resumed ? "resumed" : "new", global.store,
             (*writer)->snapshot_path());
  fmt::print("Inspect: tunepar show {}    Export: tunepar export {} --csv\n", name, name);
  return Status::Ok();
}

}  // namespace

void AddSearchCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto o = std::make_shared<SearchOptions>();
  CLI::App* cmd = app.add_subcommand("search", "Find the fastest layouts; record every trial in the store");
  o->problem.AddTo(cmd);
  cmd->add_option("--backend", o->backend,
                  "How layouts are evaluated: model (the performance model, a dry run)")
      ->check(CLI::IsMember({"model"}))
      ->capture_default_str();
  cmd->add_option("--study", o->study, "Study name (default: <model>-w<world>-<id>)");
  cmd->add_option("--node-id", o->node_id,
                  "This node's shard name (default: $SLURMD_NODENAME or the host name)");
  cmd->add_option("--work-dir", o->work_dir,
                  "Where this node's live shard is written (default: <store>/work)")
      ->envname("TUNEPAR_WORK_DIR");
  cmd->add_option("--top", o->top, "How many of the best layouts to print")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->callback([&global, result, o] { *result = RunSearch(global, *o); });
}

}  // namespace tunepar
