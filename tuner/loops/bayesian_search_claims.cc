// The search's side of the store's claims (store/claims.h): before a trial starts, its node
// holds the claim on that measurement of the layout and a budget slot, so no two nodes run the
// same measurement and a study never finishes more trials than its budget. Layouts claimed
// elsewhere are pending points of the proposer; trials whose owner is gone are re-run first; a
// trial whose claim was taken over while this tuner was unresponsive is stopped, never finished.
#include <algorithm>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "tuner/loops/bayesian_search.h"
#include "tuner/output/text_table.h"
#include "base/provenance.h"
#include "tuner/loops/stop_signals.h"

namespace tunepar {

namespace {

// Finished measurements of the layout with this key, on every node.
int Measurements(const std::vector<store::TrialRecord>& trials, const std::string& key) {
  return static_cast<int>(std::count_if(trials.begin(), trials.end(), [&](const store::TrialRecord& t) {
    return IsFinished(t.status) && LayoutKey(t.layout) == key;
  }));
}

}  // namespace

Result<store::ClaimsView> BayesianSearch::ReadClaims() {
  // The claims still stand (this process's heartbeat among them) before any other process is
  // judged by them: a heartbeat folder deleted by hand must stop this node, not make it take over
  // the others' trials.
  TUNEPAR_RETURN_IF_ERROR(session_.presence->heartbeat.Check());
  TUNEPAR_RETURN_IF_ERROR(claims_.CheckIntact({}));
  // The claims first, then the trials: a claim marked done was published before it was marked,
  // so its result is in what the refresh reads.
  Result<store::ClaimsView> view = claims_.Read(SlotLimit());
  if (!view.ok()) return view.status();
  TUNEPAR_RETURN_IF_ERROR(session_.Refresh());
  // A measurement recorded by a tuner killed before it marked its claim: settled as done, so its
  // budget slot is not handed out again (the study would finish more trials than its budget).
  bool settled = false;
  for (const store::ClaimFile& c : view->orphaned) {
    const auto [key, k] = store::SplitMeasurement(c.name);
    if (Measurements(session_.trials, key) < k) continue;
    Result<bool> done = claims_.SettleFinished(c);
    if (!done.ok()) return done.status();
    settled = settled || *done;
  }
  if (settled) view = claims_.Read(SlotLimit());
  return view;
}

std::vector<search::Outcome> BayesianSearch::HistoryWithPending(const store::ClaimsView& view) const {
  std::vector<search::Outcome> history = History(session_.trials);
  std::set<std::string> known;
  for (const search::Outcome& o : history) known.insert(LayoutKey(o.layout));
  // Measured elsewhere, not yet published: pending (in name order, so proposals depend only on
  // the finished trials and the claims seen).
  std::vector<std::string> pending;
  for (const store::ClaimFile& c : view.running_elsewhere) pending.push_back(c.name);
  // Finished elsewhere but not in what this node could read (that node's shard is damaged or
  // not yet published): pending too, so that it is not proposed (its claim would be refused).
  pending.insert(pending.end(), view.done.begin(), view.done.end());
  for (const std::string& name : pending) {
    const std::string key = store::SplitMeasurement(name).first;
    if (!known.insert(key).second) continue;
    Result<Layout> layout = ParseLayoutKey(key);
    if (layout.ok()) history.push_back({*layout, TrialStatus::kRunning, std::nullopt, false, std::nullopt});
  }
  return history;
}

// Trials whose owner is gone before they finished: this node's own interrupted ones as new
// attempts of the same trial, other nodes' as new trials of this node.
std::vector<TrialIdentity> BayesianSearch::Orphans(const store::ClaimsView& view, int room) const {
  const std::string& node = session_.node_id();
  std::vector<TrialIdentity> out;
  std::set<std::string> taken;
  int64_t next_number = NextTrialNumber();
  auto add = [&](TrialIdentity id) {
    if (static_cast<int>(out.size()) >= room) return;
    const std::string name = fmt::format("{}.m{}", LayoutKey(id.layout), id.measurement);
    if (!taken.insert(name).second) return;
    const bool elsewhere = std::any_of(view.running_elsewhere.begin(), view.running_elsewhere.end(),
                                       [&](const store::ClaimFile& c) { return c.name == name; });
    if (!elsewhere) out.push_back(std::move(id));
  };
  for (const store::TrialRecord& t : session_.trials) {
    if (t.node_id != node || t.status != TrialStatus::kInterrupted) continue;
    const bool rerun = std::any_of(session_.trials.begin(), session_.trials.end(), [&](const store::TrialRecord& u) {
      return u.node_id == node && u.number == t.number && u.attempt > t.attempt;
    });
    // As before claims: a layout measured meanwhile (here or elsewhere) is not run again.
    if (!rerun && Measurements(session_.trials, LayoutKey(t.layout)) == 0) {
      TrialIdentity again{session_.study().id, node, t.number, t.attempt + 1, t.layout, 1, ""};
      again.probe = t.role == TrialRole::kProbe;  // a probe run again is still the probe
      add(std::move(again));
    }
  }
  for (const store::ClaimFile& c : view.orphaned) {
    const auto [key, k] = store::SplitMeasurement(c.name);
    if (c.owner.node_id == node || Measurements(session_.trials, key) >= k) continue;
    Result<Layout> layout = ParseLayoutKey(key);
    if (!layout.ok() || proposer_.IndexOf(*layout) < 0) continue;
    add({session_.study().id, node, next_number++, 1, *layout, k, c.owner.node_id});
  }
  return out;
}

// A confirmation's measurement: after those finished and those running elsewhere.
int BayesianSearch::NextMeasurement(const store::ClaimsView& claims, const Layout& layout) const {
  const std::string key = LayoutKey(layout);
  const auto running = std::count_if(claims.running_elsewhere.begin(), claims.running_elsewhere.end(),
                                     [&](const store::ClaimFile& c) { return store::SplitMeasurement(c.name).first == key; });
  return Measurements(session_.trials, key) + static_cast<int>(running) + 1;
}

int BayesianSearch::SlotLimit() const {
  return options_.budget + CountFinished(session_.forgotten);
}

int64_t BayesianSearch::NextTrialNumber() const {
  int64_t next = 1;
  for (const auto* rows : {&session_.trials, &session_.forgotten})
    for (const store::TrialRecord& t : *rows)
      if (t.node_id == session_.node_id()) next = std::max(next, t.number + 1);
  return next;
}

Result<BayesianSearch::NextBatch> BayesianSearch::ClaimNextBatch() {
  // A few rounds: a layout claimed by another node between our proposal and our claim is
  // pending in the next round, so the proposer moves on.
  for (int round = 0; round < 8; ++round) {
    Result<store::ClaimsView> view = ReadClaims();
    if (!view.ok()) return view.status();
    NextBatch next;
    if (view->slots_done + view->slots_held >= SlotLimit()) {
      next.wait = view->slots_held > 0 && !view->running_elsewhere.empty();
      if (!next.wait) next.stop = fmt::format("the budget of {} is reached", Counted(options_.budget, "trial"));
      return next;
    }
    const std::vector<TrialIdentity> batch = ProposeNextBatch(*view);
    if (batch.empty()) {
      next.wait = !view->running_elsewhere.empty();
      if (!next.wait) next.stop = "every legal layout has been tried";
      return next;
    }
    for (const TrialIdentity& id : batch) {
      Result<std::optional<store::HeldClaim>> claim = claims_.ClaimLayout(LayoutKey(id.layout), id.measurement);
      if (!claim.ok()) return claim.status();
      if (!*claim) continue;  // another node was quicker
      Result<bool> slot = claims_.ClaimSlot(SlotLimit(), **claim);
      if (!slot.ok()) return slot.status();
      if (!*slot) {
        TUNEPAR_RETURN_IF_ERROR(claims_.Release(**claim));
        break;
      }
      next.trials.push_back({id, **claim});
    }
    if (!next.trials.empty()) return next;
  }
  return NextBatch{{}, true, ""};
}

Status BayesianSearch::WaitForOthers() {
  const double pause = std::clamp(options_.lease_s / 8, 0.1, 2.0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(pause);
  while (std::chrono::steady_clock::now() < until && StopSignal() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return Beat();
}

Result<bool> BayesianSearch::ClaimStillHeld(const ActiveTrial& a) {
  return claims_.StillHeld(a.claim);
}

Status BayesianSearch::StopTakenOver(ActiveTrial& a) {
  store::TrialRecord r = WithResult(a.record, a.trial->Interrupt());
  r.status = TrialStatus::kInterrupted;
  r.message =
      "stopped: its claim was taken over by another node while this tuner was unresponsive for the lease (that node "
      "measures it)";
  r.finished_at = UtcNow();
  r.process_group = 0;
  TUNEPAR_RETURN_IF_ERROR(session_.Record({r}));
  if (!global_.json) progress_.Line(fmt::format("trial {}/{} {}: {}", r.node_id, r.number, LayoutKey(r.layout), r.message));
  return Status::Ok();
}

}  // namespace tunepar
