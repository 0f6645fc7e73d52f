#include "tuner/loops/bayesian_search.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/crash_point.h"
#include "base/knobs.h"
#include "base/names.h"
#include "base/no_follow.h"
#include "base/provenance.h"
#include "runner/core_backend.h"
#include "runner/process_group.h"
#include "store/store_layout.h"
#include "tuner/loops/stop_signals.h"
#include "tuner/output/text_table.h"
#include "tuner/output/trial_output.h"
#include "tuner/study/study_best.h"
#include "tuner/study/study_lookup.h"

namespace tunepar {

namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

std::string UtcIn(double seconds) {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() +
                                                             std::chrono::seconds(static_cast<int64_t>(seconds)));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// What a failure shared by every trial points at: a program that exited non-zero failed on
// its own (its error is in the message), whatever the metric's regex; only a program that
// exited 0 without the metric points at the regex.
// What to check when every trial failed the same way, in the words of the backend that ran them:
// a metric regex means something only for the user's command.
std::string SameFailureHint(TrialStatus status, std::string_view backend) {
  if (backend != "command") {
    switch (status) {
      case TrialStatus::kCrash:
        return "tunepar-core itself fails (its error is quoted): check its build, the MPI launch and the devices";
      case TrialStatus::kInvalid:
        return "tunepar-core refuses the trials as they are placed (its reason is quoted): check the placement, "
               "--comm and the hardware profile against this machine";
      case TrialStatus::kTimeout:
        return "no trial ended in time: raise --timeout, or run one trial's command by hand to see where it stops";
      default: return "check the core's build and the launch";
    }
  }
  switch (status) {
    case TrialStatus::kCrash: return "the program itself fails (its error is quoted): fix its setup or the command";
    case TrialStatus::kInvalid:
      return "the program exits 0 but its output never matches the metric: check --metric-regex/--metric-json "
             "against the log";
    case TrialStatus::kTimeout: return "no trial ended in time: raise --timeout, or check that the program ends";
    default: return "check the command and its setup";
  }
}

constexpr std::string_view kEnqueued = "enqueued (search --enqueue): measured before any proposal";

std::string AcquisitionName(search::AcquisitionKind kind) {
  return kind == search::AcquisitionKind::kLogExpectedImprovement ? "log EI" : "UCB";
}

// The study's proposer options with this run's search policy (--max-probes).
search::ProposerOptions WithPolicy(search::ProposerOptions study, const BayesianSearchOptions& run) {
  study.max_probes = run.max_probes;
  return study;
}

// The header's word on probes: how many the search may spend past the predicted memory limit.
std::string ProbesText(int max_probes) {
  if (max_probes == 0) return "no probes past the predicted memory limit (--max-probes 0)";
  return fmt::format("at most {} past the predicted memory limit (--max-probes)",
                     Counted(max_probes, "probe"));
}

}  // namespace

int CountFinished(const std::vector<store::TrialRecord>& trials) {
  return static_cast<int>(
      std::count_if(trials.begin(), trials.end(), [](const store::TrialRecord& t) { return IsFinished(t.status); }));
}

BayesianSearch::BayesianSearch(const GlobalOptions& global, StudySession& session, runner::Backend& backend,
                               const BayesianSearchOptions& options)
    : global_(global),
      session_(session),
      context_(session.context),
      backend_(backend),
      options_(options),
      proposer_(context_.space.legal, context_.Prior(), WithPolicy(context_.proposer_options, options)),
      claims_(global.store, session.study().id, session.presence->watch),
      progress_(stdout, options.budget, CountFinished(session.trials)),
      run_start_(SteadyClock::now()),
      last_beat_(SteadyClock::now()) {}

