// The tunepar binary as a user runs it: output, exit codes, and a store left intact by errors.
#include <filesystem>
#include <set>

#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"

namespace tunepar {
namespace {

using testing::RunTunepar;
using testing::TempDir;

int CountLines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// One line on stderr, "tunepar: error: ...", mentioning `fragment`.
void ExpectOneLineError(const testing::CliRun& run, int exit_code, const std::string& fragment) {
  EXPECT_EQ(run.exit_code, exit_code) << run.err;
  EXPECT_EQ(CountLines(run.err), 1) << run.err;
  EXPECT_EQ(run.err.rfind("tunepar: error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find(fragment), std::string::npos) << run.err;
}

// (114,300 legal layouts since issue 34 added ZeRO 2-3 and hybrid sharding to the default space.)
TEST(Cli, SearchRanksLayoutsAndASecondRunReadsThemBack) {
  TempDir dir;
  const std::string store = "--store " + (dir / "store");
  testing::CliRun first = RunTunepar(store + " search --world 3072");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("Best 10 layouts by predicted throughput"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("legal layouts 114,300"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("(new)"), std::string::npos);

  testing::CliRun second = RunTunepar(store + " --json search --world 3072");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  nlohmann::json j = nlohmann::json::parse(second.out);
  EXPECT_TRUE(j["resumed"].get<bool>());
  EXPECT_EQ(j["evaluated_now"].get<int>(), 0);
  EXPECT_EQ(j["trial_count"].get<int>(), 114300);
  const std::string study = j["study"];
  ASSERT_EQ(j["best"].size(), 10u);
  // Ranked best first.
  for (size_t i = 1; i < j["best"].size(); ++i) {
    EXPECT_GE(j["best"][i - 1]["tokens_per_s"].get<double>(), j["best"][i]["tokens_per_s"].get<double>());
  }

  testing::CliRun list = RunTunepar(store + " list");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find(study), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("114,300"), std::string::npos) << list.out;

  testing::CliRun show = RunTunepar(store + " show " + study + " --limit 3");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("Best 3 of"), std::string::npos) << show.out;

  testing::CliRun csv = RunTunepar(store + " export " + study + " --csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(CountLines(csv.out), 114300 + 1);
  EXPECT_EQ(csv.out.rfind("study,node_id,number,layout,tp,pp,dp", 0), 0u);

  testing::CliRun json = RunTunepar(store + " export " + study + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  nlohmann::json exported = nlohmann::json::parse(json.out);
  EXPECT_EQ(exported["trials"].size(), 114300u);
  EXPECT_EQ(exported["trial_count"].get<int>(), 114300);
  EXPECT_NE(exported["model_toml"].get<std::string>().find("gpt-1t"), std::string::npos);
}

// Issue 33's done-when: the dry run of a Llama-style model names its terms from the shape (it
// runs in well under a second; tests do not assert timings).
TEST(Cli, LlamaDryRunNamesGqaAndSwiglu) {
  TempDir dir;
  testing::CliRun run =
      RunTunepar("--store " + (dir / "store") + " search --world 1024 --model llama3-70b --hardware lumi-g");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("shape: GQA 64/8, SwiGLU f 28672, rotary, RMSNorm, untied, no biases"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("Best 10 layouts by predicted throughput"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Q/K/V projections (GQA: 64 query heads, 8 KV groups; K and V 1/8 of Q)"),
            std::string::npos) << run.out;
  EXPECT_NE(run.out.find("MLP (SwiGLU: 3 matrices, f 28672)"), std::string::npos) << run.out;
}

TEST(Cli, BadInputGivesOneLineAndAKnownExitCodeAndLeavesTheStoreAlone) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  const std::string store = "--store " + store_dir;
  ASSERT_EQ(RunTunepar(store + " search --world 64 --model gpt-22b").exit_code, 0);
  const auto before = testing::SnapshotFiles(store_dir);

  ExpectOneLineError(RunTunepar(store + " search --world 0"), kExitUsage,
                     "--world must be a positive number");
  ExpectOneLineError(RunTunepar(store + " search --world -8"), kExitUsage, "got -8");
  ExpectOneLineError(RunTunepar(store + " search --world 12"), kExitUsage, "whole nodes");
  ExpectOneLineError(RunTunepar(store + " search --world 7"), kExitNoLegalLayout,
                     "micro_batch * dp divides the global batch");
  ExpectOneLineError(RunTunepar(store + " search --world 64 --model gpt-2t"), kExitConfig,
                     "unknown model preset 'gpt-2t'");
  ExpectOneLineError(RunTunepar(store + " search --world 64 --hardware nope"), kExitConfig,
                     "unknown hardware preset");
  testing::WriteFile(dir / "broken.toml", "name = \"broken\"\nlayers = [\n");
  ExpectOneLineError(RunTunepar(store + " search --world 64 --model " + (dir / "broken.toml")), kExitConfig,
                     "broken.toml:");
  testing::WriteFile(
      dir / "bad-heads.toml",
      "name = \"bad\"\nlayers = 4\nhidden = 100\nheads = 3\nseq_len = 8\nvocab = 16\nglobal_batch = 8\n");
  ExpectOneLineError(RunTunepar(store + " search --world 64 --model " + (dir / "bad-heads.toml")),
                     kExitConfig, "heads");
  ExpectOneLineError(RunTunepar(store + " show no-such-study"), kExitNotFound, "no-such-study");
  ExpectOneLineError(RunTunepar(store + " search --world 64 --backend magic"), kExitUsage, "magic");
  ExpectOneLineError(RunTunepar(store + " export x --csv"), kExitNotFound, "no study 'x'");
  ExpectOneLineError(RunTunepar(store + " export x"), kExitUsage, "--csv or --json");
  EXPECT_EQ(testing::SnapshotFiles(store_dir), before);

  testing::WriteFile(dir / "a-file", "x");
  ExpectOneLineError(RunTunepar("--store " + (dir / "a-file") + " search --world 64 --model gpt-22b"),
                     kExitStore, "a-file");
}

// Another node's shard from a newer tunepar is named and skipped like damage (exit 9, 0 with
// --allow-damaged) and blocks no one; only that node's own search stops (exit 6). Nothing changes.
TEST(Cli, ShardFromANewerTuneparIsSkippedByOthersAndRefusedByItsNode) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  const std::string store = "--store " + store_dir;
  ASSERT_EQ(RunTunepar(store + " search --world 64 --model gpt-22b --node-id n0").exit_code, 0);
  const std::string shard = testing::NodeShard(store_dir, "n0");
  ASSERT_FALSE(shard.empty());
  ASSERT_EQ(std::system(("sqlite3 " + shard + " 'PRAGMA user_version = 99'").c_str()), 0);
  const auto before = testing::SnapshotFiles(store_dir);
  testing::CliRun list = RunTunepar(store + " list");
  EXPECT_EQ(list.exit_code, kExitDamaged) << list.err;
  EXPECT_NE(list.err.find(shard + ": written by a newer tunepar"), std::string::npos) << list.err;
  EXPECT_EQ(RunTunepar(store + " list --allow-damaged").exit_code, 0);
  ExpectOneLineError(RunTunepar(store + " search --world 64 --model gpt-22b --node-id n0"), kExitSchemaTooNew, shard);
  EXPECT_EQ(testing::SnapshotFiles(store_dir), before);
  // Another node searches on: the newer file is named once, and left as it was.
  testing::CliRun other = RunTunepar(store + " search --world 64 --model gpt-22b --node-id n1");
  EXPECT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(other.err.find(shard), std::string::npos) << other.err;
  for (const auto& [path, content] : before) {
    if (path == shard) {
      EXPECT_EQ(testing::ReadFile(shard), content);
    }
  }
}

// A damaged shard is named on stderr and skipped; the readers exit 9 so that a script notices the
// partial result, and 0 with --allow-damaged. A reader of one study reads that study's files:
// another study's damaged file is named, but the answer is whole.
TEST(Cli, DamagedShardIsNamedAndSkippedAndTheReadersExitNonZero) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  const std::string store = "--store " + store_dir;
  ASSERT_EQ(RunTunepar(store + " search --world 64 --model gpt-22b --node-id good").exit_code, 0);
  ASSERT_EQ(RunTunepar(store + " search --world 128 --model gpt-22b --node-id bad").exit_code, 0);
  ASSERT_EQ(RunTunepar(store + " search --world 64 --model gpt-22b --node-id late").exit_code, 0);
  const std::string bad = testing::NodeShard(store_dir, "bad");
  ASSERT_FALSE(bad.empty());
  std::filesystem::resize_file(bad, std::filesystem::file_size(bad) / 3);
  testing::CliRun list = RunTunepar(store + " list");
  EXPECT_EQ(list.exit_code, kExitDamaged) << list.err;
  EXPECT_NE(list.err.find(bad + ": truncated: file is "), std::string::npos) << list.err;
  EXPECT_NE(list.err.find("--allow-damaged"), std::string::npos) << list.err;
  EXPECT_NE(list.out.find("gpt-22b-w64"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("gpt-22b-w128"), std::string::npos) << list.out;

  testing::CliRun allowed = RunTunepar(store + " --json list --allow-damaged");
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_NE(allowed.err.find(bad), std::string::npos) << allowed.err;
  const std::string good_study = nlohmann::json::parse(allowed.out)[0]["study"].get<std::string>();
  const std::vector<std::string> readers = {"show " + good_study, "export " + good_study + " --csv",
                                            "report " + good_study};
  for (const std::string& reader : readers) {  // the damaged file is another study's
    testing::CliRun run = RunTunepar(store + " " + reader);
    EXPECT_EQ(run.exit_code, 0) << reader << "\n" << run.err;
    EXPECT_NE(run.err.find(bad), std::string::npos) << reader << "\n" << run.err;
  }
  // A study that only the damaged shard held.
  testing::CliRun missing = RunTunepar(store + " show " + good_study.substr(0, good_study.find("-w64")) + "-w128");
  EXPECT_EQ(missing.exit_code, kExitDamaged) << missing.err;
  EXPECT_NE(missing.err.find("may hold it"), std::string::npos) << missing.err;

  // A damaged file of the study itself: its readers say so and exit 9.
  const std::string late = testing::NodeShard(store_dir, "late");
  ASSERT_FALSE(late.empty());
  std::filesystem::resize_file(late, std::filesystem::file_size(late) / 2);
  for (const std::string& reader : readers) {
    testing::CliRun run = RunTunepar(store + " " + reader);
    EXPECT_EQ(run.exit_code, kExitDamaged) << reader << "\n" << run.err;
    EXPECT_NE(run.err.find(late), std::string::npos) << reader << "\n" << run.err;
    EXPECT_FALSE(run.out.empty()) << reader;  // what could be read is still printed
    EXPECT_EQ(RunTunepar(store + " " + reader + " --allow-damaged").exit_code, 0) << reader;
  }
}

// One changed byte in a value passes SQLite's checks; the row checksum names the trial.
TEST(Cli, OneChangedByteInAPublishedShardIsNamed) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  const std::string store = "--store " + store_dir;
  ASSERT_EQ(RunTunepar(store + " search --world 64 --model gpt-22b --node-id n0").exit_code, 0);
  const std::string shard = testing::NodeShard(store_dir, "n0");
  ASSERT_FALSE(shard.empty());
  std::string bytes = testing::ReadFile(shard);
  // A digit of a predicted OOM's memory in its message (only the trials table has it).
  const std::string message = "predicted not to fit: ";
  const size_t at = bytes.find(message);
  ASSERT_NE(at, std::string::npos);
  char& digit = bytes[at + message.size()];
  digit = digit == '1' ? '2' : '1';
  testing::WriteFile(shard, bytes);
  testing::CliRun list = RunTunepar(store + " list");
  EXPECT_EQ(list.exit_code, kExitDamaged) << list.err;
  EXPECT_NE(list.err.find(shard + ": bad checksum in trial "), std::string::npos) << list.err;
}

TEST(Cli, TwoNodesSearchIntoOneStoreAtTheSameTime) {
  TempDir dir;
  const std::string store = "--store " + (dir / "store");
  const std::string bin = TUNEPAR_BINARY;
  const std::string cmd = bin + " " + store +
                          " search --world 256 --model gpt-22b --node-id a >/dev/null & " + bin + " " +
                          store + " search --world 256 --model gpt-22b --node-id b >/dev/null & wait";
  ASSERT_EQ(std::system(("bash -c '" + cmd + "'").c_str()), 0);
  testing::CliRun list = RunTunepar(store + " --json list");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  nlohmann::json j = nlohmann::json::parse(list.out);
  ASSERT_EQ(j.size(), 1u);
  // Both nodes recorded their trials (each evaluated the whole space it found unfinished).
  EXPECT_GE(j[0]["trial_count"].get<int>(), 1);
  testing::CliRun show = RunTunepar(store + " --json show " + j[0]["study"].get<std::string>() + " --all");
  nlohmann::json rows = nlohmann::json::parse(show.out)["trials"];
  std::set<std::string> nodes;
  for (const auto& r : rows) nodes.insert(r["node_id"].get<std::string>());
  EXPECT_EQ(nodes, (std::set<std::string>{"a", "b"}));
}

// Every subcommand `tunepar --help` lists (read from it, so a new one is covered the day it is
// added) answers --help with its usage and its own options.
TEST(Cli, EverySubcommandHasHelp) {
  const testing::CliRun top = RunTunepar("--help");
  ASSERT_EQ(top.exit_code, 0);
  const size_t listed = top.out.find("Subcommands:");
  ASSERT_NE(listed, std::string::npos) << top.out;
  std::vector<std::string> subcommands;
  std::istringstream lines(top.out.substr(listed));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line) && line.rfind("  ", 0) == 0) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    subcommands.push_back(name);
  }
  EXPECT_GE(subcommands.size(), 10u) << top.out;
  for (const std::string& cmd : subcommands) {
    const testing::CliRun run = RunTunepar(cmd + " --help");
    EXPECT_EQ(run.exit_code, 0) << cmd;
    EXPECT_NE(run.out.find("Usage: tunepar " + cmd), std::string::npos) << cmd << ": " << run.out;
    EXPECT_NE(run.out.find("-h,--help"), std::string::npos) << cmd << ": " << run.out;
    EXPECT_TRUE(run.err.empty()) << cmd << ": " << run.err;
  }
}

