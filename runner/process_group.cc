#include "runner/process_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <dirent.h>
#include <fmt/format.h>

extern char** environ;

namespace tunepar::runner {

namespace {

constexpr const char* kMarker = "TUNEPAR_TRIAL_ID";

// In the supervisor: tunepar died (PR_SET_PDEATHSIG) or asked it to stop: kill the whole group,
// itself included. Only async-signal-safe calls.
void KillOwnGroup(int) {
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

  const pid_t supervisor = fork();
  if (supervisor < 0) {
    close(log);
    return InternalError(fmt::format("fork failed: {}", std::strerror(errno)));
  }
  if (supervisor == 0) {
    setpgid(0, 0);
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
  kill(-pgid_, SIGKILL);  // whatever the command left behind in its group
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
  return *exit_;
}

int KillLeftovers(pid_t pgid, const std::string& trial_id) {
  if (pgid <= 1) return 0;
  int killed = 0;
  for (pid_t pid : MarkedMembers(pgid, trial_id)) {
    if (kill(pid, SIGKILL) == 0) ++killed;
  }
  return killed;
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
  return pgid > 1 && !MarkedMembers(pgid, trial_id).empty();
}

}  // namespace tunepar::runner
