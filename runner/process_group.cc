#include "runner/process_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <dirent.h>
#include <fmt/format.h>
#include <time.h>

extern char** environ;

namespace tunepar::runner {

namespace {

constexpr const char* kMarker = "TUNEPAR_TRIAL_ID";
// Signals to the supervisor. SIGTERM (tunepar sends it to the whole group): stop gracefully.
// kKillNow: the grace is over, SIGKILL to every descendant. kTunerDied: its parent-death signal.
constexpr int kKillNow = SIGUSR2;
constexpr int kTunerDied = SIGUSR1;
// When tunepar died, the time its processes get between SIGTERM and SIGKILL: srun cancels its job
// step on every node, mpirun ends its ranks.
constexpr long kTunerDeathGraceMs = 2000;
// How long the supervisor keeps killing and reaping: a process stuck in the kernel (D state) dies
// when it leaves it, the SIGKILL pending; past this, init reaps it.
constexpr long kKillLimitMs = 30000;
// How long tunepar waits for the supervisor to kill and reap the trial before it kills the
// supervisor too and finishes from the process record.
constexpr double kSupervisorKillWaitS = 10;
// How long a killed process may take to go (a large one frees its memory first) before it counts
// as a survivor.
constexpr double kSurvivorWaitS = 5;

// ---- Read with raw system calls only: the supervisor runs them after fork (async-signal-safe).

// A process as /proc/PID/stat describes it.
struct ProcessStat {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;
  char state = '?';
  unsigned long long start = 0;  // field 22: clock ticks since boot; with the pid, one process
  bool in_tree = false;          // a descendant of the supervisor (its last scan)
};

// A process in the trial's process record.
struct RecordedProcess {
  pid_t pid = 0;
  unsigned long long start = 0;
};

long NowMs() {
  struct timespec now {};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

bool Alive(const ProcessStat& s) { return s.state != 'Z' && s.state != 'X'; }

// Parses the text of /proc/PID/stat: "PID (COMM) STATE PPID PGRP ... START ...", where COMM
// may hold spaces and parentheses (the last ')' ends it).
bool ParseStat(const char* text, size_t size, ProcessStat* stat) {
  size_t close = size;
  for (size_t i = 0; i < size; ++i) {
    if (text[i] == ')') close = i;
  }
  if (close + 2 >= size) return false;
  int field = 3;
  unsigned long long value = 0;
  for (size_t i = close + 2; i <= size && field <= 22; ++i) {
    const char c = i < size ? text[i] : ' ';
    if (c == ' ' || c == '\n') {
      if (field == 4) stat->ppid = static_cast<pid_t>(value);
      if (field == 5) stat->pgrp = static_cast<pid_t>(value);
      if (field == 22) stat->start = value;
      ++field;
      value = 0;
    } else if (field == 3) {
      stat->state = c;
    } else if (c >= '0' && c <= '9') {
      value = value * 10 + static_cast<unsigned long long>(c - '0');
    }
  }
  return field > 22;
}

// "/proc/<name>/<file>" into `path` (64 bytes).
void ProcPath(const char* name, const char* file, char* path) {
  size_t at = 0;
  for (const char* c = "/proc/"; *c != '\0'; ++c) path[at++] = *c;
  for (const char* c = name; *c != '\0' && at < 40; ++c) path[at++] = *c;
  path[at++] = '/';
  for (const char* c = file; *c != '\0' && at < 63; ++c) path[at++] = *c;
  path[at] = '\0';
}

bool ReadStat(const char* name, ProcessStat* stat) {
  char path[64];
  ProcPath(name, "stat", path);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[1024];
  const ssize_t n = read(fd, text, sizeof(text));
  close(fd);
  return n > 0 && ParseStat(text, static_cast<size_t>(n), stat);
}

// Calls visit(pid, name) for each process in /proc.
template <typename Visit>
void ForEachProcess(Visit visit) {
  const int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return;
  alignas(8) char entries[4096];
  for (;;) {
    const long n = syscall(SYS_getdents64, proc, entries, sizeof(entries));
    if (n <= 0) break;
    for (long offset = 0; offset < n;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(entries + offset);
      offset += d->d_reclen;
      pid_t pid = 0;
      bool numeric = d->d_name[0] != '\0';
      for (const char* c = d->d_name; *c != '\0'; ++c) {
        if (*c < '0' || *c > '9')
          numeric = false;
        else
          pid = pid * 10 + (*c - '0');
      }
      if (numeric) visit(pid, d->d_name);
    }
  }
  close(proc);
}

// Whether the environment file `fd` holds `entry` as a whole entry. Raw reads with a carried
// tail.
bool EnvironHolds(int fd, const char* entry, size_t length) {
  static char buffer[8192 + 512];
  size_t carried = 0;  // bytes kept from the previous read: the start of an unfinished entry
  bool at_entry_start = true;
  for (;;) {
    const ssize_t n = read(fd, buffer + carried, 8192);
    if (n <= 0) return false;
    const size_t size = carried + static_cast<size_t>(n);
    size_t start = 0;
    for (size_t i = 0; i < size; ++i) {
      if (buffer[i] != '\0') continue;
      if (at_entry_start && i - start == length && memcmp(buffer + start, entry, length) == 0) return true;
      start = i + 1;
      at_entry_start = true;
    }
    carried = size - start;
    if (carried > 511) {  // longer than any marker entry: skip it
      carried = 0;
      at_entry_start = false;
    }
    memmove(buffer, buffer + start, carried);
  }
}

// ---- The supervisor (after fork: async-signal-safe calls only, static memory).

// The supervisor's marker entry ("TUNEPAR_TRIAL_ID=<trial>").
char g_marker_entry[512];
size_t g_marker_length = 0;

// Every process of the machine at the supervisor's last scan, by pid.
constexpr int kMaxProcesses = 1 << 16;
ProcessStat g_processes[kMaxProcesses];
int g_process_count = 0;

// The descendants already in the process record: a ring, so one forgotten after 4096 newer ones
// is written again (harmless).
constexpr int kMaxRecorded = 4096;
RecordedProcess g_recorded[kMaxRecorded];
int g_recorded_count = 0;

const ProcessStat* FindScanned(pid_t pid) {
  const ProcessStat* begin = g_processes;
  const ProcessStat* end = begin + g_process_count;
  const ProcessStat* it =
      std::lower_bound(begin, end, pid, [](const ProcessStat& s, pid_t p) { return s.pid < p; });
  return it != end && it->pid == pid ? it : nullptr;
}

// Scans /proc and marks the descendants of `root`: a process whose parent is `root` or a
// descendant (its orphans point to it too: it is their subreaper). Returns how many.
int ScanTree(pid_t root) {
  g_process_count = 0;
  ForEachProcess([](pid_t pid, const char* name) {
    ProcessStat s;
    s.pid = pid;
    if (g_process_count < kMaxProcesses && ReadStat(name, &s)) g_processes[g_process_count++] = s;
  });
  // In place, no allocation; /proc lists pids in order, so this is cheap.
  std::sort(g_processes, g_processes + g_process_count,
            [](const ProcessStat& a, const ProcessStat& b) { return a.pid < b.pid; });
  int found = 0;
  for (bool grew = true; grew;) {  // a pass per level of the tree
    grew = false;
    for (int i = 0; i < g_process_count; ++i) {
      ProcessStat& p = g_processes[i];
      if (p.in_tree) continue;
      const ProcessStat* parent = p.ppid == root ? nullptr : FindScanned(p.ppid);
      if (p.ppid == root || (parent != nullptr && parent->in_tree)) {
        p.in_tree = grew = true;
        ++found;
      }
    }
  }
  return found;
}

// Sends `signal` to the descendants of the last scan; with `outside_group`, only to those that
// left the supervisor's group (the group got it from tunepar already).
void SignalTree(int signal, bool outside_group) {
  const pid_t group = getpgrp();
  for (int i = 0; i < g_process_count; ++i) {
    const ProcessStat& p = g_processes[i];
    if (p.in_tree && (!outside_group || p.pgrp != group)) kill(p.pid, signal);
  }
}

// Sends `signal` to every process outside the last scan's tree (any group: MPI launchers put
// ranks in groups of their own) whose environment holds the marker entry; returns how many.
int SignalMarkedProcesses(int signal) {
  if (g_marker_length == 0) return 0;
  int count = 0;
  const pid_t self = getpid();
  ForEachProcess([&](pid_t pid, const char* name) {
    const ProcessStat* scanned = FindScanned(pid);
    if (pid == self || (scanned != nullptr && scanned->in_tree)) return;
    char path[64];
    ProcPath(name, "environ", path);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    if (EnvironHolds(fd, g_marker_entry, g_marker_length)) {
      kill(pid, signal);
      ++count;
    }
    close(fd);
  });
  return count;
}

size_t FormatUnsigned(unsigned long long value, char* out) {
  char digits[24];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  for (size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  return n;
}

// Appends to the process record ("PID START" lines) the descendants of the last scan it lacks.
void RecordTree(int record) {
  if (record < 0) return;
  for (int i = 0; i < g_process_count; ++i) {
    const ProcessStat& p = g_processes[i];
    if (!p.in_tree || !Alive(p)) continue;
    bool known = false;
    for (int r = 0; r < std::min(g_recorded_count, kMaxRecorded) && !known; ++r)
      known = g_recorded[r].pid == p.pid && g_recorded[r].start == p.start;
    if (known) continue;
    char line[64];
    size_t n = FormatUnsigned(static_cast<unsigned long long>(p.pid), line);
    line[n++] = ' ';
    n += FormatUnsigned(p.start, line + n);
    line[n++] = '\n';
    (void)!write(record, line, n);
    g_recorded[g_recorded_count++ % kMaxRecorded] = {p.pid, p.start};
  }
}

sigset_t SupervisorSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, kKillNow, kTunerDied, SIGCHLD}) sigaddset(&signals, s);
  return signals;
}

// Waits up to `ms` for one of the supervisor's signals; returns it, or 0. They stay blocked
// and are taken here, so none is lost between a check and the wait.
int WaitForSignal(long ms) {
  const sigset_t signals = SupervisorSignals();
  struct timespec timeout {
    ms / 1000, (ms % 1000) * 1000000
  };
  siginfo_t info;
  const int signal = sigtimedwait(&signals, &info, &timeout);
  return signal > 0 ? signal : 0;
}

struct ShellExit {
  bool done = false;
  int status = 0;  // waitpid's
};

// Reaps every child that has exited: the shell, and the orphans the subreaper inherited (__WALL:
// also those cloned without SIGCHLD). False once the supervisor has no child left.
bool ReapChildren(pid_t shell, ShellExit* shell_exit) {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG | __WALL);
    if (pid == shell) *shell_exit = {true, status};
    if (pid > 0 || (pid < 0 && errno == EINTR)) continue;
    return pid == 0;
  }
}