TEST(Cli, SpaceCountsAndExplains) {
  testing::CliRun run = RunTunepar("space --world 3072");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("legal 114,300"), std::string::npos) << run.out;
  for (const char* c : {"tp_within_node", "pp_divides_layers", "batch_divisible", "interleave_micro_batches",
                        "seq_parallel_needs_tp", "tp_fits_kv_heads", "seq_parallel_splits_sequence",
                        "dp_replicate_needs_zero", "dp_replicate_divides_dp", "dp_replicate_leaves_shards"}) {
    EXPECT_NE(run.out.find(c), std::string::npos) << c;
  }
  testing::CliRun list = RunTunepar("space --world 64 --model gpt-22b --space megatron --list");
  ASSERT_EQ(list.exit_code, 0);
  testing::CliRun json = RunTunepar("--json space --world 64 --model gpt-22b --space megatron");
  EXPECT_EQ(CountLines(list.out), nlohmann::json::parse(json.out)["legal"].get<int>());
}

TEST(Cli, ConfigsListsEveryPreset) {
  testing::CliRun run = RunTunepar("configs");
  ASSERT_EQ(run.exit_code, 0);
  for (const char* name : {"gpt-1.3b", "gpt-22b", "gpt-175b", "gpt-1t", "tiny", "small", "frontier-mi250x",
                           "lumi-g", "dgx-a100", "dgx-h100", "local-cpu", "default"}) {
    EXPECT_NE(run.out.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

// show and export, like report and launch-script, default to the store's only study, and list
// the studies when one must be named.
TEST(CliSearch, ShowAndExportDefaultToTheOnlyStudyAndListTheCandidates) {
  TempDir dir;
  const std::string store = "--store " + (dir / "store");
  ASSERT_EQ(RunTunepar(store + " search --world 64 --model gpt-22b --node-id n0").exit_code, 0);
  const testing::CliRun show = RunTunepar(store + " show");
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("Study gpt-22b-w64-"), std::string::npos) << show.out;
  EXPECT_EQ(RunTunepar(store + " export --csv").exit_code, 0);
  ASSERT_EQ(RunTunepar(store + " search --world 128 --model gpt-22b --node-id n0").exit_code, 0);
  for (const char* reader : {" show", " export --csv"}) {
    const testing::CliRun two = RunTunepar(store + reader);
    EXPECT_EQ(two.exit_code, kExitUsage) << reader;
    // Both were created within one second: the order among them is not part of the contract.
    EXPECT_NE(two.err.find("has 2 studies; name one: gpt-22b-w"), std::string::npos) << two.err;
    EXPECT_NE(two.err.find("gpt-22b-w64-"), std::string::npos) << two.err;
    EXPECT_NE(two.err.find("gpt-22b-w128-"), std::string::npos) << two.err;
  }
}

// A dry run stores each prediction without its breakdown; show and export make it again from
// the study's model, the same numbers that predict gives.
TEST(CliSearch, ADryRunStoresPredictionsCompactlyAndShowsTheirBreakdown) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  const std::string store = "--store " + store_dir;
  ASSERT_EQ(RunTunepar(store + " search --world 64 --model gpt-22b --node-id n0").exit_code, 0);
  const std::string shard = testing::NodeShard(store_dir, "n0");
  const testing::CliRun stored =
      testing::RunCommand("sqlite3 " + shard + " \"SELECT COUNT(*), SUM(details = '{}') FROM trials\"");
  const std::string counts = stored.out.substr(0, stored.out.find('\n'));
  ASSERT_EQ(counts.substr(0, counts.find('|')), counts.substr(counts.find('|') + 1)) << stored.out;
  EXPECT_NE(counts, "0|0");
  const std::string study = testing::OnlyStudy(store_dir);
  for (const std::string& reader : {"show " + study + " --limit 1", "export " + study + " --json"}) {
    const testing::CliRun run = RunTunepar(store + " --json " + reader);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const nlohmann::json best = nlohmann::json::parse(run.out)["trials"][0];
    ASSERT_TRUE(best["details"].contains("breakdown")) << reader << ": " << best["details"].dump();
    double parts = 0;
    for (auto& [k, v] : best["details"]["breakdown"].items()) parts += v.get<double>();
    EXPECT_NEAR(parts, best["predicted_step_time_s"].get<double>(), 1e-6 * parts) << reader;
    const testing::CliRun predict =
        RunTunepar("--json predict --world 64 --model gpt-22b --layout " + best["layout"].get<std::string>());
    EXPECT_EQ(nlohmann::json::parse(predict.out)["breakdown"], best["details"]["breakdown"]) << reader;
  }
}

TEST(CliPredict, PrintsTheBreakdownAndJson) {
  testing::CliRun text = RunTunepar(
      "predict --world 1024 --model gpt-175b --tp 4 --pp 16 --mbs 1 --zero 1 "
      "--recompute full --flash");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const char* part : {"pipeline bubble", "tensor-parallel communication", "optimizer states", "fits"}) {
    EXPECT_NE(text.out.find(part), std::string::npos) << part;
  }
  testing::CliRun run = RunTunepar("--json predict --world 1024 --model gpt-175b --tp 4 --pp 16 --mbs 1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  for (const char* key : {"step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "memory_bytes", "fits",
                          "breakdown", "memory"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  double parts = 0;
  for (auto& [k, v] : j["breakdown"].items()) parts += v.get<double>();
  EXPECT_NEAR(parts, j["step_time_s"].get<double>(), 1e-6 * parts);
  EXPECT_EQ(j["layout"], "tp4-pp16-dp16-mbs1-nmb96-bf16-zero0-rcnone-sp0-vpp1-fa0");
  // --layout gives the same answer as the knobs.
  testing::CliRun by_key = RunTunepar(
      "--json predict --world 1024 --model gpt-175b --layout "
      "tp4-pp16-dp16-mbs1-nmb96-bf16-zero0-rcnone-sp0-vpp1-fa0");
  EXPECT_EQ(nlohmann::json::parse(by_key.out)["step_time_s"], j["step_time_s"]);
}

TEST(CliPredict, BadInput) {
  ExpectOneLineError(RunTunepar("predict --world 1024 --model gpt-175b --tp -2"), kExitUsage,
                     "--tp must be a positive");
  ExpectOneLineError(RunTunepar("predict --world 1024 --model gpt-175b --tp 3"), kExitUsage,
                     "does not divide");
  // tp 5 divides neither the node's 8 GCDs nor 96 heads: the first constraint in the space's
  // order is named, as `tunepar space` counts it.
  ExpectOneLineError(RunTunepar("predict --world 1280 --model gpt-175b --tp 5 --pp 16"), kExitUsage,
                     "(tp_within_node)");
  ExpectOneLineError(RunTunepar("predict --world 1024 --model gpt-175b --tp 4 --pp 16 --mbs 7"), kExitUsage,
                     "global batch");
  ExpectOneLineError(RunTunepar("predict --world 1024 --model gpt-175b --tp 4 --pp 16 --precision fp8"),
                     kExitUsage, "fp8");
  TempDir dir;
  std::string hw = testing::PresetText("hardware", "dgx-a100");
  const size_t at = hw.find("link_efficiency = ");
  hw.erase(at, hw.find('\n', at) - at + 1);
  testing::WriteFile(dir / "hw.toml", hw);
  ExpectOneLineError(
      RunTunepar("predict --world 1024 --model gpt-175b --tp 4 --pp 16 --hardware " + (dir / "hw.toml")),
      kExitConfig, "link_efficiency");
}

TEST(CliCalibrate, FitsWritesAndTheProfileIsUsable) {
  TempDir dir;
  const std::string csv = std::string(TUNEPAR_SOURCE_DIR) + "/bench/data/megatron_table1.csv";
  testing::CliRun run =
      RunTunepar("calibrate --from " + csv + " --hardware dgx-a100 --name my-a100 -o " + (dir / "a.toml"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("megatron-1008.0B"), std::string::npos);
  EXPECT_NE(run.out.find("mean |error|"), std::string::npos);
  const std::string written = testing::ReadFile(dir / "a.toml");
  EXPECT_NE(written.find("name = \"my-a100\""), std::string::npos);
  EXPECT_NE(written.find("[calibration]"), std::string::npos);
  EXPECT_NE(written.find("origin = \"fitted\""), std::string::npos);
  testing::CliRun predict = RunTunepar(
      "--json predict --world 3072 --model gpt-1t --tp 8 --pp 64 --mbs 1 --hardware " + (dir / "a.toml"));
  ASSERT_EQ(predict.exit_code, 0) << predict.err;
  EXPECT_EQ(nlohmann::json::parse(predict.out)["hardware"], "my-a100");

  testing::CliRun json =
      RunTunepar("--json calibrate --from " + csv + " --hardware dgx-a100 --fit gemm_efficiency");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["rows"].size(), 10u);
  EXPECT_EQ(j["fitted"], nlohmann::json::array({"gemm_efficiency"}));
  EXPECT_LT(j["max_abs_error"].get<double>(), 0.10);
}

TEST(CliCalibrate, BadInput) {
  TempDir dir;
  testing::WriteFile(dir / "bad.csv", "label,layers\nx,2\n");
  ExpectOneLineError(RunTunepar("calibrate --from " + (dir / "bad.csv") + " --hardware dgx-a100"),
                     kExitConfig, "bad.csv");
  const std::string csv = std::string(TUNEPAR_SOURCE_DIR) + "/bench/data/megatron_table1.csv";
  ExpectOneLineError(RunTunepar("calibrate --from " + csv + " --hardware dgx-a100 --fit gemm_speed"),
                     kExitUsage, "gemm_speed");
  // A study of model-backend predictions has nothing measured to fit.
  const std::string store = "--store " + (dir / "store");
  ASSERT_EQ(RunTunepar(store + " search --world 64 --model gpt-22b").exit_code, 0);
  testing::CliRun list = RunTunepar(store + " --json list");
  const std::string study = nlohmann::json::parse(list.out)[0]["study"];
  ExpectOneLineError(RunTunepar(store + " calibrate --from " + study + " --hardware frontier-mi250x"),
                     kExitUsage, "no measured");
  ExpectOneLineError(RunTunepar(store + " calibrate --from nothing-here --hardware frontier-mi250x"),
                     kExitNotFound, "nothing-here");
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

// The stand-in trainer through the command backend: `budget` trials of a tiny model on 2 ranks.
std::string FakeTrainerSearch(const std::string& store, int budget, const std::string& extra = "") {
  return "--store " + store + " search --world 2 --model tiny --hardware " + testing::kTestCpu +
         " --backend command --command '" + TUNEPAR_FAKE_TRAINER + " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision}'" +
         " --metric-regex 'step_time: ([0-9.]+)' --budget " + std::to_string(budget) + " --node-id n0 " + extra;
}

// `tunepar help [SUBCOMMAND]` prints help and exits 0; an unknown subcommand is named, with the
// closest one.
TEST(CliMessages, HelpAndUnknownSubcommands) {
  const testing::CliRun help = RunTunepar("help");
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("Subcommands:"), std::string::npos) << help.out;
  EXPECT_TRUE(help.err.empty()) << help.err;
  const testing::CliRun search_help = RunTunepar("help search");
  EXPECT_EQ(search_help.exit_code, 0) << search_help.err;
  EXPECT_NE(search_help.out.find("Usage: tunepar search"), std::string::npos) << search_help.out;
  EXPECT_NE(search_help.out.find("--world"), std::string::npos) << search_help.out;
  ExpectOneLineError(RunTunepar("serch --world 8"), kExitUsage, "unknown subcommand 'serch' (did you mean 'search'?)");
  ExpectOneLineError(RunTunepar("--store x lst"), kExitUsage, "unknown subcommand 'lst' (did you mean 'list'?)");
  ExpectOneLineError(RunTunepar("help serch"), kExitUsage, "unknown subcommand 'serch'");
  ExpectOneLineError(RunTunepar(""), kExitUsage, "a subcommand is required: one of configs, space, search");
  // A subcommand's option before the subcommand is named as such, not read as a subcommand '8'.
  ExpectOneLineError(RunTunepar("--world 8 search"), kExitUsage, "unknown option '--world' before the subcommand");
  // A global option's value is not taken for the subcommand.
  EXPECT_EQ(RunTunepar("--json --store x configs").exit_code, 0);
}

// Option errors name the option, the value and what is allowed, in one line.
TEST(CliMessages, OptionErrorsNameTheOptionAndWhatIsAllowed) {
  TempDir dir;
  const std::string store = "--store " + (dir / "store");
  const testing::CliRun limit = RunTunepar(store + " show --limit 0");
  ExpectOneLineError(limit, kExitUsage, "--limit: must be a whole number >= 1, got '0'");
  EXPECT_LT(limit.err.size(), 100u) << limit.err;  // not CLI11's 300-digit range
  ExpectOneLineError(RunTunepar(store + " search --world 64 --top 0"), kExitUsage,
                     "--top: must be a whole number >= 1, got '0'");
  ExpectOneLineError(RunTunepar(store + " report --background-size 1"), kExitUsage,
                     "--background-size: must be a whole number from 2 to 2000, got '1'");
  // The unknown option is named even though --world, which is required, is missing.
  ExpectOneLineError(RunTunepar(store + " search --wrld 8"), kExitUsage,
                     "unknown option '--wrld' for 'tunepar search' (did you mean '--world'?)");
  ExpectOneLineError(RunTunepar(store + " search --world 8 --world 16"), kExitUsage,
                     "--world is given 2 times (8, 16): give it once");
  ExpectOneLineError(RunTunepar(store + " search --world abc"), kExitUsage, "--world takes a whole number, got 'abc'");
  ExpectOneLineError(RunTunepar(store + " search --world"), kExitUsage, "--world needs a value (INT)");
  ExpectOneLineError(RunTunepar(store + " search"), kExitUsage, "'tunepar search' needs --world INT");
  ExpectOneLineError(RunTunepar(store + " search --world 64 --backend magic"), kExitUsage,
                     "--backend: 'magic' is not one of auto, model, command, local, slurm");
  ExpectOneLineError(RunTunepar(store + " search --world 64 --acquisition logie"), kExitUsage,
                     "'logie' is not one of logei, ucb (did you mean 'logei'?)");
  ExpectOneLineError(RunTunepar(store + " space --world 64 extra"), kExitUsage,
                     "unexpected argument 'extra' for 'tunepar space'");
  ExpectOneLineError(RunTunepar(store + " export --csv --json"), kExitUsage, "--csv and --json exclude each other");
  EXPECT_FALSE(std::filesystem::exists(dir / "store"));
}

// An option the chosen backend does not use is named in one warning line, not silently dropped.
TEST(CliMessages, OptionsTheBackendDoesNotUseAreWarnedAbout) {
  TempDir dir;
  const testing::CliRun model =
      RunTunepar("--store " + (dir / "a") + " search --world 64 --model gpt-22b --backend model --budget 5 --command x");
  ASSERT_EQ(model.exit_code, 0) << model.err;
  EXPECT_EQ(model.err,
            "tunepar: warning: --budget does nothing with --backend model (a dry run evaluates every legal layout)\n"
            "tunepar: warning: --command does nothing with --backend model (the performance model predicts; "
            "--backend command runs a command)\n");
  const testing::CliRun command = RunTunepar(FakeTrainerSearch(dir / "b", 1, "--steps 3"));
  ASSERT_EQ(command.exit_code, 0) << command.err;
  EXPECT_NE(command.err.find("tunepar: warning: --steps does nothing with --backend command"), std::string::npos)
      << command.err;
  EXPECT_EQ(CountLines(command.err), 1) << command.err;
  // The options a backend uses: no warning.
  const testing::CliRun used = RunTunepar("--store " + (dir / "c") + " search --world 64 --model gpt-22b --top 3");
  ASSERT_EQ(used.exit_code, 0) << used.err;
  EXPECT_TRUE(used.err.empty()) << used.err;
  const testing::CliRun script = RunTunepar("--json --store " + (dir / "a") + " launch-script -o " + (dir / "x.sh"));
  EXPECT_EQ(script.err.rfind("tunepar: warning: --json does nothing with launch-script", 0), 0u) << script.err;
  const testing::CliRun report = RunTunepar("--store " + (dir / "a") + " report --world 8");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.err.find("tunepar: warning: --world does nothing without --of-model"), std::string::npos)
      << report.err;
}

