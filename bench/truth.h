// Hidden machines for the benchmarks: the performance model with a perturbed hardware profile
// is the "truth" the search and the reports are measured against (they never see it).
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "runner/performance_model.h"
#include "base/layout.h"

namespace tunepar::bench {

// A hidden machine: the nominal profile with every efficiency and bandwidth scaled.
inline runner::HardwareProfile Perturb(const runner::HardwareProfile& nominal, uint64_t seed) {
  runner::HardwareProfile hw = nominal;
  std::mt19937_64 rng(seed * 7919 + 17);
  std::uniform_real_distribution<double> log_factor(std::log(0.5), std::log(2.0));
  auto scale = [&](double& v) { v *= std::exp(log_factor(rng)); };
  for (const auto& p : runner::EfficiencyParameters()) {
    double& v = hw.efficiency.at(std::string(p.name)).value;
    scale(v);
    if (p.key == runner::EfficiencyKey::kDpOverlap) v = std::min(v, 1.0);
  }
  scale(hw.memory_bandwidth_gbs.value);
  scale(hw.intra_node_bandwidth_gbs.value);
  scale(hw.package_bandwidth_gbs.value);
  scale(hw.nic_bandwidth_gbs.value);
  return hw;
}

struct Truth {
  std::vector<double> step;  // noise-free true step time per legal layout
  std::vector<char> fits;
  int best = -1;  // index of the optimum
};

inline Truth MakeTruth(const ModelShape& model, const runner::HardwareProfile& hidden,
                       const std::vector<Layout>& legal) {
  const runner::PerformanceModel pm(model, hidden, runner::Efficiency::FromProfile(hidden).value());
  Truth t;
  t.step.resize(legal.size());
  t.fits.resize(legal.size());
  for (size_t i = 0; i < legal.size(); ++i) {
    const runner::Prediction p = pm.Predict(legal[i]);
    t.step[i] = p.step_time_s;
    t.fits[i] = p.fits;
    if (p.fits && (t.best < 0 || p.step_time_s < t.step[t.best])) t.best = static_cast<int>(i);
  }
  return t;
}

}  // namespace tunepar::bench
