// Claims that cannot race: how the nodes sharing a store agree on who measures which layout and
// how much of the budget is spent, keeping the rule that each node writes only its own shard.
// Every decision is the creation of a file that can exist only once: a fully written temporary
// file is link(2)ed to its name, which fails when the name exists (atomic on local disks, NFSv3
// and later, and Lustre; rename and O_EXCL are not relied on for exclusion). Nothing is decided by
// comparing clocks across hosts.
//
//   <store>/claims/beats/<owner>                         a counter its owner bumps every heartbeat
//   <store>/claims/<study>/layouts/<layout>.m<k>.g<g>    measurement k of a layout, generation g
//   <store>/claims/<study>/slots/<n>.g<g>                budget slot n (1..budget), generation g
//
// A claim's generation g+1 can be created only when generation g is over: done (its trial
// finished), released (its trial was interrupted) or expired (its owner's heartbeat stood still
// for the lease on the observer's own monotonic clock, or its process is gone from this host, or
// its node id is now held by this process). So an expired claim is taken over exactly once.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tunepar::store {

// Who holds a claim: one live process. The token is unique per process (node, host, pid and the
// process's start time, so a reused pid is another owner).
struct ClaimOwner {
  std::string token;
  std::string node_id;
  std::string host;
  std::string boot_id;  // the host's boot (/proc/sys/kernel/random/boot_id): pids restart with it
  int64_t pid = 0;
  int64_t start_ticks = 0;  // the process's start time in clock ticks since boot (/proc/PID/stat)
};

// This process as an owner under `node_id`.
ClaimOwner ThisProcess(const std::string& node_id);

// An owner as the "key=value" lines of a claim or node record, and back.
std::string OwnerLines(const ClaimOwner& owner);
ClaimOwner OwnerFromFields(const std::map<std::string, std::string>& fields);

// A layout claim's name "<layout key>.m<k>" split into the key and k.
std::pair<std::string, int> SplitMeasurement(const std::string& name);

// kForgotten: a done measurement whose trial its node forgot (`tunepar forget`): over, so the
// measurement can be claimed again, and neither done nor to re-run.
enum class ClaimState { kRunning, kDone, kReleased, kForgotten };

// One generation of a claim as read from its file.
struct ClaimFile {
  std::string name;  // "<layout>.m<k>" or "<n>" (a slot)
  int generation = 0;
  ClaimOwner owner;
  ClaimState state = ClaimState::kRunning;
  std::string detail;  // a layout claim: its slot; a slot: the layout claim it pays for
};

// Judges whether owners are alive, as this process sees it. Remembers when each owner's
// heartbeat last changed, on this process's steady clock: an owner is gone once its counter has
// not moved for the lease (a fresh observer waits the lease before judging), or at once when it
// is a process of this host that no longer exists, or another process of this node's id (which
// this process holds: NodeOwnership).
class LeaseWatch {
 public:
  LeaseWatch(std::string store_dir, ClaimOwner self, double lease_s);
  // `by_held_node` false: judged by its process and heartbeat alone, not by this process holding
  // the node id (which is held per study: node records of other studies).
  bool Gone(const ClaimOwner& owner, bool by_held_node = true);
  // This process now holds its node id (NodeOwnership): every other process of that id is gone.
  void HoldNode() { holds_node_ = true; }
  const ClaimOwner& self() const { return self_; }
  double lease_s() const { return lease_s_; }

 private:
  struct Seen {
    std::string counter;
    std::chrono::steady_clock::time_point since;
  };
  std::string store_dir_;
  ClaimOwner self_;
  double lease_s_;
  bool holds_node_ = false;
  std::map<std::string, Seen> seen_;
};

// This process's heartbeat: <store>/claims/beats/<token>, a counter rewritten every Beat(). The
// first beat creates the folder; from then on a heartbeat file or folder that vanished is
// ClaimsVanished.
class Heartbeat {
 public:
  Heartbeat(std::string store_dir, ClaimOwner self) : store_dir_(std::move(store_dir)), self_(std::move(self)) {}
  Status Beat();
  // ClaimsVanished once this process's heartbeat file is gone.
  Status Check() const;
  // Removes the file (the process is leaving; its claims are all done or released).
  void Stop();

