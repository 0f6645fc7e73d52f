// tunepar-core against itself on one rank: every layout of TP, PP, DP in {1, 2} (and TP = 4,
// PP = 4), ZeRO-1 on and off, recomputation off / full (and selective), 1, 2 and 4
// micro-batches must give the single-rank run's losses, first-step gradients and parameters
// after 3 AdamW steps. Ranks are MPI processes oversubscribed on this machine.
//
// Tolerances (fp32):
// - loss: 1e-5 relative. Layouts change only the order of floating-point sums (TP all-reduces,
//   micro-batch accumulation, DP reduction), which moves fp32 results by ~1e-7 relative.
// - gradients: |a - b| <= 1e-5 max(|a|, |b|) + 1e-5 g_max, where g_max is the largest gradient
//   of the tensor: the floor covers elements near zero, whose sums cancel (their absolute error is
//   that of the tensor's larger terms, measured at <= 1e-6 g_max).
// - parameters after 3 steps: |a - b| <= 1e-5 |a| + 0.1 lr steps. AdamW normalises each update
//   (m / sqrt(v) is scale-free), so a gradient element that is itself rounding noise (e.g. the
//   key bias, whose exact gradient is zero by softmax's shift invariance) moves its parameter by
//   up to lr per step in a noise-chosen direction; measured differences stay below 0.05 lr steps.
//   The RMS difference over all parameters must also stay below 1e-3 lr steps.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/layout.h"
#include "base/pipeline_split.h"
#include "runner/performance_model.h"
#include "tests/test_support.h"

namespace tunepar {
namespace {

using testing::CliRun;
using testing::MpiRun;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;
using Tensors = std::map<std::string, std::vector<double>>;

constexpr double kLr = 3e-4;
constexpr int kSteps = 3;

struct CoreRun {
  CliRun process;
  nlohmann::json result;
  Tensors gradients, weights;
};

// Runs tunepar-core on `ranks` ranks with the tiny model and `args`; dumps when `dump`.
CoreRun RunCore(int ranks, const std::string& args, bool dump = true,
                const std::string& binary = TUNEPAR_CORE) {
  TempDir dir;
  const std::string launcher = ranks > 1 ? MpiRun(ranks) + " " : "";
  CoreRun run;
  run.process = RunCommand(launcher + binary + " --threads 1 -q --lr " + std::to_string(kLr) + " --steps " +
                           std::to_string(kSteps) + " --warmup 0 -o " + (dir / "result.json") +
                           (dump ? " --dump " + (dir / "dump") : "") + " " + args);
  const std::string text = ReadFile(dir / "result.json");
  if (!text.empty()) run.result = nlohmann::json::parse(text);
  if (dump && run.process.exit_code == 0) {
    run.gradients = nlohmann::json::parse(ReadFile(dir / "dump/gradients.json")).get<Tensors>();
    run.weights = nlohmann::json::parse(ReadFile(dir / "dump/weights.json")).get<Tensors>();
  }
  return run;
}

// Models for uneven pipeline stages: 7 layers (no pp from 2 to 6 divides them) and a vocabulary
// of 2048, whose head (2 T C V) outweighs a layer, so the first/last-stage rule
// (base/pipeline_split.h) gives the last stage fewer layers than the even split: tiny-7 (GPT,
// tied) 5 + 2 on pp 2 and 3 + 3 + 1 on pp 3 (even: 4 + 3, 3 + 2 + 2); tiny-llama-7 (the
// Llama-style tiny-llama's shape, untied) 5 + 2 and 2 + 4 + 1. tiny-6: tiny-7 with 6 layers.
const std::map<std::string, std::string>& UnevenModelTexts() {
  static const std::map<std::string, std::string> texts = {
      {"tiny-7", "name = \"tiny-7\"\nlayers = 7\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 2048\n"
                 "global_batch = 8\n"},
      {"tiny-6", "name = \"tiny-6\"\nlayers = 6\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 2048\n"
                 "global_batch = 8\n"},
      {"tiny-llama-7",
       "name = \"tiny-llama-7\"\nlayers = 7\nhidden = 64\nheads = 4\nkv_heads = 2\nseq_len = 32\nvocab = 2048\n"
       "global_batch = 8\nmlp = \"swiglu\"\nffn_hidden = 128\npositions = \"rotary\"\nnorm = \"rmsnorm\"\n"
       "tied_embeddings = false\nlinear_biases = false\n"}};
  return texts;
}

// What --model takes for a case's model: a preset's name, or the file of an uneven-stage model.
std::string ModelArgument(const std::string& model) {
  static TempDir dir;
  const auto text = UnevenModelTexts().find(model);
  if (text == UnevenModelTexts().end()) return model;
  const std::string path = dir / (model + ".toml");
  testing::WriteFile(path, text->second);
  return path;
}

ModelShape ModelOf(const std::string& model) {
  const auto text = UnevenModelTexts().find(model);
  if (text == UnevenModelTexts().end() && model.find('/') != std::string::npos) {  // a model file (LongSequenceModel)
    std::ifstream in(model);
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return *ParseModelShape(file, model, model);
  }
  if (text == UnevenModelTexts().end()) return testing::PresetModel(model);
  Result<ModelShape> shape = ParseModelShape(text->second, model, model);
  EXPECT_TRUE(shape.ok()) << shape.status().message();
  return shape.ok() ? *shape : ModelShape{};
}

const CoreRun& Reference(const std::string& precision = "fp32", const std::string& model = "tiny") {
  static std::map<std::string, CoreRun> runs;
  const std::string key = model + " " + precision;
  auto it = runs.find(key);
  if (it == runs.end()) {
    it = runs.emplace(key, RunCore(1, "--model " + ModelArgument(model) + " --micro-batches 1 --precision " + precision))
             .first;
  }
  return it->second;
}

void ExpectLossesMatch(const CoreRun& ref, const CoreRun& run, double relative) {
  ASSERT_EQ(run.result["loss"].size(), ref.result["loss"].size());
  for (size_t i = 0; i < ref.result["loss"].size(); ++i) {
    const double a = ref.result["loss"][i], b = run.result["loss"][i];
    EXPECT_LE(std::abs(a - b), relative * std::abs(a)) << "step " << i << ": " << a << " vs " << b;
  }
}

void ExpectGradientsMatch(const Tensors& ref, const Tensors& run, double relative) {
  ASSERT_EQ(ref.size(), run.size());
  for (const auto& [name, a] : ref) {
    const std::vector<double>& b = run.at(name);
    ASSERT_EQ(a.size(), b.size()) << name;
    double g_max = 0;
    for (double x : a) g_max = std::max(g_max, std::abs(x));
    int bad = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double bound = relative * std::max(std::abs(a[i]), std::abs(b[i])) + relative * g_max;
      if (std::abs(a[i] - b[i]) > bound && bad++ < 3) {
        ADD_FAILURE() << name << "[" << i << "]: " << a[i] << " vs " << b[i] << " (g_max " << g_max << ")";
      }
    }
  }
}

void ExpectWeightsMatch(const Tensors& ref, const Tensors& run, double relative, double absolute,
                        double rms_bound) {
  double sum_sq = 0;
  int64_t count = 0;
  for (const auto& [name, a] : ref) {
    const std::vector<double>& b = run.at(name);
    ASSERT_EQ(a.size(), b.size()) << name;
    int bad = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double d = std::abs(a[i] - b[i]);
      sum_sq += d * d;
      ++count;
      if (d > relative * std::abs(a[i]) + absolute && bad++ < 3) {
        ADD_FAILURE() << name << "[" << i << "]: " << a[i] << " vs " << b[i];
      }
    }
  }
  EXPECT_LE(std::sqrt(sum_sq / count), rms_bound);
}

// ---- fp32 exactness over layouts.

struct LayoutCase {
  int tp, pp, dp, zero, micro_batches;
  std::string recompute;
  std::string comm = "mpi";  // mpi-staged: through host staging buffers, as on a GPU without NCCL
  std::string model = "tiny";  // tiny-llama: GQA, SwiGLU, rotary, RMSNorm, untied, no biases
  bool sequence_parallel = false;
  int dp_replicate = 1;  // hybrid sharding: dp = shard group x dp_replicate (ZeRO >= 1)
  bool uneven_stages = false;
  std::vector<int> stage_layers;  // the blocks per stage the result must report ({}: the even split)
  int cp = 1;                     // context parallelism (ring attention: with fused attention)
  int Ranks() const { return tp * pp * dp * cp; }
};

// Models whose sequences span several fused-attention tiles on every cp rank and are not a
// multiple of the 64-row tile: 200 tokens, so cp 2 holds 100 rows a sequence (a 64-row tile and a
// 36-row one, its chunk boundary at row 50 inside the first) and cp 4 holds 50 (chunks of 25).
// As tiny and tiny-llama otherwise, with two layers and a global batch of 4. Written once; the
// path is the model's name in the cases.
const std::string& LongSequenceModel(bool llama) {
  static TempDir dir;
  static std::map<bool, std::string> paths;
  auto it = paths.find(llama);
  if (it != paths.end()) return it->second;
  const std::string path = dir / (llama ? "long-llama.toml" : "long.toml");
  std::ofstream toml(path);
  toml << "name = \"" << (llama ? "long-llama" : "long") << "\"\nlayers = 2\nhidden = 64\nheads = 4\n"
       << "seq_len = 200\nvocab = 256\nglobal_batch = 4\n";
  if (llama) {
    toml << "kv_heads = 2\nmlp = \"swiglu\"\nffn_hidden = 128\npositions = \"rotary\"\nnorm = \"rmsnorm\"\n"
         << "tied_embeddings = false\nlinear_biases = false\n";
  }
  return paths.emplace(llama, path).first->second;
}

