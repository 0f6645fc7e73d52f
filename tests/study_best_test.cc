// "Best" means one thing everywhere: the search's summary, report and launch-script name the
// same layout, say which kind of best it is, and with no ok trial never name a layout that needs
// as much memory as one that went OOM. And the Shapley credit of a knob legal only with others.
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_support.h"

namespace tunepar {
namespace {

using testing::kTestCpu;
using testing::RunTunepar;
using testing::TempDir;

std::string Search(const std::string& store, int budget, const std::string& trainer_flags) {
  return "--store " + store + " --json search --world 2 --model tiny --hardware " + kTestCpu +
         " --backend command --command '" + std::string(TUNEPAR_FAKE_TRAINER) +
         " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision} --recompute {recompute} --vpp {vpp} " +
         trainer_flags + "' --metric-regex 'step_time: ([0-9.]+)' --confirm 0 --budget " + std::to_string(budget) +
         " --node-id n0";
}

nlohmann::json Json(const testing::CliRun& run) {
  EXPECT_FALSE(run.out.empty()) << run.err;
  return nlohmann::json::parse(run.out, nullptr, false);
}

// The layout launch-script writes a script for (its header names it).
std::string ScriptedLayout(const std::string& store) {
  const testing::CliRun run = RunTunepar("--store " + store + " launch-script --steps 1000 --command-config " +
                                         std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/megatron-deepspeed.toml");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const size_t at = run.out.find("# Layout ");
  if (at == std::string::npos) return run.out;
  return run.out.substr(at + 9, run.out.find(':', at) - at - 9);
}

TEST(StudyBest, SearchReportAndLaunchScriptNameTheSameMeasuredBest) {
  TempDir dir;
  const std::string store = dir / "s";
  const nlohmann::json search = Json(RunTunepar(Search(store, 6, "")));
  ASSERT_EQ(search["best_basis"]["basis"], "measured") << search.dump(2);
  const std::string best = search["best_basis"]["layout"];
  EXPECT_EQ(search["best"][0]["layout"], best);  // the list starts with it
  const nlohmann::json report = Json(RunTunepar("--store " + store + " --json report --shap"));
  EXPECT_EQ(report["best_basis"]["layout"], best);
  EXPECT_EQ(report["best"][0]["layout"], best);  // the table starts with it
  EXPECT_EQ(report["shap"]["local"]["layout"], best);
  EXPECT_EQ(ScriptedLayout(store), best);
}

// Every trial went OOM: the best is the surrogate's, labelled so, and needs less memory in some
// component than every layout that went OOM (the performance model's breakdown).
TEST(StudyBest, WithEveryTrialOomTheBestIsLikelyToFitAndSaysItIsNotMeasured) {
  TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun run = RunTunepar(Search(store, 5, "--oom-above 0"));
  const nlohmann::json search = Json(run);
  ASSERT_EQ(search["best_basis"]["basis"], "below-ooms") << run.out << run.err;
  const std::string best = search["best_basis"]["layout"];
  EXPECT_NE(search["best_basis"]["header"].get<std::string>().find("not measured"), std::string::npos);
  const testing::CliRun report = RunTunepar("--store " + store + " report --shap");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("Best layout: " + best), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("each of the 5 layouts that went OOM"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("Why " + best + " is best"), std::string::npos) << report.out;
  EXPECT_EQ(ScriptedLayout(store), best);
  auto memory = [&](const std::string& layout) {
    return Json(RunTunepar("--json predict --world 2 --model tiny --hardware " + kTestCpu + " --layout " + layout))["memory"];
  };
  const nlohmann::json mine = memory(best);
  const nlohmann::json shown = Json(RunTunepar("--store " + store + " --json show --all " + testing::OnlyStudy(store)));
  int ooms = 0;
  for (const auto& t : shown["trials"]) {
    if (t["status"] != "oom") continue;
    ++ooms;
    const nlohmann::json other = memory(t["layout"]);
    bool less_somewhere = false;
    for (const char* c : {"weights", "gradients", "optimizer_states", "activations", "comm_buffers"})
      less_somewhere = less_somewhere || mine[c].get<double>() < other[c].get<double>();
    EXPECT_TRUE(less_somewhere) << best << " needs no less memory than " << t["layout"];
  }
  EXPECT_EQ(ooms, 5);
}

// Issue 28 item 10: after OOMs and no ok trial, the layout offered is one the OOM evidence does
// not condemn (untried, predicted to need less memory than every layout that went OOM) and the
// one the performance model ranks fastest among those.
TEST(StudyBest, AfterOomsTheOfferIsTheModelsFastestLayoutBelowEveryOom) {
  TempDir dir;
  const std::string store = dir / "s";
  const nlohmann::json search = Json(RunTunepar(Search(store, 4, "--oom-above 0")));
  ASSERT_EQ(search["best_basis"]["basis"], "below-ooms") << search.dump(2);
  const std::string offered = search["best_basis"]["layout"];
  // Every legal layout's prediction, from a dry run of the same problem.
  const std::string dry = dir / "dry";
  ASSERT_EQ(RunTunepar("--store " + dry + " search --world 2 --model tiny --hardware " + kTestCpu).exit_code, 0);
  const nlohmann::json predicted = Json(RunTunepar("--store " + dry + " --json export"));
  std::map<std::string, nlohmann::json> by_layout;
  for (const auto& t : predicted["trials"]) by_layout[t["layout"]] = t;
  ASSERT_TRUE(by_layout.count(offered) > 0) << offered;
  const nlohmann::json shown = Json(RunTunepar("--store " + store + " --json show --all " + testing::OnlyStudy(store)));
  double least_oom = 1e300;
  std::set<std::string> tried;
  for (const auto& t : shown["trials"]) {
    tried.insert(t["layout"].get<std::string>());
    if (t["status"] == "oom") least_oom = std::min(least_oom, by_layout.at(t["layout"])["predicted_memory_bytes"].get<double>());
  }
  ASSERT_LT(least_oom, 1e300);
  const nlohmann::json& mine = by_layout.at(offered);
  EXPECT_EQ(tried.count(offered), 0u) << offered << " was tried already";
  EXPECT_LT(mine["predicted_memory_bytes"].get<double>(), least_oom) << offered;
  // The study's program receives neither zero, sp nor fa: its layouts have zero0, sp0, fa0.
  for (const auto& [key, t] : by_layout) {
    if (t["zero"] != 0 || t["seq_parallel"] != false || t["flash_attention"] != false) continue;
    if (t["status"] != "ok" || tried.count(key) > 0 || !(t["predicted_memory_bytes"].get<double>() < least_oom)) continue;
    EXPECT_GE(t["predicted_step_time_s"].get<double>(), mine["predicted_step_time_s"].get<double>())
        << key << " is predicted faster than " << offered << ", and below every OOM too";
  }
}

// ZeRO-1 is legal only with dp > 1 (on world 2: tp = pp = 1). Its credit in the explanation of the
// model's best layout stays near its one-at-a-time effect there (0.031 in natural log), not the
// effect of tp and pp that it is only legal with. (On the space of 2026-11, whose zero is 0 or 1.)
TEST(StudyBest, ZeroIsCreditedOnlyWithItsOwnEffect) {
  const testing::CliRun run = RunTunepar("--json report --of-model --world 2 --model tiny --hardware local-cpu --space " +
                                         std::string(testing::kSpace2026_11));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json local = Json(run)["shap"]["local"];
  double zero = NAN, sum = 0;
  for (const auto& c : local["contributions"]) {
    sum += c["phi"].get<double>();
    if (c["knob"] == "zero") zero = c["phi"];
  }
  EXPECT_GE(zero, 0.0) << local.dump(2);
  EXPECT_LE(zero, 0.045) << local.dump(2);
  EXPECT_NEAR(sum, local["value"].get<double>() - local["baseline"].get<double>(), 1e-9);
}

}  // namespace
}  // namespace tunepar