// A failing command prints nothing on stdout; --world is checked as a world; a file that cannot
// be written says why; counts agree with their nouns.
TEST(CliMessages, ErrorsSayWhyAndPrintNothingElse) {
  const testing::CliRun space = RunTunepar("space --world 7");
  ExpectOneLineError(space, kExitNoLegalLayout, "no legal layout for world 7");
  EXPECT_TRUE(space.out.empty()) << space.out;
  TempDir nowhere;
  for (const char* args : {"search --world 7", "search --world 64 --model gpt-2x", "search --world 8 --fix tp=3"}) {
    const testing::CliRun search = RunTunepar("--store " + (nowhere / "store") + " " + args);
    EXPECT_NE(search.exit_code, 0) << args;
    EXPECT_TRUE(search.out.empty()) << args << ": " << search.out;  // not even the backend chosen
  }
  ExpectOneLineError(RunTunepar("report --of-model --world 0"), kExitUsage, "--world must be a positive number");
  ExpectOneLineError(RunTunepar("report --of-model"), kExitUsage, "--of-model needs --world N");

  TempDir dir;
  const std::string store = "--store " + (dir / "s");
  const testing::CliRun search = RunTunepar(FakeTrainerSearch(dir / "s", 1));
  ASSERT_EQ(search.exit_code, 0) << search.err;
  EXPECT_NE(search.out.find("budget 1 trial;"), std::string::npos) << search.out;
  EXPECT_NE(search.out.find(": 1 trial ("), std::string::npos) << search.out;
  EXPECT_EQ(search.out.find("1 trials"), std::string::npos) << search.out;
  const std::string missing = dir / "no-such-dir/out.csv";
  ExpectOneLineError(RunTunepar(store + " export --csv -o " + missing), kExitUsage,
                     "cannot write '" + missing + "': No such file or directory");
  const testing::CliRun wrote = RunTunepar(store + " export --csv -o " + (dir / "out.csv"));
  ASSERT_EQ(wrote.exit_code, 0) << wrote.err;
  EXPECT_NE(wrote.err.find("wrote 1 trial of study"), std::string::npos) << wrote.err;
  const std::string csv = std::string(TUNEPAR_SOURCE_DIR) + "/bench/data/megatron_table1.csv";
  ExpectOneLineError(RunTunepar("calibrate --from " + csv + " --hardware dgx-a100 -o " + (dir / "no-such-dir/a.toml")),
                     kExitUsage, "No such file or directory");
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

int MaxParenthesisDepth(const std::string& line) {
  int depth = 0, deepest = 0;
  for (char c : line) {
    if (c == '(') deepest = std::max(deepest, ++depth);
    if (c == ')') --depth;
  }
  return deepest;
}

// Headers read in one pass: no parentheses inside parentheses; the list's best in the study's
// own unit.
TEST(CliMessages, HeadersWithoutNestedParenthesesAndTheBestInItsUnit) {
  const testing::CliRun of_model = RunTunepar("report --of-model --world 64 --model gpt-22b --background-size 10");
  ASSERT_EQ(of_model.exit_code, 0) << of_model.err;
  std::istringstream lines(of_model.out);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(MaxParenthesisDepth(line), 1) << line;
  EXPECT_NE(of_model.out.find("the performance model for gpt-22b on frontier-mi250x at world 64"), std::string::npos)
      << of_model.out;

  TempDir dir;
  ASSERT_EQ(RunTunepar(FakeTrainerSearch(dir / "s", 2)).exit_code, 0);
  const testing::CliRun list = RunTunepar("--store " + (dir / "s") + " list");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("  best  "), std::string::npos) << list.out;
  EXPECT_NE(list.out.find(" tok/s  "), std::string::npos) << list.out;
  const testing::CliRun report = RunTunepar("--store " + (dir / "s") + " report");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("Best 2 layouts, measured:"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("Best so far, each time it improved (finished trial #: best): #1: "), std::string::npos)
      << report.out;
}