 private:
  std::string store_dir_;
  ClaimOwner self_;
  int64_t count_ = 0;
};

// A measurement this process holds: the layout claim and the budget slot paying for it.
struct HeldClaim {
  std::string layout_key;
  int measurement = 1;  // k: the k-th measurement of the layout
  int layout_generation = 0;
  int slot = 0;
  int slot_generation = 0;
};

// What the claims of a study say, as this process sees them now.
struct ClaimsView {
  // Measurements running elsewhere (their owners alive): the search's pending layouts.
  std::vector<ClaimFile> running_elsewhere;
  // Measurements whose owner is gone before they finished (expired or released): to re-run.
  std::vector<ClaimFile> orphaned;
  // Measurements finished anywhere ("<layout>.m<k>"): a search proposes none of them again, even
  // when the shard holding its result cannot be read.
  std::vector<std::string> done;
  // Slots: finished, held by live owners (this one included), free or orphaned.
  int slots_done = 0, slots_held = 0;
};

class StudyClaims {
 public:
  StudyClaims(std::string store_dir, std::string study_id, LeaseWatch& watch);

  // Claims measurement `measurement` of `layout_key` (the next generation when the current one
  // is over); nullopt when another live owner holds it or it is done.
  Result<std::optional<HeldClaim>> ClaimLayout(const std::string& layout_key, int measurement);
  // Holds a budget slot among 1..limit for `held` (free, or orphaned by a gone owner); false
  // when every slot is done or held by a live owner.
  Result<bool> ClaimSlot(int limit, HeldClaim& held);
  // Marks this process's slot and layout claim done: the trial finished.
  Status Finish(const HeldClaim& held);
  // Marks them released: the trial was interrupted, and another node, or this one on resume,
  // re-runs it.
  Status Release(const HeldClaim& held);
  // False once a later generation of the layout claim or of its slot exists: taken over by a
  // node that judged this process gone (it was unresponsive for the lease).
  Result<bool> StillHeld(const HeldClaim& held);
  // Joins the study's claims: makes their folders (links below the store refused) and gives the
  // `finished` trials recorded slots among 1..finished, done, where those slots are missing (a
  // study searched before claims existed, or claims deleted while no node ran; every joining node
  // fills them, so none claims a missing one as free while another creates them); a slot that
  // exists, in any state, stays as it is.
  // From then on, a folder or a claim of this process that vanishes is ClaimsVanished.
  Status Join(int finished);
  // A measurement whose result is recorded but whose claim an owner now gone left running (it
  // was killed between recording the trial and marking its claim): the layout claim and the slot
  // paying for it get a next generation, done, so that the budget counts the trial once. False
  // when another process settled it first.
  Result<bool> SettleFinished(const ClaimFile& layout_claim);
  // The `count` done measurements of `layout_key` with the highest k marked forgotten (their
  // trials were forgotten): the layout's done measurements stay as many as its trials that
  // count. Returns how many were marked.
  Result<int> Forget(const std::string& layout_key, int count);
  // ClaimsVanished when the study's claim folders, or a claim in `held`, are gone.
  Status CheckIntact(const std::vector<HeldClaim>& held) const;
  // The study's claims, judged through the watch, with slots counted among 1..limit;
  // ClaimsVanished when a folder is gone or fewer slots are done than this process saw before.
  Result<ClaimsView> Read(int slot_limit);

 private:
  std::string LayoutsDir() const;
  std::string SlotsDir() const;
  Status CheckHeldFiles(const HeldClaim& held) const;

  std::string store_dir_;
  std::string relative_dir_;  // "claims/<study>"
  std::string dir_;
  LeaseWatch& watch_;
  int done_seen_ = 0;  // budget slots seen done so far (they never come undone)
};

}  // namespace tunepar::store
