#include "tuner/loops/stop_signals.h"

#include <signal.h>

#include <atomic>

namespace tunepar {

namespace {

std::atomic<int> g_stop_signal{0};

void RecordSignal(int signal) {
  g_stop_signal.store(signal);
}

}  // namespace

void InstallStopHandlers() {
  struct sigaction action {};
  action.sa_handler = RecordSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int StopSignal() {
  return g_stop_signal.load();
}

}  // namespace tunepar
