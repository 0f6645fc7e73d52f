// Trials whose processes leave the trial: a child that calls setsid with an empty environment
// (env -i), once as a child of the trial's shell and once orphaned at once by a double fork, so
// that neither the process group nor the TUNEPAR_TRIAL_ID marker finds it. They must end with
// the trial: on its timeout, when tunepar is SIGKILLed, and when the supervisor itself is
// SIGKILLed (then a resumed tunepar's KillLeftovers finds them in the process record).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runner/command_backend.h"
#include "runner/process_group.h"
#include "tests/test_support.h"

namespace tunepar::runner {
namespace {

namespace fs = std::filesystem;

// Polls `done` for up to 10 s: generous, the machine may be loaded by parallel tests.
bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// The live processes with `argument` as a whole argument of their command line (a zombie's is
// empty).
std::vector<pid_t> ProcessesWithArgument(const std::string& argument) {
  std::vector<pid_t> pids;
  std::error_code ec;  // processes come and go while /proc is read
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(it->path() / "cmdline", std::ios::binary);
    std::string word;
    while (std::getline(in, word, '\0')) {
      if (word == argument) {
        pids.push_back(std::stoi(name));
        break;
      }
    }
  }
  return pids;
}

// /proc/PID/stat's state letter ('Z' for a zombie), or '?' once the process is gone.
char StateOf(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  std::getline(in, stat);
  const size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

// /proc/PID/stat's field 22, the start time in clock ticks since boot.
unsigned long long StartTimeOf(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  std::getline(in, stat);
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i < 22; ++i) fields >> field;
  unsigned long long start = 0;
  fields >> start;
  return start;
}

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::string SleepPath() { return fs::exists("/bin/sleep") ? "/bin/sleep" : "/usr/bin/sleep"; }

// A trial whose command hides two sleeps from its process group and its marker, and ignores
// SIGTERM in them. Their duration (1000 s and a fraction unique to the test) is what finds them.
class EscapingTrial : public ::testing::Test {
 protected:
  void TearDown() override {
    if (tuner_ > 0) {
      kill(tuner_, SIGKILL);
      waitpid(tuner_, nullptr, 0);
    }
    for (pid_t pid : ProcessesWithArgument(duration_)) kill(pid, SIGKILL);
    for (pid_t pid : ProcessesWithMarker(trial_id_)) kill(pid, SIGKILL);
  }

  std::string Command() const {
    // Deaf to SIGTERM, like a hung program: only SIGKILL ends them.
    const std::string escape =
        fmt::format("setsid env -i /bin/sh -c 'trap \"\" TERM; exec {} {}'", SleepPath(), duration_);
    return fmt::format("({} &); {} & sleep 1000", escape, escape);
  }
  // Without a record, the supervisor alone must end them.
  ProcessOptions Options(bool with_record) const {
    ProcessOptions p;
    p.command = Command();
    p.log_path = dir_ / "output.log";
    p.trial_id = trial_id_;
    if (with_record) p.record_path = record_path_;
    return p;
  }
  bool EscapesRun() const {
    return Eventually([&] { return ProcessesWithArgument(duration_).size() == 2; });
  }
  bool NothingOfTheTrialLeft() const {
    return Eventually(
        [&] { return ProcessesWithArgument(duration_).empty() && ProcessesWithMarker(trial_id_).empty(); });
  }