// The case as tunepar-core's flags (the comm mode included).
std::string LayoutFlags(const LayoutCase& c) {
  return "--model " + ModelArgument(c.model) + " --tp " + std::to_string(c.tp) + " --pp " + std::to_string(c.pp) + " --dp " +
         std::to_string(c.dp) + " --zero " + std::to_string(c.zero) + " --recompute " + c.recompute +
         " --micro-batches " + std::to_string(c.micro_batches) + " --comm " + c.comm +
         (c.sequence_parallel ? " --sequence-parallel" : "") + " --dp-replicate " + std::to_string(c.dp_replicate) +
         (c.uneven_stages ? " --uneven-stages" : "") + (c.cp > 1 ? " --flash-attention --cp " + std::to_string(c.cp) : "");
}

// "tiny", "llama", "long", "longllama", "7", "llama_7" (test names: no dashes).
std::string ModelName(const std::string& model) {
  if (model == LongSequenceModel(false)) return "long";
  if (model == LongSequenceModel(true)) return "longllama";
  std::string name = model == "tiny" ? model : model.substr(model.find('-') + 1);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

void PrintTo(const LayoutCase& c, std::ostream* out);

std::string Name(const LayoutCase& c) {
  std::string model = c.model == "tiny" ? "" : "_" + c.model.substr(c.model.find('-') + 1);
  std::replace(model.begin(), model.end(), '-', '_');
  return "tp" + std::to_string(c.tp) + "_pp" + std::to_string(c.pp) + "_dp" + std::to_string(c.dp) + "_zero" +
         std::to_string(c.zero) + "_rc" + c.recompute + "_nmb" + std::to_string(c.micro_batches) +
         (c.comm == "mpi" ? "" : "_" + c.comm.substr(c.comm.find('-') + 1)) +
         (c.model == "tiny" ? "" : "_" + ModelName(c.model)) + (c.sequence_parallel ? "_sp" : "") +
         (c.dp_replicate == 1 ? "" : "_dpr" + std::to_string(c.dp_replicate)) + (c.uneven_stages ? "_uneven" : "") +
         (c.cp == 1 ? "" : "_cp" + std::to_string(c.cp));
}

void PrintTo(const LayoutCase& c, std::ostream* out) {
  *out << Name(c);
}

class CoreExactness : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(CoreExactness, MatchesTheSingleRankRun) {
  const LayoutCase& c = GetParam();
  const CoreRun& ref = Reference("fp32", c.model);
  ASSERT_EQ(ref.process.exit_code, 0) << ref.process.err;
  const CoreRun run = RunCore(c.Ranks(), LayoutFlags(c));
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  EXPECT_EQ(run.result["status"], "ok");
  EXPECT_NE(run.result["layout"].get<std::string>().find(c.sequence_parallel ? "-sp1-" : "-sp0-"), std::string::npos)
      << run.result["layout"];
  if (c.cp > 1) {
    const std::string key = run.result["layout"];
    EXPECT_EQ(key.substr(key.size() - 4), "-cp" + std::to_string(c.cp)) << key;
  }
  EXPECT_EQ(run.result["comm"], c.comm);
  EXPECT_EQ(run.result["world"], c.Ranks());
  EXPECT_EQ(run.result["global_batch"], ModelName(c.model).rfind("long", 0) == 0 ? 4 : 8);
  // The blocks each stage's trainers built: the rule's split (base/pipeline_split.h).
  const std::vector<int> stage_layers = run.result["stage_layers"].get<std::vector<int>>();
  EXPECT_EQ(stage_layers, SplitLayers(ModelOf(c.model), c.pp, c.uneven_stages).layers);
  if (!c.stage_layers.empty()) EXPECT_EQ(stage_layers, c.stage_layers);
  ExpectLossesMatch(ref, run, 1e-5);
  ExpectGradientsMatch(ref.gradients, run.gradients, 1e-5);
  ExpectWeightsMatch(ref.weights, run.weights, 1e-5, 0.1 * kLr * kSteps, 1e-3 * kLr * kSteps);
}

std::vector<LayoutCase> ShardingCases();
std::vector<LayoutCase> ContextParallelCases();

// Uneven pipeline stages (the first/last-stage rule's split, stage_layers as the result reports
// it), a covering design over both 7-layer models: pp 2 and 3, tp, dp, ZeRO 1, 2 and 3, every
// recomputation, 1, 2 and 4 micro-batches, staged transfers, sequence parallelism. The tied
// embedding's copy on the last stage, the 1F1B warm-up and the FSDP units all follow the counts.
std::vector<LayoutCase> UnevenStageCases() {
  std::vector<LayoutCase> cases;
  for (LayoutCase c : std::vector<LayoutCase>{{1, 2, 1, 0, 4, "none", "mpi", "tiny-7"},
                                              {2, 3, 1, 0, 4, "full", "mpi", "tiny-7"},
                                              {1, 3, 2, 1, 2, "selective", "mpi", "tiny-7"},
                                              {1, 2, 2, 3, 2, "none", "mpi", "tiny-7"},
                                              {1, 3, 1, 0, 1, "none", "mpi-staged", "tiny-7"},
                                              {2, 2, 1, 0, 2, "selective", "mpi", "tiny-7", true},
                                              {2, 2, 1, 0, 2, "none", "mpi", "tiny-llama-7"},
                                              {1, 3, 2, 3, 2, "full", "mpi", "tiny-llama-7"},
                                              {1, 2, 2, 2, 4, "none", "mpi", "tiny-llama-7"}}) {
    c.uneven_stages = true;
    const bool llama = c.model == "tiny-llama-7";
    c.stage_layers = c.pp == 2 ? std::vector<int>{5, 2} : llama ? std::vector<int>{2, 4, 1} : std::vector<int>{3, 3, 1};
    cases.push_back(c);
  }
  return cases;
}

std::vector<LayoutCase> ExactnessCases() {
  std::vector<LayoutCase> cases;
  for (int tp : {1, 2}) {
    for (int pp : {1, 2}) {
      for (int dp : {1, 2}) {
        for (int zero : {0, 1}) {
          for (const char* recompute : {"none", "full"}) {
            for (int micro_batches : {1, 2, 4}) cases.push_back({tp, pp, dp, zero, micro_batches, recompute});
          }
        }
      }
    }
  }
  cases.push_back({4, 1, 1, 0, 2, "none"});
  cases.push_back({4, 1, 2, 1, 2, "selective"});
  cases.push_back({1, 4, 1, 0, 4, "none"});
  cases.push_back({1, 4, 2, 1, 2, "full"});
  cases.push_back({2, 4, 1, 0, 4, "selective"});
  cases.push_back({2, 2, 2, 1, 4, "selective"});
  // Every device transfer through host staging: TP all-reduces, pipeline sends and receives, the
  // tied embedding's sum, the bucketed DP sum and ZeRO-1's reduce-scatter and all-gather.
  cases.push_back({2, 2, 2, 1, 4, "none", "mpi-staged"});
  cases.push_back({2, 2, 2, 0, 2, "full", "mpi-staged"});
  cases.push_back({1, 4, 1, 0, 4, "selective", "mpi-staged"});
  cases.push_back({2, 1, 2, 0, 1, "none", "mpi-staged"});
  // The Llama-style model (4 query heads in 2 K/V groups, so tp <= 2): a covering design, every
  // knob value met at least once rather than the product.
  for (LayoutCase c : std::vector<LayoutCase>{{2, 1, 1, 0, 1, "none"},
                                              {2, 2, 1, 0, 2, "full"},
                                              {2, 2, 2, 1, 4, "selective"},
                                              {1, 4, 1, 0, 4, "none"},
                                              {1, 4, 2, 1, 2, "selective"},
                                              {1, 2, 2, 0, 4, "full"},
                                              {2, 4, 1, 0, 4, "none"},
                                              {1, 1, 2, 1, 2, "none"},
                                              {2, 1, 2, 1, 2, "none", "mpi-staged"},
                                              {2, 2, 2, 0, 2, "full", "mpi-staged"}}) {
    c.model = "tiny-llama";
    cases.push_back(c);
  }
  // Sequence parallelism (the stream split over TP by rows; all-gathers and reduce-scatters around
  // the TP layers; the norms' gradients summed over TP once a step), a covering design over both
  // models: tp 2 and 4, pp 1, 2 and 4, dp, ZeRO-1, every recomputation, 1, 2 and 4
  // micro-batches, staged transfers.
  for (LayoutCase c : std::vector<LayoutCase>{{2, 1, 1, 0, 1, "none"},
                                              {4, 1, 2, 1, 2, "selective"},
                                              {2, 2, 2, 1, 4, "full"},
                                              {4, 2, 1, 0, 4, "none"},
                                              {2, 4, 1, 0, 2, "selective"},
                                              {2, 2, 2, 0, 2, "none", "mpi-staged"},
                                              {2, 1, 2, 0, 4, "full", "mpi", "tiny-llama"},
                                              {2, 2, 2, 1, 2, "selective", "mpi", "tiny-llama"},
                                              {2, 4, 1, 0, 4, "none", "mpi", "tiny-llama"},
                                              {2, 1, 1, 0, 2, "none", "mpi-staged", "tiny-llama"}}) {
    c.sequence_parallel = true;
    cases.push_back(c);
  }
  for (const LayoutCase& c : ShardingCases()) cases.push_back(c);
  for (const LayoutCase& c : UnevenStageCases()) cases.push_back(c);
  for (const LayoutCase& c : ContextParallelCases()) cases.push_back(c);
  return cases;
}

// Context parallelism (ring attention over the fused kernel, the chunks' positions, gradients and
// ZeRO over the dp x cp group) against the single-rank run (fa0: fused attention reproduces it to
// these bounds), a covering design: cp 2 and 4, both tiny models and the long-sequence ones
// (several tiles a rank), with tp, sp, pp, dp, ZeRO 1-3, hybrid sharding, every recomputation,
// 1, 2 and 4 micro-batches, staged transfers.
std::vector<LayoutCase> ContextParallelCases() {
  const std::string& lng = LongSequenceModel(false);
  const std::string& long_llama = LongSequenceModel(true);
  std::vector<LayoutCase> cases;
  for (LayoutCase c : std::vector<LayoutCase>{{1, 1, 1, 0, 2, "none"},
                                              {1, 1, 1, 0, 1, "none", "mpi", lng},
                                              {2, 1, 1, 0, 2, "selective", "mpi", lng},
                                              {1, 2, 1, 0, 4, "none", "mpi", lng},
                                              {1, 1, 2, 1, 2, "full", "mpi", lng},
                                              {1, 1, 2, 3, 2, "none", "mpi-staged", lng},
                                              {1, 1, 1, 0, 2, "none", "mpi", long_llama},
                                              {2, 1, 1, 0, 2, "full", "mpi", long_llama, true},
                                              {2, 2, 1, 0, 2, "none", "mpi", "tiny-llama"},
                                              {1, 1, 4, 2, 1, "none", "mpi", "tiny", false, 2}}) {
    c.cp = 2;
    cases.push_back(c);
  }
  for (LayoutCase c : std::vector<LayoutCase>{{1, 1, 1, 0, 2, "full", "mpi", lng},
                                              {1, 1, 1, 0, 1, "none", "mpi", "tiny-llama"},
                                              {1, 1, 2, 1, 2, "none"}}) {
    c.cp = 4;
    cases.push_back(c);
  }
  return cases;
}

std::vector<LayoutCase> ShardingCases() {
  std::vector<LayoutCase> cases;
  // ZeRO-2 (each unit's gradients reduce-scattered after every micro-batch into the gradient
  // shard) and ZeRO-3 (FSDP: units gathered before their forward and backward, the next one
  // prefetched; the tied head on one stage computing with the embedding's unit, across stages its
  // gradient summed through the shards), a covering design over both models: tp, pp 1, 2 and 4,
  // every recomputation, 1, 2 and 4 micro-batches, staged transfers, sequence parallelism.
  for (const LayoutCase& c : std::vector<LayoutCase>{{1, 1, 2, 2, 2, "none"},
                                                     {2, 2, 2, 2, 4, "full"},
                                                     {1, 2, 2, 2, 2, "selective", "mpi-staged"},
                                                     {2, 1, 2, 2, 1, "none", "mpi", "tiny-llama"},
                                                     {1, 1, 2, 3, 2, "none"},
                                                     {2, 2, 2, 3, 4, "full"},
                                                     {1, 4, 2, 3, 4, "selective"},
                                                     {2, 1, 2, 3, 2, "none", "mpi-staged"},
                                                     {1, 2, 2, 3, 2, "none", "mpi", "tiny-llama"},
                                                     {2, 2, 2, 3, 2, "selective", "mpi-staged", "tiny-llama"},
                                                     {2, 1, 2, 3, 2, "full", "mpi", "tiny", true}}) {
    cases.push_back(c);
  }
  // Hybrid sharding: dp 4 as two replicas of a shard group of 2 (the gradient shard all-reduced
  // across the replicas once a step), for ZeRO 1, 2 and 3.
  for (LayoutCase c : std::vector<LayoutCase>{{1, 1, 4, 1, 2, "none"},
                                              {1, 1, 4, 2, 1, "full", "mpi-staged"},
                                              {1, 1, 4, 3, 2, "none", "mpi", "tiny-llama"},
                                              {2, 1, 4, 3, 1, "selective"},
                                              {1, 2, 4, 3, 2, "none"},
                                              {1, 2, 4, 2, 2, "none", "mpi", "tiny-llama"}}) {
    c.dp_replicate = 2;
    cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Layouts, CoreExactness, ::testing::ValuesIn(ExactnessCases()),
                         [](const ::testing::TestParamInfo<LayoutCase>& info) { return Name(info.param); });

// ---- 16-bit storage.
// A value stored in bf16 keeps 8 significant bits (relative rounding up to 2^-9 = 0.2%), fp16
// 11 bits (2^-12). The storage rounding is the same on every layout, but summation-order
// differences of 1e-7 flip individual roundings by one 16-bit ulp, so layouts agree only to
// that: the loss to 2e-3 (bf16) / 3e-4 (fp16) relative over 3 steps, and the first-step
// gradients to 5% (bf16) / 1% (fp16) of each tensor's largest gradient (measured: about a
// quarter of these). Against fp32 the 16-bit loss is within 1% (bf16) / 0.2% (fp16).

struct PrecisionCase {
  std::string precision;
  double loss_rel, grad_rel, vs_fp32;
};

void PrintTo(const PrecisionCase& c, std::ostream* out) {
  *out << c.precision;
}

// Every gradient within `fraction` of its tensor's largest.
void ExpectGradientsWithin(const Tensors& ref, const Tensors& run, double fraction) {
  for (const auto& [name, a] : ref) {
    const std::vector<double>& b = run.at(name);
    double g_max = 0, d_max = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      g_max = std::max(g_max, std::abs(a[i]));
      d_max = std::max(d_max, std::abs(a[i] - b[i]));
    }
    EXPECT_LE(d_max, fraction * g_max) << name;
  }
}

class CorePrecision : public ::testing::TestWithParam<PrecisionCase> {};

TEST_P(CorePrecision, LayoutsAgreeWithinTheStorageRounding) {
  const PrecisionCase& c = GetParam();
  const CoreRun& ref = Reference(c.precision);
  ASSERT_EQ(ref.process.exit_code, 0) << ref.process.err;
  const CoreRun run =
      RunCore(8, "--model tiny --tp 2 --pp 2 --dp 2 --zero 1 --micro-batches 2 --precision " + c.precision);
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  ExpectLossesMatch(ref, run, c.loss_rel);
  ExpectGradientsWithin(ref.gradients, run.gradients, c.grad_rel);
  ExpectLossesMatch(Reference(), ref, c.vs_fp32);
  if (c.precision == "fp16") {
    EXPECT_EQ(run.result["loss_scale"][0], 65536.0);
    EXPECT_EQ(run.result["skipped_steps"], 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Storage, CorePrecision,
                         ::testing::Values(PrecisionCase{"bf16", 2e-3, 5e-2, 1e-2},
                                           PrecisionCase{"fp16", 3e-4, 1e-2, 2e-3}),
                         [](const ::testing::TestParamInfo<PrecisionCase>& info) {
                           return info.param.precision;
                         });

// Sequence parallelism with 16-bit storage: the stream's rows all-gathered as 16-bit numbers, the
// reduce-scattered sums rounded once, with fused attention too; within the bf16 layout bounds.
TEST(CorePrecision, SequenceParallelAgreesInBf16WithFusedAttention) {
  const CoreRun& ref = Reference("bf16");
  ASSERT_EQ(ref.process.exit_code, 0) << ref.process.err;
  const CoreRun run =
      RunCore(4, "--model tiny --tp 2 --pp 2 --micro-batches 2 --precision bf16 --sequence-parallel --flash-attention");
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  EXPECT_EQ(run.result["layout"], "tp2-pp2-dp1-mbs4-nmb2-bf16-zero0-rcnone-sp1-vpp1-fa1");
  ExpectLossesMatch(ref, run, 2e-3);
  ExpectGradientsWithin(ref.gradients, run.gradients, 5e-2);
}

// ZeRO all-gathers 16-bit weights as 16-bit numbers: with three replicas the larger stage of
// two has an odd shard (ZeRO-1: 118400 values / 3 -> 39467; ZeRO-2/3 shard each unit, padded to a
// multiple of 3, and ZeRO-3 gathers them before every pass, prefetched), so the gathers move odd
// counts per rank, through MPI and through the NCCL stand-in's path; the weights after three
// steps are those of one rank running the same global batch (3 sequences), to the storage rounding.
TEST(CorePrecisionZero, SixteenBitWeightsAllGatherAnOddShard) {
  const CoreRun one = RunCore(1, "--model tiny --micro-batch 1 --micro-batches 3 --precision bf16");
  ASSERT_EQ(one.process.exit_code, 0) << one.process.err;
  for (const auto& [zero, comm] : std::vector<std::pair<std::string, std::string>>{
           {"1", "mpi"}, {"1", "nccl"}, {"2", "mpi"}, {"3", "mpi"}, {"3", "nccl"}}) {
    SCOPED_TRACE("zero " + zero + ", " + comm);
    const CoreRun run = RunCore(6, "--model tiny --pp 2 --dp 3 --zero " + zero +
                                       " --micro-batch 1 --micro-batches 1 --precision bf16 --comm " + comm,
                                true, comm == "nccl" ? TUNEPAR_CORE_NCCL_OVER_MPI : TUNEPAR_CORE);
    ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
    ExpectLossesMatch(one, run, 2e-3);
    ExpectWeightsMatch(one.weights, run.weights, 1e-2, 0.1 * kLr * kSteps, 1e-3 * kLr * kSteps);
  }
}

// ---- Fused attention (fa1).
// The tiny model's shape with sequences of 130 tokens: three 64-row tiles, the last partial, so
// the fused kernels' causal tile skipping and partial tiles run inside the training step.
const std::string& LongSequenceModel() {
  static TempDir dir;
  static const std::string path = [] {
    testing::WriteFile(dir / "tiny-130.toml",
                       "name = \"tiny-130\"\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 130\nvocab = 256\n"
                       "global_batch = 8\n");
    return dir / "tiny-130.toml";
  }();
  return path;
}

// fa1 against fa0 in fp32, on one rank and on TP = 2, PP = 2 (recomputation none, selective and
// full): the bounds of the layout tests (1e-5), since the fused attention changes only how fp32
// sums are grouped (the online softmax's rescaled partial sums; D = dO . O for sum_j P dP), as a
// layout does. Measured: losses to 4e-9 relative, gradients to 1e-6 of their tensor's largest.
TEST(CoreFlashAttention, MatchesTheUnfusedRunOnOneRankAndOnTp2Pp2) {
  const std::string model = "--model " + LongSequenceModel() + " ";
  const CoreRun fa0 = RunCore(1, model + "--micro-batches 1");
  ASSERT_EQ(fa0.process.exit_code, 0) << fa0.process.err;
  const CoreRun fa1 = RunCore(1, model + "--micro-batches 1 --flash-attention");
  ASSERT_EQ(fa1.process.exit_code, 0) << fa1.process.err;
  EXPECT_EQ(fa1.result["layout"], "tp1-pp1-dp1-mbs8-nmb1-fp32-zero0-rcnone-sp0-vpp1-fa1");
  ExpectLossesMatch(fa0, fa1, 1e-5);
  ExpectGradientsMatch(fa0.gradients, fa1.gradients, 1e-5);
  ExpectWeightsMatch(fa0.weights, fa1.weights, 1e-5, 0.1 * kLr * kSteps, 1e-3 * kLr * kSteps);
  for (const char* recompute : {"none", "selective", "full"}) {
    SCOPED_TRACE(recompute);
    const CoreRun run = RunCore(4, model + "--tp 2 --pp 2 --micro-batches 2 --flash-attention --recompute " +
                                       std::string(recompute));
    ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
    ExpectLossesMatch(fa0, run, 1e-5);
    ExpectGradientsMatch(fa0.gradients, run.gradients, 1e-5);
    ExpectWeightsMatch(fa0.weights, run.weights, 1e-5, 0.1 * kLr * kSteps, 1e-3 * kLr * kSteps);
  }
}

// In bf16 the fused op rounds the running softmax weights e^(s - m) to bf16 before P V where the
// unfused one rounds the normalised probabilities, so single roundings differ by a bf16 ulp
// (2^-8 relative), a few of which add up in a gradient: the loss to 1e-4 relative and the
// gradients to 1.5e-2 of each tensor's largest (measured 8e-6 and 8.3e-3; a backward that
// dropped D from dS moved the gradients by 2.1e-2, which the bf16 layout test's 5e-2 let pass).
TEST(CoreFlashAttention, MatchesTheUnfusedRunInBf16WithinTheStorageRounding) {
  const std::string model = "--model " + LongSequenceModel() + " --micro-batches 1 --precision bf16";
  const CoreRun fa0 = RunCore(1, model);
  ASSERT_EQ(fa0.process.exit_code, 0) << fa0.process.err;
  const CoreRun fa1 = RunCore(1, model + " --flash-attention");
  ASSERT_EQ(fa1.process.exit_code, 0) << fa1.process.err;
  ExpectLossesMatch(fa0, fa1, 1e-4);
  for (const auto& [name, a] : fa0.gradients) {
    const std::vector<double>& b = fa1.gradients.at(name);
    double g_max = 0, d_max = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      g_max = std::max(g_max, std::abs(a[i]));
      d_max = std::max(d_max, std::abs(a[i] - b[i]));
    }
    EXPECT_LE(d_max, 1.5e-2 * g_max) << name;
  }
}

// The T x T probabilities are gone from the activations: fa1 holds, per block and micro-batch,
// B NH T log-sum-exps (fp32) where fa0 holds B NH T^2 probabilities (fp32 here), so its peak is
// lower by exactly layers B NH T (T - 1) 4 bytes; selective recomputation, with nothing left to
// recompute, holds what no recomputation does.
TEST(CoreFlashAttention, KeepsNoScoreMatrices) {
  auto activations = [](const std::string& args) {
    const CoreRun run = RunCore(1, "--model " + LongSequenceModel() + " --micro-batches 1 " + args, false);
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
    return run.result["memory"]["peak_by_category"]["activations"].get<double>();
  };
  const double layers = 4, B = 8, NH = 4, T = 130;
  const double fa1 = activations("--flash-attention");
  EXPECT_EQ(activations("") - fa1, layers * B * NH * T * (T - 1) * 4);
  EXPECT_EQ(activations("--flash-attention --recompute selective"), fa1);
}

// ---- Gradients against finite differences (fp64 build).

TEST(CoreGradients, MatchFiniteDifferencesInFp64) {
  TempDir dir;
  const CliRun run =
      RunCommand(std::string(TUNEPAR_CORE_FP64) + " --model tiny --steps 1 --warmup 0 -q --threads 1 " +
                 "--gradient-check 6 -o " + (dir / "r.json"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json r = nlohmann::json::parse(ReadFile(dir / "r.json"));
  EXPECT_EQ(r["versions"]["arithmetic"], "fp64");
  EXPECT_GE(r["gradient_check"]["points"].get<int>(), 6 * 40);  // every tensor of 4 blocks
  EXPECT_LT(r["gradient_check"]["max_rel_error"].get<double>(), 1e-5) << r["gradient_check"].dump();
}

// The Llama-style model's ops against finite differences: RMSNorm, SwiGLU, rotary positions and
// grouped-query attention (a K/V head's gradient summed over its query heads), unfused and fused
// (the dK/dV pass over a group's query heads), on a 2-layer model with 4 query heads in 2 groups,
// 70 tokens (two flash tiles, the second partial).
TEST(CoreGradients, LlamaStyleModelMatchesFiniteDifferencesInFp64) {
  TempDir dir;
  testing::WriteFile(dir / "llama-70.toml",
                     "name = \"llama-70\"\nlayers = 2\nhidden = 32\nheads = 4\nkv_heads = 2\nseq_len = 70\n"
                     "vocab = 64\nglobal_batch = 2\nmlp = \"swiglu\"\nffn_hidden = 48\npositions = \"rotary\"\n"
                     "norm = \"rmsnorm\"\ntied_embeddings = false\nlinear_biases = false\n");
  for (const std::string fa : {"", " --flash-attention"}) {
    const CliRun run = RunCommand(std::string(TUNEPAR_CORE_FP64) + " --model " + (dir / "llama-70.toml") + fa +
                                  " --steps 1 --warmup 0 -q --threads 1 --gradient-check 6 -o " + (dir / "r.json"));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const nlohmann::json r = nlohmann::json::parse(ReadFile(dir / "r.json"));
    // wte, 2 x (ln1.w, qkv.w, attproj.w, ln2.w, fc.w, fcproj.w), lnf.w, lm_head: no biases, no wpe.
    EXPECT_GE(r["gradient_check"]["points"].get<int>(), 6 * 15) << fa;
    EXPECT_LT(r["gradient_check"]["max_rel_error"].get<double>(), 1e-5) << fa << r["gradient_check"].dump();
  }
}

// The fused attention's backward (recomputed probabilities, D = dO . O) against finite
// differences, on two sequences of 70 tokens (two tiles, the second partial) through a smaller
// model than tiny (the fp64 check of tiny-130 took six minutes).
TEST(CoreGradients, FusedAttentionMatchesFiniteDifferencesInFp64) {
  TempDir dir;
  testing::WriteFile(dir / "small-70.toml",
                     "name = \"small-70\"\nlayers = 2\nhidden = 32\nheads = 2\nseq_len = 70\nvocab = 64\n"
                     "global_batch = 2\n");
  const CliRun run = RunCommand(std::string(TUNEPAR_CORE_FP64) + " --model " + (dir / "small-70.toml") +
                                " --flash-attention --steps 1 --warmup 0 -q --threads 1 --gradient-check 6 -o " +
                                (dir / "r.json"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json r = nlohmann::json::parse(ReadFile(dir / "r.json"));
  EXPECT_EQ(r["layout"], "tp1-pp1-dp1-mbs2-nmb1-fp32-zero0-rcnone-sp0-vpp1-fa1");
  EXPECT_GE(r["gradient_check"]["points"].get<int>(), 6 * 20);  // every tensor of 2 blocks
  EXPECT_LT(r["gradient_check"]["max_rel_error"].get<double>(), 1e-5) << r["gradient_check"].dump();
}

// ---- Training makes progress.

TEST(CoreTraining, LowersTheLossOnTheSmallModel) {
  TempDir dir;
  const CliRun run = RunCommand(std::string(TUNEPAR_CORE) +
                                " --model small --steps 150 --warmup 0 -q --lr 2e-3 --threads 1 " +
                                "--micro-batches 1 -o " + (dir / "r.json"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json r = nlohmann::json::parse(ReadFile(dir / "r.json"));
  const std::vector<double> loss = r["loss"];
  const double floor = r["loss_floor"];
  EXPECT_NEAR(loss.front(), std::log(1024.0), 0.1);  // uniform predictions at initialisation
  // Mean of the last 10 steps: well below the start, on the way to the data's entropy rate.
  double tail = 0;
  for (size_t i = loss.size() - 10; i < loss.size(); ++i) tail += loss[i] / 10;
  EXPECT_LT(tail, floor + 0.5 * (loss.front() - floor)) << "start " << loss.front() << " floor " << floor;
  EXPECT_GT(tail, floor - 0.05);
}

// ---- Memory cap and failure modes.

TEST(CoreMemory, ActivationsBeyondTheCapEndAsOom) {
  // Weights, gradients and AdamW states of tiny take 3.5 MB and the backward workspace 1 MB;
  // 8 sequences in one micro-batch need 5.2 MB of activations: a 7 MB cap fits the first, not
  // the second.
  const CoreRun run = RunCore(1, "--model tiny --micro-batches 1 --memory-cap 7MB", false);
  EXPECT_EQ(run.process.exit_code, 3) << run.process.err;
  ASSERT_EQ(run.result["status"], "oom") << run.process.err;
  EXPECT_EQ(run.result["memory"]["category"], "activations");
  const nlohmann::json& peak = run.result["memory"]["peak_by_category"];
  EXPECT_GT(peak["activations"].get<double>(), peak["weights"].get<double>());
  EXPECT_GT(peak["activations"].get<double>(), peak["optimizer"].get<double>());
  EXPECT_LE(run.result["memory"]["peak_bytes"].get<double>(), 7e6);
  EXPECT_NE(run.process.err.find("out of memory"), std::string::npos);

  // The same job fits with full recomputation and 4 micro-batches (4.3 MB).
  const CoreRun fits = RunCore(1, "--model tiny --micro-batches 4 --recompute full --memory-cap 7MB", false);
  EXPECT_EQ(fits.process.exit_code, 0) << fits.process.err;
  EXPECT_LE(fits.result["memory"]["peak_bytes"].get<double>(), 7e6);
}

TEST(CoreMemory, OptimizerStatesBeyondTheCapEndAsOomAtStart) {
  // small: 13.8 MB of weights, 13.8 MB of gradients, then 2 x 13.8 MB of AdamW moments.
  const CoreRun run = RunCore(1, "--model small --memory-cap 40MB", false);
  EXPECT_EQ(run.process.exit_code, 3) << run.process.err;
  ASSERT_EQ(run.result["status"], "oom");
  EXPECT_EQ(run.result["memory"]["category"], "optimizer");
}

TEST(CoreMemory, PipelineStagesHoldOnlyTheMicroBatchesInFlight) {
  // 1F1B: stage s of p holds at most p - s micro-batches' activations, however many the step
  // has (GPipe would hold all of them); a larger micro-batch holds proportionally more.
  auto activations = [](const std::string& args) {
    const CoreRun run = RunCore(2, "--model tiny --pp 2 " + args, false);
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
    return run.result["memory"]["peak_by_category"]["activations"].get<double>();
  };
  const double two = activations("--micro-batch 1 --micro-batches 2");
  EXPECT_EQ(activations("--micro-batch 1 --micro-batches 4"), two);
  EXPECT_EQ(activations("--micro-batch 1 --micro-batches 8"), two);
  EXPECT_GT(activations("--micro-batch 2 --micro-batches 2"), 1.5 * two);
}

// Sequence parallelism keeps 1/tp of what the norms and the residual stream hold: per block ln1,
// res2 and ln2 (3 C values a row) and the norms' statistics (mean and rstd, 4 a row), the stage's
// L + 1 stream buffers (C a row) and the final norm's output and statistics (C + 2): at tp 2 the
// activations shrink by exactly half of those rows (fp32, one micro-batch of N = 8 x 32 rows),
// and nothing else changes.
TEST(CoreMemory, SequenceParallelHoldsTheStreamsRowsOncePerTpGroup) {
  auto activations = [](const std::string& args) {
    const CoreRun run = RunCore(2, "--model tiny --tp 2 --micro-batches 1 " + args, false);
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
    return run.result["memory"]["peak_by_category"]["activations"].get<double>();
  };
  const double N = 8 * 32, C = 64, L = 4;
  const double rows_saved = N / 2;
  const double bytes_per_row = 4 * (L * (3 * C + 4) + (L + 1) * C + (C + 2));
  EXPECT_EQ(activations("") - activations("--sequence-parallel"), rows_saved * bytes_per_row);
}

// Context parallelism: each rank holds T / cp tokens of every sequence, so everything the
// activations count (the blocks' saved values, the stream, the log-sum-exps, the logits) is
// exactly half at cp 2; the ring's K/V blocks and dK/dV buffers are comm buffers. The measured
// peak falls (the long-sequence model, one micro-batch of 4 x 200 tokens).
TEST(CoreMemory, ContextParallelHoldsHalfTheActivationsAtCp2) {
  auto memory = [](int cp) {
    const CoreRun run = RunCore(cp, "--model " + LongSequenceModel(false) +
                                        " --flash-attention --micro-batches 1 --cp " + std::to_string(cp), false);
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
    return run.result["memory"];
  };
  const nlohmann::json one = memory(1), two = memory(2);
  EXPECT_EQ(two["peak_by_category"]["activations"].get<double>(),
            one["peak_by_category"]["activations"].get<double>() / 2);
  EXPECT_LT(two["peak_bytes"].get<double>(), one["peak_bytes"].get<double>());
  EXPECT_GT(two["peak_by_category"]["comm_buffers"].get<double>(), one["peak_by_category"]["comm_buffers"].get<double>());
}

// What the buffers hold on the device against what is counted: in fp32 the same; with 16-bit
// storage the weights, every saved activation, the residual stream and every activation gradient
// are real 16-bit numbers, so a bf16 run holds less than the fp32 run. It still holds more than it
// counts, by no more than the TP partial sums (comm buffers on one rank), which are fp32 counted
// at 2 bytes (any activation or activation gradient held in reals again breaks that bound: with
// fp32 activation gradients the excess was 17 times the comm buffers).
TEST(CoreMemory, SixteenBitStorageHoldsLessThanFp32) {
  auto memory = [](const std::string& precision) {
    const CoreRun run = RunCore(1, "--model tiny --micro-batches 1 --precision " + precision, false);
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
    return run.result["memory"];
  };
  const nlohmann::json fp32 = memory("fp32"), bf16 = memory("bf16");
  EXPECT_EQ(fp32["held_peak_bytes"], fp32["peak_bytes"]);
  EXPECT_LT(bf16["held_peak_bytes"].get<double>(), fp32["held_peak_bytes"].get<double>());
  const double held_wider = bf16["held_peak_bytes"].get<double>() - bf16["peak_bytes"].get<double>();
  const nlohmann::json& counted = bf16["peak_by_category"];
  EXPECT_GT(held_wider, 0);
  EXPECT_LE(held_wider, counted["comm_buffers"].get<double>());
}

// ---- ZeRO's memory: what each stage shards, counted to the byte.
// tiny on dp 2 (one shard group of S = 2), fp32, two micro-batches of 2: P parameters, a block's
// 12 C^2 + 13 C of them, all even, so no unit needs padding.
struct ZeroBytes {
  double weights, gathered, gradients, optimizer, comm, peak;
};

ZeroBytes CountedBytes(const std::string& layout_key, const std::string& model = "tiny") {
  const CoreRun run = RunCore(2, "--model " + model + " --layout " + layout_key, false);
  EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
  const nlohmann::json& m = run.result["memory"];
  const nlohmann::json& c = m["peak_by_category"];
  return {c["weights"], c["gathered_weights"], c["gradients"], c["optimizer"], c["comm_buffers"], m["peak_bytes"]};
}

std::string TinyDp2Key(int zero) {
  return "tp1-pp1-dp2-mbs2-nmb2-fp32-zero" + std::to_string(zero) + "-rcnone-sp0-vpp1-fa0";
}

// Stage 1 shards the AdamW moments (8 bytes a parameter), 2 also the fp32 gradients, 3 also the
// weights, which it gathers one unit (a block: the largest) at a time with the next prefetched.
// ZeRO-1 keeps its reduce-scatter's output shard beside the whole gradients.
TEST(CoreMemory, ZeroStagesShardWhatTheFormulasSay) {
  const double C = 64, L = 4, V = 256, T = 32, S = 2;
  const double block = 12 * C * C + 13 * C, P = L * block + V * C + T * C + 2 * C;
  ZeroBytes z[4];
  for (int zero = 0; zero <= 3; ++zero) z[zero] = CountedBytes(TinyDp2Key(zero));
  EXPECT_EQ(z[0].weights, 4 * P);
  EXPECT_EQ(z[0].gradients, 4 * P);
  EXPECT_EQ(z[0].optimizer, 8 * P);
  EXPECT_EQ(z[1].weights, 4 * P);
  EXPECT_EQ(z[1].gradients, 4 * P + 4 * P / S);
  EXPECT_EQ(z[1].optimizer, 8 * P / S);
  EXPECT_EQ(z[2].weights, 4 * P);
  EXPECT_EQ(z[2].gradients, 4 * P / S);  // the shard only: no whole gradient buffer across the step
  EXPECT_EQ(z[2].optimizer, 8 * P / S);
  EXPECT_EQ(z[3].weights, 4 * P / S);
  EXPECT_EQ(z[3].gathered, 2 * 4 * block);  // the unit computing and the one prefetched
  EXPECT_EQ(z[3].gradients, 4 * P / S);
  EXPECT_EQ(z[3].optimizer, 8 * P / S);
  for (int zero = 0; zero <= 2; ++zero) EXPECT_EQ(z[zero].gathered, 0) << zero;
  // ZeRO-2/3 make one unit's whole gradients at a time and reduce-scatter them into a shard-sized
  // buffer: at most a block's 4 block (1 + 1 / S) bytes more comm buffers than ZeRO-1.
  for (int zero = 2; zero <= 3; ++zero) {
    EXPECT_GT(z[zero].comm, z[1].comm) << zero;
    EXPECT_LE(z[zero].comm - z[1].comm, 4 * block * (1 + 1 / S)) << zero;
  }
  // The whole peak: ZeRO-3 holds (S - 1) / S of the weights and the whole gradients (and ZeRO-1's
  // gradient shard) less, two gathered units and the unit gradients' comm buffers more. The
  // categories' peaks need not fall at the same moment: the comm buffers' difference is the slack.
  const double fewer = 4 * P * (S - 1) / S + 4 * P + 4 * P / S - 4 * P / S - z[3].gathered;
  const double saved = z[1].peak - z[3].peak;
  EXPECT_LE(saved, fewer) << "zero1 " << z[1].peak << " zero3 " << z[3].peak;
  EXPECT_GE(saved, fewer - (z[3].comm - z[1].comm)) << "zero1 " << z[1].peak << " zero3 " << z[3].peak;
}

// The performance model's memory terms (runner/performance_model.cc Memory) against the core's
// counted bytes, ZeRO 0-3 on the same layouts. Known, stated differences: the model counts one
// replicated bias per GPT layer (5h) where the core, as Megatron, keeps two (6h; the model keeps
// the missing h for exactness with earlier predictions: StageParams); and the core's ZeRO-1 keeps
// its reduce-scatter output shard (P / S fp32 values) beside the whole gradients, which the model
// does not count. Without biases (tiny-llama) the model and the core agree to the byte.
TEST(CoreMemory, ModelStatesAgreeWithThePerformanceModel) {
  for (const std::string model : {"tiny", "tiny-llama"}) {
    const ModelShape shape = testing::PresetModel(model);
    const Result<runner::PerformanceModel> pm =
        runner::PerformanceModel::Create(shape, testing::PresetHardware("local-cpu"));
    ASSERT_TRUE(pm.ok()) << pm.status().message();
    const double S = 2, h = shape.hidden, L = shape.layers;
    const double missing = shape.linear_biases ? L * h : 0;  // the model's second bias per layer
    const double missing_per_unit = shape.linear_biases ? h : 0;
    for (int zero = 0; zero <= 3; ++zero) {
      SCOPED_TRACE(model + " zero" + std::to_string(zero));
      const Result<Layout> layout = ParseLayoutKey(TinyDp2Key(zero));
      ASSERT_TRUE(layout.ok());
      const runner::MemoryBreakdown predicted = pm->Predict(*layout).memory;
      const ZeroBytes counted = CountedBytes(TinyDp2Key(zero), model);
      const double weight_shards = zero >= 3 ? S : 1, gradient_shards = zero >= 2 ? S : 1;
      EXPECT_EQ(counted.weights, predicted.weights + 4 * missing / weight_shards);
      EXPECT_EQ(counted.gathered, predicted.gathered_weights + (zero == 3 ? 2 * 4 * missing_per_unit : 0));
      const double zero1_shard = zero == 1 ? predicted.gradients / S + 4 * missing / S : 0;
      EXPECT_EQ(counted.gradients, predicted.gradients + 4 * missing / gradient_shards + zero1_shard);
      EXPECT_EQ(counted.optimizer, predicted.optimizer_states + 8 * missing / (zero >= 1 ? S : 1));
    }
  }
}

// ZeRO-3 with a vocabulary larger than a block (as in real models): the embedding's unit is the
// largest, and the core gathers it with a block. The model's gathered_weights (layer + max(layer,
// V h / t)) leaves out what the core's embedding unit holds beside wte: the learned positions
// (T h), and with the tied head on one stage the final norm (2 h); plus the model's missing bias.
TEST(CoreMemory, TheGatheredEmbeddingUnitHoldsThePositionsAndTheFinalNorm) {
  TempDir dir;
  const std::string toml = dir / "tiny-v4096.toml";
  testing::WriteFile(toml, "name = \"tiny-v4096\"\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\n"
                           "vocab = 4096\nglobal_batch = 8\n");
  const Result<ModelShape> shape = ParseModelShape(testing::ReadFile(toml), toml, "tiny-v4096");
  ASSERT_TRUE(shape.ok()) << shape.status().message();
  const Result<runner::PerformanceModel> pm =
      runner::PerformanceModel::Create(*shape, testing::PresetHardware("local-cpu"));
  ASSERT_TRUE(pm.ok()) << pm.status().message();
  const Result<Layout> layout = ParseLayoutKey(TinyDp2Key(3));
  ASSERT_TRUE(layout.ok());
  const double predicted = pm->Predict(*layout).memory.gathered_weights;
  const double C = 64, T = 32, V = 4096, block = 12 * C * C + 13 * C;
  const ZeroBytes counted = CountedBytes(TinyDp2Key(3), toml);
  EXPECT_EQ(counted.gathered, 4 * (V * C + T * C + 2 * C + block));
  EXPECT_EQ(counted.gathered - predicted, 4 * (T * C + 2 * C + C)) << "model " << predicted;
}

// The cap applies to what ZeRO-3 allocates as it runs: tiny on dp 2 peaks at 4.6 MB with
// ZeRO-1 and 3.8 MB with ZeRO-3, so a 4.2 MB cap ends the first as oom and fits the second; at
// 3.5 MB ZeRO-3 runs out too, past its start (its gathered units and unit gradients count).
TEST(CoreMemory, ZeroThreeFitsACapZeroOneDoesNot) {
  auto run = [](int zero, const std::string& cap) {
    return RunCore(2, "--model tiny --layout " + TinyDp2Key(zero) + " --memory-cap " + cap, false);
  };
  const CoreRun one = run(1, "4.2MB"), three = run(3, "4.2MB"), tight = run(3, "3.5MB");
  EXPECT_EQ(one.process.exit_code, 3) << one.process.err;
  EXPECT_EQ(one.result["status"], "oom");
  EXPECT_EQ(three.process.exit_code, 0) << three.process.err;
  EXPECT_LE(three.result["memory"]["peak_bytes"].get<double>(), 4.2e6);
  EXPECT_EQ(tight.process.exit_code, 3) << tight.process.err;
  EXPECT_EQ(tight.result["status"], "oom");
  EXPECT_GT(tight.result["memory"]["peak_by_category"]["gathered_weights"].get<double>(), 0);
}

// Hybrid sharding shards over the shard group, not over dp: dp 4 as 2 replicas of 2 holds what
// dp 2 holds, and ZeRO-3 over all 4 ranks half of its weight shard.
TEST(CoreMemory, HybridShardingShardsOverTheShardGroup) {
  auto counted = [](const std::string& layout) {
    const CoreRun run = RunCore(4, "--model tiny --layout " + layout, false);
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
    return run.result["memory"]["peak_by_category"];
  };
  const nlohmann::json hybrid = counted("tp1-pp1-dp4-mbs1-nmb2-fp32-zero3-rcnone-sp0-vpp1-fa0-dpr2");
  const nlohmann::json full = counted("tp1-pp1-dp4-mbs1-nmb2-fp32-zero3-rcnone-sp0-vpp1-fa0");
  const ZeroBytes dp2 = CountedBytes(TinyDp2Key(3));
  EXPECT_EQ(hybrid["weights"].get<double>(), dp2.weights);
  EXPECT_EQ(hybrid["optimizer"].get<double>(), dp2.optimizer);
  EXPECT_EQ(hybrid["gradients"].get<double>(), dp2.gradients);
  EXPECT_EQ(full["weights"].get<double>(), dp2.weights / 2);
  EXPECT_EQ(full["gathered_weights"].get<double>(), dp2.gathered);
}

TEST(CoreFaults, CrashHangAndOomAreWhatTheySay) {
  const CoreRun crash = RunCore(2, "--model tiny --dp 2 --fault crash --fault-rank 1", false);
  EXPECT_NE(crash.process.exit_code, 0);
  EXPECT_NE(crash.process.err.find("injected fault 'crash'"), std::string::npos) << crash.process.err;
  EXPECT_TRUE(crash.result.is_null());  // no result: a crash is not a measurement

  TempDir dir;
  const CliRun hang =
      RunCommand("timeout -s KILL 8 " + MpiRun(2) + " " + TUNEPAR_CORE +
                 " --model tiny --dp 2 --threads 1 --fault hang --fault-rank 1 -o " + (dir / "r.json"));
  EXPECT_EQ(hang.exit_code, 137);  // killed by the timeout, as a runner would
  EXPECT_NE(hang.err.find("injected fault 'hang'"), std::string::npos) << hang.err;

  const CoreRun oom = RunCore(2, "--model tiny --dp 2 --fault oom --fault-rank 1", false);
  EXPECT_EQ(oom.process.exit_code, 3) << oom.process.err;
  EXPECT_EQ(oom.result["status"], "oom");
  EXPECT_EQ(oom.result["memory"]["rank"], 1);
}

TEST(CoreInput, BadInputIsOneLineAndExitTwo) {
  for (const std::string args : {"--model tiny --tp 3", "--model nope", "--model tiny --precision fp8",
                                 "--model tiny --layout tp1-pp1-dp1-mbs8-nmb1-fp32-zero0-rcnone-sp1-vpp1-fa0",
                                 "--model tiny --sequence-parallel",
                                 "--model tiny --memory-cap lots",
                                 "--model tiny --zero 4",
                                 "--model tiny --zero -1",
                                 "--model tiny --dp-replicate 0",
                                 "--model tiny --dp-replicate 2 --zero 1",  // dp 1: no shard group of 2
                                 "--model tiny --layout tp1-pp1-dp1-mbs8-nmb1-fp32-zero1-rcnone-sp0-vpp1-fa0-dpr2",
                                 "--model tiny --layout tp1-pp1-dp1-mbs8-nmb1-fp32-zero5-rcnone-sp0-vpp1-fa0",
                                 // The first/last-stage rule has no split of one stage.
                                 "--model tiny --uneven-stages",
                                 "--model tiny --layout tp1-pp1-dp1-mbs8-nmb1-fp32-zero0-rcnone-sp0-vpp1-fa0-uneven1"}) {
    const CoreRun run = RunCore(1, args, false);
    EXPECT_EQ(run.process.exit_code, 2) << args << ": " << run.process.err;
    EXPECT_EQ(std::count(run.process.err.begin(), run.process.err.end(), '\n'), 1) << run.process.err;
    EXPECT_EQ(run.process.err.rfind("tunepar-core: ", 0), 0u) << run.process.err;
  }
  // Hybrid sharding's rules on two ranks: replicas need ZeRO, and a shard group of two or more
  // (mpirun adds its own lines after the core's one).
  for (const std::string args : {"--model tiny --dp 2 --dp-replicate 2 --zero 1", "--model tiny --dp 2 --dp-replicate 2"}) {
    const CoreRun run = RunCore(2, args, false);
    EXPECT_EQ(run.process.exit_code, 2) << args << ": " << run.process.err;
    const std::string first = run.process.err.substr(0, run.process.err.find('\n'));
    EXPECT_EQ(first.rfind("tunepar-core: --dp-replicate 2", 0), 0u) << run.process.err;
    EXPECT_EQ(run.process.err.find("tunepar-core:", 1), std::string::npos) << run.process.err;  // rank 0 alone
  }
  // Context parallelism runs ring attention on the fused kernel, and its sequence must cut into
  // 2 cp chunks of whole tokens (tiny: 32 tokens, not 6 chunks).
  for (const auto& [ranks, args] : std::vector<std::pair<int, std::string>>{
           {2, "--model tiny --cp 2"}, {3, "--model tiny --cp 3 --flash-attention"}}) {
    const CoreRun run = RunCore(ranks, args, false);
    EXPECT_EQ(run.process.exit_code, 2) << args << ": " << run.process.err;
    const std::string first = run.process.err.substr(0, run.process.err.find('\n'));
    EXPECT_EQ(first.rfind("tunepar-core: context parallelism", 0), 0u) << run.process.err;
    EXPECT_EQ(run.process.err.find("tunepar-core:", 1), std::string::npos) << run.process.err;  // rank 0 alone
  }
}

// The first stage's activations follow its own layer count: under 1F1B it holds pp = 2
// micro-batches in flight, each with a block's saved activations per layer it holds, so one more
// layer there (uneven 5 + 2 against even 4 + 3) adds what one more layer adds to the even split
// (4 + 3 against tiny-6's 3 + 3), to the byte (the first stage holds the most activations here).
TEST(CoreMemory, TheFirstStagesActivationsFollowItsOwnLayerCount) {
  const auto activations = [](const std::string& model, const std::string& args) {
    const CoreRun run = RunCore(2, "--model " + ModelArgument(model) + " --pp 2 --micro-batches 4 " + args, false);
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
    return run.result["memory"]["peak_by_category"]["activations"].get<double>();
  };
  const double uneven = activations("tiny-7", "--uneven-stages"), even = activations("tiny-7", "");
  const double fewer = activations("tiny-6", "");
  EXPECT_GT(uneven, even);
  EXPECT_EQ(uneven - even, even - fewer);
}

// A layout key with uneven1 runs the rule's split, as --uneven-stages does; without it, the even
// split of the same 7 layers.
TEST(CoreUnevenStages, ALayoutKeyCarriesThem) {
  const std::string model = "--model " + ModelArgument("tiny-7") + " --layout ";
  const CoreRun uneven = RunCore(2, model + "tp1-pp2-dp1-mbs2-nmb4-fp32-zero0-rcnone-sp0-vpp1-fa0-uneven1", false);
  ASSERT_EQ(uneven.process.exit_code, 0) << uneven.process.err;
  EXPECT_EQ(uneven.result["stage_layers"], nlohmann::json::array({5, 2}));
  EXPECT_NE(uneven.result["layout"].get<std::string>().find("uneven1"), std::string::npos) << uneven.result["layout"];
  const CoreRun even = RunCore(2, model + "tp1-pp2-dp1-mbs2-nmb4-fp32-zero0-rcnone-sp0-vpp1-fa0", false);
  ASSERT_EQ(even.process.exit_code, 0) << even.process.err;
  EXPECT_EQ(even.result["stage_layers"], nlohmann::json::array({4, 3}));
}

TEST(CoreResult, ReportsPhasesPlacementAndVersions) {
  const CoreRun run = RunCore(4, "--model tiny --tp 2 --pp 2 --micro-batches 4", false);
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  const nlohmann::json& r = run.result;
  EXPECT_GT(r["step_time_s"].get<double>(), 0);
  EXPECT_NEAR(r["tokens_per_s"].get<double>(), 8 * 32 / r["step_time_s"].get<double>(), 1e-6);
  for (const char* phase : {"compute", "tp_comm", "pp_wait", "dp_comm", "optimizer"}) {
    EXPECT_GE(r["phases"][phase]["max"].get<double>(), r["phases"][phase]["mean"].get<double>()) << phase;
  }
  EXPECT_GT(r["phases"]["tp_comm"]["max"].get<double>(), 0);
  EXPECT_GT(r["phases"]["pp_wait"]["max"].get<double>(), 0);
  EXPECT_EQ(r["phases"]["dp_comm"]["max"].get<double>(), 0);
  ASSERT_EQ(r["placement"].size(), 4u);
  for (int rank = 0; rank < 4; ++rank) {
    const nlohmann::json& p = r["placement"][rank];
    EXPECT_EQ(p["rank"], rank);
    EXPECT_EQ(p["tp_rank"], rank % 2);
    EXPECT_EQ(p["pp_rank"], rank / 2);
    EXPECT_EQ(p["device"], "cpu");
    EXPECT_FALSE(p["cpus"].get<std::string>().empty());
  }
  EXPECT_FALSE(r["versions"]["mpi"].get<std::string>().empty());
  EXPECT_EQ(r["layout"], "tp2-pp2-dp1-mbs2-nmb4-fp32-zero0-rcnone-sp0-vpp1-fa0");
}

// Sleeping waits (for more ranks than cores) run the same training as MPI's spinning ones: the
// non-blocking collectives and receives behind them compute the same sums.
TEST(CoreWaiting, SleepAndSpinTrainTheSame) {
  const std::string layout = "--model tiny --tp 2 --pp 2 --dp 2 --zero 1 --micro-batches 2";
  const CoreRun spin = RunCore(8, layout + " --wait spin", false);
  const CoreRun sleep = RunCore(8, layout + " --wait sleep", false);
  ASSERT_EQ(spin.process.exit_code, 0) << spin.process.err;
  ASSERT_EQ(sleep.process.exit_code, 0) << sleep.process.err;
  EXPECT_EQ(spin.result["mpi_wait"], "spin");
  EXPECT_EQ(sleep.result["mpi_wait"], "sleep");
  const std::vector<double> a = spin.result["loss"].get<std::vector<double>>();
  const std::vector<double> b = sleep.result["loss"].get<std::vector<double>>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * std::abs(a[i])) << "step " << i;
  EXPECT_EQ(RunCore(1, "--model tiny --wait nap", false).process.exit_code, 2);
}

// ---- --comm, --smoke and device failures (issue 18: collectives on GPUs).

TEST(CoreComm, TheCpuBuildRefusesNcclAndMpiDirectInOneLine) {
  for (const std::string comm : {"nccl", "mpi-direct", "gloo"}) {
    const CoreRun run = RunCore(1, "--model tiny --comm " + comm, false);
    EXPECT_EQ(run.process.exit_code, 2) << comm << ": " << run.process.err;
    EXPECT_EQ(std::count(run.process.err.begin(), run.process.err.end(), '\n'), 1) << run.process.err;
    EXPECT_EQ(run.process.err.rfind("tunepar-core: --comm " + comm + ": ", 0), 0u) << run.process.err;
  }
  EXPECT_EQ(RunCore(1, "--model tiny", false).result["comm"], "mpi");  // the CPU build's default
}

TEST(CoreComm, SmokeChecksOneAllReduceAndPrintsALinePerNode) {
  for (const std::string comm : {"mpi", "mpi-staged"}) {
    const CliRun run = RunCommand(MpiRun(3) + " " + TUNEPAR_CORE + " --smoke --comm " + comm);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const std::string ok = "tunepar-core: smoke ok: 3 ranks, comm " + comm + ", node ";
    EXPECT_EQ(run.out.rfind(ok, 0), 0u) << run.out;
    const std::string devices = ": cpu, cpu, cpu\n";
    ASSERT_GE(run.out.size(), devices.size()) << run.out;
    EXPECT_EQ(run.out.substr(run.out.size() - devices.size()), devices) << run.out;
    EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1) << run.out;  // one node
  }
}

// The comm layer's nccl paths on CPU ranks, through tunepar-core-nccl-over-mpi (NCCL's semantics
// moved by MPI: in-place collectives, the pipeline's sends issued with the next receive as one
// group, the bucket sum on the communication stream, ZeRO's in-place all-gather): every layout
// reproduces the single-rank run, and the smoke test passes over three ranks.
TEST(CoreComm, NcclPathsReproduceTheSingleRankRunOnCpuRanks) {
  const CoreRun& ref = Reference();
  ASSERT_EQ(ref.process.exit_code, 0) << ref.process.err;
  const std::vector<LayoutCase> layouts = {{2, 2, 2, 1, 4, "none", "nccl"},
                                           {2, 2, 2, 0, 2, "full", "nccl"},
                                           {1, 4, 1, 0, 4, "selective", "nccl"},
                                           {2, 1, 2, 0, 1, "none", "nccl"},
                                           {2, 2, 1, 0, 2, "none", "nccl", "tiny", true},
                                           // ZeRO-3's prefetched gathers on the communication stream
                                           {1, 2, 2, 3, 2, "full", "nccl"},
                                           {1, 1, 4, 2, 2, "none", "nccl", "tiny", false, 2}};
  for (const LayoutCase& c : layouts) {
    SCOPED_TRACE(Name(c));
    const CoreRun run = RunCore(c.tp * c.pp * c.dp, LayoutFlags(c), true, TUNEPAR_CORE_NCCL_OVER_MPI);
    ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
    EXPECT_EQ(run.result["comm"], "nccl");
    ExpectLossesMatch(ref, run, 1e-5);
    ExpectGradientsMatch(ref.gradients, run.gradients, 1e-5);
    ExpectWeightsMatch(ref.weights, run.weights, 1e-5, 0.1 * kLr * kSteps, 1e-3 * kLr * kSteps);
  }
  const CliRun smoke = RunCommand(MpiRun(3) + " " + TUNEPAR_CORE_NCCL_OVER_MPI + " --smoke --comm nccl");
  EXPECT_EQ(smoke.exit_code, 0) << smoke.err;
  EXPECT_EQ(smoke.out.rfind("tunepar-core: smoke ok: 3 ranks, comm nccl, node ", 0), 0u) << smoke.out;
}

// Context parallelism's ring over nccl on CPU ranks (tunepar-core-nccl-over-mpi): each step's
// transfers queued and issued as one group at the step's first wait, in order of tag (NCCL has
// none), the dK/dV of the last block sent with the next block's K/V. cp 2 and 4, several tiles a
// rank, GQA with tp 2, recomputation: every run reproduces the single-rank one.
TEST(CoreComm, TheRingOverNcclReproducesTheSingleRankRunOnCpuRanks) {
  for (LayoutCase c : std::vector<LayoutCase>{{1, 1, 1, 0, 2, "none", "nccl", LongSequenceModel(false)},
                                              {2, 1, 1, 0, 2, "full", "nccl", LongSequenceModel(true)},
                                              {1, 1, 1, 0, 1, "none", "nccl", "tiny-llama"}}) {
    c.cp = c.model == "tiny-llama" ? 4 : 2;
    SCOPED_TRACE(Name(c));
    const CoreRun& ref = Reference("fp32", c.model);
    ASSERT_EQ(ref.process.exit_code, 0) << ref.process.err;
    const CoreRun run = RunCore(c.Ranks(), LayoutFlags(c), true, TUNEPAR_CORE_NCCL_OVER_MPI);
    ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
    EXPECT_EQ(run.result["comm"], "nccl");
    ExpectLossesMatch(ref, run, 1e-5);
    ExpectGradientsMatch(ref.gradients, run.gradients, 1e-5);
    ExpectWeightsMatch(ref.weights, run.weights, 1e-5, 0.1 * kLr * kSteps, 1e-3 * kLr * kSteps);
  }
}

// A failing device call (here injected) on one rank ends every rank: status crash, one line.
TEST(CoreComm, ADeviceErrorEndsTheTrialAsACrash) {
  const CoreRun run = RunCore(2, "--model tiny --dp 2 --comm mpi-staged --fault device --fault-rank 1", false);
  EXPECT_EQ(run.process.exit_code, 7) << run.process.err;
  EXPECT_EQ(run.result["status"], "crash");
  EXPECT_EQ(run.result["error"], "rank 1: injected device fault");
  EXPECT_NE(run.process.err.find("tunepar-core: rank 1: injected device fault\n"), std::string::npos)
      << run.process.err;
}

#ifdef TUNEPAR_CORE_CUDA
// Without a GPU (this machine) the CUDA build says so and exits 4; where a GPU is present its
// smoke test must pass through NCCL instead.
TEST(CoreCuda, ReportsNoDeviceOrPassesTheSmokeTest) {
  const CliRun smoke = RunCommand(std::string(TUNEPAR_CORE_CUDA) + " --smoke");
  if (smoke.exit_code != 4) {
    EXPECT_EQ(smoke.exit_code, 0) << smoke.err;
    EXPECT_EQ(smoke.out.rfind("tunepar-core: smoke ok: 1 ranks, comm nccl, node ", 0), 0u) << smoke.out;
    return;
  }
  EXPECT_EQ(smoke.err, "tunepar-core: no cuda device visible to this process\n");
  EXPECT_TRUE(smoke.out.empty()) << smoke.out;
  const CoreRun run = RunCore(1, "--model tiny", false, TUNEPAR_CORE_CUDA);
  EXPECT_EQ(run.process.exit_code, 4) << run.process.err;
  EXPECT_EQ(run.result["status"], "no_device");
  EXPECT_EQ(run.result["comm"], "nccl");
  EXPECT_NE(run.process.err.find("no cuda device"), std::string::npos) << run.process.err;
}

TEST(CoreCuda, RefusesHostMpiOnDeviceMemoryAndAnMpiThatIsNotCudaAware) {
  const CoreRun host = RunCore(1, "--model tiny --comm mpi", false, TUNEPAR_CORE_CUDA);
  EXPECT_EQ(host.process.exit_code, 2) << host.process.err;
  EXPECT_EQ(host.process.err.rfind("tunepar-core: --comm mpi: ", 0), 0u) << host.process.err;
  const CoreRun direct = RunCore(1, "--model tiny --comm mpi-direct", false, TUNEPAR_CORE_CUDA);
  if (direct.process.exit_code == 2) {  // the Open MPI here is not CUDA-aware
    EXPECT_NE(direct.process.err.find("is not CUDA-aware (use mpi-staged)"), std::string::npos) << direct.process.err;
    EXPECT_EQ(std::count(direct.process.err.begin(), direct.process.err.end(), '\n'), 1) << direct.process.err;
  }
}
#endif

#ifdef TUNEPAR_CORE_HIP
TEST(CoreHip, WithoutADeviceSaysSoCleanly) {
  const CoreRun run = RunCore(1, "--model tiny", false, TUNEPAR_CORE_HIP);
  EXPECT_EQ(run.process.exit_code, 4) << run.process.err;
  EXPECT_EQ(run.result["status"], "no_device");
  EXPECT_NE(run.process.err.find("no hip device"), std::string::npos) << run.process.err;
}
#endif

}  // namespace
}  // namespace tunepar
