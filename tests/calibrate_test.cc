// `tunepar calibrate` knows when a fit failed: the judgement of a fit (runner::JudgeFit), and
// the command's exit code 10, its one-line reason, --force, and the name of the written profile.
#include <algorithm>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/calibration.h"
#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"

namespace tunepar {
namespace {

using runner::CalibrationResult;
using runner::EfficiencyKey;
using runner::FitJudgement;
using runner::JudgeFit;
using testing::RunTunepar;
using testing::TempDir;

// A fit of dgx-a100's efficiencies with `runs` rows whose step-time errors cycle through `errors`.
CalibrationResult FitOf(std::vector<EfficiencyKey> fitted, int runs, std::vector<double> errors,
                        const std::string& profile = "dgx-a100") {
  CalibrationResult r;
  r.efficiency = *runner::Efficiency::FromProfile(testing::PresetHardware(profile));
  r.fitted = std::move(fitted);
  for (int i = 0; i < runs; ++i) {
    runner::RowFit row;
    row.error = errors[i % errors.size()];
    r.rows.push_back(row);
    r.mean_abs_error += std::abs(row.error) / runs;
    r.max_abs_error = std::max(r.max_abs_error, std::abs(row.error));
  }
  return r;
}

bool Contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

TEST(CalibrationJudgement, AnEfficiencyAtItsFloorFailsEvenWithASmallError) {
  CalibrationResult r =
      FitOf({EfficiencyKey::kGemmEfficiency, EfficiencyKey::kLinkEfficiency}, 10, {0.02, -0.03});
  r.efficiency[EfficiencyKey::kGemmEfficiency] = 0.05;
  const FitJudgement j = JudgeFit(r);
  EXPECT_TRUE(j.failed);
  EXPECT_EQ(j.at_bound, std::vector<EfficiencyKey>{EfficiencyKey::kGemmEfficiency});
  EXPECT_TRUE(Contains(j.reason, "gemm_efficiency at the floor of its range (0.05)")) << j.reason;
  EXPECT_TRUE(Contains(j.reason, "another machine")) << j.reason;
}

TEST(CalibrationJudgement, AnEfficiencyOfOneIsPhysical) {
  CalibrationResult r =
      FitOf({EfficiencyKey::kGemmEfficiency, EfficiencyKey::kMemoryEfficiency}, 10, {0.05, -0.07});
  r.efficiency[EfficiencyKey::kGemmEfficiency] = 1.0;
  r.efficiency[EfficiencyKey::kMemoryEfficiency] = 1.0;
  const FitJudgement j = JudgeFit(r);
  EXPECT_FALSE(j.failed) << j.reason;
  EXPECT_TRUE(j.at_bound.empty());
  EXPECT_EQ(j.reason, "");
}

// The shipped local-cpu profile, fitted by bench/calibration_benchmark.sh (memory_efficiency
// 1, gemm_efficiency 0.97), is a fit that passes.
TEST(CalibrationJudgement, TheShippedLocalCpuFitPasses) {
  const runner::HardwareProfile hw = testing::PresetHardware("local-cpu");
  ASSERT_TRUE(hw.calibration.has_value());
  std::vector<EfficiencyKey> fitted;
  for (const std::string& name : hw.calibration->fitted)
    fitted.push_back(runner::FindEfficiencyParameter(name)->key);
  const FitJudgement j = JudgeFit(FitOf(fitted, 32, {0.074, -0.074}, "local-cpu"));
  EXPECT_FALSE(j.failed) << j.reason;
}

TEST(CalibrationJudgement, AParameterAtACeilingFailsAndZeroLatencyPasses) {
  CalibrationResult r =
      FitOf({EfficiencyKey::kGemmHalfSize, EfficiencyKey::kLinkLatencyUs}, 10, {0.05, -0.05});
  r.efficiency[EfficiencyKey::kLinkLatencyUs] = 0;
  EXPECT_FALSE(JudgeFit(r).failed) << JudgeFit(r).reason;
  r.efficiency[EfficiencyKey::kGemmHalfSize] = 2048;
  const FitJudgement j = JudgeFit(r);
  EXPECT_TRUE(j.failed);
  EXPECT_TRUE(Contains(j.reason, "gemm_half_size at the ceiling of its range (2048)")) << j.reason;
}

TEST(CalibrationJudgement, AMeanErrorOverTwentyFivePercentFails) {
  const FitJudgement j = JudgeFit(FitOf({EfficiencyKey::kGemmEfficiency}, 10, {0.30}));
  EXPECT_TRUE(j.failed);
  EXPECT_TRUE(j.at_bound.empty());
  EXPECT_TRUE(Contains(j.reason, "mean |error| 30.0% (more than 25%)")) << j.reason;
  // Every prediction 1.3x too slow: a common factor.
  EXPECT_TRUE(j.off_by_common_factor);
  EXPECT_NEAR(j.common_factor, 1.3, 1e-9);
  EXPECT_TRUE(Contains(j.reason, "every prediction is about 1.3x too slow")) << j.reason;
}

TEST(CalibrationJudgement, ATenPercentErrorPasses) {
  const FitJudgement j = JudgeFit(FitOf({EfficiencyKey::kGemmEfficiency}, 10, {0.10, -0.10}));
  EXPECT_FALSE(j.failed) << j.reason;
  EXPECT_FALSE(j.off_by_common_factor);
}

TEST(CalibrationJudgement, NamesTooFewRunsOrErrorsThatDifferAsTheCause) {
  const FitJudgement few = JudgeFit(FitOf(
      {EfficiencyKey::kGemmEfficiency, EfficiencyKey::kLinkEfficiency, EfficiencyKey::kMemoryEfficiency}, 5,
      {0.4, -0.3}));
  EXPECT_TRUE(few.failed);
  EXPECT_TRUE(Contains(few.reason, "too few runs: 5 for 3 fitted parameters (give at least 6")) << few.reason;
  const FitJudgement differ = JudgeFit(FitOf({EfficiencyKey::kGemmEfficiency}, 10, {0.6, -0.4}));
  EXPECT_TRUE(differ.failed);
  EXPECT_FALSE(differ.off_by_common_factor);
  EXPECT_TRUE(Contains(differ.reason, "differ from run to run (-40% to +60%)")) << differ.reason;
}

// Issue 29 item 4: the performance model's flash terms calibrate against runs of the core's fused
// attention (fa1), and are left alone by sweeps without it.
TEST(CalibrationFitSet, FusedAttentionRunsFitTheFlashEfficiency) {
  const runner::HardwareProfile profile = testing::PresetHardware("local-cpu");
  auto run = [](bool flash) {
    runner::MeasuredRun r;
    r.layout = Layout{1, 1, 1, 8, 1, Precision::kBf16, 0, Recompute::kNone, false, 1, flash};
    r.step_time_s = 1;
    return r;
  };
  const std::vector<runner::MeasuredRun> without(8, run(false));
  std::vector<runner::MeasuredRun> with = without;
  with[3] = run(true);
  auto has_flash = [](const std::vector<runner::EfficiencyKey>& keys) {
    return std::find(keys.begin(), keys.end(), runner::EfficiencyKey::kFlashEfficiency) != keys.end();
  };
  EXPECT_FALSE(has_flash(runner::DefaultFitSet(without, profile)));
  EXPECT_TRUE(has_flash(runner::DefaultFitSet(with, profile)));
}

TEST(CalibrationJudgement, ExitCodeTen) {
  EXPECT_EQ(ExitCode(StatusCode::kFitFailed), 10);
  EXPECT_EQ(kExitCalibrationFailed, 10);
}

// bench/data/megatron_table1.csv with every run `slower` times slower (TFLOP/s per GPU divided).
std::string SlowerMegatronCsv(double slower) {
  std::istringstream in(
      testing::ReadFile(std::string(TUNEPAR_SOURCE_DIR) + "/bench/data/megatron_table1.csv"));
  std::string line, out;
  int column = -1;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') {
      out += line + "\n";
      continue;
    }
    std::vector<std::string> cells;
    std::stringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    if (column < 0) {
      column = static_cast<int>(std::find(cells.begin(), cells.end(), "tflops_per_gpu") - cells.begin());
    } else {
      cells[column] = fmt::format("{}", std::stod(cells[column]) / slower);
    }
    out += fmt::format("{}\n", fmt::join(cells, ","));
  }
  return out;
}

