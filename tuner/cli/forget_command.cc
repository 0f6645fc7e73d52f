// `tunepar forget STUDY [TRIAL...] [--failed] [--dry-run]`: a node forgets its own rows of a
// study (a node writes only its own shard): the whole study, the trials named, or its failed
// ones (crash, timeout, invalid: a setup error fixed since). A forgotten trial keeps its row,
// with role "forgotten" (base/trial_role.h), and counts nowhere: not in the budget (its slot is
// paid back), not in the search's history, not in any summary; its layout may be measured again
// (its claim is marked forgotten). What other nodes still hold of the study is said.
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/provenance.h"
#include "store/claims.h"
#include "store/store_layout.h"
#include "tuner/cli/commands.h"
#include "tuner/output/trial_output.h"
#include "tuner/study/study_lookup.h"
#include "tuner/study/study_session.h"

namespace tunepar {

namespace {

struct ForgetOptions {
  std::string study;
  std::vector<std::string> trials;  // "N" (this node's) or "NODE/N"
  bool failed = false;
  bool dry_run = false;
  std::string node_id;  // "" = this node (store::DefaultNodeId)
  std::string work_dir;
};

bool FailedBySetup(TrialStatus s) {
  return s == TrialStatus::kCrash || s == TrialStatus::kTimeout || s == TrialStatus::kInvalid;
}

// "3" or "n0/3" -> 3, refusing another node's trial (a node writes only its own shard).
Result<int64_t> TrialNumberOf(const std::string& word, const std::string& node, const std::string& study) {
  const size_t slash = word.rfind('/');
  const std::string owner = slash == std::string::npos ? node : word.substr(0, slash);
  const std::string number = slash == std::string::npos ? word : word.substr(slash + 1);
  if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos || number.size() > 12)
    return InvalidArgument(fmt::format("trial '{}': give a trial number (3) or NODE/NUMBER (n0/3)", word));
  if (owner != node) {
    return InvalidArgument(fmt::format(
        "trial {}/{} is node {}'s: a node forgets only its own rows (run forget {} {} --node-id {} where that node's "
        "shard is written)",
        owner, number, owner, study, word, owner));
  }
  return std::stoll(number);
}

// The rows to forget: the trials named, or the failed ones, or every row of this node.
Result<std::vector<store::TrialRecord>> Chosen(const ForgetOptions& o, const std::string& node,
                                               const store::StudyRecord& study,
                                               const std::vector<store::TrialRecord>& own) {
  if (o.trials.empty()) {
    std::vector<store::TrialRecord> out;
    for (const store::TrialRecord& t : own)
      if (!o.failed || FailedBySetup(t.status)) out.push_back(t);
    return out;
  }
  std::vector<store::TrialRecord> out;
  std::set<int64_t> seen;
  for (const std::string& word : o.trials) {
    Result<int64_t> number = TrialNumberOf(word, node, study.name);
    if (!number.ok()) return number.status();
    auto it = std::find_if(own.begin(), own.end(), [&](const store::TrialRecord& t) { return t.number == *number; });
    if (it == own.end()) {
      return Status{StatusCode::kNotFound,
                    fmt::format("study {} has no trial {}/{} to forget (node {} holds {} of its trials)", study.name,
                                node, *number, node, own.size())};
    }
    if (o.failed && !FailedBySetup(it->status)) {
      return InvalidArgument(fmt::format("trial {}/{} did not fail ({}): --failed forgets only crash, timeout and "
                                         "invalid trials",
                                         node, *number, ToString(it->status)));
    }
    if (seen.insert(*number).second) out.push_back(*it);
  }
  return out;
}

std::string StatusCounts(const std::vector<store::TrialRecord>& trials) {
  std::map<std::string, int> counts;
  for (const store::TrialRecord& t : trials) ++counts[std::string(ToString(t.status))];
  std::string text;
  for (const auto& [status, n] : counts) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", status, n);
  return text;
}

// "n1 5, n2 2" of the trials other nodes hold (still counted); "" when none.
std::string OthersHold(const std::vector<store::TrialRecord>& trials, const std::string& node) {
  std::map<std::string, int> by_node;
  for (const store::TrialRecord& t : trials)
    if (t.node_id != node) ++by_node[t.node_id];
  std::string text;
  for (const auto& [other, n] : by_node)
    text += fmt::format("{}{} ({} trial{})", text.empty() ? "" : ", ", other, n, n == 1 ? "" : "s");
  return text;
}

// The trials marked forgotten (their earlier role kept in their details), their layouts'
// measurements given back in the claims first: killed in between, the layouts may be measured
// again while the trials still count (never the other way round).
Status ForgetRows(const GlobalOptions& global, const ForgetOptions& o, const store::StudyRecord& study,
                  const std::string& node, const std::vector<store::TrialRecord>& chosen) {
  Result<StudySession> session = OpenStoredStudySession(global, study, node, o.work_dir);
  if (!session.ok()) return session.status();
  std::error_code ec;
  if (std::filesystem::is_directory(std::filesystem::path(global.store) / "claims" / study.id / "layouts", ec)) {
    store::StudyClaims claims(global.store, study.id, session->presence->watch);
    std::map<std::string, int> per_layout;
    for (const store::TrialRecord& t : chosen)
      if (IsFinished(t.status)) ++per_layout[LayoutKey(t.layout)];
    for (const auto& [key, n] : per_layout) {
      Result<int> marked = claims.Forget(key, n);
      if (!marked.ok()) return marked.status();
    }
  }
  std::vector<store::TrialRecord> rows;
  const std::string now = UtcNow();
  for (store::TrialRecord t : chosen) {
    nlohmann::json details = nlohmann::json::parse(t.details, nullptr, false);
    if (!details.is_object()) details = nlohmann::json::object();
    details["forgotten"] = {{"role", ToString(t.role)}, {"at", now}};
    t.details = details.dump();
    t.role = TrialRole::kForgotten;
    rows.push_back(std::move(t));
  }
  return session->Record(rows);
}

void PrintOutcome(const GlobalOptions& global, const ForgetOptions& o, const store::StudyRecord& study,
                  const std::string& node, const std::vector<store::TrialRecord>& chosen,
                  const std::vector<store::TrialRecord>& trials) {
  const std::string others = OthersHold(trials, node);
  if (global.json) {
    nlohmann::json j = {{"study", study.name}, {"node_id", node}, {"dry_run", o.dry_run}};
    nlohmann::json forgotten = nlohmann::json::array();
    for (const store::TrialRecord& t : chosen) forgotten.push_back(fmt::format("{}/{}", t.node_id, t.number));
    j["forgotten"] = forgotten;
    nlohmann::json held = nlohmann::json::object();
    for (const store::TrialRecord& t : trials)
      if (t.node_id != node) held[t.node_id] = held.value(t.node_id, 0) + 1;
    j["other_nodes_hold"] = held;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  for (const store::TrialRecord& t : chosen)
    fmt::print("{} {}/{}  {}  {}\n", o.dry_run ? "would forget" : "forgot", t.node_id, t.number,
               LayoutKey(t.layout), ToString(t.status));
  fmt::print("{} {} trial{} of study {} on node {} ({}){}.\n", o.dry_run ? "Would forget" : "Forgot", chosen.size(),
             chosen.size() == 1 ? "" : "s", study.name, node, StatusCounts(chosen),
             o.dry_run ? " (--dry-run: nothing changed)"
                       : ": they no longer count toward its budget, and their layouts may be measured again");
  if (!others.empty()) {
    fmt::print("Other nodes still hold trials of it: {} (a node forgets only its own rows: run forget with "
               "--node-id there).\n",
               others);
  }
}

// "3" or "n0/3": a trial, not a study name (forget 3 is trial 3 of the store's only study).
bool LooksLikeATrial(const std::string& word) {
  const std::string number = word.substr(word.rfind('/') == std::string::npos ? 0 : word.rfind('/') + 1);
  return !number.empty() && number.find_first_not_of("0123456789") == std::string::npos;
}

Status RunForget(const GlobalOptions& global, ForgetOptions o) {
  Result<store::StoreView> view = ReadStudyView(global.store, o.study);
  if (!view.ok()) return view.status();
  Result<store::StudyRecord> study = FindStudyOrOnly(*view, global.store, o.study, "nothing to forget");
  if (!study.ok() && study.status().code() == StatusCode::kNotFound && LooksLikeATrial(o.study)) {
    o.trials.insert(o.trials.begin(), o.study);
    o.study.clear();
    view = ReadStudyView(global.store, o.study);
    if (!view.ok()) return view.status();
    study = FindStudyOrOnly(*view, global.store, o.study, "nothing to forget");
  }
  if (!study.ok()) return study.status();
  const std::string node = o.node_id.empty() ? store::DefaultNodeId() : o.node_id;
  TUNEPAR_RETURN_IF_ERROR(store::ValidateNodeId(node));
  std::vector<store::TrialRecord> trials, own;
  for (const store::TrialRecord& t : view->trials) {
    if (t.study_id != study->id) continue;
    trials.push_back(t);
    if (t.node_id == node) own.push_back(t);
  }
  if (own.empty()) {
    const std::string others = OthersHold(trials, node);
    return Status{StatusCode::kNotFound,
                  fmt::format("node {} holds no trial of study {} to forget{}", node, study->name,
                              others.empty() ? "" : fmt::format(" (its trials are on nodes {}: give --node-id)", others))};
  }
  Result<std::vector<store::TrialRecord>> chosen = Chosen(o, node, *study, own);
  if (!chosen.ok()) return chosen.status();
  if (chosen->empty()) {
    if (!global.json)
      fmt::print("Nothing to forget: node {} holds no failed trial (crash, timeout, invalid) of study {}.\n", node,
                 study->name);
    return Status::Ok();
  }
  if (!o.dry_run) TUNEPAR_RETURN_IF_ERROR(ForgetRows(global, o, *study, node, *chosen));
  PrintOutcome(global, o, *study, node, *chosen, trials);
  return Status::Ok();
}

}  // namespace

void AddForgetCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto o = std::make_shared<ForgetOptions>();
  CLI::App* cmd = app.add_subcommand(
      "forget", "Forget this node's trials of a study (all, those named, or the failed ones): they stay in its shard "
                "and count nowhere, not toward the budget either");
  cmd->add_option("study", o->study,
                  "Study name or id, or a unique prefix of 4+ characters of the id (default: the store's only study; "
                  "a trial given first is one of the store's only study)");
  cmd->add_option("trials", o->trials, "Trials to forget: NUMBER or NODE/NUMBER (this node's); default: all of them");
  cmd->add_flag("--failed", o->failed,
                "Only the failed trials (crash, timeout, invalid: a setup error since fixed); OOM trials are evidence "
                "of where memory ends: name them to forget them");
  cmd->add_flag("--dry-run", o->dry_run, "Say what would be forgotten; change nothing");
  cmd->add_option("--node-id", o->node_id, "This node's id in the store (default: $SLURMD_NODENAME, else the host name)");
  cmd->add_option("--work-dir", o->work_dir, "Where this node writes its shard, as the search was given it");
  cmd->callback([&global, result, o] { *result = RunForget(global, *o); });
}

}  // namespace tunepar
