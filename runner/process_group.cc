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
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <dirent.h>
#include <fmt/format.h>
#include <time.h>

extern char** environ;

namespace tunepar::runner {

namespace {

constexpr const char* kMarker = "TUNEPAR_TRIAL_ID";

// The supervisor's marker entry ("TUNEPAR_TRIAL_ID=<trial>"), set before fork.
char g_marker_entry[512];
size_t g_marker_length = 0;

// Whether the environment file `fd` holds `entry` as a whole entry. Raw reads with a carried
// tail: async-signal-safe.
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

// Kills every process (any group: MPI launchers put ranks in groups of their own) whose
// environment holds the marker entry, scanning /proc with raw system calls only, so it can run
// in a signal handler.
void SignalMarkedProcesses(const char* entry, size_t length, int signal) {
  if (length == 0) return;
  const int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return;
  static char entries[4096];
  const pid_t self = getpid();
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
      if (!numeric || pid == self) continue;
      char path[64] = "/proc/";
      size_t at = 6;
      for (const char* c = d->d_name; *c != '\0' && at < 48; ++c) path[at++] = *c;
      memcpy(path + at, "/environ", 9);
      const int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      if (EnvironHolds(fd, entry, length)) kill(pid, signal);
      close(fd);
    }
  }
  close(proc);
}

// In the supervisor: tunepar died (PR_SET_PDEATHSIG) or asked it to stop. SIGTERM first to the
// trial's processes wherever they are and to the group (srun then cancels its job step on every
// node, mpirun ends its ranks), a moment for that, then SIGKILL to all of them and the group,
// the supervisor included. Only async-signal-safe calls.
void KillOwnGroup(int) {
  SignalMarkedProcesses(g_marker_entry, g_marker_length, SIGTERM);
  kill(0, SIGTERM);  // the supervisor ignores it
  struct timespec pause {
    2, 0
  };
  nanosleep(&pause, nullptr);
  SignalMarkedProcesses(g_marker_entry, g_marker_length, SIGKILL);
  kill(0, SIGKILL);
}

// Reads /proc/<pid>/stat's process-group field (the fifth; the command name may hold spaces).
pid_t ProcessGroupOf(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  std::string state;
  long ppid = 0, pgrp = -1;
  rest >> state >> ppid >> pgrp;
  return static_cast<pid_t>(pgrp);
}

bool HasMarker(const std::string& pid, const std::string& trial_id) {
  std::ifstream in("/proc/" + pid + "/environ", std::ios::binary);
  const std::string wanted = std::string(kMarker) + "=" + trial_id;
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    if (entry == wanted) return true;
  }
  return false;
}

// The pids of group `pgid` that carry the marker.
std::vector<pid_t> MarkedMembers(pid_t pgid, const std::string& trial_id) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* e = readdir(proc)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ProcessGroupOf(name) == pgid && HasMarker(name, trial_id)) pids.push_back(std::stoi(name));
  }
  closedir(proc);
  return pids;
}

