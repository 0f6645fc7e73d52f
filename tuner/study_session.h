// A search's study, opened in the store: the problem, its legal space, the study's identity and
// record, this node's shard, and every trial of the study so far (all nodes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "search/space.h"
#include "store/shard_writer.h"
#include "tuner/commands.h"
#include "tuner/problem.h"
#include "tuner/study_identity.h"

namespace tunepar {

struct SessionRequest {
  std::string model, hardware, space;
  int64_t world = 0;
  StudySettings settings;  // world is filled in from `world`
  std::string study;       // the name asked for; "" = the default name
  std::string node_id;     // "" = DefaultNodeId()
  std::string work_dir;
  bool new_study = false;    // --new: a fresh study even if one with these inputs exists
  bool resume_only = false;  // --resume-only: the study must exist
  // The built-in core's knobs only (measuring with tunepar-core): no sequence parallelism,
  // interleaved stages or flash attention, which it does not implement.
  bool core_knobs_only = false;
};

struct StudySession {
  Problem problem;
  int world = 0;
  search::SpaceEnumeration space;
  StudySettings settings;
  store::StudyRecord study;
  bool resumed = false;
  std::unique_ptr<store::ShardWriter> writer;
  std::vector<store::TrialRecord> trials;  // of this study, every node, ordered by (node, number)

  const std::string& node_id() const { return writer->node_id(); }
  // Re-reads the trials (other nodes' published shards and this node's live one).
  Status Refresh();
};

Result<StudySession> OpenStudySession(const GlobalOptions& global, SessionRequest request);

}  // namespace tunepar
