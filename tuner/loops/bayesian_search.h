// `tunepar search` on a backend that measures, in named steps: recover what a stopped tuner left
// running, propose the next batch, start it (recorded running, with a lease), poll it until it
// ends (heartbeats renew the leases), check whether to stop, and summarise. Each step is a
// method that tests can call on their own; Run() is the loop over them.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/backend.h"
#include "search/proposer.h"
#include "tuner/loops/progress.h"
#include "tuner/loops/searches.h"
#include "tuner/study/study_session.h"
#include "tuner/study/trial_records.h"

namespace tunepar {

// A trial of the current batch: its record as started (running), the claim it runs under and
// the backend's handle.
struct ActiveTrial {
  store::TrialRecord record;
  store::HeldClaim claim;
  runner::Prediction predicted;
  std::unique_ptr<runner::RunningTrial> trial;
  bool enqueued = false;  // search --enqueue: its message says so when it finishes
};

class BayesianSearch {
 public:
  BayesianSearch(const GlobalOptions& global, StudySession& session, runner::Backend& backend,
                 const BayesianSearchOptions& options);

  // The whole search: recover, then propose, start and poll batches until a stop; the summary.
  Status Run();

  // This node's trials still marked running belong to a tuner that is gone (this process holds
  // the node's shard exclusively): kills what they left and records them as interrupted.
  Result<std::vector<store::TrialRecord>> RecoverInterrupted();
  // Joins the study's claims (store::StudyClaims::Join): their folders made, and the finished
  // trials given budget slots when the study has none.
  Status JoinClaims();
  // Why the search must stop before another batch ("" to go on): a stop signal, the budget, or
  // the time budget.
  std::string CheckBudget() const;
  // The next batch (at most the batch size, and what the budget leaves), given the claims seen:
  // trials whose owner is gone first (this node's interrupted ones as new attempts), else a
  // confirmation, else the proposer's picks, with the layouts measured elsewhere as pending
  // points. Empty when every legal layout has been tried or is being measured.
  std::vector<TrialIdentity> ProposeNextBatch(const store::ClaimsView& claims) const;
  // A batch to run and the claims it holds; or none, and whether to wait for other nodes'
  // trials (they hold the rest of the budget or the last untried layouts) or why to stop.
  struct NextBatch {
    std::vector<std::pair<TrialIdentity, store::HeldClaim>> trials;
    bool wait = false;
    std::string stop;
  };
  // Proposes and claims the next batch (each trial's measurement of its layout, and a budget
  // slot), proposing again when another node claimed a pick first.
  Result<NextBatch> ClaimNextBatch();
  // Starts every trial of the batch, then records them all as running (with their leases).
  Result<std::vector<ActiveTrial>> StartBatch(const std::vector<std::pair<TrialIdentity, store::HeldClaim>>& batch);
  // Polls the batch until every trial has ended, recording each one as it finishes and renewing
  // the leases of the others; on a stop signal, interrupts them all. True when interrupted.
  Result<bool> PollBatch(std::vector<ActiveTrial>& active);
  // After a batch: kTrialsFailed when every trial of this run failed the same way and none in
  // the study succeeded (the command or its setup is wrong); else why to stop early ("": go on).
  // An early stop waits while a confirmation trial is due (the search turns to confirming).
  Result<std::string> CheckStop() const;
  // The layout to measure again before naming the best (nullopt: none due now): in the
  // budget's confirmation reserve, once the early stop advises stopping, or when `exhausted`
  // (nothing untried is left to propose).
  std::optional<Layout> ConfirmationDue(bool exhausted) const;
  // Where the search stands: the best measured layout, with its uncertainty.
  search::Standing Standing() const;
  // Whether --early-stop advises stopping now (never without it).
  search::StopAdvice EarlyStopAdvice() const;
  bool ExploredEnoughToStop() const;
  // The final summary on stdout, as text or JSON.
  void Summarise(const std::string& stop_reason) const;

  // Finished trials of this run, in order.
  const std::vector<store::TrialRecord>& finished_this_run() const { return this_run_; }

 private:
  std::string TrialId(int64_t number, int attempt, int64_t pid) const;
  Result<store::ClaimsView> ReadClaims();
  std::vector<search::Outcome> HistoryWithPending(const store::ClaimsView& claims) const;
  std::vector<TrialIdentity> Orphans(const store::ClaimsView& claims, int room) const;
  int64_t NextTrialNumber() const;
  void WarnOfEarlierFailures() const;
  std::vector<std::string> ForgetFailedWords() const;
  // The budget slots the claims count among: the budget, and one more for each finished trial
  // forgotten since (its slot stays done; the trial no longer counts toward the budget).
  int SlotLimit() const;
  int NextMeasurement(const store::ClaimsView& claims, const Layout& layout) const;
  Status WaitForOthers();
  Result<bool> ClaimStillHeld(const ActiveTrial& active);
  Status StopTakenOver(ActiveTrial& active);
  std::string TrialFolder() const;
  std::string TrialDir(int64_t number) const;
  Status PrepareTrialDirs(const std::vector<std::pair<TrialIdentity, store::HeldClaim>>& batch);
  std::string RecordedTrialDir(const store::TrialRecord& t) const;
  store::TrialRecord RunningRecord(const TrialIdentity& id, const runner::Prediction& predicted,
                                   const runner::RunningTrial& trial, const std::string& dir) const;
  Status RecordFinished(const ActiveTrial& active, const runner::TrialResult& result);
  bool HeartbeatDue() const;
  Status Beat();
  Status RenewLeases(std::vector<ActiveTrial>& active);
  // Whether the claims still stand for `active` (their folders, this process's heartbeat and its
  // claims); once they do not, claims_lost_ holds why: the batch's trials finish and are recorded
  // (nothing else can hold their claims: every node stops), then the search stops with it.
  bool ClaimsIntact(const std::vector<const ActiveTrial*>& active);
  void PrintHeader(const std::vector<store::TrialRecord>& recovered) const;
  void PrintSummaryText(const std::string& stop_reason) const;
  void PrintSummaryJson(const std::string& stop_reason) const;

  const GlobalOptions& global_;
  StudySession& session_;
  const StudyContext& context_;
  runner::Backend& backend_;
  BayesianSearchOptions options_;
  search::Proposer proposer_;
  store::StudyClaims claims_;
  std::optional<Status> claims_lost_;
  Progress progress_;
  std::chrono::steady_clock::time_point run_start_;
  std::chrono::steady_clock::time_point last_beat_;  // this process's heartbeat (claims.h)
  std::vector<store::TrialRecord> this_run_;
};

// Finished trials among `trials`.
int CountFinished(const std::vector<store::TrialRecord>& trials);

}  // namespace tunepar
