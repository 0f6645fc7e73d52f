// A study's context, built in one place from its stored record: the problem as the study
// recorded it, the legal space after the backend's restriction (what its program can run), the
// performance model with the placement the trials ran with, and the proposer's options. The
// search, report, launch-script and calibrate --from all build it here, so they see the same
// legal set and the same placement.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/knob_support.h"
#include "base/status.h"
#include "runner/performance_model.h"
#include "search/proposer.h"
#include "search/space.h"
#include "store/records.h"
#include "tuner/study/problem.h"

namespace tunepar {

// The program a study measured with the command backend, as its backend settings stored it: the
// template, and whether the program reads its layout from $TUNEPAR_LAYOUT.
struct StudyProgram {
  std::string command;
  bool reads_layout_env = false;
};

struct StudyContext {
  store::StudyRecord study;
  std::optional<StudyProgram> program;  // the study's own command (command backend only)
  Problem problem;           // the study's configs; problem.space as the backend restricts it
  KnobSupport support;       // what the study's backend can run
  int world = 0;
  search::SpaceEnumeration space;  // the legal layouts, in enumeration order
  // Ranks placed on each node (the allocation's, not the study's: read from the trials); 0 or
  // the profile's GPUs per node: one rank per device.
  int ranks_per_node = 0;
  std::optional<runner::PerformanceModel> performance_model;  // always set by MakeStudyContext
  search::ProposerOptions proposer_options;

  const runner::PerformanceModel& model() const { return *performance_model; }
  runner::Prediction Predict(const Layout& layout) const { return model().Predict(layout); }
  search::SpaceQuery Query() const { return MakeSpaceQuery(problem, world); }
  // The performance model as the search's prior (a function of the layout).
  search::PriorModel Prior() const;
  // Ranks per node as the model places them (at least one per device) and the nodes the world spans.
  int PlacedRanksPerNode() const { return model().ranks_per_node(); }
  // The ranks a node holds as placed: no more than the world (a world-1 study ran 1 rank on its
  // node, not one per device). What reports say and JSON's ranks_per_node.
  int RanksOnANode() const { return std::min<int>(static_cast<int>(world), PlacedRanksPerNode()); }
  int Nodes() const;
  // The model's fastest legal layout that it predicts to fit (nullopt when none fits).
  std::optional<Layout> ModelBest() const;
};

// The performance model's prediction as the search's prior: step time, memory and its breakdown.
search::PriorPrediction PriorOf(const runner::Prediction& prediction);

// Builds the context of `study`, its model placing `ranks_per_node` ranks on each node.
// kInvalidArgument when the world does not suit the hardware, kNoLegalLayout when nothing is
// legal, kConfig when a recorded config no longer parses.
Result<StudyContext> MakeStudyContext(const store::StudyRecord& study, int ranks_per_node);

// The placement the study's trials recorded: the value most of them ran with (the latest on a
// tie); 0 (one rank per device) when none recorded one.
int PlacementOfTrials(const std::vector<store::TrialRecord>& trials);

}  // namespace tunepar
