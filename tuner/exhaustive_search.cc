// `tunepar search --backend model`: every legal layout, predicted by the performance model.
#include <chrono>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "runner/model_backend.h"
#include "tuner/searches.h"
#include "tuner/text_table.h"
#include "tuner/trial_output.h"
#include "tuner/trial_records.h"

namespace tunepar {

Status RunExhaustiveSearch(const GlobalOptions& global, StudySession& s, int top) {
  const Problem& problem = s.problem;
  std::set<std::string> finished;
  int64_t next_number = 1;
  for (const store::TrialRecord& t : s.trials) {
    if (search::IsFinished(t.status)) finished.insert(search::LayoutKey(t.layout));
    if (t.node_id == s.node_id()) next_number = std::max(next_number, t.number + 1);
  }

  const auto start = std::chrono::steady_clock::now();
  Result<runner::PerformanceModel> model = runner::PerformanceModel::Create(problem.model, problem.hardware);
  if (!model.ok()) return model.status();
  runner::ModelBackend backend(*model, problem.hardware.memory_gb.value);
  std::vector<store::TrialRecord> fresh;
  for (const search::Layout& layout : s.space.legal) {
    if (finished.count(search::LayoutKey(layout)) != 0) continue;
    fresh.push_back(ToRecord(s.study.id, s.node_id(), next_number++, layout, backend.Evaluate(layout),
                             model->Predict(layout)));
  }
  const double eval_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!fresh.empty()) {
    TUNEPAR_RETURN_IF_ERROR(s.writer->PutTrials(fresh));
    TUNEPAR_RETURN_IF_ERROR(s.writer->Publish());
  }
  spdlog::debug("evaluated {} layouts in {:.3f} s; shard {}", fresh.size(), eval_s, s.writer->work_path());

  std::vector<store::TrialRecord> all = s.trials;
  all.insert(all.end(), fresh.begin(), fresh.end());
  const std::vector<const store::TrialRecord*> ranked = RankByThroughput(all);
  std::vector<const store::TrialRecord*> best(ranked.begin(),
                                              ranked.begin() + std::min<size_t>(ranked.size(), top));
  const std::map<std::string, int64_t> counts = CountByStatus(all);
  auto count = [&](const char* status) {
    auto it = counts.find(status);
    return it == counts.end() ? int64_t{0} : it->second;
  };

  if (global.json) {
    nlohmann::json j = {{"study", s.study.name},
                        {"study_id", s.study.id},
                        {"resumed", s.resumed},
                        {"store", global.store},
                        {"shard", s.writer->snapshot_path()},
                        {"world", s.world},
                        {"model", problem.model.name},
                        {"hardware", problem.hardware.name},
                        {"space", problem.space.name},
                        {"backend", "model"},
                        {"performance_model", runner::kPerformanceModelVersion},
                        {"candidates", s.space.candidates},
                        {"legal_layouts", s.space.legal.size()},
                        {"evaluated_now", fresh.size()},
                        {"trials", all.size()},
                        {"status_counts", counts}};
    nlohmann::json rows = nlohmann::json::array();
    for (const store::TrialRecord* t : best) rows.push_back(TrialJson(*t));
    j["best"] = rows;
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }

  const int gpn = problem.hardware.gpus_per_node;
  const int nodes = (s.world + gpn - 1) / gpn;
  fmt::print("tunepar search: model {} ({} parameters), hardware {}, world {} ({} node{} x {}), space {}\n",
             problem.model.name, HumanCount(problem.model.Parameters()), problem.hardware.name, s.world,
             nodes, nodes == 1 ? "" : "s", std::min(s.world, gpn), problem.space.name);
  fmt::print("backend model: {}\n", runner::kPerformanceModelVersion);
  fmt::print("legal layouts {} of {} candidates (tunepar space --world {} shows the exclusions)\n",
             WithCommas(static_cast<int64_t>(s.space.legal.size())), WithCommas(s.space.candidates), s.world);
  fmt::print("evaluated {} layouts now in {:.2f} s, {} already in the store\n",
             WithCommas(static_cast<int64_t>(fresh.size())), eval_s,
             WithCommas(static_cast<int64_t>(s.trials.size())));
  fmt::print("predicted to fit in {:g} GB: {}; predicted not to fit (oom): {}\n\n",
             problem.hardware.memory_gb.value, WithCommas(count("ok")), WithCommas(count("oom")));
  if (best.empty()) {
    fmt::print("No layout is predicted to fit in device memory.\n");
  } else {
    fmt::print(
        "Best {} layouts by predicted throughput (TFLOP/s/GPU counts model FLOPs, no recompute):\n{}\n",
        best.size(), TrialTable(best, false).Render());
  }
  fmt::print("Study {} ({}) in store {}, shard {}\n", s.study.name, s.resumed ? "resumed" : "new",
             global.store, s.writer->snapshot_path());
  fmt::print("Inspect: tunepar show {}    Export: tunepar export {} --csv\n", s.study.name, s.study.name);
  return Status::Ok();
}

}  // namespace tunepar