// SIGKILL to every descendant, again and again, reaping, until the supervisor has no child left:
// a process forked between a scan and the kill is found by the next scan, and the orphans of a
// killed one come to the supervisor, their subreaper.
void KillTree(pid_t shell, ShellExit* shell_exit) {
  const long deadline = NowMs() + kKillLimitMs;
  for (long pause_ms = 5; NowMs() < deadline; pause_ms = std::min(2 * pause_ms, 100L)) {
    ScanTree(getpid());
    SignalTree(SIGKILL, false);
    if (!ReapChildren(shell, shell_exit)) return;
    WaitForSignal(pause_ms);
  }
}

// tunepar died: SIGTERM to every process of the trial (srun then cancels its job step on every
// node, mpirun ends its ranks), and up to kTunerDeathGraceMs for them to end; KillTree and the
// marker kill the rest.
void TermAfterTunerDeath(pid_t shell, ShellExit* shell_exit) {
  ScanTree(getpid());
  SignalTree(SIGTERM, false);
  SignalMarkedProcesses(SIGTERM);
  const long deadline = NowMs() + kTunerDeathGraceMs;
  while (NowMs() < deadline) {
    if (!ReapChildren(shell, shell_exit) && SignalMarkedProcesses(0) == 0) return;
    WaitForSignal(50);
  }
}