ExitInfo Decode(int status) {
  // The supervisor exits with the shell's code, or 128 + the signal that killed it; it is itself
  // SIGKILLed when its group is killed.
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

Result<std::unique_ptr<ProcessGroup>> ProcessGroup::Start(const ProcessOptions& options) {
  const int log = open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0)
    return InvalidArgument(
        fmt::format("cannot create trial log '{}': {}", options.log_path, std::strerror(errno)));

  // Everything the children need is built before fork: after it, only async-signal-safe calls.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : options.env) env[k] = v;
  env[kMarker] = options.trial_id;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", command = options.command;
  char* argv[] = {sh.data(), dash_c.data(), command.data(), nullptr};
  const std::string workdir = options.workdir;
  const pid_t tuner = getpid();
  const std::string marker_entry = std::string(kMarker) + "=" + options.trial_id;

  const pid_t supervisor = fork();
  if (supervisor < 0) {
    close(log);
    return InternalError(fmt::format("fork failed: {}", std::strerror(errno)));
  }
  if (supervisor == 0) {
    setpgid(0, 0);
    g_marker_length = std::min(marker_entry.size(), sizeof(g_marker_entry) - 1);
    memcpy(g_marker_entry, marker_entry.data(), g_marker_length);
    // The supervisor outlives a SIGTERM sent to the group (so the command can stop gracefully
    // and the supervisor reports it) and kills the group when tunepar dies.
    struct sigaction kill_group {
    }, ignore{};
    kill_group.sa_handler = KillOwnGroup;
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGUSR1, &kill_group, nullptr);
    sigaction(SIGTERM, &ignore, nullptr);
    sigaction(SIGINT, &ignore, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGUSR1);
    if (getppid() != tuner) kill(0, SIGKILL);  // tunepar died before the line above
    const pid_t shell = fork();
    if (shell == 0) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigaction(SIGUSR1, &dfl, nullptr);
      sigaction(SIGTERM, &dfl, nullptr);
      sigaction(SIGINT, &dfl, nullptr);
      prctl(PR_SET_PDEATHSIG, 0);
      dup2(log, STDOUT_FILENO);
      dup2(log, STDERR_FILENO);
      const int null = open("/dev/null", O_RDONLY);
      if (null >= 0) dup2(null, STDIN_FILENO);
      if (!workdir.empty() && chdir(workdir.c_str()) != 0) {
        static const char msg[] = "tunepar: cannot enter the trial's working directory\n";
        (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
        _exit(126);
      }
      execve(argv[0], argv, envp.data());
      static const char msg[] = "tunepar: cannot run /bin/sh\n";
      (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
      _exit(127);
    }
    close(log);
    int status = 0;
    while (waitpid(shell, &status, 0) < 0 && errno == EINTR) {
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  setpgid(supervisor, supervisor);  // also here: no window where the group does not exist yet
  close(log);
  std::unique_ptr<ProcessGroup> group(new ProcessGroup());
  group->pgid_ = supervisor;
  group->trial_id_ = options.trial_id;
  return group;
}

ProcessGroup::~ProcessGroup() {
  if (!exit_) Stop(0.0);
}

std::optional<ExitInfo> ProcessGroup::Poll() {
  if (exit_) return exit_;
  int status = 0;
  const pid_t done = waitpid(pgid_, &status, WNOHANG);
  if (done == 0) return std::nullopt;
  exit_ = done == pgid_ ? Decode(status) : ExitInfo{true, SIGKILL};
  kill(-pgid_, SIGKILL);  // whatever the command left behind in its group, or outside it
  KillLeftovers(pgid_, trial_id_);
  return exit_;
}

ExitInfo ProcessGroup::Stop(double grace_s) {
  if (exit_) return *exit_;
  kill(-pgid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Poll()) return *exit_;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-pgid_, SIGKILL);
  int status = 0;
  while (waitpid(pgid_, &status, 0) < 0 && errno == EINTR) {
  }
  exit_ = Decode(status);
  KillLeftovers(pgid_, trial_id_);
  return *exit_;
}

int KillLeftovers(pid_t pgid, const std::string& trial_id) {
  int killed = 0;
  if (pgid > 1) {
    for (pid_t pid : MarkedMembers(pgid, trial_id)) {
      if (kill(pid, SIGKILL) == 0) ++killed;
    }
  }
  if (trial_id.empty()) return killed;
  for (pid_t pid : ProcessesWithMarker(trial_id)) {
    if (kill(pid, SIGKILL) == 0) ++killed;
  }
  return killed;
}

std::vector<pid_t> ProcessesWithMarker(const std::string& trial_id) {
  std::vector<pid_t> pids;
  for (pid_t pid : ProcessesWithMarkerPrefix(trial_id)) {
    if (HasMarker(std::to_string(pid), trial_id)) pids.push_back(pid);
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

bool HasLeftovers(pid_t pgid, const std::string& trial_id) {
  return (pgid > 1 && !MarkedMembers(pgid, trial_id).empty()) ||
         (!trial_id.empty() && !ProcessesWithMarker(trial_id).empty());
}

}  // namespace tunepar::runner