  testing::TempDir dir_;
  const std::string duration_ = fmt::format("1000.{:07d}", getpid() % 10000000);
  const std::string trial_id_ = "escape-test/" + dir_.path();
  const std::string record_path_ = ProcessRecordPath(dir_.path());
  pid_t tuner_ = -1;  // a stand-in for tunepar, forked by the test
};

TEST_F(EscapingTrial, StopOnTimeoutLeavesNoProcessOfTheTrial) {
  Result<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Start(Options(/*with_record=*/false));
  ASSERT_TRUE(group.ok()) << group.status().message();
  ASSERT_TRUE(EscapesRun());
  const ExitInfo exit = (*group)->Stop(0.5);
  EXPECT_TRUE(exit.signaled);  // the shell's sleep 1000, by SIGTERM
  EXPECT_TRUE(NothingOfTheTrialLeft());
  EXPECT_TRUE((*group)->Survivors().empty());
}

TEST_F(EscapingTrial, TimedOutCommandClaimsEveryProcessWhenNoneIsLeft) {
  CommandBackendOptions o;
  o.command = Command();
  o.metric_regex = "step_time: ([0-9.]+)";
  o.timeout_s = 1;
  o.stop_grace_s = 0.5;
  ASSERT_TRUE(ValidateCommandOptions(o).ok());
  CommandBackend backend(o);
  const ModelShape model = testing::PresetModel("tiny");
  TrialContext c;
  c.trial_id = trial_id_;
  c.trial_dir = dir_.path();
  c.world = 4;
  c.gpus_per_node = 2;
  c.model = &model;
  Layout layout;
  layout.tp = 2;
  layout.dp = 2;
  layout.micro_batch = 4;
  layout.num_micro_batches = 4;
  const TrialResult r = backend.Evaluate(layout, c);
  EXPECT_EQ(r.status, TrialStatus::kTimeout) << r.message;
  EXPECT_NE(r.message.find("with every process of the trial"), std::string::npos) << r.message;
  EXPECT_TRUE(NothingOfTheTrialLeft());
  // The record the trial kept, for a resumed tunepar: its header and the processes it saw.
  const std::string record = testing::ReadFile(record_path_);
  EXPECT_NE(record.find("marker " + trial_id_ + "\n"), std::string::npos) << record;
}

TEST_F(EscapingTrial, KilledTuneparLeavesNoProcessOfTheTrial) {
  int channel[2];
  ASSERT_EQ(pipe(channel), 0);
  tuner_ = fork();
  ASSERT_GE(tuner_, 0);
  if (tuner_ == 0) {  // tunepar: starts the trial, then waits to be killed
    Result<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Start(Options(/*with_record=*/true));
    const pid_t pgid = group.ok() ? (*group)->process_group() : -1;
    (void)!write(channel[1], &pgid, sizeof(pgid));
    for (;;) pause();
  }
  close(channel[1]);
  pid_t pgid = -1;
  ASSERT_EQ(read(channel[0], &pgid, sizeof(pgid)), static_cast<ssize_t>(sizeof(pgid)));
  close(channel[0]);
  ASSERT_GT(pgid, 0);
  ASSERT_TRUE(EscapesRun());
  kill(tuner_, SIGKILL);
  waitpid(tuner_, nullptr, 0);
  tuner_ = -1;
  EXPECT_TRUE(NothingOfTheTrialLeft());
}

TEST_F(EscapingTrial, KillLeftoversFindsThemAfterTheSupervisorWasKilled) {
  Result<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Start(Options(/*with_record=*/true));
  ASSERT_TRUE(group.ok()) << group.status().message();
  ASSERT_TRUE(EscapesRun());
  const std::vector<pid_t> escaped = ProcessesWithArgument(duration_);
  ASSERT_TRUE(Eventually([&] {
    const std::string record = testing::ReadFile(record_path_);
    for (pid_t pid : escaped) {
      if (record.find(fmt::format("\n{} ", pid)) == std::string::npos) return false;
    }
    return true;
  })) << testing::ReadFile(record_path_);
  // The supervisor is killed as tunepar still runs; not polled, it stays a zombie (its pid, the
  // group's, is not reused) as after a crash of tunepar's host side.
  const pid_t supervisor = (*group)->process_group();
  ASSERT_EQ(kill(supervisor, SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { return StateOf(supervisor) == 'Z'; }));
  EXPECT_EQ(ProcessesWithArgument(duration_).size(), 2u);  // its death alone does not end them

  EXPECT_GE(KillLeftovers(supervisor, trial_id_, record_path_), 2);
  EXPECT_TRUE(NothingOfTheTrialLeft());
  EXPECT_FALSE(HasLeftovers(supervisor, trial_id_, record_path_));
}

TEST(ProcessRecord, KillsARecordedProcessOnlyWithItsStartTimeAndBoot) {
  testing::TempDir dir;
  const pid_t sleeper = fork();
  ASSERT_GE(sleeper, 0);
  if (sleeper == 0) {
    execl(SleepPath().c_str(), "sleep", "1000", nullptr);
    _exit(127);
  }
  // Asleep in sleep(1), not still starting up: the check below tells "untouched" from "stopped".
  ASSERT_TRUE(Eventually([&] { return StartTimeOf(sleeper) > 0 && StateOf(sleeper) == 'S'; }));
  const unsigned long long start = StartTimeOf(sleeper);
  const std::string path = dir / "processes.txt";
  const auto record = [&](const std::string& marker, const std::string& boot, unsigned long long recorded) {
    testing::WriteFile(path, fmt::format("marker {}\nboot {}\n{} {}\n", marker, boot, sleeper, recorded));
  };
  record("trial-a", BootId(), start + 1);  // the pid reused by another process
  EXPECT_EQ(KillLeftovers(-1, "trial-a", path), 0);
  record("trial-b", BootId(), start);  // another trial's record
  EXPECT_EQ(KillLeftovers(-1, "trial-a", path), 0);
  record("trial-a", "an-earlier-boot", start);
  EXPECT_EQ(KillLeftovers(-1, "trial-a", path), 0);
  EXPECT_EQ(StateOf(sleeper), 'S');  // untouched: neither stopped nor killed

  record("trial-a", BootId(), start);
  EXPECT_EQ(KillLeftovers(-1, "trial-a", path), 1);
  int status = 0;
  ASSERT_EQ(waitpid(sleeper, &status, 0), sleeper);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST(ProcessRecord, SurvivorsAreCountedAndListed) {
  EXPECT_EQ(SurvivorsText({}), "");
  EXPECT_EQ(SurvivorsText({42}), "1 process of the trial survived SIGKILL (pid 42)");
  EXPECT_EQ(SurvivorsText({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}),
            "11 processes of the trial survived SIGKILL (pids 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...)");
}

}  // namespace
}  // namespace tunepar::runner