// The supervisor's life once the shell runs: record the trial's processes as they appear, until
// the command ends, tunepar stops the trial or dies; then kill every one and exit as the shell
// did (its code, or 128 + the signal that ended it).
[[noreturn]] void Supervise(pid_t shell, int record) {
  const pid_t self = getpid();
  ShellExit shell_exit;
  bool tuner_died = false;
  long next_scan_ms = NowMs(), scan_interval_ms = 50;
  for (bool stop = false; !stop;) {
    if (!ReapChildren(shell, &shell_exit) || shell_exit.done) break;
    if (NowMs() >= next_scan_ms) {
      ScanTree(self);
      RecordTree(record);
      // Processes appear mostly as the trial starts (launcher, ranks, loader workers): scan
      // often then, each second later.
      next_scan_ms = NowMs() + scan_interval_ms;
      scan_interval_ms = std::min(2 * scan_interval_ms, 1000L);
    }
    switch (WaitForSignal(std::max(1L, next_scan_ms - NowMs()))) {
      case kTunerDied: tuner_died = stop = true; break;
      case kKillNow: stop = true; break;
      case SIGTERM:  // the group has it: pass it on to the processes that left the group
        ScanTree(self);
        SignalTree(SIGTERM, true);
        break;
      default: break;
    }
  }
  if (tuner_died) TermAfterTunerDeath(shell, &shell_exit);
  KillTree(shell, &shell_exit);
  ScanTree(self);  // an empty tree now; the marker finds the rest
  SignalMarkedProcesses(SIGKILL);
  if (!shell_exit.done) _exit(128 + SIGKILL);
  const int status = shell_exit.status;
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

// What the supervisor and the shell need, built before fork.
struct Launch {
  std::vector<std::string> env_strings;
  std::vector<char*> envp;
  std::string sh = "/bin/sh", dash_c = "-c", command;
  std::string workdir;
  std::string marker_entry;
  pid_t tuner = 0;
  int log = -1;
  int record = -1;  // -1: no process record
};

[[noreturn]] void RunShell(Launch& launch, const sigset_t& tuner_mask) {
  // The command starts as it would from tunepar: default dispositions for the signals the
  // supervisor handles, tunepar's signal mask. (Fork clears the parent-death signal and the
  // subreaper flag.)
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s : {SIGINT, SIGTERM, kKillNow, kTunerDied, SIGCHLD}) sigaction(s, &dfl, nullptr);
  sigprocmask(SIG_SETMASK, &tuner_mask, nullptr);
  dup2(launch.log, STDOUT_FILENO);
  dup2(launch.log, STDERR_FILENO);
  const int null = open("/dev/null", O_RDONLY);
  if (null >= 0) dup2(null, STDIN_FILENO);
  if (!launch.workdir.empty() && chdir(launch.workdir.c_str()) != 0) {
    static const char msg[] = "tunepar: cannot enter the trial's working directory\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(126);
  }
  char* argv[] = {launch.sh.data(), launch.dash_c.data(), launch.command.data(), nullptr};
  execve(argv[0], argv, launch.envp.data());
  static const char msg[] = "tunepar: cannot run /bin/sh\n";
  (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
  _exit(127);
}

[[noreturn]] void RunSupervisor(Launch& launch) {
  setpgid(0, 0);
  g_marker_length = std::min(launch.marker_entry.size(), sizeof(g_marker_entry) - 1);
  memcpy(g_marker_entry, launch.marker_entry.data(), g_marker_length);
  // Orphans of the trial (setsid, double fork) come to the supervisor instead of init, so they
  // stay in the tree it kills, whatever group, session or environment they moved to.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t tuner_mask;
  const sigset_t signals = SupervisorSignals();
  sigprocmask(SIG_BLOCK, &signals, &tuner_mask);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, nullptr);  // a SIGINT to the group is the command's to handle
  prctl(PR_SET_PDEATHSIG, kTunerDied);
  if (getppid() != launch.tuner) _exit(128 + SIGKILL);  // tunepar died before the line above
  const pid_t shell = fork();
  if (shell == 0) RunShell(launch, tuner_mask);
  if (shell < 0) {
    static const char msg[] = "tunepar: cannot fork the trial's shell\n";
    (void)!write(launch.log, msg, sizeof(msg) - 1);
    _exit(127);
  }
  close(launch.log);
  Supervise(shell, launch.record);
}

