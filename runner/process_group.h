// A trial's processes: a command run by /bin/sh under a supervisor, its output captured to a log
// file, killed as a whole on timeout or interrupt, and never left behind.
//
//   tunepar ── supervisor (process group G, child subreaper, dies with tunepar)
//                  └─ /bin/sh -c COMMAND (in G) ── ... ── any descendant, also after setsid,
//                                                          a double fork or `env -i`
//
// Three nets catch the trial's processes, because each one alone has holes:
//   - the supervisor is a child subreaper (PR_SET_CHILD_SUBREAPER), so every descendant stays in
//     its tree, orphans included, whatever group, session or environment it moved to. It walks
//     that tree through /proc (ppid links) and kills all of it, then reaps until it has no child
//     left: when the command ends, when tunepar stops the trial (SIGTERM to G, then SIGUSR2:
//     kill now), and when tunepar dies (PR_SET_PDEATHSIG, even on SIGKILL of tunepar);
//   - every process started with the trial's environment carries TUNEPAR_TRIAL_ID, so processes
//     that were never descendants (MPI ranks started by a daemon) are found by their marker;
//   - the supervisor records every descendant it sees (pid and start time) in the trial's process
//     record, so that when the supervisor itself is killed (SIGKILL, OOM killer), a later tunepar
//     finds the escaped ones that cleared their environment (KillLeftovers with the record).
// Why not a cgroup per trial: runner/README.md.
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
  std::string record_path;  // "" = none: the process record (ProcessRecordPath of the trial's directory)
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

// Where a trial's process record lives: "<trial_dir>/processes.txt". A header names the trial's
// marker and the boot it was written in; then one "PID START" line per process the supervisor
// saw, START being /proc/PID/stat's field 22 (clock ticks since boot), so that a reused pid is
// never mistaken for the trial's process.
std::string ProcessRecordPath(const std::string& trial_dir);

class ProcessGroup {
 public:
  static Result<std::unique_ptr<ProcessGroup>> Start(const ProcessOptions& options);
  ~ProcessGroup();  // kills what is still running
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // The exit of the command once it has ended (the supervisor has then killed every other
  // process of the trial); nullopt while it runs. Non-blocking.
  std::optional<ExitInfo> Poll();
  // SIGTERM to the whole trial (the group, and every descendant that left it), then SIGKILL to
  // all of it after `grace_s`; waits for the supervisor.
  ExitInfo Stop(double grace_s);
  // The processes of the trial still alive after it ended (Poll or Stop): none, unless some
  // could not be killed (another user's, or stuck in the kernel for longer than a few seconds).
  std::vector<pid_t> Survivors() const;

  pid_t process_group() const { return pgid_; }

 private:
  ProcessGroup() = default;
  // The supervisor has exited with `status` (waitpid's): kills what it could not reach.
  void Finished(int status);
  // Polls until the supervisor has exited (true) or `seconds` have passed.
  bool WaitForExit(double seconds);

  pid_t pgid_ = -1;  // = the supervisor's pid
  std::string trial_id_;
  std::string record_path_;
  std::optional<ExitInfo> exit_;
};

// Kills (SIGKILL) what is left of a trial: the processes whose environment has
// TUNEPAR_TRIAL_ID=trial_id (in group `pgid` or outside it: MPI launchers give ranks groups of
// their own), those in the process record at `record_path` still alive with the recorded start
// time (they may have cleared their environment), and every descendant of those. Returns how
// many. Each is stopped (SIGSTOP) before any is killed, so none can fork a process that escapes
// the count. No other process is touched.
int KillLeftovers(pid_t pgid, const std::string& trial_id, const std::string& record_path = "");

// Whether any process of the trial, found as KillLeftovers finds them, is alive.
bool HasLeftovers(pid_t pgid, const std::string& trial_id, const std::string& record_path = "");

// "" when `survivors` is empty, otherwise "N processes of the trial survived SIGKILL (pids ...)"
// for a trial's message (at most 10 pids listed).
std::string SurvivorsText(const std::vector<pid_t>& survivors);

// The pids of every process whose TUNEPAR_TRIAL_ID is exactly `trial_id`.
std::vector<pid_t> ProcessesWithMarker(const std::string& trial_id);

// The pids of every process (any group) whose TUNEPAR_TRIAL_ID starts with `prefix`.
std::vector<pid_t> ProcessesWithMarkerPrefix(const std::string& prefix);

}  // namespace tunepar::runner
