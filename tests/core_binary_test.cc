// Issue 18 item 2: `search` and `calibrate` with --backend local|slurm run the tunepar-core build
// of the hardware profile's devices (tunepar-core-cuda for NVIDIA, tunepar-core-hip for AMD,
// tunepar-core for CPUs) and say which on their first lines; without that build they refuse in
// one line, unless --core names a binary; the build's knobs are the backend's, and the study ids
// made before the builds were told apart stay as they were. (launch-script: launch_script_test.)
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/knob_support.h"
#include "runner/core/supported_knobs.h"
#include "tests/test_support.h"
#include "tuner/backends/core_backend_config.h"
#include "tuner/cli/exit_codes.h"

namespace tunepar {
namespace {

using core::CoreBuild;
using testing::CliRun;
using testing::RunCommand;
using testing::TempDir;

// The build a profile's text makes CoreBuildFor choose, and why.
std::pair<CoreBuild, std::string> BuildOf(const std::string& profile_text) {
  Result<runner::HardwareProfile> hw = runner::ParseHardwareProfile(profile_text, "mine.toml", "mine");
  if (!hw.ok()) throw std::runtime_error(hw.status().message());
  std::string why;
  const CoreBuild build = CoreBuildFor(*hw, &why);
  return {build, why};
}

std::string Edit(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("no '" + from + "' to edit");
  return text.replace(at, from.size(), to);
}

TEST(CoreBuild, FollowsTheVendorOfTheProfilesDevices) {
  for (const auto& [preset, build] : std::vector<std::pair<std::string, CoreBuild>>{
           {"dgx-a100", CoreBuild::kCuda},
           {"dgx-h100", CoreBuild::kCuda},
           {"frontier-mi250x", CoreBuild::kHip},
           {"lumi-g", CoreBuild::kHip},
           {"local-cpu", CoreBuild::kCpu}}) {
    EXPECT_EQ(BuildOf(testing::PresetText("hardware", preset)).first, build) << preset;
  }
  // A user's profile without the variable that gives a rank its device: the device's name.
  const std::string lumi = testing::PresetText("hardware", "lumi-g");
  const std::string h100 = testing::PresetText("hardware", "dgx-h100");
  const std::string rocr = "visible_devices_env = \"ROCR_VISIBLE_DEVICES\"";
  const std::string cuda = "visible_devices_env = \"CUDA_VISIBLE_DEVICES\"";
  EXPECT_EQ(BuildOf(Edit(lumi, rocr, "")), std::make_pair(CoreBuild::kHip, std::string("its device is 'AMD MI250X GCD'")));
  EXPECT_EQ(BuildOf(Edit(h100, cuda, "")).first, CoreBuild::kCuda);
  EXPECT_EQ(BuildOf(Edit(lumi, rocr, "visible_devices_env = \"HIP_VISIBLE_DEVICES\"")).first, CoreBuild::kHip);
  // The variable decides over the name; a profile that names no vendor runs the CPU build.
  EXPECT_EQ(BuildOf(Edit(lumi, rocr, cuda)).first, CoreBuild::kCuda);
  const auto unnamed = BuildOf(Edit(Edit(h100, cuda, ""), "name = \"NVIDIA H100 80GB SXM\"", "name = \"H100\""));
  EXPECT_EQ(unnamed, std::make_pair(CoreBuild::kCpu,
                                    std::string("its device 'H100' and launch.visible_devices_env name no GPU vendor")));
}

// The CPU and CUDA builds run fused attention (fa0 and fa1), sequence parallelism (sp0 and
// sp1), ZeRO 0-3, hybrid sharding and context parallelism (the CUDA build's ring kernels since
// issue 35), so a study of theirs pins "vpp1"; the HIP build
// keeps sp0, fa0, ZeRO 0-1, dpr1 and cp1 pinned until they run on an AMD GPU (its fused kernel is
// written for 32-lane warps, not 64-wide waves).
TEST(CoreBuild, EveryBuildRunsTheKnobsTheCoreAlwaysRan) {
  EXPECT_EQ(PinnedKnobs(core::SupportedKnobs(CoreBuild::kCpu)), "vpp1");
  EXPECT_EQ(PinnedKnobs(core::SupportedKnobs(CoreBuild::kCuda)), "vpp1");
  EXPECT_EQ(PinnedKnobs(core::SupportedKnobs(CoreBuild::kHip)), "zero0 zero1 sp0 vpp1 fa0 dpr1 cp1");
  EXPECT_EQ(core::CoreBuildNamed("cuda"), CoreBuild::kCuda);
  EXPECT_EQ(core::CoreBuildNamed("hip"), CoreBuild::kHip);
  EXPECT_EQ(core::CoreBuildNamed("cpu"), CoreBuild::kCpu);
  EXPECT_EQ(core::CoreBuildNamed("metal"), std::nullopt);
}

std::string Search(const std::string& store, const std::string& hardware) {
  return " --store " + store + " search --backend local --world 2 --model tiny" +
         (hardware.empty() ? "" : " --hardware " + hardware) + " --budget 1 --steps 1 --warmup 0 --node-id n0";
}

// The command line of the search's one trial.
std::string TrialCommand(const std::string& store) {
  const std::string study = testing::OnlyStudy(store);
  return testing::ReadFile(store + "/trials/" + study + "/n0-1/command.txt");
}

TEST(CoreBinary, SearchRunsTheProfilesBuildAndNamesItFirst) {
  TempDir dir;
  const std::string tunepar =
      testing::InstallTunepar(dir.path(), {"tunepar-core", "tunepar-core-cuda", "tunepar-core-hip"});
  struct Case {
    std::string hardware, binary, said;
  };
  for (const Case& c : std::vector<Case>{
           {"", "tunepar-core", "(the CPU build, for local-cpu: its device 'CPU core' and launch.visible_devices_env "
                                "name no GPU vendor)"},
           {"dgx-h100", "tunepar-core-cuda",
            "(the NVIDIA build, for dgx-h100: its launch.visible_devices_env is CUDA_VISIBLE_DEVICES)"},
           {"lumi-g", "tunepar-core-hip",
            "(the AMD build, for lumi-g: its launch.visible_devices_env is ROCR_VISIBLE_DEVICES)"}}) {
    const std::string store = dir / ("s-" + c.binary);
    const CliRun run = RunCommand(tunepar + Search(store, c.hardware));
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    const std::string line = "core: " + c.binary + " beside tunepar " + c.said + "\n";
    EXPECT_NE(run.out.find(line), std::string::npos) << run.out;
    EXPECT_LT(run.out.find(line), run.out.find("tunepar search: model tiny")) << run.out;
    EXPECT_NE(TrialCommand(store).find(" " + (dir / c.binary) + " --model "), std::string::npos) << TrialCommand(store);
  }
}

// The ids of a study of the CPU build, and of a GPU profile: the same whichever way the build is
// found (the same searches with --core tunepar-core give them too). They changed when the CPU
// and CUDA builds gained fused attention (pinned knobs "sp0 vpp1 fa0" -> "sp0 vpp1"; before:
// tiny-w2-1eb8838e and tiny-w2-fba600c0) and again with sequence parallelism ("sp0 vpp1" ->
// "vpp1"; before: tiny-w2-cf42d4b2 and tiny-w2-e5fc8311), as a new capability should. Issue 34's
// default space (ZeRO 0-3, dp_replicate) gives new ids again (before: tiny-w2-677b2afd and
// tiny-w2-37623368); the space of 2026-11 still gives those: the core's new stages and hybrid
// sharding pin nothing in the CPU and CUDA builds. fp8 in the default space changed them again
// (before: tiny-w2-8b5d2274 and tiny-w2-4a895044; the core runs no fp8, pinned "fp32 fp16 bf16"
// where the space offers it), and the dgx-h100 profile's FP8 peak changed its studies' ids in
// the space of 2026-11 too (before: tiny-w2-37623368): a profile that says more is another study.
// The CUDA build's cp, pinned to 1 until its ring kernels existed and every value since (issue
// 35), changes no id here either way: neither space below offers cp, and a knob of 2026-11's
// later rows pinned at its neutral value is left out of the identity. (A space that offers cp,
// such as configs/spaces/long-context.toml, gives a CUDA profile's studies new ids.)
TEST(CoreBinary, StudyIdsStayAsTheyWere) {
  TempDir dir;
  const std::string tunepar = testing::InstallTunepar(dir.path(), {"tunepar-core", "tunepar-core-cuda"});
  ASSERT_EQ(RunCommand(tunepar + Search(dir / "cpu", "")).exit_code, 0);
  EXPECT_EQ(testing::OnlyStudy(dir / "cpu"), "tiny-w2-252e03d3");
  ASSERT_EQ(RunCommand(tunepar + Search(dir / "h100", "dgx-h100")).exit_code, 0);
  EXPECT_EQ(testing::OnlyStudy(dir / "h100"), "tiny-w2-793bed9b");
  const std::string before = std::string(" --space ") + testing::kSpace2026_11;
  ASSERT_EQ(RunCommand(tunepar + Search(dir / "cpu-2026-11", "") + before).exit_code, 0);
  EXPECT_EQ(testing::OnlyStudy(dir / "cpu-2026-11"), "tiny-w2-677b2afd");
  ASSERT_EQ(RunCommand(tunepar + Search(dir / "h100-2026-11", "dgx-h100") + before).exit_code, 0);
  EXPECT_EQ(testing::OnlyStudy(dir / "h100-2026-11"), "tiny-w2-6802c2c8");
}

void ExpectOneLineError(const CliRun& run, const std::string& fragment) {
  EXPECT_EQ(run.exit_code, kExitUsage) << run.out << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.err.rfind("tunepar: error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find(fragment), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");
}

// The CPU build on a GPU profile would measure the wrong machine: refused, and --core is the way
// to run another binary in its place (said first, and its study is the profile's).
TEST(CoreBinary, WithoutTheProfilesBuildOnlyCoreRuns) {
  TempDir dir;
  const std::string tunepar = "PATH=/usr/bin:/bin " + testing::InstallTunepar(dir.path(), {"tunepar-core"});
  const std::string store = dir / "s";
  ExpectOneLineError(RunCommand(tunepar + Search(store, "dgx-h100")),
                     "tunepar-core-cuda (the NVIDIA build, for dgx-h100) not found next to tunepar or on $PATH: cmake "
                     "builds it where it finds nvcc with cuBLAS and NCCL, or give --core PATH");
  ExpectOneLineError(RunCommand(tunepar + " --store " + store +
                                " calibrate --backend local --hardware lumi-g --model tiny --world 2 --layouts 2"),
                     "tunepar-core-hip (the AMD build, for lumi-g) not found next to tunepar or on $PATH: cmake builds "
                     "it where it finds hipcc with hipBLAS and RCCL, e.g. a site's ROCm, or give --core PATH");
  EXPECT_TRUE(testing::SnapshotFiles(store).empty());

  const CliRun given = RunCommand(tunepar + Search(store, "dgx-h100") + " --core " + (dir / "tunepar-core"));
  ASSERT_EQ(given.exit_code, 0) << given.out << given.err;
  EXPECT_NE(given.out.find("core: " + (dir / "tunepar-core") +
                           " (--core, in place of tunepar-core-cuda: the NVIDIA build, for dgx-h100)\n"),
            std::string::npos)
      << given.out;
  EXPECT_NE(TrialCommand(store).find(" " + (dir / "tunepar-core") + " --model "), std::string::npos);
  EXPECT_EQ(testing::OnlyStudy(store), "tiny-w2-793bed9b");  // the CUDA build's (StudyIdsStayAsTheyWere)
}

// Not beside tunepar: the build on $PATH, named by its path.
TEST(CoreBinary, ABuildOnPathIsNamedByItsPath) {
  TempDir dir, bin;
  const std::string tunepar = testing::InstallTunepar(dir.path(), {});
  testing::InstallTunepar(bin.path(), {"tunepar-core-hip"});
  const std::string store = dir / "s";
  const CliRun run = RunCommand("PATH=" + bin.path() + ":/usr/bin:/bin " + tunepar + Search(store, "lumi-g"));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("core: " + (bin / "tunepar-core-hip") + " from $PATH (the AMD build, for lumi-g: "),
            std::string::npos)
      << run.out;
  EXPECT_NE(TrialCommand(store).find(" " + (bin / "tunepar-core-hip") + " --model "), std::string::npos);
}

TEST(CoreBinary, CalibrateNamesTheBuildItSweepsWith) {
  TempDir dir;
  const std::string tunepar = testing::InstallTunepar(dir.path(), {"tunepar-core-cuda"});
  const CliRun run = RunCommand(tunepar + " --store " + (dir / "s") +
                                " calibrate --backend local --hardware dgx-h100 --model tiny --world 2 --layouts 2 "
                                "--steps 1 --warmup 0 --force");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.out.rfind("core: tunepar-core-cuda beside tunepar (the NVIDIA build, for dgx-h100: ", 0), 0u)
      << run.out;
}

}  // namespace
}  // namespace tunepar