// ---- tunepar's side.

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// Creates the process record with its header; returns the descriptor the supervisor appends to
// (-1 when the trial keeps none).
Result<int> OpenProcessRecord(const std::string& path, const std::string& trial_id) {
  if (path.empty()) return -1;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  const std::string header = fmt::format(
      "# tunepar: the processes of a trial (PID START), to kill them if their supervisor dies\n"
      "marker {}\nboot {}\n",
      trial_id, BootId());
  if (fd < 0 || write(fd, header.data(), header.size()) != static_cast<ssize_t>(header.size())) {
    const std::string error = errno == ELOOP ? "it is a symbolic link (never written through)" : std::strerror(errno);
    if (fd >= 0) close(fd);
    return InvalidArgument(fmt::format("cannot write the trial's process record '{}': {}", path, error));
  }
  return fd;
}

// The processes in the record at `path`, when it was written for `trial_id` in this boot (after
// a reboot, pids and start times repeat).
std::vector<RecordedProcess> ReadProcessRecord(const std::string& path, const std::string& trial_id) {
  std::vector<RecordedProcess> processes;
  if (path.empty()) return processes;
  std::ifstream in(path);
  bool same_trial = false, same_boot = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("marker ", 0) == 0) {
      same_trial = line.substr(7) == trial_id;
    } else if (line.rfind("boot ", 0) == 0) {
      same_boot = line.substr(5) == BootId();
    } else if (!line.empty() && line[0] != '#') {
      std::istringstream fields(line);
      RecordedProcess p;
      if (fields >> p.pid >> p.start) processes.push_back(p);
    }
  }
  if (!same_trial || !same_boot) processes.clear();
  return processes;
}

