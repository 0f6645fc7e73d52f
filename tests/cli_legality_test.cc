// A user's own config files and one notion of a legal layout, as a new user meets them: a model,
// hardware or space file without a `name` key is named after the file; `predict` refuses what
// `space` and `search` call illegal, naming the constraint, and says so when an option it was
// given cannot apply.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"

namespace tunepar {
namespace {

using testing::RunTunepar;
using testing::TempDir;

void ExpectOneLineError(const testing::CliRun& run, int exit_code, const std::string& fragment) {
  EXPECT_EQ(run.exit_code, exit_code) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.err.rfind("tunepar: error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find(fragment), std::string::npos) << run.err;
}

// The preset's text without its `name = "..."` line.
std::string WithoutName(const std::string& kind, const std::string& preset) {
  std::string text = testing::PresetText(kind, preset);
  const size_t at = text.find("\nname = ");
  text.erase(at + 1, text.find('\n', at + 1) - at);
  return text;
}

TEST(CliOwnConfigs, AFileWithoutANameKeyIsNamedAfterTheFile) {
  TempDir dir;
  testing::WriteFile(dir / "my-llm.toml", WithoutName("models", "tiny"));
  testing::WriteFile(dir / "my-box.toml", WithoutName("hardware", "local-cpu"));
  testing::WriteFile(dir / "narrow.toml", WithoutName("spaces", "default"));
  const std::string files = " --model " + (dir / "my-llm.toml") + " --hardware " + (dir / "my-box.toml") +
                            " --space " + (dir / "narrow.toml");
  const testing::CliRun predict = RunTunepar("--json predict --world 2 --tp 1 --pp 1 --mbs 1" + files);
  ASSERT_EQ(predict.exit_code, 0) << predict.err;
  const nlohmann::json j = nlohmann::json::parse(predict.out);
  EXPECT_EQ(j["model"], "my-llm");
  EXPECT_EQ(j["hardware"], "my-box");

  const testing::CliRun search = RunTunepar("--store " + (dir / "store") + " search --world 2" + files);
  ASSERT_EQ(search.exit_code, 0) << search.err;
  EXPECT_NE(search.out.find("my-llm-w2-"), std::string::npos) << search.out;
  const testing::CliRun show = RunTunepar("--store " + (dir / "store") + " show");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("narrow"), std::string::npos) << show.out;

  // A name that is there must say something.
  testing::WriteFile(dir / "empty.toml", "name = \"\"\n" + WithoutName("models", "tiny"));
  ExpectOneLineError(RunTunepar("predict --world 2 --model " + (dir / "empty.toml")), kExitConfig,
                     "key 'name': must not be empty");
}

// A model file that breaks a shape rule (base/model_shape.cc, BrokenShapeRule; one case per rule
// in config_test.cc) stops every command with exit 3, naming the file, the key and the rule.
TEST(CliOwnConfigs, ABrokenShapeExitsThreeNamingTheKeyAndTheRule) {
  TempDir dir;
  std::string text = WithoutName("models", "tiny");
  text.insert(text.find("\nlayers"), "\nmlp = \"relu\"");
  testing::WriteFile(dir / "relu.toml", text);
  ExpectOneLineError(RunTunepar("predict --world 2 --model " + (dir / "relu.toml")), kExitConfig,
                     "relu.toml:");
  ExpectOneLineError(RunTunepar("predict --world 2 --model " + (dir / "relu.toml")), kExitConfig,
                     "key 'mlp': unknown mlp 'relu' (expected gelu or swiglu)");
  text = WithoutName("models", "tiny");
  text.insert(text.find("\nlayers"), "\nkv_heads = 3");
  testing::WriteFile(dir / "gqa.toml", text);
  ExpectOneLineError(RunTunepar("space --world 2 --model " + (dir / "gqa.toml")), kExitConfig,
                     "key 'kv_heads': must divide heads");
}

TEST(CliPredict, RefusesWhatTheSpaceCallsIllegalAndNamesTheConstraint) {
  const std::string gpt = "predict --world 1024 --model gpt-175b ";
  ExpectOneLineError(RunTunepar(gpt + "--tp 16 --pp 8"), kExitUsage, "tp_within_node");
  ExpectOneLineError(RunTunepar(gpt + "--tp 1 --pp 16 --seq-parallel"), kExitUsage, "seq_parallel_needs_tp");
  ExpectOneLineError(RunTunepar(gpt + "--tp 4 --pp 16 --precision fp32 --flash"), kExitUsage, "flash_needs_16bit");
  ExpectOneLineError(RunTunepar(gpt + "--tp 4 --pp 16 --vpp 2 --layout tp4-pp16-dp16-mbs1-nmb96"), kExitUsage,
                     "--layout");
  ExpectOneLineError(RunTunepar("predict --world 1 --model tiny --hardware local-cpu --zero 1"), kExitUsage,
                     "zero_needs_dp");
  ExpectOneLineError(RunTunepar(gpt + "--tp 4 --pp 16 --gbs 0"), kExitUsage, "--gbs must be a positive");
  // A value the space does not list: refused, with the way to admit it.
  const testing::CliRun outside = RunTunepar(gpt + "--tp 4 --pp 16 --mbs 32");
  ExpectOneLineError(outside, kExitUsage, "micro_batch 32 is not among its values");
  EXPECT_NE(outside.err.find("--fix"), std::string::npos) << outside.err;
  EXPECT_EQ(RunTunepar(gpt + "--tp 4 --pp 16 --mbs 32 --fix micro_batch=32").exit_code, 0);
  // A space that allows tensor parallelism across nodes admits tp 16.
  TempDir dir;
  std::string cross = testing::PresetText("spaces", "default");
  cross.replace(cross.find("tp_cross_node = false"), 21, "tp_cross_node = true");
  testing::WriteFile(dir / "cross.toml", cross);
  const testing::CliRun across = RunTunepar(gpt + "--tp 16 --pp 8 --space " + (dir / "cross.toml"));
  EXPECT_EQ(across.exit_code, 0) << across.err;
}

// A command config's [[rules]] (and a space file's) are one counted constraint: a --fix that only
// their combination excludes empties the space (exit 4), naming the rule and its why; predict
// refuses such a layout (exit 2); `space` counts it.
TEST(CliRules, ACombinationARuleExcludesIsRefusedWithItsWhy) {
  TempDir dir;
  const std::string config = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/megatron-deepspeed.toml";
  const std::string why = "zero 2 or 3 needs pp 1 (DeepSpeed's pipeline engine refuses ZeRO-2 and 3 with pipeline "
                          "parallelism)";
  const testing::CliRun search =
      RunTunepar("--store " + (dir / "s") + " search --world 32 --hardware lumi-g --model gpt-22b --backend command "
                 "--command-config " + config + " --fix zero=3 --fix pp=2 --budget 1");
  ExpectOneLineError(search, kExitNoLegalLayout, "program runs the combination");
  EXPECT_NE(search.err.find(why), std::string::npos) << search.err;
  EXPECT_TRUE(search.out.empty()) << search.out;

  const std::string rules =
      "[[rules]]\nwhen = { zero = [2, 3] }\nthen = { pp = [1] }\nwhy = \"DeepSpeed's pipeline engine refuses ZeRO-2 "
      "and 3 with pipeline parallelism\"\n";
  testing::WriteFile(dir / "ruled.toml", testing::PresetText("spaces", "default") + rules);
  const std::string gpt = "--world 1024 --model gpt-175b --space " + (dir / "ruled.toml");
  ExpectOneLineError(RunTunepar("predict " + gpt + " --tp 4 --pp 16 --zero 3"), kExitUsage,
                     "program_runs_combination): " + why);
  EXPECT_EQ(RunTunepar("predict " + gpt + " --tp 4 --pp 1 --zero 3").exit_code, 0);
  const testing::CliRun space = RunTunepar("--json space " + gpt);
  ASSERT_EQ(space.exit_code, 0) << space.err;
  const nlohmann::json j = nlohmann::json::parse(space.out);
  int64_t counted = -1;
  for (const nlohmann::json& c : j["excluded"])
    if (c["constraint"] == "program_runs_combination") counted = c["excluded"].get<int64_t>();
  EXPECT_GT(counted, 0) << space.out;
}

// Every layout predict accepts is one that `space` lists, and the reverse, on a small problem.
// fp8 is the default space's where the hardware has an FP8 peak (dgx-h100), and asked for on
// hardware without one (MI250X, A100) it is refused with the rule named.
TEST(CliFp8, AskedForOnHardwareWithoutAnFp8PeakExitsTwoNamingTheRule) {
  const std::string llama = "predict --world 64 --model llama3-8b --tp 2 --pp 1 --flash ";
  ExpectOneLineError(RunTunepar(llama + "--hardware frontier-mi250x --precision fp8"), kExitUsage, "fp8_needs_peak");
  ExpectOneLineError(RunTunepar(llama + "--hardware dgx-a100 --precision fp8"), kExitUsage, "fp8_needs_peak");
  const testing::CliRun h100 = RunTunepar(llama + "--hardware dgx-h100 --precision fp8");
  ASSERT_EQ(h100.exit_code, 0) << h100.err;
  EXPECT_NE(h100.out.find("fp8 dense peak of 1979"), std::string::npos) << h100.out;
  TempDir dir;
  const std::string store = "--store " + (dir / "store");
  const testing::CliRun refused =
      RunTunepar(store + " search --world 64 --model llama3-8b --hardware dgx-a100 --fix precision=fp8");
  ExpectOneLineError(refused, kExitUsage, "FP8 peak");
  const testing::CliRun searched =
      RunTunepar(store + " --json search --world 64 --model llama3-8b --hardware dgx-h100 --fix precision=fp8");
  ASSERT_EQ(searched.exit_code, 0) << searched.err;
  EXPECT_NE(searched.out.find("-fp8-"), std::string::npos) << searched.out.substr(0, 600);
}

// Issue 35's two cases as a user types them: a 70-layer GPT on 8 stages with --fix
// uneven_stages=on says how its layers were split; Llama 3 8B at 131072 tokens on 64 H100s
// gets context-parallel layouts from a dry run in the default space (which offers cp 1-16 for
// that sequence: 8192 tokens a rank or more), whose breakdown names the K/V exchange.
TEST(CliLongSequences, UnevenStagesSayTheSplitAndTheDryRunProposesContextParallelism) {
  TempDir dir;
  testing::WriteFile(dir / "gpt-70l.toml",
                     "name = \"gpt-70l\"\nlayers = 70\nhidden = 8192\nheads = 64\nseq_len = 2048\n"
                     "vocab = 51200\nglobal_batch = 1024\n");
  const std::string gpt = "predict --world 512 --hardware lumi-g --tp 8 --pp 8 --flash --model " + (dir / "gpt-70l.toml");
  ExpectOneLineError(RunTunepar(gpt), kExitUsage, "pp_divides_layers");
  const testing::CliRun uneven = RunTunepar(gpt + " --fix uneven_stages=on");
  ASSERT_EQ(uneven.exit_code, 0) << uneven.err;
  EXPECT_NE(uneven.out.find("layers per stage 8 + 6 x 9 + 8"), std::string::npos) << uneven.out;
  EXPECT_NE(uneven.out.find("--decoder-first-pipeline-num-layers 8"), std::string::npos) << uneven.out;

  std::string llama = testing::PresetText("models", "llama3-8b");
  llama.replace(llama.find("seq_len = 8192"), 14, "seq_len = 131072");
  llama.replace(llama.find("global_batch = 1024"), 19, "global_batch = 64");
  testing::WriteFile(dir / "llama-128k.toml", llama);
  const testing::CliRun dry = RunTunepar("--store " + (dir / "store") + " search --world 64 --hardware dgx-h100 --model " +
                                         (dir / "llama-128k.toml"));
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  // The best layout's step names the K/V exchange, and the best layouts split the sequence.
  EXPECT_NE(dry.out.find("context-parallel K/V exchange (ring, exposed)"), std::string::npos) << dry.out;
  const testing::CliRun best = RunTunepar("--store " + (dir / "store") + " --json search --world 64 --hardware dgx-h100 --model " +
                                          (dir / "llama-128k.toml"));
  ASSERT_EQ(best.exit_code, 0) << best.err;
  const nlohmann::json j = nlohmann::json::parse(best.out);
  ASSERT_FALSE(j["best"].empty());
  for (const nlohmann::json& trial : j["best"]) EXPECT_GT(trial["cp"].get<int>(), 1) << trial["layout"];
  EXPECT_GT(j["best"][0]["details"]["breakdown"]["cp_comm_s"].get<double>(), 0.0);
}

// Issue 36's case as a user types it: a dry run of Mixtral 8x7B on 256 LUMI-G GCDs in the default
// space proposes expert-parallel layouts and names the all-to-all and expert terms; ep on a dense
// model and an inconsistent MoE file are one line each, naming what is wrong.
TEST(CliMixturesOfExperts, MixtralDryRunProposesExpertParallelism) {
  TempDir dir;
  const std::string dry = "--store " + (dir / "store") + " search --world 256 --hardware lumi-g --model mixtral-8x7b";
  const testing::CliRun text = RunTunepar(dry);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("mixtral-8x7b (46.7B parameters, 12.9B active)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("MoE token all-to-alls (dispatch and combine)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("MoE experts (router, top-2 of 8 experts f 14336)"), std::string::npos) << text.out;
  const testing::CliRun json = RunTunepar("--json " + dry);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  ASSERT_FALSE(j["best"].empty());
  EXPECT_GT(j["best"][0]["ep"].get<int>(), 1) << j["best"][0]["layout"];
  EXPECT_GT(j["best"][0]["details"]["breakdown"]["moe_all_to_all_s"].get<double>(), 0.0);
  EXPECT_GT(j["best"][0]["details"]["compute_terms"]["expert_compute_s"].get<double>(), 0.0);

  ExpectOneLineError(RunTunepar("--store " + (dir / "store") +
                                " search --world 64 --hardware lumi-g --model llama3-8b --fix ep=2"),
                     kExitNoLegalLayout, "expert parallelism (ep > 1) needs a model with experts");
  ExpectOneLineError(RunTunepar("predict --world 64 --hardware lumi-g --model llama3-8b --tp 2 --mbs 1 --fix ep=2"),
                     kExitUsage, "(ep_needs_experts)");
  std::string bad = testing::PresetText("models", "mixtral-8x7b");
  bad.replace(bad.find("top_k = 2"), 9, "top_k = 9");
  testing::WriteFile(dir / "bad-moe.toml", bad);
  ExpectOneLineError(RunTunepar("predict --world 64 --hardware lumi-g --tp 1 --mbs 1 --model " + (dir / "bad-moe.toml")),
                     kExitConfig, "key 'top_k': at most experts (top 9 of 8 experts)");
}

TEST(CliPredict, AcceptsExactlyTheLayoutsTheSpaceLists) {
  const testing::CliRun space = RunTunepar("--json space --world 8 --model tiny --hardware local-cpu --list");
  ASSERT_EQ(space.exit_code, 0) << space.err;
  const nlohmann::json listed = nlohmann::json::parse(space.out);
  ASSERT_TRUE(listed.contains("layouts")) << space.out.substr(0, 400);
  ASSERT_GT(listed["layouts"].size(), 10u);
  int checked = 0;
  for (const nlohmann::json& l : listed["layouts"]) {
    if (++checked > 12) break;
    const std::string key = l.is_string() ? l.get<std::string>() : l["layout"].get<std::string>();
    const testing::CliRun p = RunTunepar("--json predict --world 8 --model tiny --hardware local-cpu --layout " + key);
    EXPECT_EQ(p.exit_code, 0) << key << ": " << p.err;
  }
  // Twins of legal layouts that the constraints exclude are refused.
  ExpectOneLineError(RunTunepar("predict --world 8 --model tiny --hardware local-cpu --tp 2 --pp 4 --zero 1"), kExitUsage,
                     "zero_needs_dp");
  ExpectOneLineError(RunTunepar("predict --world 8 --model tiny --hardware local-cpu --vpp 2"), kExitUsage,
                     "interleave_needs_pp");
}

}  // namespace
}  // namespace tunepar