int CountLines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// Megatron's Table 1 made 100x slower cannot be this DGX A100: the fit ends at its floor with
// every prediction too fast by a common factor, exits 10 with one line saying so, and writes
// nothing.
TEST(CalibrateCli, RunsOfAnotherMachineFailWithExitTenAndWriteNothing) {
  TempDir dir;
  testing::WriteFile(dir / "slow.csv", SlowerMegatronCsv(100));
  const auto before = testing::SnapshotFiles(dir.path());
  const testing::CliRun run =
      RunTunepar("calibrate --from " + (dir / "slow.csv") + " --hardware dgx-a100 -o " + (dir / "fit.toml"));
  EXPECT_EQ(run.exit_code, kExitCalibrationFailed) << run.out << run.err;
  EXPECT_EQ(CountLines(run.err), 1) << run.err;
  EXPECT_EQ(run.err.rfind("tunepar: error: calibration of dgx-a100 on slow.csv failed: ", 0), 0u) << run.err;
  EXPECT_TRUE(Contains(run.err, "gemm_efficiency and link_efficiency at the floor of their range (0.05)"))
      << run.err;
  EXPECT_TRUE(Contains(run.err, "too fast: likely a profile of another machine")) << run.err;
  EXPECT_TRUE(Contains(run.err, "; nothing written to " + (dir / "fit.toml") + " (--force writes it)"))
      << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "fit.toml"));
  EXPECT_EQ(testing::SnapshotFiles(dir.path()), before);
  // The fit is still shown on stdout, and in JSON with the reason.
  EXPECT_TRUE(Contains(run.out, "mean |error|")) << run.out;
  const testing::CliRun json =
      RunTunepar("--json calibrate --from " + (dir / "slow.csv") + " --hardware dgx-a100");
  EXPECT_EQ(json.exit_code, kExitCalibrationFailed) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_GT(j["mean_abs_error"].get<double>(), 0.25);
  EXPECT_TRUE(Contains(j["failed"].get<std::string>(), "another machine")) << json.out;
  EXPECT_EQ(j["written"], "");
}