bool HasMarker(pid_t pid, const std::string& trial_id) {
  std::ifstream in(fmt::format("/proc/{}/environ", pid), std::ios::binary);
  const std::string wanted = std::string(kMarker) + "=" + trial_id;
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    if (entry == wanted) return true;
  }
  return false;
}

// The live processes of a trial: those with its marker (only in group `pgid` when the marker is
// empty), those in its record with their recorded start time, and every descendant of those.
std::set<pid_t> TrialProcesses(pid_t pgid, const std::string& trial_id, const std::string& record_path) {
  std::map<pid_t, ProcessStat> table;
  ForEachProcess([&](pid_t pid, const char* name) {
    ProcessStat s;
    s.pid = pid;
    if (ReadStat(name, &s) && Alive(s)) table[pid] = s;
  });
  std::set<pid_t> trial;
  for (const auto& [pid, s] : table) {
    const bool in_group = pgid > 1 && s.pgrp == pgid;
    if ((in_group || !trial_id.empty()) && HasMarker(pid, trial_id)) trial.insert(pid);
  }
  for (const RecordedProcess& r : ReadProcessRecord(record_path, trial_id)) {
    const auto it = table.find(r.pid);
    if (it != table.end() && it->second.start == r.start) trial.insert(r.pid);
  }
  for (bool grew = true; grew;) {  // descendants, a pass per level
    grew = false;
    for (const auto& [pid, s] : table) {
      if (trial.count(s.ppid) != 0 && trial.insert(pid).second) grew = true;
    }
  }
  trial.erase(getpid());
  return trial;
}

ExitInfo Decode(int status) {
  // The supervisor exits with the shell's code, or 128 + the signal that killed it; it is itself
  // SIGKILLed only when its group is killed.
  if (WIFSIGNALED(status)) return {true, WTERMSIG(status)};
  const int code = WEXITSTATUS(status);
  if (code > 128 && code < 128 + 65) return {true, code - 128};
  return {false, code};
}

}  // namespace

std::string ExitText(const ExitInfo& exit) {
  return exit.signaled ? fmt::format("signal {}", exit.code) : fmt::format("code {}", exit.code);
}

std::string CrashMessage(const ExitInfo& exit, const std::string& last_output) {
  const std::string how =
      exit.signaled ? fmt::format("killed by signal {}", exit.code) : fmt::format("exit code {}", exit.code);
  return last_output.empty() ? how : fmt::format("{}; last output: {}", how, last_output);
}

std::string ProcessRecordPath(const std::string& trial_dir) {
  return (std::filesystem::path(trial_dir) / "processes.txt").string();
}

Result<std::unique_ptr<ProcessGroup>> ProcessGroup::Start(const ProcessOptions& options) {
  // Everything the children need is built before fork: after it, only async-signal-safe calls.
  Launch launch;
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : options.env) env[k] = v;
  env[kMarker] = options.trial_id;
  for (const auto& [k, v] : env) launch.env_strings.push_back(k + "=" + v);
  for (std::string& s : launch.env_strings) launch.envp.push_back(s.data());
  launch.envp.push_back(nullptr);
  launch.command = options.command;
  launch.workdir = options.workdir;
  launch.marker_entry = std::string(kMarker) + "=" + options.trial_id;
  launch.tuner = getpid();

  launch.log = open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (launch.log < 0)
    return InvalidArgument(fmt::format("cannot create trial log '{}': {}", options.log_path,
                                       errno == ELOOP ? "it is a symbolic link (never written through)"
                                                      : std::strerror(errno)));
  Result<int> record = OpenProcessRecord(options.record_path, options.trial_id);
  if (!record.ok()) {
    close(launch.log);
    return record.status();
  }
  launch.record = *record;

  const pid_t supervisor = fork();
  if (supervisor == 0) RunSupervisor(launch);
  const int fork_error = errno;
  close(launch.log);
  if (launch.record >= 0) close(launch.record);
  if (supervisor < 0) return InternalError(fmt::format("fork failed: {}", std::strerror(fork_error)));
  setpgid(supervisor, supervisor);  // also here: no window where the group does not exist yet
  std::unique_ptr<ProcessGroup> group(new ProcessGroup());
  group->pgid_ = supervisor;
  group->trial_id_ = options.trial_id;
  group->record_path_ = options.record_path;
  return group;
}

