// What the dense GPT presets predict, frozen (issue 33, plan §0): parameters, FLOPs and the
// performance model's every time and memory term on the legal layouts of a few (model, hardware,
// world) problems, as %a hexfloats, so "unchanged" means the same double, bit for bit. New model
// features (GQA, SwiGLU, RMSNorm, rotary, ViT) must leave these numbers where they are.
//
// TUNEPAR_RECORD_GOLDEN=1 rewrites tests/data/dense-golden.csv. It was recorded once, before the
// performance model learnt those features; a later change that needs to rewrite it is wrong.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/flops.h"
#include "runner/performance_model.h"
#include "search/space.h"
#include "tests/test_support.h"

namespace tunepar::runner {
namespace {

const std::string kGoldenPath = std::string(TUNEPAR_SOURCE_DIR) + "/tests/data/dense-golden.csv";

std::string Hex(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%a", x);
  return text;
}

// One golden row: what it is about (key) and named values.
struct Row {
  std::string key;
  std::vector<std::pair<std::string, std::string>> values;
};

Row PresetRow(const std::string& name) {
  const ModelShape m = testing::PresetModel(name);
  return {"preset " + name,
          {{"parameters", Hex(m.Parameters())},
           {"model_flops", Hex(ModelFlopsPerStep(m))},
           {"hardware_flops_selective", Hex(HardwareFlopsPerStep(m, Recompute::kSelective))},
           {"hardware_flops_full", Hex(HardwareFlopsPerStep(m, Recompute::kFull))}}};
}

Row PredictionRow(const std::string& problem, const Layout& l, const Prediction& p) {
  const TimeBreakdown& t = p.time;
  const MemoryBreakdown& m = p.memory;
  return {problem + " " + LayoutKey(l),
          {{"step_time_s", Hex(p.step_time_s)},
           {"compute", Hex(t.compute)},
           {"tp_comm", Hex(t.tp_comm)},
           {"pp_p2p", Hex(t.pp_p2p)},
           {"bubble", Hex(t.bubble)},
           {"dp_comm_exposed", Hex(t.dp_comm_exposed)},
           {"optimizer", Hex(t.optimizer)},
           {"device_sharing", Hex(t.device_sharing)},
           {"weights", Hex(m.weights)},
           {"gradients", Hex(m.gradients)},
           {"optimizer_states", Hex(m.optimizer_states)},
           {"activations", Hex(m.activations)},
           {"comm_buffers", Hex(m.comm_buffers)},
           {"runtime_overhead", Hex(m.runtime_overhead)},
           {"tflops_per_gpu", Hex(p.tflops_per_gpu)}}};
}

struct Problem {
  std::string model, hardware;
  int world;
  int every;  // predict one in `every` legal layouts (by enumeration index)
};

// The plan's problems: every legal layout of small at 8 (750), one in 13 of gpt-22b at 256
// (9,750 legal), one in 11 of gpt-175b at 1024 (7,230), one in 37 of gpt-1t at 3072 (13,770).
// Prime strides, so the samples do not line up with the knobs' nesting; the file stays < 1 MB.
const Problem kProblems[] = {{"gpt-22b", "lumi-g", 256, 13},
                             {"gpt-175b", "frontier-mi250x", 1024, 11},
                             {"small", "local-cpu", 8, 1},
                             {"gpt-1t", "frontier-mi250x", 3072, 37}};

std::vector<Row> ProblemRows(const Problem& pb) {
  const ModelShape m = testing::PresetModel(pb.model);
  const HardwareProfile hw = testing::PresetHardware(pb.hardware);
  // The default space of 2026-11 (ZeRO 0-1): the goldens' layouts, sampled by index, stay the same.
  const SpaceSpec space = testing::Space2026_11();
  Result<search::SpaceEnumeration> e = search::EnumerateSpace({pb.world, hw.gpus_per_node, &m, &space});
  EXPECT_TRUE(e.ok()) << e.status().message();
  Result<PerformanceModel> model = PerformanceModel::Create(m, hw);
  EXPECT_TRUE(model.ok()) << model.status().message();
  std::vector<Row> rows;
  if (!e.ok() || !model.ok()) return rows;
  const std::string problem = pb.model + "@" + std::to_string(pb.world) + "/" + pb.hardware;
  for (size_t i = 0; i < e->legal.size(); i += pb.every) {
    rows.push_back(PredictionRow(problem, e->legal[i], model->Predict(e->legal[i])));
  }
  return rows;
}

std::vector<Row> AllRows() {
  std::vector<Row> rows;
  for (const char* name : {"gpt-1.3b", "gpt-22b", "gpt-175b", "gpt-1t", "small", "tiny"})
    rows.push_back(PresetRow(name));
  for (const Problem& pb : kProblems) {
    for (Row& r : ProblemRows(pb)) rows.push_back(std::move(r));
  }
  return rows;
}

// The file: a "# key,field,..." line names the fields of the rows after it; each row is
// "key,hexfloat,...".
std::string Render(const std::vector<Row>& rows) {
  std::string text, names;
  for (const Row& r : rows) {
    std::string header = "# key", line = r.key;
    for (const auto& [field, value] : r.values) {
      header += "," + field;
      line += "," + value;
    }
    if (header != names) text += header + "\n";
    names = header;
    text += line + "\n";
  }
  return text;
}

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> cells;
  std::istringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  return cells;
}

// "key,field" -> hexfloat.
std::map<std::string, std::string> ReadGolden() {
  std::map<std::string, std::string> golden;
  std::istringstream in(testing::ReadFile(kGoldenPath));
  std::string line;
  std::vector<std::string> names;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0) {
      names = Split(line.substr(2));
      continue;
    }
    const std::vector<std::string> cells = Split(line);
    for (size_t i = 1; i < cells.size() && i < names.size(); ++i) golden[cells[0] + "," + names[i]] = cells[i];
  }
  return golden;
}

TEST(DenseGolden, GptPresetsPredictWhatTheyDidBeforeIssue33) {
  const std::vector<Row> rows = AllRows();
  if (std::getenv("TUNEPAR_RECORD_GOLDEN") != nullptr) {
    testing::WriteFile(kGoldenPath, Render(rows));
    GTEST_SKIP() << "recorded " << kGoldenPath;
  }
  const std::map<std::string, std::string> golden = ReadGolden();
  size_t compared = 0, differ = 0;
  for (const Row& r : rows) {
    for (const auto& [field, value] : r.values) {
      const auto it = golden.find(r.key + "," + field);
      ASSERT_NE(it, golden.end()) << "not in the golden file: " << r.key << " " << field;
      ++compared;
      if (it->second != value && ++differ <= 20)
        ADD_FAILURE() << r.key << " " << field << ": " << value << " (" << std::strtod(value.c_str(), nullptr)
                      << "), golden " << it->second << " (" << std::strtod(it->second.c_str(), nullptr) << ")";
    }
  }
  EXPECT_EQ(differ, 0u) << "of " << compared << " values";
  EXPECT_EQ(compared, golden.size()) << "the golden file has values this test no longer computes";
  EXPECT_GT(compared, 1000u);
}

}  // namespace
}  // namespace tunepar::runner
