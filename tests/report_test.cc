// `tunepar report`: summaries, knob importance, charts that render, and studies with little data.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_support.h"
#include "tuner/exit_codes.h"

namespace tunepar {
namespace {

using testing::kTestCpu;
using testing::RunTunepar;
using testing::TempDir;

void ExpectNoNan(const std::string& text) {
  for (const char* bad : {"nan", "NaN", "inf"}) {
    size_t at = text.find(bad);
    // "inf" may be part of a word (e.g. "information"): only flag it as a number.
    while (at != std::string::npos && std::string(bad) == "inf" && at > 0 &&
           std::isalpha(static_cast<unsigned char>(text[at - 1]))) {
      at = text.find(bad, at + 1);
    }
    EXPECT_EQ(at, std::string::npos) << bad << " in:\n" << text;
  }
}

std::string Search(const std::string& store, int budget, const std::string& flags) {
  return "--store " + store +
         " search --world 2 --model tiny --hardware " + kTestCpu + " --backend command --command '" +
         std::string(TUNEPAR_FAKE_TRAINER) +
         " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision} --recompute " +
         "{recompute} --vpp {vpp} " + flags + "' --metric-regex 'step_time: ([0-9.]+)' --budget " +
         std::to_string(budget) + " --node-id n0";
}

TEST(Report, OfModelRanksKnobsAndTheLocalExplanationAddsUp) {
  const testing::CliRun run = RunTunepar("--json report --of-model --world 3072");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out)["shap"];
  ASSERT_GE(j["knobs"].size(), 5u);
  double share = 0;
  std::map<std::string, double> importance;
  for (const auto& k : j["knobs"]) {
    share += k["share"].get<double>();
    importance[k["knob"]] = k["importance"].get<double>();
  }
  EXPECT_NEAR(share, 1.0, 1e-9);
  EXPECT_GT(importance["micro_batch"], importance["zero"]);
  EXPECT_GT(importance["tp"], importance["zero"]);
  // Efficiency: the contributions add up to the explained layout's value minus the baseline.
  double sum = 0;
  for (const auto& c : j["local"]["contributions"]) sum += c["phi"].get<double>();
  EXPECT_NEAR(sum, j["local"]["value"].get<double>() - j["local"]["baseline"].get<double>(), 1e-9);
  // Knobs ranked: the text lists them by importance.
  const testing::CliRun text = RunTunepar("report --of-model --world 3072");
  EXPECT_NE(text.out.find("Which knobs matter"), std::string::npos);
  EXPECT_NE(text.out.find("Why tp"), std::string::npos);
  ExpectNoNan(text.out);
}

TEST(Report, StudySummaryShapAndChartsThatRender) {
  TempDir dir;
  const std::string store = dir / "s";
  ASSERT_EQ(RunTunepar(Search(store, 6, "")).exit_code, 0);
  const std::string svg = dir / "charts";
  const testing::CliRun run = RunTunepar("--store " + store + " report --shap --svg " + svg);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* part : {"trials 6", "Best 6 layouts (measured)", "Best so far",
                           "Model against measurement", "Which knobs matter", "Why "}) {
    EXPECT_NE(run.out.find(part), std::string::npos) << part << "\n" << run.out;
  }
  ExpectNoNan(run.out);
  int charts = 0;
  for (const auto& entry : std::filesystem::directory_iterator(svg)) {
    const std::string path = entry.path().string();
    const std::string png = dir / (entry.path().stem().string() + ".png");
    ASSERT_EQ(std::system(("rsvg-convert '" + path + "' -o '" + png + "'").c_str()), 0) << path;
    EXPECT_GT(std::filesystem::file_size(png), 3000u) << png;
    const std::string text = testing::ReadFile(path);
    EXPECT_NE(text.find("<svg"), std::string::npos);
    ExpectNoNan(text);
    ++charts;
  }
  EXPECT_GE(charts, 5);  // importance, convergence, predicted vs measured, dependence per knob
  EXPECT_TRUE(std::filesystem::exists(svg + "/importance.svg"));
  EXPECT_TRUE(std::filesystem::exists(svg + "/convergence.svg"));
  EXPECT_TRUE(std::filesystem::exists(svg + "/predicted-vs-measured.svg"));
  EXPECT_TRUE(std::filesystem::exists(svg + "/dependence-micro_batch.svg"));
  const std::string convergence = testing::ReadFile(svg + "/convergence.svg");
  EXPECT_NE(convergence.find("finished trials"), std::string::npos);  // axis label
  EXPECT_NE(convergence.find("predicted optimum"), std::string::npos);
}

TEST(Report, StudiesWithLittleOrNoDataGiveAMessageNotANan) {
  TempDir dir;
  // One trial.
  const std::string one = dir / "one";
  ASSERT_EQ(RunTunepar(Search(one, 1, "")).exit_code, 0);
  testing::CliRun run = RunTunepar("--store " + one + " report --shap");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("too few for a trial background"), std::string::npos) << run.out;
  ExpectNoNan(run.out);
  // Every trial failed.
  const std::string failed = dir / "failed";
  EXPECT_EQ(RunTunepar(Search(failed, 5, "--crash")).exit_code, kExitTrialsFailed);
  run = RunTunepar("--store " + failed + " report --shap");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("No trial has finished ok yet"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("no ok trial yet"), std::string::npos) << run.out;
  ExpectNoNan(run.out);
  // No finished trial at all: the only trial was interrupted.
  const std::string none = dir / "none";
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string command =
        "exec " + std::string(TUNEPAR_BINARY) + " " + Search(none, 2, "--hang") + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  run = RunTunepar("--store " + none + " report --shap");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("interrupted 1"), std::string::npos) << run.out;
  ExpectNoNan(run.out);
  // Several studies and none named.
  ASSERT_EQ(RunTunepar(Search(one, 2, "--sleep 0.01")).exit_code, 0);  // another command: another study
  run = RunTunepar("--store " + one + " report");
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_NE(run.err.find("name one"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace tunepar
