#include "runner/core/reference_dump.h"

#include <filesystem>
#include <fstream>
#include <vector>

namespace tunepar::core {

void WriteDump(const std::string& dir, const std::string& name, const nlohmann::json& content) {
  std::filesystem::create_directories(dir);
  std::ofstream(std::filesystem::path(dir) / name) << content.dump();
}

nlohmann::json StepBatches(const TokenSource& data, int steps, int64_t global_batch, int T) {
  nlohmann::json samples = nlohmann::json::array();
  std::vector<int> sample(static_cast<size_t>(T) + 1);
  for (int s = 0; s < steps; ++s) {
    nlohmann::json step = nlohmann::json::array();
    for (int64_t i = 0; i < global_batch; ++i) {
      data.Sample(s * global_batch + i, T + 1, sample.data());
      step.push_back(sample);
    }
    samples.push_back(std::move(step));
  }
  return {{"samples", std::move(samples)}};
}

}  // namespace tunepar::core
