// `tunepar report`: summaries, knob importance, charts that render, and studies with little data.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"

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

// The tick labels of a chart's axis: the numbers the axes write right-aligned (y) or centred
// under the plot (x).
std::vector<std::string> TickLabels(const std::string& svg, const std::string& anchor) {
  static const std::regex kNumber("-?[0-9.]+(e[-+]?[0-9]+)?[kM]?");
  const std::regex text("<text [^>]*font-size=\"12\" text-anchor=\"" + anchor + "\">([^<]*)</text>");
  std::vector<std::string> labels;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator(); ++it) {
    const std::string label = (*it)[1];
    if (std::regex_match(label, kNumber)) labels.push_back(label);
  }
  return labels;
}

double TickValue(const std::string& label) {
  const char suffix = label.back();
  const double scale = suffix == 'k' ? 1e3 : suffix == 'M' ? 1e6 : 1.0;
  return std::stod(suffix == 'k' || suffix == 'M' ? label.substr(0, label.size() - 1) : label) * scale;
}

// Every chart in `svg_dir` renders to a PNG of some size (next to the directory), has no NaN and
// no negative tick; the stdout of the report that wrote them names each one. Returns the charts
// by file name.
std::map<std::string, std::string> ExpectChartsReadRight(const std::string& svg_dir, const std::string& out) {
  std::map<std::string, std::string> charts;
  for (const auto& entry : std::filesystem::directory_iterator(svg_dir)) {
    const std::string path = entry.path().string(), name = entry.path().filename().string();
    const std::string png = svg_dir + "-" + entry.path().stem().string() + ".png";
    EXPECT_EQ(std::system(("rsvg-convert '" + path + "' -o '" + png + "'").c_str()), 0) << path;
    EXPECT_GT(std::filesystem::file_size(png), 3000u) << png;
    const std::string text = testing::ReadFile(path);
    ExpectNoNan(text);
    if (name.rfind("dependence-", 0) != 0) {  // contributions are signed; every other axis is not
      for (const char* anchor : {"end", "middle"}) {
        for (const std::string& label : TickLabels(text, anchor))
          EXPECT_NE(label[0], '-') << name << ": " << label;
      }
    }
    EXPECT_NE(out.find("wrote " + path), std::string::npos) << path << " not named in:\n" << out;
    charts[name] = text;
  }
  return charts;
}

// The convergence chart counts trials: whole-number ticks only.
void ExpectWholeTrialTicks(const std::string& convergence, const std::vector<std::string>& expected = {}) {
  const std::vector<std::string> ticks = TickLabels(convergence, "middle");
  ASSERT_FALSE(ticks.empty());
  for (const std::string& t : ticks)
    EXPECT_EQ(t.find('.'), std::string::npos) << "fractional trial tick " << t;
  if (!expected.empty()) {
    EXPECT_EQ(ticks, expected);
  }
}