// The marker of a trial's processes: "<study id>/<node>/<number>.<attempt>/<store>/<pid>",
// where <store> is a hash of the store's path, so that the same study searched in two stores on
// one machine (the same inputs give the same study id) never claims the other's processes, a
// re-run is never mistaken for what its interrupted attempt left behind, and <pid> is the tuner
// that started it: unique per process.
std::string BayesianSearch::TrialId(int64_t number, int attempt, int64_t pid) const {
  std::error_code ec;
  const std::string path = fs::weakly_canonical(fs::absolute(global_.store, ec), ec).string();
  const uint64_t store_hash = std::hash<std::string>{}(path)&0xffffffffu;
  return fmt::format("{}/{}/{}.{}/{:08x}/{}", session_.study().id, session_.node_id(), number, attempt, store_hash,
                     pid);
}

// <store>/trials/<study>/<node>-<number>, <study> being the study's name, or its id when the name
// is not a valid one (base/names.h: a study stored before names were checked).
std::string BayesianSearch::TrialFolder() const {
  const store::StudyRecord& study = session_.study();
  return IsValidName(study.name) ? study.name : study.id;
}

std::string BayesianSearch::TrialDir(int64_t number) const {
  return store::TrialDirPath(global_.store, TrialFolder(), session_.node_id(), number);
}

// The batch's trial folders, created below the store without following a link. A folder that is
// a link, or holds one (planted where the trial writes its command, log or process record), is
// refused: the batch's claims are given back and the search stops, naming the link.
Status BayesianSearch::PrepareTrialDirs(const std::vector<std::pair<TrialIdentity, store::HeldClaim>>& batch) {
  for (const auto& [id, claim] : batch) {
    Status made = MakeDirectoriesBelow(global_.store, store::TrialDirBelowStore(TrialFolder(), session_.node_id(), id.number));
    if (made.ok()) made = CheckNoLinksIn(TrialDir(id.number));
    if (made.ok()) continue;
    for (const auto& [unused, held] : batch) (void)claims_.Release(held);
    return made.WithContext("cannot prepare the trial folder");
  }
  return Status::Ok();
}

// Where a recorded trial ran: the folder of its log (a study stored before trial folders were
// named by the study id when its name is not valid ran under its name), else TrialDir.
std::string BayesianSearch::RecordedTrialDir(const store::TrialRecord& t) const {
  if (!t.log_path.empty()) return fs::path(t.log_path).parent_path().string();
  return TrialDir(t.number);
}

Result<std::vector<store::TrialRecord>> BayesianSearch::RecoverInterrupted() {
  std::vector<store::TrialRecord> recovered;
  for (const store::TrialRecord& t : session_.trials) {
    if (t.node_id != session_.node_id() || t.status != TrialStatus::kRunning) continue;
    store::TrialRecord r = t;
    const std::string marker = TrialId(t.number, t.attempt, t.pid);
    int killed = 0;
    if (t.process_group > 0 && t.host == HostName())
      killed = runner::KillLeftovers(static_cast<pid_t>(t.process_group), marker,
                                     runner::ProcessRecordPath(RecordedTrialDir(t)));
    killed += runner::CancelSlurmSteps(marker);
    r.status = TrialStatus::kInterrupted;
    r.process_group = 0;
    r.message = fmt::format("interrupted: its tuner (pid {} on {}) stopped before it finished{}", t.pid, t.host,
                            killed > 0 ? fmt::format("; {} leftover processes killed", killed) : "");
    r.finished_at = UtcNow();
    recovered.push_back(r);
  }
  TUNEPAR_RETURN_IF_ERROR(session_.Record(recovered));
  return recovered;
}

Status BayesianSearch::JoinClaims() {
  return claims_.Join(CountFinished(session_.trials) + CountFinished(session_.forgotten));
}

std::string BayesianSearch::CheckBudget() const {
  if (StopSignal() != 0) return "interrupted";
  if (CountFinished(session_.trials) >= options_.budget)
    return fmt::format("the budget of {} is reached", Counted(options_.budget, "trial"));
  const double elapsed = std::chrono::duration<double>(SteadyClock::now() - run_start_).count();
  if (options_.time_budget_s > 0 && elapsed >= options_.time_budget_s)
    return fmt::format("the time budget of {} is spent", Clock(options_.time_budget_s));
  return "";
}

