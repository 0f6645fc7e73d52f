#include "runner/core/lifecycle.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

namespace tunepar::core {

namespace {

// The process's start time in seconds since boot (field 22 of /proc/self/stat, after the
// command name, which may hold spaces and parentheses: count from the last ')'); negative when
// it cannot be read.
double ProcessStartSinceBoot() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return -1;
}

double UptimeSeconds() {
  std::ifstream uptime("/proc/uptime");
  double seconds = -1;
  return uptime >> seconds ? seconds : -1;
}

}  // namespace

double SecondsSinceProcessStart() {
  using Clock = std::chrono::steady_clock;
  // Read once: the offset between the process's start and this clock's first reading.
  static const Clock::time_point first = Clock::now();
  static const double started_before_first = [] {
    const double start = ProcessStartSinceBoot(), now = UptimeSeconds();
    return start >= 0 && now >= start ? now - start : 0.0;
  }();
  return started_before_first + std::chrono::duration<double>(Clock::now() - first).count();
}

StartupTimes GatherStartup(const StartupMarks& mine, MPI_Comm world, int rank) {
  // Durations of each stage on this rank, then the slowest rank's of each.
  std::array<double, 5> stages = {mine.main, mine.mpi_ready - mine.main, mine.device_ready - mine.mpi_ready,
                                  mine.first_step - mine.device_ready, mine.first_step};
  std::array<double, 5> slowest{};
  MPI_Reduce(stages.data(), slowest.data(), static_cast<int>(stages.size()), MPI_DOUBLE, MPI_MAX, 0, world);
  if (rank != 0) return {};
  StartupTimes t;
  t.total_s = slowest[4];
  t.process_to_main_s = slowest[0];
  t.mpi_init_s = slowest[1];
  t.device_and_comm_s = slowest[2];
  t.model_setup_s = slowest[3];
  return t;
}

void SayWhenEveryRankJoined(MPI_Comm world, int rank) {
  const char* asked = std::getenv(kSayJoinedVariable);
  if (asked == nullptr || std::string_view(asked) != "1") return;
  MPI_Barrier(world);
  if (rank != 0) return;
  int size = 1;
  MPI_Comm_size(world, &size);
  std::fputs(fmt::format("{} ({} ranks)\n", kJoinedLine, size).c_str(), stderr);
  std::fflush(stderr);
}

namespace {

void SayTeardown(int rank, double since, std::string_view what) {
  const std::string line = fmt::format("tunepar-core: rank {}{}{:.3f} s: {}\n", rank, kTeardownMarker, since, what);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

// The stage the teardown is in and when it began (seconds since process start), for the
// watchdog; written by the teardown, read by the watchdog thread.
struct CurrentStage {
  std::mutex lock;
  std::string what;
  double entered = 0;  // when the stage began
  double said = 0;     // when it was last named as stalled (its start until then)
};

CurrentStage& Current() {
  static CurrentStage stage;
  return stage;
}

// Runs until the process ends (quick_exit ends it with the rest): a stage that has run longer
// than kStallSeconds is named, again each kStallSeconds it goes on.
void WatchTeardown(int rank, double start) {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const double now = SecondsSinceProcessStart();
    std::lock_guard<std::mutex> held(Current().lock);
    if (now - Current().said < TeardownLog::kStallSeconds) continue;
    SayTeardown(rank, now - start, fmt::format("still in '{}' after {:.0f} s", Current().what, now - Current().entered));
    Current().said = now;
  }
}

}  // namespace

TeardownLog::TeardownLog(int rank, bool say_each)
    : rank_(rank), say_each_(say_each), start_(SecondsSinceProcessStart()) {
  {
    std::lock_guard<std::mutex> held(Current().lock);
    Current().what = "run ended";
    Current().entered = Current().said = start_;
  }
  std::thread(WatchTeardown, rank_, start_).detach();
}

void TeardownLog::Stage(std::string_view what) {
  const double now = SecondsSinceProcessStart();
  {
    std::lock_guard<std::mutex> held(Current().lock);
    Current().what = std::string(what);
    Current().entered = Current().said = now;
  }
  if (say_each_) SayTeardown(rank_, now - start_, what);
}

}  // namespace tunepar::core