// Issue 28 item 11: bad input that was taken as something else is refused with one line.
TEST(Cli, AStoreThatIsAFileTimeoutsBelowZeroAndTwoCommandsAreRefused) {
  TempDir dir;
  testing::WriteFile(dir / "afile", "not a store\n");
  for (const std::string command : {"list", "show x", "search --world 8 --model tiny --hardware local-cpu"}) {
    ExpectOneLineError(RunTunepar("--store " + (dir / "afile") + " " + command), kExitStore, "is not a directory");
    EXPECT_EQ(testing::ReadFile(dir / "afile"), "not a store\n");
  }
  const std::string search = "--store " + (dir / "s") + " search --world 2 --model tiny --hardware local-cpu "
                             "--backend command --command 'true {tp} {pp} {mbs} {precision} {recompute} {vpp}' "
                             "--metric-regex 'x([0-9])' ";
  for (const std::string bad : {"--timeout 0", "--timeout -5", "--time-budget -10"})
    ExpectOneLineError(RunTunepar(search + bad), kExitUsage, bad.substr(0, bad.find(' ')));
  const std::string config = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/torchtitan.toml";
  ExpectOneLineError(RunTunepar("--store " + (dir / "s") + " search --world 8 --model tiny --hardware local-cpu "
                                "--backend command --command-config " + config + " --command 'true'"),
                     kExitUsage, "give the command in one place");
  EXPECT_FALSE(std::filesystem::exists(dir / "s"));
}

// Issue 33: a command config whose program cannot train the model is refused when the study
// starts (exit 3, the field named), before the store is touched.
TEST(Cli, ACommandConfigThatCannotTrainTheModelIsRefusedAtStudyStart) {
  TempDir dir;
  const std::string configs = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/";
  const std::string search = "--store " + (dir / "s") + " search --world 64 --hardware lumi-g --backend command ";
  ExpectOneLineError(RunTunepar(search + "--model llama3-8b --command-config " + configs + "megatron-deepspeed.toml"),
                     kExitConfig, "command config megatron-deepspeed.toml does not pass {ffn_hidden}: its program "
                                  "would train model llama3-8b with ffn_hidden 16384 (what it takes untold), not 14336");
  ExpectOneLineError(RunTunepar(search + "--model gpt-22b --command-config " + configs + "torchtitan.toml"),
                     kExitConfig, "model gpt-22b has the shape of none of torchtitan's (llama3 8B, 70B, 405B");
  EXPECT_FALSE(std::filesystem::exists(dir / "s"));
}

}  // namespace
}  // namespace tunepar