ProcessGroup::~ProcessGroup() {
  if (!exit_) Stop(0.0);
}

std::optional<ExitInfo> ProcessGroup::Poll() {
  if (exit_) return exit_;
  int status = 0;
  const pid_t done = waitpid(pgid_, &status, WNOHANG);
  if (done == 0 || (done < 0 && errno == EINTR)) return std::nullopt;
  Finished(done == pgid_ ? status : SIGKILL);  // not our child any more: count it as killed
  return exit_;
}

void ProcessGroup::Finished(int status) {
  exit_ = Decode(status);
  // The supervisor killed its tree. What it could not reach if it was itself killed: its group
  // and the processes in the record; and marked processes that were never in its tree.
  kill(-pgid_, SIGKILL);
  KillLeftovers(pgid_, trial_id_, record_path_);
}

bool ProcessGroup::WaitForExit(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    if (Poll()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

ExitInfo ProcessGroup::Stop(double grace_s) {
  if (exit_) return *exit_;
  // SIGTERM to the group here; the supervisor passes it on to the descendants that left it.
  kill(-pgid_, SIGTERM);
  if (WaitForExit(grace_s)) return *exit_;
  kill(pgid_, kKillNow);
  if (WaitForExit(kSupervisorKillWaitS)) return *exit_;
  // The supervisor could not reap everything in time (processes stuck in the kernel): kill it
  // with its group; Finished kills the rest from the record.
  kill(-pgid_, SIGKILL);
  int status = 0;
  while (waitpid(pgid_, &status, 0) < 0 && errno == EINTR) {
  }
  Finished(status);
  return *exit_;
}

std::vector<pid_t> ProcessGroup::Survivors() const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kSurvivorWaitS);
  for (;;) {
    const std::set<pid_t> alive = TrialProcesses(pgid_, trial_id_, record_path_);
    if (alive.empty() || std::chrono::steady_clock::now() >= deadline) return {alive.begin(), alive.end()};
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int KillLeftovers(pid_t pgid, const std::string& trial_id, const std::string& record_path) {
  // A stopped process cannot fork: stop them until no new one appears, then kill them all.
  std::set<pid_t> stopped;
  for (bool grew = true; grew;) {
    grew = false;
    for (pid_t pid : TrialProcesses(pgid, trial_id, record_path)) {
      if (stopped.count(pid) != 0 || kill(pid, SIGSTOP) != 0) continue;
      stopped.insert(pid);
      grew = true;
    }
  }
  int killed = 0;
  for (pid_t pid : stopped) {
    if (kill(pid, SIGKILL) == 0) ++killed;
  }
  return killed;
}

bool HasLeftovers(pid_t pgid, const std::string& trial_id, const std::string& record_path) {
  return !TrialProcesses(pgid, trial_id, record_path).empty();
}

std::string SurvivorsText(const std::vector<pid_t>& survivors) {
  if (survivors.empty()) return "";
  constexpr size_t kListed = 10;
  std::string pids;
  for (size_t i = 0; i < std::min(survivors.size(), kListed); ++i)
    pids += fmt::format("{}{}", i == 0 ? "" : ", ", survivors[i]);
  if (survivors.size() > kListed) pids += ", ...";
  const bool one = survivors.size() == 1;
  return fmt::format("{} process{} of the trial survived SIGKILL (pid{} {})", survivors.size(), one ? "" : "es",
                     one ? "" : "s", pids);
}

std::vector<pid_t> ProcessesWithMarker(const std::string& trial_id) {
  std::vector<pid_t> pids;
  for (pid_t pid : ProcessesWithMarkerPrefix(trial_id)) {
    if (HasMarker(pid, trial_id)) pids.push_back(pid);
  }
  return pids;
}

std::vector<pid_t> ProcessesWithMarkerPrefix(const std::string& prefix) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  const std::string wanted = std::string(kMarker) + "=" + prefix;
  while (dirent* e = readdir(proc)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in("/proc/" + name + "/environ", std::ios::binary);
    std::string entry;
    while (std::getline(in, entry, '\0')) {
      if (entry.rfind(wanted, 0) == 0) {
        pids.push_back(std::stoi(name));
        break;
      }
    }
  }
  closedir(proc);
  return pids;
}

}  // namespace tunepar::runner
