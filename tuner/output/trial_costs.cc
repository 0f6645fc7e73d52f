#include "tuner/output/trial_costs.h"

#include <time.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tuner/output/text_table.h"

namespace tunepar {

std::optional<double> SecondsBetween(const std::string& from, const std::string& to) {
  auto parse = [](const std::string& text) -> std::optional<time_t> {
    struct tm t {};
    const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &t);
    if (end == nullptr) return std::nullopt;
    return timegm(&t);
  };
  const std::optional<time_t> a = parse(from), b = parse(to);
  if (!a || !b) return std::nullopt;
  return static_cast<double>(*b - *a);
}

TrialCosts CostsOf(const store::TrialRecord& trial) {
  TrialCosts costs;
  const nlohmann::json details = nlohmann::json::parse(trial.details, nullptr, false);
  if (details.is_object()) {
    if (details.contains("comm") && details["comm"].is_string()) costs.comm = details["comm"].get<std::string>();
    const nlohmann::json startup = details.value("startup", nlohmann::json());
    if (startup.is_object() && startup.contains("total_s") && startup["total_s"].is_number())
      costs.startup_s = startup["total_s"].get<double>();
  }
  if (!trial.started_at.empty() && !trial.finished_at.empty())
    costs.wall_s = SecondsBetween(trial.started_at, trial.finished_at);
  return costs;
}

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Whole seconds, as the trial's times are stored.
std::string WallText(double seconds) {
  return seconds < 1 ? "under 1 s" : fmt::format("{:.0f} s", seconds);
}

// "start-up 2.41 s median (1.90-3.10) over 6 trials; their wall time 14.0 s median".
void AddStartup(const std::vector<TrialCosts>& costs, Report* report) {
  std::vector<double> startup, wall;
  for (const TrialCosts& c : costs) {
    if (!c.startup_s) continue;
    startup.push_back(*c.startup_s);
    if (c.wall_s) wall.push_back(*c.wall_s);
  }
  if (startup.empty()) return;
  const auto [low, high] = std::minmax_element(startup.begin(), startup.end());
  report->text += fmt::format(
      "start-up (process start to first step, tunepar-core's clock): {:.2f} s median ({:.2f}-{:.2f}) over {} "
      "trial{}{}\n",
      Median(startup), *low, *high, startup.size(), startup.size() == 1 ? "" : "s",
      wall.empty() ? "" : fmt::format("; their whole run in the tuner (launch to end) {} median", WallText(Median(wall))));
  report->json["startup_s"] = {{"median", Median(startup)}, {"min", *low}, {"max", *high}, {"trials", startup.size()}};
  if (!wall.empty()) report->json["trial_wall_s"] = {{"median", Median(wall)}, {"trials", wall.size()}};
}

void AddCommModes(const std::vector<TrialCosts>& costs, Report* report) {
  std::map<std::string, int64_t> modes;
  for (const TrialCosts& c : costs)
    if (!c.comm.empty()) ++modes[c.comm];
  if (modes.empty()) return;
  std::string text;
  for (const auto& [mode, n] : modes) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", mode, WithCommas(n));
  report->text += fmt::format("communication, as the core chose it for each trial's placement: {}{}\n", text,
                              modes.size() > 1 ? " (step times of different modes are not comparable: staged "
                                                 "transfers go through host memory)"
                                               : "");
  report->json["comm_modes"] = modes;
}

}  // namespace

void AddTrialCosts(const StudyTrials& trials, Report* report) {
  std::vector<TrialCosts> costs;
  for (const store::TrialRecord* t : trials.finished) costs.push_back(CostsOf(*t));
  AddCommModes(costs, report);
  AddStartup(costs, report);
}

}  // namespace tunepar
