// Issue 31 item 2, as a user meets it: `search --max-probes N` (a policy of the run, not of the
// study), and `report`'s section on what the trials taught the memory model, with the probes
// among them. Today's proposer proposes no probe, so a trial is made one in the store.
#include <cmath>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "store/shard_writer.h"
#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"

namespace tunepar {
namespace {

using testing::CliRun;
using testing::RunTunepar;
using testing::TempDir;

// A search of the fake trainer (tests/fake_trainer.cc) on node n0; `trainer` adds to its command
// line, `extra` to tunepar's.
std::string Search(const std::string& store, int budget, const std::string& trainer,
                   const std::string& extra = "") {
  return "--store " + store + " search --world 2 --model tiny --hardware " + testing::kTestCpu +
         " --backend command --command '" + TUNEPAR_FAKE_TRAINER +
         " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision} --recompute {recompute} --vpp {vpp} " +
         trainer + "' --metric-regex 'step_time: ([0-9.]+)' --budget " + std::to_string(budget) +
         " --node-id n0 " + extra;
}

constexpr char kMemoryRegex[] = "--memory-regex 'max memory allocated: ([0-9.]+ GiB)'";

// Trial `number` of node n0 made a probe, as a search that proposed it would have recorded it.
void MakeProbe(const std::string& store, int64_t number) {
  const std::string id = testing::StudyId(store, testing::OnlyStudy(store));
  Result<std::unique_ptr<store::ShardWriter>> w = store::ShardWriter::Open({store, "n0", id, ""});
  ASSERT_TRUE(w.ok()) << w.status().message();
  Result<std::vector<store::TrialRecord>> trials = (*w)->Trials(id);
  ASSERT_TRUE(trials.ok());
  for (store::TrialRecord& t : *trials) {
    if (t.number != number) continue;
    t.role = TrialRole::kProbe;
    ASSERT_TRUE((*w)->PutTrials({t}).ok());
  }
  ASSERT_TRUE((*w)->Publish().ok());
}

nlohmann::json ReportJson(const std::string& store) {
  const CliRun run = RunTunepar("--json --store " + store + " report");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return nlohmann::json::parse(run.out, nullptr, false);
}

TEST(MaxProbes, ANegativeCountIsRefusedWithOneLine) {
  TempDir dir;
  const CliRun run = RunTunepar(Search(dir / "s", 2, "", "--max-probes -1"));
  EXPECT_EQ(run.exit_code, kExitUsage) << run.err;
  EXPECT_EQ(run.err, "tunepar: error: --max-probes must be a number of trials (0: no probes), got -1\n");
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "s"));
  const CliRun help = RunTunepar("search --help");
  EXPECT_NE(help.out.find("--max-probes INT=4"), std::string::npos) << help.out;
}

// The cap is the run's: another one resumes the same study, and the header says which holds.
TEST(MaxProbes, ACapIsTheRunsAndResumesTheSameStudy) {
  TempDir dir;
  const std::string store = dir / "s";
  const CliRun off = RunTunepar(Search(store, 2, "", "--max-probes 0"));
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_NE(off.out.find("; no probes past the predicted memory limit (--max-probes 0)\n"), std::string::npos)
      << off.out;
  const CliRun more = RunTunepar(Search(store, 3, "", "--max-probes 2"));
  ASSERT_EQ(more.exit_code, 0) << more.err;
  EXPECT_NE(more.out.find("(resumed; 2 finished trials so far)"), std::string::npos) << more.out;
  EXPECT_NE(more.out.find("; at most 2 probes past the predicted memory limit (--max-probes)\n"),
            std::string::npos)
      << more.out;
  const CliRun model = RunTunepar("--store " + (dir / "m") + " search --world 2 --model tiny --max-probes 3");
  ASSERT_EQ(model.exit_code, 0) << model.err;
  EXPECT_NE(model.err.find("--max-probes does nothing with --backend model"), std::string::npos) << model.err;
}