std::vector<TrialIdentity> BayesianSearch::ProposeNextBatch(const store::ClaimsView& claims) const {
  const std::string& node = session_.node_id();
  const int room = std::min(options_.batch, options_.budget - CountFinished(session_.trials));
  std::vector<TrialIdentity> batch = Orphans(claims, room);
  if (!batch.empty() || room <= 0) return batch;
  int64_t next_number = NextTrialNumber();
  auto again = [&](const Layout& layout) {
    return TrialIdentity{session_.study().id, node, next_number, 1, layout, NextMeasurement(claims, layout), ""};
  };
  for (const Layout& layout : options_.enqueued) {
    if (static_cast<int>(batch.size()) >= room || NextMeasurement(claims, layout) > 1) continue;
    batch.push_back(again(layout));
    batch.back().number = next_number++;
    batch.back().enqueued = true;
  }
  if (!batch.empty()) return batch;
  if (std::optional<Layout> layout = ConfirmationDue(false)) return {again(*layout)};
  for (const search::Proposal& p : proposer_.Propose(HistoryWithPending(claims), room)) {
    batch.push_back({session_.study().id, node, next_number++, 1, p.layout, 1, ""});
    batch.back().probe = p.probe;
  }
  if (batch.empty()) {
    if (std::optional<Layout> layout = ConfirmationDue(true)) batch.push_back(again(*layout));
  }
  return batch;
}

search::Standing BayesianSearch::Standing() const {
  return proposer_.Stand(History(session_.trials), options_.confidence);
}

std::optional<Layout> BayesianSearch::ConfirmationDue(bool exhausted) const {
  if (options_.confirmations == 0) return std::nullopt;  // --confirm 0: never
  const int left = options_.budget - CountFinished(session_.trials);
  const bool in_reserve = left <= options_.ConfirmationReserve();
  // After an early stop's advice the search only confirms (a function of the history, so a
  // resumed search does the same).
  if (!(in_reserve || exhausted || EarlyStopAdvice().stop)) return std::nullopt;
  return Standing().remeasure;
}

search::StopAdvice BayesianSearch::EarlyStopAdvice() const {
  if (!options_.early_stop || !ExploredEnoughToStop()) return {};
  const auto [gain, probability] = *options_.early_stop;
  return proposer_.Advise(History(session_.trials), gain, probability);
}

// An early stop speaks for every knob the program receives only when the measurements do: each
// such knob (more than one value in the legal space) varied among the finished layouts, and at
// least as many distinct layouts finished as there are such knobs (a confirmation is the same
// layout again, so it counts once).
bool BayesianSearch::ExploredEnoughToStop() const {
  std::vector<Knob> varying;
  for (Knob knob : Knobs()) {
    const auto& legal = context_.space.legal;
    const bool varies = std::any_of(legal.begin(), legal.end(), [&](const Layout& l) {
      return KnobCode(knob, l) != KnobCode(knob, legal.front());
    });
    if (varies) varying.push_back(knob);
  }
  std::set<std::string> distinct;
  std::map<Knob, std::set<int>> values;
  for (const store::TrialRecord& t : session_.trials) {
    if (!IsFinished(t.status)) continue;
    distinct.insert(LayoutKey(t.layout));
    for (Knob knob : varying) values[knob].insert(KnobCode(knob, t.layout));
  }
  if (distinct.size() < varying.size()) return false;
  return std::all_of(varying.begin(), varying.end(), [&](Knob knob) { return values[knob].size() > 1; });
}

