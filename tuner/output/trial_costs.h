// What a measured trial cost beyond its steps, and how it ran: its start-up (process start to the
// first step, on tunepar-core's own clock), its wall time in the tuner (launch to end, whole
// seconds), and the communication mode the core chose for its placement (nccl, or mpi-staged
// when a node ran more ranks than devices). All from the trial's stored details and times.
//
// The comm mode is not part of a study's identity: it is not an input but what the machine the
// trial ran on imposed (its devices against the ranks placed on them), decided per trial and
// stored with it. A study that resumes on another machine may mix modes, and the report says so
// (staged transfers are slower: such step times are not comparable).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "store/records.h"
#include "tuner/output/report.h"

namespace tunepar {

struct TrialCosts {
  std::optional<double> startup_s;  // process start to first step, the slowest rank's
  std::optional<double> wall_s;     // started_at to finished_at
  std::string comm;                 // "" when the trial did not run tunepar-core (or said none)
};
TrialCosts CostsOf(const store::TrialRecord& trial);

// Seconds from one ISO 8601 UTC time ("2026-11-21T23:44:29Z") to another; nullopt when either
// does not parse.
std::optional<double> SecondsBetween(const std::string& from, const std::string& to);

// The report's lines on start-up and comm modes (nothing when no trial has either).
void AddTrialCosts(const StudyTrials& trials, Report* report);

}  // namespace tunepar