// With measured peaks: each component's multiplier inside its 90% interval, the trials it learned
// from, and a probe among them with its outcome; `show` marks the probe.
TEST(ReportMemory, PeaksGiveEachComponentAMultiplierWithItsInterval) {
  TempDir dir;
  const std::string store = dir / "s";
  ASSERT_EQ(RunTunepar(Search(store, 6, "--print-memory --oom-above 12", kMemoryRegex)).exit_code, 0);
  MakeProbe(store, 1);
  const CliRun text = RunTunepar("--store " + store + " report");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const char* part : {"\nMemory: what 6 trials taught about the performance model's memory per device "
                           "(device 8.0 GB): ",
                           "with a 90% interval:\n", "multiplier       interval  interval vs prior\n",
                           "weights ", "optimizer_states ", "activations ", "runtime_overhead ",
                           "1 probe past the predicted memory limit: "})
    EXPECT_NE(text.out.find(part), std::string::npos) << part << "\n" << text.out;
  EXPECT_EQ(text.out.find("no peak measured"), std::string::npos) << text.out;
  const nlohmann::json memory = ReportJson(store)["memory_model"];
  ASSERT_TRUE(memory.is_object()) << memory;
  EXPECT_EQ(memory["device_memory_bytes"], 8e9);
  EXPECT_TRUE(memory["note"].is_null());
  const nlohmann::json& from = memory["learned_from"];
  EXPECT_EQ(from["ok"].get<int>() + from["oom"].get<int>(), 6) << from;
  EXPECT_GE(from["ok_peaks"].get<int>(), 1) << from;
  EXPECT_EQ(from["probes"], 1);
  EXPECT_EQ(from["probe_outcomes"].size(), 1u) << from;
  ASSERT_EQ(memory["components"].size(), 6u);
  for (const nlohmann::json& c : memory["components"]) {
    const double m = c["multiplier"], low = c["low"], high = c["high"], sd = c["log_sd"];
    EXPECT_GT(m, 0) << c;
    EXPECT_NEAR(low, m * std::exp(-1.6448536269514722 * sd), 1e-9 * m) << c;
    EXPECT_NEAR(high, m * std::exp(1.6448536269514722 * sd), 1e-9 * m) << c;
    EXPECT_LT(low, m);
    EXPECT_GT(high, m);
    EXPECT_NE(text.out.find(c["component"].get<std::string>()), std::string::npos);
  }
  const CliRun show = RunTunepar("--store " + store + " show --all");
  EXPECT_NE(show.out.find(" (probe)"), std::string::npos) << show.out;
}

// Without a peak the report says what bounds the multipliers; a dry run has no such section.
TEST(ReportMemory, WithoutPeaksItSaysWhatBoundsTheMultipliersAndADryRunHasNone) {
  TempDir dir;
  const std::string store = dir / "s";
  ASSERT_EQ(RunTunepar(Search(store, 3, "")).exit_code, 0);
  const CliRun text = RunTunepar("--store " + store + " report");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(
      text.out.find("Memory: what 3 trials taught about the performance model's memory per device (device "
                    "8.0 GB): 3 ok (0 with a measured peak), 0 OOM"),
      std::string::npos)
      << text.out;
  EXPECT_NE(
      text.out.find("no peak measured and no OOM: the trials say only that 3 layouts fit in 8.0 GB, which "
                    "bounds the multipliers from above"),
      std::string::npos)
      << text.out;
  EXPECT_TRUE(ReportJson(store)["memory_model"]["note"].is_string());
  const std::string dry = dir / "dry";
  ASSERT_EQ(RunTunepar("--store " + dry + " search --world 2 --model tiny --hardware " + testing::kTestCpu)
                .exit_code,
            0);
  const CliRun report = RunTunepar("--store " + dry + " report");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(report.out.find("Memory:"), std::string::npos) << report.out;
  EXPECT_FALSE(ReportJson(dry).contains("memory_model"));
}

}  // namespace
}  // namespace tunepar
