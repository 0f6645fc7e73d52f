#include "runner/core/lifecycle.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

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

nlohmann::json GatherStartup(const StartupMarks& mine, MPI_Comm world, int rank) {
  // Durations of each stage on this rank, then the slowest rank's of each.
  std::array<double, 5> stages = {mine.main, mine.mpi_ready - mine.main, mine.device_ready - mine.mpi_ready,
                                  mine.first_step - mine.device_ready, mine.first_step};
  std::array<double, 5> slowest{};
  MPI_Reduce(stages.data(), slowest.data(), static_cast<int>(stages.size()), MPI_DOUBLE, MPI_MAX, 0, world);
  if (rank != 0) return nullptr;
  return {{"total_s", slowest[4]},          {"process_to_main_s", slowest[0]}, {"mpi_init_s", slowest[1]},
          {"device_and_comm_s", slowest[2]}, {"model_setup_s", slowest[3]},
          {"note", "each stage: its slowest rank; total_s: the slowest rank's process start to first step"}};
}

void TeardownLog::Stage(std::string_view what) const {
  if (quiet_) return;
  const std::string line =
      fmt::format("tunepar-core: rank {}{}{:.3f} s: {}\n", rank_, kTeardownMarker, SecondsSinceProcessStart() - start_, what);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace tunepar::core
