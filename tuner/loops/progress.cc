#include "tuner/loops/progress.h"

#include <unistd.h>

#include <cmath>

#include <fmt/format.h>

namespace tunepar {

std::string Clock(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

Progress::Progress(std::FILE* out, int total, int already_done)
    : out_(out),
      total_(total),
      done_(already_done),
      done_at_start_(already_done),
      terminal_(isatty(fileno(out)) == 1),
      start_(std::chrono::steady_clock::now()) {}

double Progress::ElapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::Line(const std::string& text) {
  if (bar_shown_) fmt::print(out_, "\r\033[K");
  bar_shown_ = false;
  fmt::print(out_, "{}\n", text);
  DrawBar();
  std::fflush(out_);
}

void Progress::Finished() {
  ++done_;
  DrawBar();
}

void Progress::Close() {
  if (bar_shown_) fmt::print(out_, "\r\033[K");
  bar_shown_ = false;
  std::fflush(out_);
}

void Progress::DrawBar() {
  if (!terminal_ || total_ <= 0) return;
  constexpr int kWidth = 30;
  const int filled = std::min(kWidth, kWidth * done_ / total_);
  const int measured = done_ - done_at_start_;
  std::string eta = "--:--";
  if (measured > 0 && done_ < total_) eta = Clock(ElapsedSeconds() / measured * (total_ - done_));
  if (done_ >= total_) eta = "0:00";
  fmt::print(out_, "\r\033[K[{}{}] {}/{} trials, {} elapsed, ETA {}", std::string(filled, '#'),
             std::string(kWidth - filled, '.'), done_, total_, Clock(ElapsedSeconds()), eta);
  bar_shown_ = true;
  std::fflush(out_);
}

}  // namespace tunepar
