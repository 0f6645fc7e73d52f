// What a person watching a search sees: one line per finished trial, and on a terminal a
// progress bar with an estimate of the time left, redrawn under the lines.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace tunepar {

class Progress {
 public:
  // `total`: the trial budget of the run. The bar is drawn only when `out` is a terminal.
  Progress(std::FILE* out, int total, int already_done);

  // A finished trial's line (the bar, if any, is cleared first and redrawn after).
  void Line(const std::string& text);
  // Counts one finished trial and redraws the bar.
  void Finished();
  // Clears the bar (before the final summary).
  void Close();

  double ElapsedSeconds() const;
  bool terminal() const { return terminal_; }

 private:
  void DrawBar();
  std::FILE* out_;
  int total_, done_, done_at_start_;
  bool terminal_;
  bool bar_shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

// "1:05:03" / "4:07" for a duration in seconds.
std::string Clock(double seconds);

}  // namespace tunepar
