#include "tuner/output/trial_output.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/knobs.h"
#include "runner/model_backend.h"
#include "tuner/output/trial_costs.h"

namespace tunepar {

std::vector<const store::TrialRecord*> RankByThroughput(const std::vector<store::TrialRecord>& trials) {
  std::vector<const store::TrialRecord*> ok;
  std::set<std::string> seen;
  for (const store::TrialRecord& t : trials) {
    if (t.status != TrialStatus::kOk || !t.tokens_per_s) continue;
    if (!seen.insert(LayoutKey(t.layout)).second) continue;
    ok.push_back(&t);
  }
  std::stable_sort(ok.begin(), ok.end(), [](const store::TrialRecord* a, const store::TrialRecord* b) {
    return *a->tokens_per_s > *b->tokens_per_s;
  });
  return ok;
}

std::string ThroughputText(const store::TrialRecord& t) {
  if (t.tokens_per_s) return fmt::format("{} tok/s", WithCommas(std::llround(*t.tokens_per_s)));
  if (!t.metric_kind.empty() && t.metric_value) return fmt::format("{} {:g}", t.metric_kind, *t.metric_value);
  return "-";
}

TextTable TrialTable(const std::vector<const store::TrialRecord*>& trials, bool with_status) {
  using A = TextTable::Align;
  TextTable t;
  t.AddColumn("#");
  if (with_status) {
    t.AddColumn("trial", A::kLeft);
    t.AddColumn("status", A::kLeft);
  }
  const std::vector<LayoutField> fields = LayoutFields();
  for (const LayoutField& f : fields) {
    const bool named = f.knob >= 0 && RowOf(static_cast<Knob>(f.knob)).kind == KnobKind::kChoice;
    t.AddColumn(std::string(f.column), named ? A::kLeft : A::kRight);
  }
  t.AddColumn("step s");
  t.AddColumn("tokens/s");
  t.AddColumn("TFLOP/s/GPU");
  t.AddColumn("mem GB");
  const bool any_sliced = !with_status && std::any_of(trials.begin(), trials.end(),
                                                      [](const store::TrialRecord* r) { return r->sliced; });
  if (any_sliced) t.AddColumn("measured", A::kLeft);
  // tunepar-core trials: how each ran and what it cost beyond its steps (trial_costs.h).
  std::vector<TrialCosts> costs;
  for (const store::TrialRecord* r : trials) costs.push_back(CostsOf(*r));
  const bool any_comm = std::any_of(costs.begin(), costs.end(), [](const TrialCosts& c) { return !c.comm.empty(); });
  const bool any_startup = std::any_of(costs.begin(), costs.end(), [](const TrialCosts& c) { return c.startup_s; });
  if (any_comm) t.AddColumn("comm", A::kLeft);
  if (any_startup) t.AddColumn("start-up s");
  int rank = 0;
  for (const store::TrialRecord* r : trials) {
    const Layout& l = r->layout;
    std::vector<std::string> row = {std::to_string(++rank)};
    if (with_status) {
      row.push_back(fmt::format("{}/{}", r->node_id, r->number));
      row.push_back(std::string(ToString(r->status)) + (r->sliced ? " (sliced)" : "") +
                    (r->role == TrialRole::kProbe ? " (probe)" : ""));
    }
    for (const LayoutField& f : fields) row.push_back(LayoutFieldText(f, l));
    row.push_back(Fixed(r->step_time_s.value_or(NAN), 3));
    row.push_back(r->tokens_per_s ? WithCommas(static_cast<int64_t>(std::llround(*r->tokens_per_s))) : "-");
    row.push_back(TflopsText(r->tflops_per_gpu.value_or(NAN)));
    row.push_back(GigabytesText(r->peak_memory_bytes.value_or(NAN)));
    if (any_sliced) row.emplace_back(r->sliced ? "slice + model" : "whole");
    const TrialCosts& cost = costs[rank - 1];
    if (any_comm) row.push_back(cost.comm.empty() ? "-" : cost.comm);
    if (any_startup) row.push_back(Fixed(cost.startup_s.value_or(NAN), 2));
    t.AddRow(std::move(row));
  }
  return t;
}

std::map<std::string, int64_t> CountByStatus(const std::vector<store::TrialRecord>& trials) {
  std::map<std::string, int64_t> counts;
  for (const store::TrialRecord& t : trials) ++counts[std::string(ToString(t.status))];
  return counts;
}

namespace {

nlohmann::json OptionalJson(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

}  // namespace

namespace {

// A layout field as JSON holds it: switches true / false, choices by name, sizes as numbers.
nlohmann::json FieldJson(const LayoutField& f, const Layout& l) {
  const int code = LayoutFieldCode(f, l);
  if (f.knob < 0) return code;
  const KnobKind kind = RowOf(static_cast<Knob>(f.knob)).kind;
  if (kind == KnobKind::kSwitch) return code != 0;
  if (kind == KnobKind::kChoice) return KnobValueText(static_cast<Knob>(f.knob), code);
  return code;
}

}  // namespace

nlohmann::json TrialJson(const store::TrialRecord& t) {
  const Layout& l = t.layout;
  nlohmann::json details = nlohmann::json::parse(t.details, nullptr, false);
  nlohmann::json j = {{"node_id", t.node_id},
          {"number", t.number},
          {"layout", LayoutKey(l)},
          {"status", ToString(t.status)},
          {"attempt", t.attempt},
          {"role", ToString(t.role)},
          {"rerun_of", t.rerun_of},
          {"step_time_s", OptionalJson(t.step_time_s)},
          {"tokens_per_s", OptionalJson(t.tokens_per_s)},
          {"tflops_per_gpu", OptionalJson(t.tflops_per_gpu)},
          {"peak_memory_bytes", OptionalJson(t.peak_memory_bytes)},
          {"predicted_step_time_s", OptionalJson(t.predicted_step_time_s)},
          {"predicted_tokens_per_s", OptionalJson(t.predicted_tokens_per_s)},
          {"predicted_memory_bytes", OptionalJson(t.predicted_memory_bytes)},
          {"metric", t.metric_kind.empty() ? nlohmann::json()
                                            : nlohmann::json{{"kind", t.metric_kind}, {"value", OptionalJson(t.metric_value)}}},
          {"sliced", t.sliced},
          {"ranks_per_node", t.ranks_per_node ? nlohmann::json(*t.ranks_per_node) : nlohmann::json()},
          {"details", details.is_discarded() ? nlohmann::json(t.details) : details},
          {"message", t.message},
          {"log_path", t.log_path},
          {"backend", t.backend},
          {"hosts", t.hosts},
          {"tunepar_version", t.tunepar_version},
          {"git_revision", t.git_revision},
          {"host", t.host},
          {"process_group", t.process_group},
          {"started_at", t.started_at},
          {"finished_at", t.finished_at}};
  for (const LayoutField& f : LayoutFields()) j[std::string(f.name)] = FieldJson(f, l);
  return j;
}

namespace {

// What the performance model says of the layout today, as the dry run would have stored it,
// when it still gives the stored prediction.
nlohmann::json PredictionDetails(const store::TrialRecord& t, const StudyContext& context) {
  const runner::Prediction p = context.Predict(t.layout);
  const bool same = t.predicted_step_time_s &&
                    std::abs(p.step_time_s - *t.predicted_step_time_s) <= 1e-9 * std::abs(p.step_time_s);
  if (!same) {
    return {{"breakdown_unavailable",
             "stored by another version of the performance model; tunepar predict gives today's breakdown"}};
  }
  return nlohmann::json::parse(runner::PredictionJson(p, context.problem.model));
}

}  // namespace

nlohmann::json TrialJson(const store::TrialRecord& t, const StudyContext& context) {
  nlohmann::json j = TrialJson(t);
  if (t.backend == "model" && t.details == "{}") j["details"] = PredictionDetails(t, context);
  return j;
}

std::optional<StudyContext> ContextForPredictions(const store::StudyRecord& study,
                                                  const std::vector<store::TrialRecord>& trials) {
  if (study.backend != "model") return std::nullopt;
  Result<StudyContext> context = MakeStudyContext(study, PlacementOfTrials(trials));
  if (!context.ok()) return std::nullopt;
  return std::move(*context);
}

nlohmann::json UnmeasuredKnobsJson(const KnobSupport& support) {
  nlohmann::json j = nlohmann::json::object();
  for (Knob k : Knobs()) {
    if (support.Unreceived(k)) j[std::string(KnobName(k))] = KnobValueText(k, support.Of(k).front());
  }
  return j;
}

KnobSupport SupportOf(const store::StudyRecord& study) {
  Result<KnobSupport> support = ParsePinnedKnobs(study.pinned_knobs);
  return support.ok() ? *support : KnobSupport{};
}

}  // namespace tunepar
