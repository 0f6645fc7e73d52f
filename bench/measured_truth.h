// The measured truth: a sweep of tunepar-core over every layout it runs of a small model at
// world 8 on this machine (bench/measure_core_truth.sh writes it to bench/data/core-w8-*.csv),
// replayed by the search benchmark. A layout's true step time is the mean log step time of its
// runs; the replay's noise is the run-to-run spread of the layouts measured more than once
// (pooled standard deviation of log step time); it fits when its runs ended ok (the core's
// memory accounting is deterministic: a layout either stays under the cap or does not).
#pragma once

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/layout.h"
#include "base/status.h"
#include "bench/truth.h"

namespace tunepar::bench {

struct MeasuredTruth {
  Truth truth;
  double memory_cap_bytes = 0;  // the cap the sweep ran under: the device memory of the replay
  int runs = 0, repeated_layouts = 0;
};

inline Result<MeasuredTruth> LoadMeasuredTruth(const std::string& path, const std::vector<Layout>& legal) {
  std::ifstream in(path);
  if (!in) return Status(StatusCode::kConfig, "cannot read " + path);
  struct Runs {
    std::vector<double> log_step;
    std::string status;
    double peak = 0;
  };
  std::map<std::string, Runs> runs;
  MeasuredTruth out;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      const std::string tag = "# memory_cap_bytes:";
      if (line.rfind(tag, 0) == 0) out.memory_cap_bytes = std::stod(line.substr(tag.size()));
      continue;
    }
    if (header) {  // layout,repeat,status,step_time_s,peak_bytes
      header = false;
      continue;
    }
    std::vector<std::string> field;
    std::stringstream row(line);
    for (std::string f; std::getline(row, f, ',');) field.push_back(f);
    field.resize(5);
    Runs& r = runs[field[0]];
    ++out.runs;
    if (r.status.empty() || field[2] != "ok") r.status = field[2];  // one failure makes it a failure
    if (!field[4].empty()) r.peak = std::max(r.peak, std::stod(field[4]));
    if (field[2] == "ok" && !field[3].empty()) r.log_step.push_back(std::log(std::stod(field[3])));
  }
  if (out.memory_cap_bytes <= 0) return Status(StatusCode::kConfig, path + ": no '# memory_cap_bytes:' line");
  Truth& t = out.truth;
  t.step.assign(legal.size(), 0);
  t.memory.assign(legal.size(), 0);
  t.fits.assign(legal.size(), 0);
  double squares = 0;
  int dof = 0;
  for (size_t i = 0; i < legal.size(); ++i) {
    const auto it = runs.find(LayoutKey(legal[i]));
    if (it == runs.end()) return Status(StatusCode::kConfig, path + " has no run of " + LayoutKey(legal[i]));
    const Runs& r = it->second;
    t.memory[i] = r.peak;
    t.fits[i] = r.status == "ok";
    if (!t.fits[i]) continue;
    double mean = 0;
    for (double v : r.log_step) mean += v / r.log_step.size();
    t.step[i] = std::exp(mean);
    for (double v : r.log_step) squares += (v - mean) * (v - mean);
    dof += static_cast<int>(r.log_step.size()) - 1;
    out.repeated_layouts += r.log_step.size() > 1;
  }
  if (dof > 0) t.noise_sd = std::sqrt(squares / dof);
  FindOptimum(t);
  if (t.best < 0) return Status(StatusCode::kConfig, path + ": no layout ran ok");
  return out;
}

}  // namespace tunepar::bench
