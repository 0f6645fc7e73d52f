// A trial's processes: a command run by /bin/sh in its own process group, its output captured
// to a log file, killed as a whole on timeout or interrupt, and never left behind.
//
//   tunepar ── supervisor (own process group G, dies with tunepar) ── /bin/sh -c COMMAND ── ...
//
// The supervisor is a forked child that only waits for the shell. It asks the kernel to signal
// it when tunepar dies (PR_SET_PDEATHSIG), even by SIGKILL, and then kills all of G. Every
// process of the trial carries TUNEPAR_TRIAL_ID in its environment, so a later tunepar can find
// and kill what an earlier one left (KillLeftovers) without touching anything else.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tunepar::runner {

struct ProcessOptions {
  std::string command;                                   // run as /bin/sh -c COMMAND
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing in) tunepar's environment
  std::string log_path;                                  // stdout and stderr, merged
  std::string workdir;                                   // "" = tunepar's working directory
  std::string trial_id;                                  // the TUNEPAR_TRIAL_ID marker
};

struct ExitInfo {
  bool signaled = false;  // the command was killed by a signal
  int code = 0;           // exit code, or the signal number when signaled
};

// "code N" or "signal N" (a trial's details).
std::string ExitText(const ExitInfo& exit);
// "exit code N" or "killed by signal N", then "; last output: <last_output>" when there is any
// (a crashed trial's message).
std::string CrashMessage(const ExitInfo& exit, const std::string& last_output);

class ProcessGroup {
 public:
  static Result<std::unique_ptr<ProcessGroup>> Start(const ProcessOptions& options);
  ~ProcessGroup();  // kills what is still running
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // The exit of the command once it has ended (leftover processes of the group are then
  // killed); nullopt while it runs. Non-blocking.
  std::optional<ExitInfo> Poll();
  // SIGTERM to the whole group, then SIGKILL after `grace_s`; waits for the supervisor.
  ExitInfo Stop(double grace_s);

  pid_t process_group() const { return pgid_; }

 private:
  ProcessGroup() = default;
  pid_t pgid_ = -1;  // = the supervisor's pid
  std::string trial_id_;
  std::optional<ExitInfo> exit_;
};

// Kills (SIGKILL) the processes whose environment has TUNEPAR_TRIAL_ID=trial_id, in group `pgid`
// or outside it (MPI launchers give ranks groups of their own); returns how many. Processes
// without the marker are never touched.
int KillLeftovers(pid_t pgid, const std::string& trial_id);

// Whether any process carries the marker (in group `pgid` or elsewhere).
bool HasLeftovers(pid_t pgid, const std::string& trial_id);

// The pids of every process whose TUNEPAR_TRIAL_ID is exactly `trial_id`.
std::vector<pid_t> ProcessesWithMarker(const std::string& trial_id);

// The pids of every process (any group) whose TUNEPAR_TRIAL_ID starts with `prefix`.
std::vector<pid_t> ProcessesWithMarkerPrefix(const std::string& prefix);

}  // namespace tunepar::runner
