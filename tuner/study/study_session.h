// A search's study, opened in the store: its context (problem, legal space, model, proposer
// options; study_context.h), whether it was resumed, this node's shard, and every trial of the
// study so far (all nodes).
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/knob_support.h"
#include "base/status.h"
#include "runner/backend.h"
#include "store/claims.h"
#include "store/node_owner.h"
#include "store/shard_writer.h"
#include "tuner/study/global_options.h"
#include "tuner/study/study_context.h"
#include "tuner/study/study_identity.h"

namespace tunepar {

struct SessionRequest {
  std::string model, hardware, space;
  std::string knobs;  // declared knob values, TOML lines (LoadProblem)
  int64_t world = 0;
  StudySettings settings;  // world and pinned_knobs are filled in from `world` and `backend`
  std::string study;       // the name asked for; "" = the default name
  std::string node_id;     // "" = DefaultNodeId()
  std::string work_dir;
  bool new_study = false;    // --new: a fresh study even if one with these inputs exists
  bool resume_only = false;  // --resume-only: the study must exist
  const runner::Backend* backend = nullptr;  // what its program can run (SupportedKnobs); none: every value
  int ranks_per_node = 0;    // where the backend places the ranks (Backend::RanksPerNode)
  double lease_s = 120;      // how long a silent heartbeat takes to mark this process gone
  // The caller's own inputs held against the study (e.g. --enqueue's layouts against its
  // space), before anything is written: a refusal leaves the store as it was.
  std::function<Status(const StudyContext&)> check_inputs;
};

// This process in the store: its node id held (one live process per id, whatever its work
// directory), its heartbeat, and the watch that judges other processes' claims. Leaving
// releases the id and stops the heartbeat.
struct NodePresence {
  NodePresence(const std::string& store_dir, const std::string& node_id, double lease_s)
      : watch(store_dir, store::ThisProcess(node_id), lease_s), heartbeat(store_dir, watch.self()) {}
  ~NodePresence();
  NodePresence(const NodePresence&) = delete;
  NodePresence& operator=(const NodePresence&) = delete;

  store::LeaseWatch watch;
  store::Heartbeat heartbeat;
  store::NodeOwnership ownership;
};

struct StudySession {
  StudyContext context;
  bool resumed = false;
  std::unique_ptr<NodePresence> presence;  // before the writer: the node id is held first
  std::unique_ptr<store::ShardWriter> writer;
  std::vector<store::TrialRecord> trials;  // of this study, every node, ordered by (node, number)
  std::vector<store::TrialRecord> forgotten;  // forgotten trials (counted nowhere; numbers stay taken)
  std::set<std::string> warned;            // the skipped shards named so far (each once per run)

  const store::StudyRecord& study() const { return context.study; }
  const std::string& node_id() const { return writer->node_id(); }
  // Re-reads the trials (other nodes' published shards and this node's live one); a shard that
  // cannot be counted is named once, and the rest read.
  Status Refresh();
  // Writes `records` to this node's shard in one transaction, publishes the shard, and puts
  // them into `trials` (replacing the rows with the same node and number; forgotten ones move
  // to `forgotten`). Refused when another
  // process has taken this node id (it judged this one gone). `crash_point` names the moment
  // between writing and publishing (base/crash_point.h).
  Status Record(const std::vector<store::TrialRecord>& records, std::string_view crash_point = {});
  // Renews this process's heartbeat and checks that it still holds its node id.
  Status Beat();
};

Result<StudySession> OpenStudySession(const GlobalOptions& global, SessionRequest request);

// A study found in the store, opened by node `node_id` to change its own rows (`tunepar
// forget`): the node id held (refused while a search of this node runs), its shard open, every
// trial read.
Result<StudySession> OpenStoredStudySession(const GlobalOptions& global, const store::StudyRecord& study,
                                            const std::string& node_id, const std::string& work_dir);

// Replaces the record with the same (node, number), or adds it; keeps (node, number) order.
void Upsert(std::vector<store::TrialRecord>& trials, const store::TrialRecord& record);

}  // namespace tunepar
