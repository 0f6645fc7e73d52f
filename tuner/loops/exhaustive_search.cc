// `tunepar search --backend model`: every legal layout, predicted by the performance model.
#include <chrono>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "runner/compute_terms.h"
#include "runner/model_backend.h"
#include "tuner/loops/searches.h"
#include "tuner/output/text_table.h"
#include "tuner/output/trial_output.h"
#include "tuner/study/study_lookup.h"
#include "tuner/study/trial_records.h"

namespace tunepar {

namespace {

// Every legal layout that the study has no finished trial of, predicted, numbered after this
// node's last trial.
std::vector<store::TrialRecord> PredictUntried(const StudySession& session) {
  const StudyContext& context = session.context;
  std::set<std::string> finished;
  int64_t next_number = 1;
  for (const store::TrialRecord& t : session.trials) {
    if (IsFinished(t.status)) finished.insert(LayoutKey(t.layout));
    if (t.node_id == session.node_id()) next_number = std::max(next_number, t.number + 1);
  }
  for (const store::TrialRecord& t : session.forgotten)
    if (t.node_id == session.node_id()) next_number = std::max(next_number, t.number + 1);
  runner::ModelBackend backend(context.model(), context.problem.hardware.memory_gb.value);
  std::vector<store::TrialRecord> fresh;
  for (const Layout& layout : context.space.legal) {
    if (finished.count(LayoutKey(layout)) != 0) continue;
    const TrialIdentity id{session.study().id, session.node_id(), next_number++, 1, layout, 1, ""};
    store::TrialRecord predicted =
        WithResult(NewTrialRecord(id, context.Predict(layout), context.ranks_per_node), backend.Evaluate(layout));
    // Stored compactly: the study's model, hardware and space make the breakdown again when a
    // trial is shown (TrialJson with the study's context).
    predicted.details = "{}";
    fresh.push_back(std::move(predicted));
  }
  return fresh;
}

void PrintJson(const GlobalOptions& global, const StudySession& session, const std::vector<store::TrialRecord>& all,
               const std::vector<const store::TrialRecord*>& best, size_t evaluated_now) {
  nlohmann::json j = SearchJson(global, session, all, best);
  j["backend"] = "model";
  j["evaluated_now"] = evaluated_now;
  j["stopped_because"] = "every legal layout is evaluated";
  fmt::print("{}\n", j.dump(2));
}

// Where the best layout's compute time goes, named from the shape (GQA, SwiGLU, ...), and the
// rest of its step (communication, bubble, optimizer) as shares of the step.
void PrintComputeTerms(const StudyContext& context, const Layout& best) {
  const runner::Prediction p = context.model().Predict(best);
  fmt::print("Compute of the best layout, {:.4g} s of its {:.4g} s step:\n", p.time.compute, p.step_time_s);
  for (const runner::NamedTerm& term : runner::NamedComputeTerms(context.problem.model, p.compute_terms, best.precision)) {
    if (term.seconds > 0) fmt::print("  {:5.1f}%  {}\n", 100 * term.seconds / p.time.compute, term.label);
  }
  // The rest of the step, as shares of it.
  std::vector<std::string> rest;
  for (const runner::NamedTerm& term : runner::NamedTimeTerms(p.time, best))
    if (term.seconds > 0) rest.push_back(fmt::format("{} {:.1f}%", term.label, 100 * term.seconds / p.step_time_s));
  fmt::print("The rest of its step: {}\n\n", fmt::join(rest, ", "));
}

void PrintText(const GlobalOptions& global, const StudySession& session, const std::vector<store::TrialRecord>& all,
               const std::vector<const store::TrialRecord*>& best, size_t evaluated_now, double eval_s) {
  const size_t stored_before = all.size() - evaluated_now;
  const StudyContext& context = session.context;
  const Problem& problem = context.problem;
  const std::map<std::string, int64_t> counts = CountByStatus(all);
  auto count = [&](const char* status) {
    auto it = counts.find(status);
    return it == counts.end() ? int64_t{0} : it->second;
  };
  fmt::print("tunepar search: model {} ({}), hardware {}, world {} ({} node{} x {}), space {}\n",
             problem.model.name, ParametersText(problem.model.Parameters(), problem.model.ActiveParameters()), problem.hardware.name, context.world, context.Nodes(),
             context.Nodes() == 1 ? "" : "s", std::min(context.world, problem.hardware.gpus_per_node), problem.space.name);
  fmt::print("shape: {}\n", runner::ShapeFeatures(problem.model));
  fmt::print("backend model: {}\n", runner::kPerformanceModelVersion);
  fmt::print("legal layouts {} of {} candidates (tunepar space --world {} shows the exclusions)\n",
             WithCommas(static_cast<int64_t>(context.space.legal.size())), WithCommas(context.space.candidates), context.world);
  fmt::print("evaluated {} now in {:.2f} s, {} already in the store\n",
             Counted(static_cast<int64_t>(evaluated_now), "layout"), eval_s,
             WithCommas(static_cast<int64_t>(stored_before)));
  fmt::print("predicted to fit in {:g} GB: {}; predicted not to fit (oom): {}\n\n", problem.hardware.memory_gb.value,
             WithCommas(count("ok")), WithCommas(count("oom")));
  if (best.empty()) {
    fmt::print("No layout is predicted to fit in device memory.\n");
  } else {
    fmt::print("Best {} by predicted throughput (TFLOP/s/GPU counts model FLOPs, no recompute):\n{}\n",
               Counted(static_cast<int64_t>(best.size()), "layout"), TrialTable(best, false).Render());
    PrintComputeTerms(context, best.front()->layout);
  }
  fmt::print("Study {} ({}) in store {}, shard {}\n", session.study().name, session.resumed ? "resumed" : "new", global.store,
             session.writer->snapshot_path());
  fmt::print("Inspect: {}    Export: {}\n", TuneparCommand(global, {"show", session.study().name}),
             TuneparCommand(global, {"export", session.study().name, "--csv"}));
}

}  // namespace

Status RunExhaustiveSearch(const GlobalOptions& global, StudySession& session, int top) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<store::TrialRecord> fresh = PredictUntried(session);
  const double eval_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<store::TrialRecord> all = session.trials;
  TUNEPAR_RETURN_IF_ERROR(session.Record(fresh));
  spdlog::debug("evaluated {} layouts in {:.3f} s; shard {}", fresh.size(), eval_s, session.writer->work_path());
  all.insert(all.end(), fresh.begin(), fresh.end());
  const std::vector<const store::TrialRecord*> ranked = RankByThroughput(all);
  const std::vector<const store::TrialRecord*> best(ranked.begin(),
                                                    ranked.begin() + std::min<size_t>(ranked.size(), top));
  if (global.json) {
    PrintJson(global, session, all, best, fresh.size());
  } else {
    PrintText(global, session, all, best, fresh.size(), eval_s);
  }
  return Status::Ok();
}

}  // namespace tunepar