store::TrialRecord BayesianSearch::RunningRecord(const TrialIdentity& id, const runner::Prediction& predicted,
                                                 const runner::RunningTrial& trial, const std::string& dir) const {
  store::TrialRecord r = NewTrialRecord(id, predicted, backend_.RanksPerNode(context_.world));
  r.status = TrialStatus::kRunning;
  r.backend = std::string(backend_.Name());
  r.hosts = HostName();
  r.process_group = trial.process_group();
  r.message = id.attempt > 1 ? fmt::format("re-run after an interruption (attempt {})", id.attempt) : "";
  if (!id.rerun_of.empty()) {
    r.role = TrialRole::kRerun;
    r.rerun_of = id.rerun_of;
    r.message = WithRoleMark(r, "");
  } else if (id.probe) {
    r.role = TrialRole::kProbe;
  }
  const bool measured_before = std::any_of(session_.trials.begin(), session_.trials.end(), [&](const store::TrialRecord& t) {
    return t.status == TrialStatus::kOk && t.layout == id.layout;
  });
  if (id.enqueued) r.message = kEnqueued;
  if (id.attempt == 1 && measured_before && r.role == TrialRole::kFirst) {
    r.role = TrialRole::kConfirmation;
    r.message = WithRoleMark(r, "the leaders are within noise");
  }
  r.log_path = dir + "/output.log";
  r.started_at = r.heartbeat_at = UtcNow();
  r.lease_expires_at = UtcIn(options_.lease_s);
  return r;
}

// Starts the batch, then records it as running (a crash in between leaves no process: each
// trial dies with its tuner).
Result<std::vector<ActiveTrial>> BayesianSearch::StartBatch(
    const std::vector<std::pair<TrialIdentity, store::HeldClaim>>& batch) {
  TUNEPAR_RETURN_IF_ERROR(PrepareTrialDirs(batch));
  std::vector<ActiveTrial> active;
  std::vector<store::TrialRecord> running;
  for (const auto& [id, claim] : batch) {
    const std::string dir = TrialDir(id.number);
    const runner::TrialContext trial_context{TrialId(id.number, id.attempt, getpid()), dir,
                                             id.number,                      id.attempt,
                                             context_.world,                 context_.problem.hardware.gpus_per_node,
                                             &context_.problem.model,        static_cast<uint64_t>(session_.study().seed)};
    ActiveTrial a;
    a.claim = claim;
    a.enqueued = id.enqueued;
    a.predicted = context_.Predict(id.layout);
    a.trial = backend_.Start(id.layout, trial_context);
    CrashPoint("start");
    a.record = RunningRecord(id, a.predicted, *a.trial, dir);
    running.push_back(a.record);
    active.push_back(std::move(a));
  }
  TUNEPAR_RETURN_IF_ERROR(session_.Record(running));
  return active;
}

Status BayesianSearch::RecordFinished(const ActiveTrial& a, const runner::TrialResult& result) {
  store::TrialRecord r = WithResult(a.record, result);
  if (a.enqueued) r.message = std::string(kEnqueued) + (r.message.empty() ? "" : "; " + r.message);
  r.message = WithRoleMark(a.record, r.message);
  // A node that judged this tuner gone has taken the measurement over: it is that node's now.
  // With the claims gone, no one took it over: the result stands.
  Result<bool> held = ClaimsIntact({&a}) ? ClaimStillHeld(a) : Result<bool>(false);
  if (!held.ok()) return held.status();
  if (!*held && IsFinished(r.status) && !claims_lost_) {
    r.message = fmt::format("discarded ({} {}): its claim was taken over by another node while this tuner was "
                            "unresponsive for the lease",
                            ToString(r.status), r.message);
    r.status = TrialStatus::kInterrupted;
  }
  TUNEPAR_RETURN_IF_ERROR(session_.Record({r}, "record"));
  CrashPoint("publish");
  if (*held) {
    TUNEPAR_RETURN_IF_ERROR(IsFinished(r.status) ? claims_.Finish(a.claim) : claims_.Release(a.claim));
  }
  if (IsFinished(r.status)) {
    this_run_.push_back(r);
    progress_.Finished();
  }
  if (global_.json) return Status::Ok();
  const store::TrialRecord* best = FastestOkTrial(session_.trials);
  // Named as it is stored (node/number, what show and the summary say); a finished trial also
  // takes the next place in the budget, one that did not finish (interrupted) none.
  const std::string place = IsFinished(r.status)
                                ? fmt::format("{}/{}", CountFinished(session_.trials), options_.budget)
                                : "not counted";
  progress_.Line(fmt::format(
      "trial {:<17}  {:<54}  {:<8} {:>16}  (model {})  best {}{}",
      fmt::format("{}/{} ({})", r.node_id, r.number, place), LayoutKey(r.layout),
      std::string(ToString(r.status)) + (r.sliced ? " (sliced)" : "") + RoleMark(a.record),
      r.status == TrialStatus::kOk ? ThroughputText(r) : "-",
      a.predicted.fits ? fmt::format("{} tok/s", WithCommas(std::llround(a.predicted.tokens_per_s))) : "oom",
      best != nullptr ? ThroughputText(*best) : "-",
      r.status == TrialStatus::kOk ? "" : fmt::format("  [{}]", r.message)));
  return Status::Ok();
}