// --force writes the failed fit under a name of its own, recording the failure and the error,
// and the profile loads.
TEST(CalibrateCli, ForceWritesAFailedFitUnderANewNameThatRecordsIt) {
  TempDir dir;
  testing::WriteFile(dir / "slow.csv", SlowerMegatronCsv(100));
  const testing::CliRun run = RunTunepar("calibrate --from " + (dir / "slow.csv") +
                                         " --hardware dgx-a100 --force -o " + (dir / "fit.toml"));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(CountLines(run.err), 1) << run.err;
  EXPECT_EQ(run.err.rfind("tunepar: warning: calibration of dgx-a100 on slow.csv failed: ", 0), 0u)
      << run.err;
  EXPECT_TRUE(Contains(run.out, "wrote " + (dir / "fit.toml") + " (profile dgx-a100-fit-slow, a failed fit)"))
      << run.out;
  const std::string text = testing::ReadFile(dir / "fit.toml");
  EXPECT_TRUE(Contains(text, "name = \"dgx-a100-fit-slow\"")) << text;
  EXPECT_TRUE(Contains(text, "# failed: gemm_efficiency and link_efficiency at the floor")) << text;
  EXPECT_TRUE(Contains(text, "; failed: gemm_efficiency and link_efficiency at the floor"))
      << text;  // in the fitted values' source
  const Result<runner::HardwareProfile> back = runner::ParseHardwareProfile(text, "fit.toml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_TRUE(back->calibration.has_value());
  EXPECT_GT(back->calibration->mean_abs_error_pct, 25);
  EXPECT_TRUE(Contains(back->efficiency.at("gemm_efficiency").source, "failed:"));
  const testing::CliRun predict = RunTunepar(
      "--json predict --world 3072 --model gpt-1t --tp 8 --pp 64 --mbs 1 "
      "--hardware " +
      (dir / "fit.toml"));
  ASSERT_EQ(predict.exit_code, 0) << predict.err;
  EXPECT_EQ(nlohmann::json::parse(predict.out)["hardware"], "dgx-a100-fit-slow");
}

// The published runs fit dgx-a100 well: exit 0, and the written profile is named after the
// original and the data, never as the original; refitting it does not stack suffixes.
TEST(CalibrateCli, AGoodFitPassesAndIsNamedAfterTheProfileAndTheData) {
  TempDir dir;
  const std::string csv = std::string(TUNEPAR_SOURCE_DIR) + "/bench/data/megatron_table1.csv";
  const testing::CliRun run =
      RunTunepar("--json calibrate --from " + csv + " --hardware dgx-a100 -o " + (dir / "fit.toml"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_LT(j["mean_abs_error"].get<double>(), 0.05);
  EXPECT_TRUE(j["failed"].is_null());
  EXPECT_EQ(j["name"], "dgx-a100-fit-megatron_table1");
  const std::string text = testing::ReadFile(dir / "fit.toml");
  EXPECT_TRUE(Contains(text, "name = \"dgx-a100-fit-megatron_table1\"")) << text;
  EXPECT_FALSE(Contains(text, "failed")) << text;
  const testing::CliRun refit = RunTunepar("calibrate --from " + csv + " --hardware " + (dir / "fit.toml") +
                                           " -o " + (dir / "refit.toml"));
  ASSERT_EQ(refit.exit_code, 0) << refit.err;
  EXPECT_TRUE(Contains(testing::ReadFile(dir / "refit.toml"), "name = \"dgx-a100-fit-megatron_table1\""));
}

TEST(CalibrateCli, HelpListsEveryExitCode) {
  const testing::CliRun help = RunTunepar("--help");
  ASSERT_EQ(help.exit_code, 0);
  for (const char* code : {"8 every trial failed", "9 a damaged shard", "10 calibration failed", "130/143"})
    EXPECT_TRUE(Contains(help.out, code)) << code << "\n" << help.out;
}

// Issue 28 item 6: six runs of one model whose step times are the performance model's in reverse
// order, each within 30% of it: the error rule alone passes such a fit, but it ranks the runs it
// did not see backwards (leave-one-out Spearman -1): exit 10, nothing written; the table names
// every run by its full layout key.
TEST(CalibrateCli, AFitThatRanksUnseenRunsBackwardsFailsWithExitTen) {
  TempDir dir;
  testing::WriteFile(dir / "reversed.csv",
                     "label,layers,hidden,heads,seq_len,vocab,global_batch,gpus,tp,pp,micro_batch,virtual_stages,"
                     "precision,recompute,zero,step_time_s\n"
                     "a,4,256,8,128,1024,8,4,1,2,4,1,fp16,none,0,0.1268\n"
                     "b,4,256,8,128,1024,8,4,1,2,4,1,bf16,none,1,0.1085\n"
                     "c,4,256,8,128,1024,8,4,1,2,4,1,fp32,none,0,0.1054\n"
                     "d,4,256,8,128,1024,8,4,1,2,4,1,bf16,selective,0,0.1040\n"
                     "e,4,256,8,128,1024,8,4,1,2,4,1,fp32,selective,1,0.0992\n"
                     "f,4,256,8,128,1024,8,4,1,2,4,1,fp16,full,0,0.0989\n");
  const testing::CliRun run = RunTunepar("calibrate --from " + (dir / "reversed.csv") + " --hardware local-cpu -o " +
                                         (dir / "fit.toml"));
  EXPECT_EQ(run.exit_code, kExitCalibrationFailed) << run.out << run.err;
  EXPECT_TRUE(Contains(run.err, "cross-validated Spearman -1.00 over 6 runs, leave-one-out")) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "fit.toml"));
  EXPECT_TRUE(Contains(run.out, "tp1-pp2-dp2-mbs4-nmb1-fp16-zero0-rcfull-sp0-vpp1-fa0")) << run.out;
  // --force writes it anyway, as any failed fit.
  EXPECT_EQ(RunTunepar("calibrate --from " + (dir / "reversed.csv") + " --hardware local-cpu --force -o " +
                       (dir / "fit.toml"))
                .exit_code,
            0);
  EXPECT_TRUE(std::filesystem::exists(dir / "fit.toml"));
}

}  // namespace
}  // namespace tunepar
