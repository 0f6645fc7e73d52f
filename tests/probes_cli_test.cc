// Issue 31 item 2, as a user meets it: `search --max-probes N` (a policy of the run, not of the
// study).
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tests/test_support.h"
#include "tuner/exit_codes.h"

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

}  // namespace
}  // namespace tunepar