bool BayesianSearch::HeartbeatDue() const {
  return std::chrono::duration<double>(SteadyClock::now() - last_beat_).count() >= options_.lease_s / 4;
}

Status BayesianSearch::Beat() {
  last_beat_ = SteadyClock::now();
  return session_.Beat();
}

// The heartbeat, the claims' check (a trial taken over elsewhere is stopped) and the running
// records' leases.
bool BayesianSearch::ClaimsIntact(const std::vector<const ActiveTrial*>& active) {
  if (claims_lost_) return false;
  std::vector<store::HeldClaim> held;
  for (const ActiveTrial* a : active) held.push_back(a->claim);
  Status intact = session_.presence->heartbeat.Check();
  if (intact.ok()) intact = claims_.CheckIntact(held);
  if (intact.ok()) return true;
  claims_lost_ = intact;
  if (!global_.json) progress_.Line(fmt::format("tunepar: {}", intact.message()));
  return false;
}

Status BayesianSearch::RenewLeases(std::vector<ActiveTrial>& active) {
  std::vector<const ActiveTrial*> all;
  for (const ActiveTrial& a : active) all.push_back(&a);
  if (!ClaimsIntact(all)) return Status::Ok();  // the running trials finish; no claim is renewed
  TUNEPAR_RETURN_IF_ERROR(Beat());
  for (size_t i = 0; i < active.size();) {
    Result<bool> held = ClaimStillHeld(active[i]);
    if (!held.ok()) return held.status();
    if (*held) {
      ++i;
      continue;
    }
    TUNEPAR_RETURN_IF_ERROR(StopTakenOver(active[i]));
    active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
  }
  std::vector<store::TrialRecord> beats;
  for (ActiveTrial& a : active) {
    a.record.heartbeat_at = UtcNow();
    a.record.lease_expires_at = UtcIn(options_.lease_s);
    beats.push_back(a.record);
  }
  return session_.Record(beats);
}