// A log axis: "log scale" in the axis labels, and every tick a whole number times a power of ten.
void ExpectLogAxes(const std::string& svg) {
  EXPECT_NE(svg.find("log scale"), std::string::npos);
  for (const char* anchor : {"end", "middle"}) {
    const std::vector<std::string> ticks = TickLabels(svg, anchor);
    EXPECT_GE(ticks.size(), 2u) << anchor;
    for (const std::string& t : ticks) {
      const double v = TickValue(t);
      ASSERT_GT(v, 0) << t;
      const double mantissa = v / std::pow(10.0, std::floor(std::log10(v) + 1e-9));
      EXPECT_NEAR(mantissa, std::round(mantissa), 1e-6) << t;
    }
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

// On the space of 2026-11 (ZeRO 0-1), where tp and the micro-batch outrank ZeRO-1; in the default
// space of issue 34 ZeRO 2-3 make room for layouts nothing else fits, and zero ranks above tp.
TEST(Report, OfModelRanksKnobsAndTheLocalExplanationAddsUp) {
  const std::string space = std::string(" --space ") + testing::kSpace2026_11;
  const testing::CliRun run = RunTunepar("--json report --of-model --world 3072" + space);
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
  const testing::CliRun text = RunTunepar("report --of-model --world 3072" + space);
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
  // Six trials of five layouts (one confirmation measures the best again): one row per layout.
  for (const char* part : {"trials 6", "Best 5 layouts, measured: every layout with an ok trial", "Best so far",
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
  const std::map<std::string, std::string> rendered = ExpectChartsReadRight(svg, run.out);
  ExpectWholeTrialTicks(rendered.at("convergence.svg"), {"1", "2", "3", "4", "5", "6"});
  ExpectLogAxes(rendered.at("predicted-vs-measured.svg"));
  EXPECT_NE(rendered.at("predicted-vs-measured.svg").find("within 25%"), std::string::npos);
  ExpectLogAxes(rendered.at("predicted-throughput-vs-memory.svg"));
  // The noise floor: drawn, explained in the subtitle and the text, and in the JSON.
  EXPECT_NE(rendered.at("importance.svg").find("noise floor"), std::string::npos);
  EXPECT_NE(rendered.at("importance.svg").find("24 refits"), std::string::npos);
  EXPECT_NE(run.out.find("Noise floor "), std::string::npos) << run.out;
  const testing::CliRun json = RunTunepar("--json --store " + store + " report --shap");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json floor = nlohmann::json::parse(json.out)["shap"]["noise_floor"];
  EXPECT_GT(floor["value"].get<double>(), 0) << floor;
  EXPECT_EQ(floor["refits"], 24);
  EXPECT_NE(floor["method"].get<std::string>().find("shuffled"), std::string::npos) << floor;
}

// Charts of a study with one trial, with only OOMs, and with only crashes: written without
// --shap, each named, none with a NaN, a negative tick or a fractional trial; what cannot be
// drawn is said.
TEST(Report, ChartsOfStudiesWithLittleDataReadRight) {
  TempDir dir;
  struct Case {
    std::string name, flags;
    std::string convergence_mark;  // in convergence.svg's legend
  };
  for (const Case& c : {Case{"one", "", "ok (1)"}, Case{"oom", "--oom-above 0.1", "out of memory (5)"},
                        Case{"crash", "--crash", "failed: crash"}}) {
    SCOPED_TRACE(c.name);
    const std::string store = dir / c.name;
    RunTunepar(Search(store, c.name == "one" ? 1 : 5, c.flags));  // exit 8 when every trial failed alike
    const std::string svg = dir / (c.name + "-charts");
    const testing::CliRun run = RunTunepar("--store " + store + " report --svg " + svg);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const std::map<std::string, std::string> charts = ExpectChartsReadRight(svg, run.out);
    ASSERT_TRUE(charts.count("convergence.svg")) << run.out;
    ASSERT_TRUE(charts.count("predicted-throughput-vs-memory.svg")) << run.out;
    const std::string& convergence = charts.at("convergence.svg");
    EXPECT_NE(convergence.find(c.convergence_mark), std::string::npos) << convergence;
    if (c.name == "one") {
      ExpectWholeTrialTicks(convergence, {"1"});
      ExpectLogAxes(charts.at("predicted-vs-measured.svg"));
    } else {
      ExpectWholeTrialTicks(convergence);
      EXPECT_FALSE(charts.count("predicted-vs-measured.svg"));
      EXPECT_NE(run.out.find("no predicted-vs-measured chart: no trial finished ok"), std::string::npos)
          << run.out;
      EXPECT_NE(convergence.find("no trial finished ok"), std::string::npos);
    }
  }
}

// All measurements equal: whatever importance the surrogate gives a knob is noise, and the
// chart and the table say so instead of printing shares.
TEST(Report, EqualMeasurementsLeaveEveryKnobUnderTheNoiseFloor) {
  TempDir dir;
  const std::string store = dir / "flat";
  const testing::CliRun search = RunTunepar(
      "--store " + store + " search --world 2 --model tiny --hardware " + kTestCpu +
      " --backend command --command 'echo step_time: 1.5 {tp} {pp} {mbs} {precision} {recompute} {vpp}' "
      "--metric-regex 'step_time: ([0-9.]+)' --budget 8 --node-id n0");
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const std::string svg = dir / "charts";
  const testing::CliRun run = RunTunepar("--store " + store + " report --shap --svg " + svg);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("Every knob is under the noise floor"), std::string::npos) << run.out;
  const size_t table = run.out.find("\nknob "), table_end = run.out.find("Noise floor ");
  ASSERT_LT(table, table_end) << run.out;
  const std::string knob_table = run.out.substr(table, table_end - table);
  EXPECT_EQ(knob_table.find("%  "), std::string::npos) << "a share in the knob table:\n" << knob_table;
  EXPECT_NE(knob_table.find("under floor"), std::string::npos) << knob_table;
  const std::map<std::string, std::string> charts = ExpectChartsReadRight(svg, run.out);
  const std::string& importance = charts.at("importance.svg");
  EXPECT_NE(importance.find("noise floor"), std::string::npos);
  EXPECT_NE(importance.find("stroke-dasharray=\"6 4\""), std::string::npos);  // the floor's line
  EXPECT_FALSE(std::regex_search(importance, std::regex("\\([0-9]+%\\)"))) << "a share printed:\n"
                                                                           << importance;
  const testing::CliRun json = RunTunepar("--json --store " + store + " report --shap");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json shap = nlohmann::json::parse(json.out)["shap"];
  EXPECT_GT(shap["noise_floor"]["value"].get<double>(), 0);
  for (const auto& k : shap["knobs"]) EXPECT_TRUE(k["under_noise_floor"].get<bool>()) << k;
}

// A model study: no measurement, yet `report --svg` without --shap writes a chart, names it,
// and says why the measurement charts are missing; its knob analysis has no noise floor.
TEST(Report, AModelStudyGetsChartsWithoutShap) {
  TempDir dir;
  const std::string store = dir / "model";
  const testing::CliRun search = RunTunepar(
      "--store " + store + " search --world 2 --model tiny --hardware " + kTestCpu + " --backend model");
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const std::string svg = dir / "charts";
  const testing::CliRun run = RunTunepar("--store " + store + " report --svg " + svg);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::map<std::string, std::string> charts = ExpectChartsReadRight(svg, run.out);
  ASSERT_GE(charts.size(), 1u);
  ASSERT_TRUE(charts.count("predicted-throughput-vs-memory.svg"));
  ExpectLogAxes(charts.at("predicted-throughput-vs-memory.svg"));
  EXPECT_NE(run.out.find("no convergence or predicted-vs-measured chart: a model study measures nothing"),
            std::string::npos)
      << run.out;
  const testing::CliRun json = RunTunepar("--json --store " + store + " report --shap");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json floor = nlohmann::json::parse(json.out)["shap"]["noise_floor"];
  EXPECT_TRUE(floor["value"].is_null());
  EXPECT_EQ(floor["method"], "no noise floor: the performance model is deterministic");
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
  // Crashes say nothing of speed or memory: nothing is recommended, nor explained.
  EXPECT_NE(run.out.find("No layout to explain: no layout to recommend: all 3 finished trials failed without running "
                         "out of memory"),
            std::string::npos)
      << run.out;
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
  run = RunTunepar("--store " + none + " report --shap --svg " + (dir / "none-charts"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("interrupted 1"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("no convergence chart: the study has no finished trial"), std::string::npos)
      << run.out;
  EXPECT_FALSE(ExpectChartsReadRight(dir / "none-charts", run.out).empty());
  ExpectNoNan(run.out);
  // Several studies and none named.
  ASSERT_EQ(RunTunepar(Search(one, 2, "--sleep 0.01")).exit_code, 0);  // another command: another study
  run = RunTunepar("--store " + one + " report");
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_NE(run.err.find("name one"), std::string::npos) << run.err;
}

// Issue 28 item 4: where layouts were measured again, the noise floor is what the repeats say;
// precision (fp32 is 40% slower in the fake trainer, whose repeats agree exactly) matters.
TEST(Report, RepeatsSetTheNoiseFloorAndAKnobFarAboveItMatters) {
  TempDir dir;
  ASSERT_EQ(RunTunepar(Search(dir / "s", 12, "") + " --confirm 4").exit_code, 0);
  const testing::CliRun run = RunTunepar("--store " + (dir / "s") + " --json report --shap");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json shap = nlohmann::json::parse(run.out)["shap"];
  EXPECT_NE(shap["noise_floor"]["method"].get<std::string>().find("spread of repeated measurements"),
            std::string::npos)
      << shap["noise_floor"].dump();
  bool precision = false;
  for (const auto& k : shap["knobs"]) {
    if (k["knob"] != "precision") continue;
    precision = true;
    EXPECT_FALSE(k["under_noise_floor"].get<bool>()) << k.dump() << shap["noise_floor"].dump();
  }
  EXPECT_TRUE(precision);
  const testing::CliRun text = RunTunepar("--store " + (dir / "s") + " report --shap");
  EXPECT_EQ(text.out.find("Every knob is under the noise floor"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace tunepar
