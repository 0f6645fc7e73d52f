// A rank's life outside its steps: what it costs to start (process start to the first step, on
// the core's own clock) and where it is while it ends (a timestamped line per teardown stage).
// A trial pays its start-up on top of its steps, and a run that does not exit after writing its
// result shows in its log the last stage it reached.
#pragma once

#include <mpi.h>

#include <string_view>

#include "runner/core/core_log.h"
#include "runner/core/result_format.h"

namespace tunepar::core {

// Seconds since this process started: from the kernel's start time of the process
// (/proc/self/stat, clock ticks: 10 ms here) where it can be read, else since the first call.
double SecondsSinceProcessStart();

// The start-up of one rank, in seconds since its process started, at each mark.
struct StartupMarks {
  double main = 0;        // main() entered: exec and dynamic loading
  double mpi_ready = 0;   // MPI_Init_thread returned
  double device_ready = 0;  // device bound, communicators made
  double first_step = 0;  // the model built, its weights initialised: the first step begins
};

// With kSayJoinedVariable=1 in the environment (core_log.h; every rank has the same): a barrier
// over `world`, then rank 0 says kJoinedLine on stderr. Without it, nothing: no barrier.
void SayWhenEveryRankJoined(MPI_Comm world, int rank);

// Rank 0's summary of every rank's marks: each stage's slowest rank, and the slowest rank's
// whole start-up (process start to the first step). A collective; other ranks get zeros.
StartupTimes GatherStartup(const StartupMarks& mine, MPI_Comm world, int rank);

// The teardown's stages. Each is said on stderr, one flushed line ("tunepar-core: rank 0:
// teardown +0.003 s: MPI finalized; exiting", seconds since the run ended) when `say_each` (the
// local and slurm backends ask for them in the trial's log: TUNEPAR_CORE_TEARDOWN=1); whatever
// that says, a watchdog thread names a stage still running after kStallSeconds (and again each
// kStallSeconds), so a run that does not end shows where it stopped even on a terminal that
// was spared the routine lines. Readers of the core's last word skip these lines
// (core_log.h kTeardownMarker).
class TeardownLog {
 public:
  static constexpr double kStallSeconds = 3;
  TeardownLog(int rank, bool say_each);
  void Stage(std::string_view what);

 private:
  int rank_;
  bool say_each_;
  double start_;
};

}  // namespace tunepar::core