Result<bool> BayesianSearch::PollBatch(std::vector<ActiveTrial>& active) {
  while (!active.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const bool stopping = StopSignal() != 0;
    for (size_t i = 0; i < active.size();) {
      std::optional<runner::TrialResult> result = stopping ? active[i].trial->Interrupt() : active[i].trial->Poll();
      if (!result) {
        ++i;
        continue;
      }
      TUNEPAR_RETURN_IF_ERROR(RecordFinished(active[i], *result));
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (stopping) return true;
    if (HeartbeatDue()) TUNEPAR_RETURN_IF_ERROR(RenewLeases(active));
  }
  return false;
}

Result<std::string> BayesianSearch::CheckStop() const {
  const bool any_ok = std::any_of(session_.trials.begin(), session_.trials.end(),
                                  [](const store::TrialRecord& t) { return t.status == TrialStatus::kOk; });
  if (!any_ok && static_cast<int>(this_run_.size()) >= options_.failures_to_abort) {
    const store::TrialRecord& first = this_run_.front();
    const bool same = std::all_of(this_run_.begin(), this_run_.end(), [&](const store::TrialRecord& t) {
      return t.status == first.status && t.status != TrialStatus::kOom && t.message == first.message;
    });
    if (same) {
      return Status{StatusCode::kTrialsFailed,
                    fmt::format("every trial failed the same way ({} trials): {}: {} (log: {}); {}", this_run_.size(),
                                ToString(first.status), first.message, first.log_path, SameFailureHint(first.status, backend_.Name())) +
                        "; once it is fixed, " + TuneparCommand(global_, ForgetFailedWords()) +
                        " keeps these trials from counting toward the budget"};
    }
  }
  if (!options_.early_stop) return std::string();
  const auto [gain, probability] = *options_.early_stop;
  const search::StopAdvice advice = EarlyStopAdvice();
  if (!advice.stop) return std::string();
  // No new layout is worth a trial: make sure of the best first (ConfirmationDue).
  if (options_.confirmations != 0 && CountFinished(session_.trials) < options_.budget && Standing().remeasure)
    return std::string();
  return fmt::format(
      "early stop: no untried layout can improve the best by more than {:g}% with probability {:g}% or more (the "
      "most promising, {}, has {:.2g}%)",
      100 * gain, 100 * probability, advice.most_promising ? LayoutKey(*advice.most_promising) : "-",
      100 * advice.best_probability);
}

// `forget STUDY --failed`, with this node's id unless it is the default one.
std::vector<std::string> BayesianSearch::ForgetFailedWords() const {
  std::vector<std::string> words = {"forget", session_.study().name, "--failed"};
  if (session_.node_id() != store::DefaultNodeId()) words.insert(words.end(), {"--node-id", session_.node_id()});
  return words;
}

// A resumed study whose finished trials all failed the same way (a setup error, fixed since or
// not): how many, how they count toward the budget, and how to forget them.
void BayesianSearch::WarnOfEarlierFailures() const {
  std::vector<const store::TrialRecord*> finished;
  for (const store::TrialRecord& t : session_.trials)
    if (IsFinished(t.status)) finished.push_back(&t);
  if (finished.empty()) return;
  const store::TrialRecord& first = *finished.front();
  const bool same = std::all_of(finished.begin(), finished.end(), [&](const store::TrialRecord* t) {
    return t->status == first.status && t->status != TrialStatus::kOk && t->status != TrialStatus::kOom &&
           t->message == first.message;
  });
  if (!same) return;
  const bool here = std::all_of(finished.begin(), finished.end(),
                                [&](const store::TrialRecord* t) { return t->node_id == session_.node_id(); });
  std::vector<std::string> words = ForgetFailedWords();
  if (!here) words = {"forget", session_.study().name, "--failed", "--node-id", first.node_id};
  spdlog::warn(
      "study {}: {} {} finished trial{} failed the same way ({}: {}); they count toward the budget of {}. If the "
      "cause is fixed, forget them first: {}",
      OneLine(session_.study().name), finished.size() == 1 ? "its" : "all its", finished.size(),
      finished.size() == 1 ? "" : "s", ToString(first.status), OneLine(first.message), options_.budget,
      TuneparCommand(global_, words));
}

void BayesianSearch::PrintHeader(const std::vector<store::TrialRecord>& recovered) const {
  if (global_.json) return;
  const Problem& problem = context_.problem;
  const int gpn = problem.hardware.gpus_per_node, per_node = context_.PlacedRanksPerNode(), nodes = context_.Nodes();
  fmt::print("tunepar search: model {} ({}), hardware {}, world {} ({} node{}{}), space {}: {} legal layouts\n",
             problem.model.name, ParametersText(problem.model.Parameters(), problem.model.ActiveParameters()), problem.hardware.name, context_.world, nodes,
             nodes > 1 ? "s" : "",
             per_node > gpn ? fmt::format("; {} ranks per node share {} devices", per_node, gpn) : "",
             problem.space.name, WithCommas(static_cast<int64_t>(context_.space.legal.size())));
  fmt::print(
      "backend {}; Bayesian search (GP on the performance model's prior, {}), batch {}, budget {}{}; {}\n",
      backend_.Name(), AcquisitionName(context_.proposer_options.acquisition), options_.batch,
      Counted(options_.budget, "trial"),
      options_.time_budget_s > 0 ? fmt::format(", time budget {}", Clock(options_.time_budget_s)) : "",
      ProbesText(options_.max_probes));
  fmt::print("study {} ({}; {} finished trials so far), node {}\n", session_.study().name,
             session_.resumed ? "resumed" : "new", CountFinished(session_.trials), session_.node_id());
  if (const std::string fixed = UnreceivedKnobs(context_.support); !fixed.empty())
    fmt::print("not measured: {} (the program does not receive them: fixed, every trial runs with these)\n", fixed);
  for (const Layout& l : options_.enqueued)
    fmt::print("enqueued (--enqueue): {}: measured before any proposal unless the study has measured it, counted in "
               "the budget\n",
               LayoutKey(l));
  for (const store::TrialRecord& r : recovered) {
    fmt::print("trial {}/{} was left running by a stopped tuner: marked interrupted, will be re-run first\n",
               session_.node_id(), r.number);
  }
}

Status BayesianSearch::Run() {
  InstallStopHandlers();
  Result<std::vector<store::TrialRecord>> recovered = RecoverInterrupted();
  if (!recovered.ok()) return recovered.status();
  TUNEPAR_RETURN_IF_ERROR(JoinClaims());
  PrintHeader(*recovered);
  WarnOfEarlierFailures();
  run_start_ = SteadyClock::now();  // the time budget counts the search, not the recovery
  std::string stop_reason;
  bool interrupted = false;
  while (stop_reason.empty()) {
    stop_reason = CheckBudget();
    if (!stop_reason.empty()) break;
    if (HeartbeatDue()) TUNEPAR_RETURN_IF_ERROR(Beat());
    Result<NextBatch> next = ClaimNextBatch();
    if (!next.ok()) return next.status();
    if (next->trials.empty() && next->wait) {
      TUNEPAR_RETURN_IF_ERROR(WaitForOthers());  // other nodes hold what is left
      continue;
    }
    if (next->trials.empty()) {
      stop_reason = next->stop;
      break;
    }
    CrashPoint("claim");
    Result<std::vector<ActiveTrial>> active = StartBatch(next->trials);
    if (!active.ok()) return active.status();
    Result<bool> stopped = PollBatch(*active);
    if (!stopped.ok()) return stopped.status();
    if (claims_lost_) {
      progress_.Close();
      return *claims_lost_;
    }
    if (*stopped) {
      stop_reason = "interrupted";
      break;
    }
    TUNEPAR_RETURN_IF_ERROR(session_.Refresh());  // other nodes' progress
    Result<std::string> stop = CheckStop();
    if (!stop.ok()) {
      progress_.Close();
      return stop.status();
    }
    stop_reason = *stop;
  }
  interrupted = stop_reason == "interrupted";
  progress_.Close();
  Summarise(stop_reason);
  if (!interrupted) return Status::Ok();
  return {StatusCode::kInterrupted,
          fmt::format("interrupted by signal {}; the running trials were stopped and recorded as interrupted (they "
                      "are re-run first on resume)",
                      StopSignal())};
}

Status RunBayesianSearch(const GlobalOptions& global, StudySession& session, runner::Backend& backend,
                         const BayesianSearchOptions& options) {
  return BayesianSearch(global, session, backend, options).Run();
}

}  // namespace tunepar
