// `tunepar search --backend command` end to end, with a fake trainer as the command: crash-safe
// deterministic resume, failures as data, concurrent nodes, signals, bad input.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/process_group.h"
#include "store/schema.h"
#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"
#include "tuner/output/trial_output.h"

namespace tunepar {
namespace {

namespace fs = std::filesystem;

using testing::NoTrialProcessesLeft;
using testing::OnlyStudy;
using testing::kTestCpu;
using testing::RunTunepar;
using testing::Spawn;
using testing::StudyId;
using testing::TempDir;
using testing::Trial;
using testing::Trials;
using testing::Wait;

std::string Command(const std::string& extra) {
  return std::string("'") + TUNEPAR_FAKE_TRAINER +
         " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision} --recompute {recompute} --vpp {vpp} " +
         extra + "'";
}

std::string SearchArgs(const std::string& store, int budget, const std::string& trainer_flags,
                       const std::string& extra = "") {
  return "--store " + store +
         " search --world 2 --model tiny --hardware " + kTestCpu + " --backend command --command " +
         Command(trainer_flags) + " --metric-regex 'step_time: ([0-9.]+)' --budget " +
         std::to_string(budget) + " --node-id n0 " + extra;
}

std::vector<std::string> FinishedSequence(const std::vector<Trial>& trials) {
  std::vector<std::string> seq;
  for (const Trial& t : trials) {
    if (t.status != "running" && t.status != "interrupted" && t.status != "queued") seq.push_back(t.layout);
  }
  return seq;
}

// Runs the search once uninterrupted, then again under eight SIGKILLs at random moments and a
// final run to the end: both must finish the same layouts in the same order. Returns the
// uninterrupted run's trials.
std::vector<Trial> ExpectKilledAndResumedEqualsUninterrupted(const std::string& flags) {
  TempDir dir;
  const std::string reference = dir / "reference";
  const testing::CliRun full = RunTunepar(SearchArgs(reference, 20, flags));
  EXPECT_EQ(full.exit_code, 0) << full.out << full.err;
  const std::vector<Trial> reference_trials = Trials(reference, OnlyStudy(reference));
  const std::vector<std::string> expected = FinishedSequence(reference_trials);

  EXPECT_EQ(expected.size(), 20u);
  // The last fifth of the budget may measure leading layouts again (confirmation trials).
  EXPECT_GE(std::set<std::string>(expected.begin(), expected.end()).size(), 16u);

  const std::string store = dir / "killed";
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> delay_ms(150, 900);
  int kills = 0;
  for (int round = 0; round < 8; ++round) {
    const pid_t pid = Spawn(SearchArgs(store, 20, flags), dir / "out.txt");
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    if (kill(pid, SIGKILL) == 0) ++kills;
    Wait(pid);
    const std::string study = OnlyStudy(store);
    if (!study.empty()) {
      EXPECT_TRUE(NoTrialProcessesLeft(StudyId(store, study))) << "round " << round;
    }
  }
  EXPECT_GE(kills, 4);
  const testing::CliRun finish = RunTunepar(SearchArgs(store, 20, flags));
  EXPECT_EQ(finish.exit_code, 0) << finish.out << finish.err;
  const std::string study = OnlyStudy(store);
  const std::vector<Trial> trials = Trials(store, study);
  EXPECT_EQ(FinishedSequence(trials), expected);
  for (const Trial& t : trials) EXPECT_NE(t.status, "running");
  EXPECT_TRUE(NoTrialProcessesLeft(StudyId(store, study)));
  // A further run finds the budget reached and runs nothing.
  const testing::CliRun again = RunTunepar(SearchArgs(store, 20, flags));
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.out.find("budget of 20 trials is reached"), std::string::npos) << again.out;
  EXPECT_EQ(Trials(store, study).size(), trials.size());
  return reference_trials;
}

TEST(SearchLoop, KilledAndResumedSearchEqualsAnUninterruptedOne) {
  // Each trial also leaves a child that must not survive.
  ExpectKilledAndResumedEqualsUninterrupted("--sleep 0.08 --child 30");
}

// The fake trainer runs out of memory above 20 GiB, where the model predicts more: the search
// probes past the predicted limit, and the probes' count and outcomes replay on resume.
TEST(SearchLoop, KilledAndResumedSearchWithProbesEqualsAnUninterruptedOne) {
  const std::vector<Trial> reference =
      ExpectKilledAndResumedEqualsUninterrupted("--sleep 0.08 --oom-above 20");
  const long probes = std::count_if(reference.begin(), reference.end(),
                                    [](const Trial& t) { return t.role == "probe"; });
  EXPECT_GE(probes, 1) << "the uninterrupted search probed nothing: this test no longer tests probes";
}

// SIGKILL while a probe runs: the resumed search runs that probe again as the probe, so with one
// probe allowed it probes nothing more, and it finishes what an uninterrupted search finishes.
TEST(SearchLoop, KilledDuringAProbeResumesItAsTheProbe) {
  TempDir dir;
  const std::string flags = "--sleep 1 --oom-above 20";
  const std::string reference = dir / "reference";
  const testing::CliRun full = RunTunepar(SearchArgs(reference, 12, flags, "--max-probes 1"));
  ASSERT_EQ(full.exit_code, 0) << full.out << full.err;
  const std::vector<Trial> reference_trials = Trials(reference, OnlyStudy(reference));
  const auto is_probe = [](const Trial& t) { return t.role == "probe" && t.status != "interrupted"; };
  ASSERT_EQ(std::count_if(reference_trials.begin(), reference_trials.end(), is_probe), 1)
      << "the uninterrupted search should probe once: " << full.out;

  const std::string store = dir / "killed";
  const pid_t pid = Spawn(SearchArgs(store, 12, flags, "--max-probes 1"), dir / "out.txt");
  bool killed = false;
  for (int i = 0; i < 600 && !killed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string study = OnlyStudy(store);
    if (study.empty()) continue;
    for (const Trial& t : Trials(store, study)) {
      if (t.role == "probe" && t.status == "running") killed = kill(pid, SIGKILL) == 0;
    }
  }
  Wait(pid);
  ASSERT_TRUE(killed) << "no probe was seen running";
  const testing::CliRun finish = RunTunepar(SearchArgs(store, 12, flags, "--max-probes 1"));
  ASSERT_EQ(finish.exit_code, 0) << finish.out << finish.err;
  const std::vector<Trial> trials = Trials(store, OnlyStudy(store));
  EXPECT_EQ(FinishedSequence(trials), FinishedSequence(reference_trials)) << finish.out;
  EXPECT_EQ(std::count_if(trials.begin(), trials.end(), is_probe), 1) << finish.out;
}

// With no repeat, the best's chance of being the fastest rests on an assumed noise, and a rounded
// certainty ("100% likely") is a claim no data shows: the summary says neither.
TEST(SearchLoop, TheBestsChanceClaimsOnlyWhatTheMeasurementsShow) {
  TempDir dir;
  const testing::CliRun run = RunTunepar(SearchArgs(dir / "s", 3, "--sleep 0.01", "--confirm 0"));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const size_t at = run.out.find("  estimate: ");
  ASSERT_NE(at, std::string::npos) << run.out;
  const std::string estimate = run.out.substr(at, run.out.find('\n', at) - at);
  EXPECT_NE(estimate.find("no repeat yet"), std::string::npos) << estimate;
  EXPECT_NE(estimate.find("likely the fastest measured if that noise holds)"), std::string::npos) << estimate;
  EXPECT_EQ(estimate.find("100%"), std::string::npos) << estimate;
  EXPECT_EQ(estimate.find(" 0% likely"), std::string::npos) << estimate;
}

TEST(SearchLoop, FailuresAreRecordedAndTheSearchGoesOn) {
  TempDir dir;
  const std::string store = dir / "s";
  // mbs 1 hangs (killed after 0.5 s), mbs 2 crashes, large memory runs out of it.
  const testing::CliRun run =
      RunTunepar(SearchArgs(store, 14, "--hang-mbs 1 --crash-mbs 2 --oom-above 20", "--timeout 0.5"));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::map<std::string, int> by_status;
  const std::vector<Trial> trials = Trials(store, OnlyStudy(store));
  for (const Trial& t : trials) ++by_status[t.status];
  EXPECT_EQ(trials.size(), 14u);
  EXPECT_GE(by_status["ok"], 2) << run.out;
  EXPECT_GE(by_status["oom"], 1) << run.out;
  EXPECT_GE(by_status["timeout"], 1) << run.out;
  EXPECT_NE(run.out.find("Best layout:"), std::string::npos);
  EXPECT_TRUE(NoTrialProcessesLeft(StudyId(store, OnlyStudy(store))));
  // Failures teach: the trials after the first OOM and the first hang are not all failures.
  int ok_after_failures = 0;
  bool seen_oom = false, seen_timeout = false;
  for (const Trial& t : trials) {
    if (seen_oom && seen_timeout && t.status == "ok") ++ok_after_failures;
    seen_oom = seen_oom || t.status == "oom";
    seen_timeout = seen_timeout || t.status == "timeout";
  }
  EXPECT_GE(ok_after_failures, 1) << run.out;
}

TEST(SearchLoop, HangsAndCrashesAreClassified) {
  TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun run = RunTunepar(SearchArgs(store, 6, "--hang", "--timeout 0.5"));
  // Every trial hangs: timeouts, six of them, and then the run says so.
  EXPECT_EQ(run.exit_code, kExitTrialsFailed) << run.out << run.err;
  EXPECT_NE(run.err.find("every trial failed the same way"), std::string::npos) << run.err;
  for (const Trial& t : Trials(store, OnlyStudy(store))) EXPECT_EQ(t.status, "timeout");
  EXPECT_TRUE(NoTrialProcessesLeft(StudyId(store, OnlyStudy(store))));
}

TEST(SearchLoop, EightNodesAndAReaderShareOneStore) {
  TempDir dir;
  const std::string store = dir / "s";
  std::vector<pid_t> pids;
  for (int node = 0; node < 8; ++node) {
    // A seed per node: eight studies, each with exactly its budget of trials.
    std::string args = SearchArgs(store, 4, "--sleep 0.05", "--seed " + std::to_string(node));
    args.replace(args.find("--node-id n0"), 12, "--node-id n" + std::to_string(node));
    pids.push_back(Spawn(args, dir / ("out" + std::to_string(node))));
  }
  int reads = 0;
  bool running = true;
  while (running) {
    const testing::CliRun list = RunTunepar("--store " + store + " list");
    EXPECT_TRUE(list.exit_code == 0) << list.err;
    EXPECT_EQ(list.err.find("locked"), std::string::npos) << list.err;
    ++reads;
    running = false;
    for (pid_t pid : pids) running = running || waitpid(pid, nullptr, WNOHANG) == 0;
  }
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  for (int node = 0; node < 8; ++node) {
    const std::string out = testing::ReadFile(dir / ("out" + std::to_string(node)));
    EXPECT_EQ(out.find("locked"), std::string::npos) << out;
    EXPECT_NE(out.find("budget of 4 trials is reached"), std::string::npos) << out;
  }
  const testing::CliRun list = RunTunepar("--store " + store + " --json list");
  const nlohmann::json studies = nlohmann::json::parse(list.out);
  ASSERT_EQ(studies.size(), 8u);
  int rows = 0;
  for (const auto& s : studies) rows += s["trial_count"].get<int>();
  EXPECT_EQ(rows, 32);
  EXPECT_GT(reads, 0);
}

TEST(SearchLoop, SigtermStopsTheTrialAndResumeRerunsIt) {
  TempDir dir;
  const std::string store = dir / "s";
  const std::string flags = "--child 60";
  const pid_t pid = Spawn(SearchArgs(store, 3, flags, "--env FAKE_TRAINER_SLEEP=3"), dir / "out.txt");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // the first trial is running
  kill(pid, SIGTERM);
  EXPECT_EQ(Wait(pid), 128 + SIGTERM) << testing::ReadFile(dir / "out.txt");
  const std::string study = OnlyStudy(store);
  ASSERT_FALSE(study.empty()) << testing::ReadFile(dir / "out.txt");
  std::vector<Trial> trials = Trials(store, study);
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].status, "interrupted");
  EXPECT_TRUE(NoTrialProcessesLeft(StudyId(store, study)));
  // The environment is not part of the study (the command template is): the same study resumes,
  // faster, and re-runs the interrupted trial first, under its own number.
  const testing::CliRun resume = RunTunepar(SearchArgs(store, 3, flags, "--env FAKE_TRAINER_SLEEP=0.05"));
  ASSERT_EQ(resume.exit_code, 0) << resume.out << resume.err;
  EXPECT_NE(resume.out.find("resumed"), std::string::npos);
  trials = Trials(store, OnlyStudy(store));
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].status, "ok");
  EXPECT_EQ(trials[0].attempt, 2);
  EXPECT_EQ(trials[0].layout, Trials(store, study)[0].layout);
}

TEST(SearchLoop, NewStartsAFreshStudyOfTheSameInputs) {
  TempDir dir;
  const std::string store = dir / "s";
  ASSERT_EQ(RunTunepar(SearchArgs(store, 2, "")).exit_code, 0);
  // --new twice: two more studies, each of its own, none of the finished trials reused.
  for (int fresh = 1; fresh <= 2; ++fresh) {
    const testing::CliRun run = RunTunepar(SearchArgs(store, 2, "", "--new"));
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_NE(run.out.find("(new; 0 finished trials so far)"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("-" + std::to_string(fresh + 1) + " (new"), std::string::npos) << run.out;
  }
  const testing::CliRun list = RunTunepar("--store " + store + " --json list");
  const nlohmann::json studies = nlohmann::json::parse(list.out);
  ASSERT_EQ(studies.size(), 3u);
  for (const auto& st : studies) EXPECT_EQ(st["trial_count"].get<int>(), 2) << st.dump();
}

TEST(SearchLoop, ASecondTuneparOnTheSameNodeIsRefused) {
  TempDir dir;
  const std::string store = dir / "s";
  const pid_t pid = Spawn(SearchArgs(store, 3, "--sleep 5"), dir / "out.txt");
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  const testing::CliRun second = RunTunepar(SearchArgs(store, 3, "--sleep 5"));
  EXPECT_EQ(second.exit_code, kExitStore) << second.err;
  EXPECT_NE(second.err.find("node id 'n0' is in use"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("--node-id"), std::string::npos);
  kill(pid, SIGINT);
  EXPECT_EQ(Wait(pid), 128 + SIGINT);
}

TEST(SearchLoop, BadInputIsRefusedBeforeAnythingRuns) {
  TempDir dir;
  const std::string store = dir / "s";
  testing::CliRun run =
      RunTunepar("--store " + store +
                 " search --world 2 --model tiny --hardware local-cpu --backend command --command "
                 "'train --tp {tpp}' --metric-regex 'x([0-9]+)'");
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_NE(run.err.find("unknown placeholder {tpp}"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(store));  // nothing was created

  run = RunTunepar(SearchArgs(store, 5, "") + " --resume-only");
  EXPECT_EQ(run.exit_code, kExitNotFound) << run.err;
  EXPECT_FALSE(std::filesystem::exists(store));

  // A metric that is never printed: each trial is invalid, and after three the run stops.
  run = RunTunepar(SearchArgs(store, 10, "--quiet"));
  EXPECT_EQ(run.exit_code, kExitTrialsFailed) << run.out << run.err;
  EXPECT_NE(run.err.find("no match for --metric-regex"), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1);
  for (const Trial& t : Trials(store, OnlyStudy(store))) EXPECT_EQ(t.status, "invalid");

  // A store written by a newer tunepar: refused, untouched.
  const std::string shard = testing::NodeShard(store, "n0");
  ASSERT_FALSE(shard.empty());
  ASSERT_EQ(std::system(("sqlite3 " + shard + " 'PRAGMA user_version = 9'").c_str()), 0);
  const auto before = testing::SnapshotFiles(store);
  run = RunTunepar(SearchArgs(store, 10, ""));
  EXPECT_EQ(run.exit_code, kExitSchemaTooNew) << run.err;
  EXPECT_EQ(testing::SnapshotFiles(store), before);
}

TEST(SearchLoop, ProgressLinesAndTheFinalSummary) {
  TempDir dir;
  const testing::CliRun run = RunTunepar(SearchArgs(dir / "s", 4, ""));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("trial n0/1 (1/4)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("trial n0/4 (4/4)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("(model "), std::string::npos);
  EXPECT_NE(run.out.find("Best layout:"), std::string::npos);
  EXPECT_NE(run.out.find("The model's top layout"), std::string::npos);
  EXPECT_EQ(run.out.find("\r"), std::string::npos);  // no progress bar when not on a terminal
  // Hints that work when pasted: the same store, and a larger budget once it is reached.
  EXPECT_NE(run.out.find("Inspect: tunepar --store " + (dir / "s") + " show "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("To go on: run the same command with a larger --budget"), std::string::npos) << run.out;
  const testing::CliRun json = RunTunepar("--json " + SearchArgs(dir / "s2", 3, ""));
  ASSERT_EQ(json.exit_code, 0);
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["trial_count"].get<int>(), 3);
  ASSERT_TRUE(j["best"].is_array() && !j["best"].empty()) << j.dump();
  EXPECT_TRUE(j["best"][0].contains("layout"));
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

// A store written by the previous version (schema 1: tests/data/v1-store/n0.sql) resumes under
// the same study id: its finished trials are not run again, the trial its tuner left running is
// re-run first, and the shard moves to the current schema.
TEST(SearchLoop, AStoreFromSchemaOneResumesUnderTheSameStudyId) {
  TempDir dir;
  const std::string store = dir / "s";
  const std::string data = std::string(TUNEPAR_SOURCE_DIR) + "/tests/data/";
  std::filesystem::create_directories(store + "/shards");
  ASSERT_EQ(std::system(("sqlite3 " + store + "/shards/n0.sqlite < " + data + "v1-store/n0.sql").c_str()), 0);
  const testing::CliRun run = RunTunepar(
      "--store " + store + " search --world 2 --model " + data + "v1-store/model.toml --space " + data +
      "v1-store/space.toml --hardware " + data +
      "test-cpu.toml --backend command --command 'echo tps: $(( {mbs} * 100 + {tp} * 10 ))' --metric-regex "
      "'tps: ([0-9]+)' --metric higher --budget 5 --confirm 0 --seed 7 --acquisition ucb --node-id n0");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("study tiny-w2-9398e629 (resumed; 3 finished trials so far)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("trial n0/4 was left running by a stopped tuner"), std::string::npos) << run.out;
  const std::vector<Trial> trials = Trials(store, "tiny-w2-9398e629");
  ASSERT_EQ(trials.size(), 5u);
  std::set<std::string> layouts;
  for (const Trial& t : trials) {
    EXPECT_EQ(t.status, "ok") << t.number << " " << t.message;
    layouts.insert(t.layout);
  }
  EXPECT_EQ(layouts.size(), 5u);  // nothing measured twice
  EXPECT_EQ(trials[3].number, 4);
  EXPECT_EQ(trials[3].attempt, 2);
  EXPECT_EQ(trials[3].layout, "tp1-pp1-dp2-mbs2-nmb2-fp16-zero1-rcnone-sp0-vpp1-fa1");
  // The study moved into a shard of its own at the current schema; the old file is left as it was.
  const std::string own = store + "/shards/n0/" + testing::StudyId(store, "tiny-w2-9398e629") + ".sqlite";
  EXPECT_EQ(testing::RunCommand("sqlite3 " + own + " 'PRAGMA user_version'").out,
            std::to_string(store::kSchemaVersion) + "\n");
  EXPECT_EQ(testing::RunCommand("sqlite3 " + store + "/shards/n0.sqlite 'PRAGMA user_version'").out, "1\n");
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

// The command's peak memory reaches the store (and from there the memory model); a memory regex
// without a capture group is one line, exit 2, nothing created.
TEST(SearchLoop, ThePeakMemoryTheProgramPrintsIsRecorded) {
  TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun bad = RunTunepar(SearchArgs(store, 2, "--print-memory", "--memory-regex 'max memory'"));
  EXPECT_EQ(bad.exit_code, kExitUsage) << bad.err;
  EXPECT_NE(bad.err.find("--memory-regex 'max memory' has no capture group"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(store));
  const testing::CliRun run = RunTunepar(
      SearchArgs(store, 3, "--print-memory --oom-above 12", "--memory-regex 'max memory allocated: ([0-9.]+ GiB)'"));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const testing::CliRun show = RunTunepar("--json --store " + store + " show " + OnlyStudy(store) + " --all");
  int measured = 0;
  const nlohmann::json shown = nlohmann::json::parse(show.out);
  for (const auto& row : shown["trials"]) {
    if (row["status"] != "ok" && row["status"] != "oom") continue;
    ASSERT_TRUE(row["peak_memory_bytes"].is_number()) << row.dump();
    EXPECT_GT(row["peak_memory_bytes"].get<double>(), 1e9);
    ++measured;
  }
  EXPECT_GE(measured, 1) << show.out;
}

// A template that passes neither vpp nor flash but does pass the trial's directory: every trial
// runs a different program, vpp and flash stay at what the program runs with (1, off), and the
// best layout says they were not measured.
TEST(SearchLoop, KnobsTheCommandNeverReceivesAreFixedAndNotMeasured) {
  TempDir dir;
  const std::string store = dir / "s";
  const std::string space = dir / "wide.toml";
  std::ofstream(space) << "name = \"wide\"\n[knobs]\ntp = \"divisors\"\npp = \"divisors\"\nmicro_batch = [1, 2]\n"
                          "recompute = [\"none\", \"selective\", \"full\"]\nvirtual_stages = [1, 2]\n"
                          "flash_attention = [false, true]\n";
  const std::string command = std::string("'") + TUNEPAR_FAKE_TRAINER +
                              " --tp {tp} --pp {pp} --mbs {mbs} {recompute=full?--recompute full} --sleep 0 "
                              "# {trial_dir} {trial} {seed}'";
  const testing::CliRun run = RunTunepar("--json --store " + store + " search --world 2 --model tiny --hardware " +
                                         kTestCpu + " --space " + space + " --backend command --command " + command +
                                         " --metric-regex 'step_time: ([0-9.]+)' --budget 40 --node-id n0");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const nlohmann::json summary = nlohmann::json::parse(run.out);
  EXPECT_EQ(summary["unmeasured_knobs"]["virtual_stages"], "1") << summary.dump();
  EXPECT_EQ(summary["unmeasured_knobs"]["flash_attention"], "off") << summary.dump();
  EXPECT_FALSE(summary["unmeasured_knobs"].contains("recompute"));
  // The best comes with its uncertainty (the stand-in trainer is deterministic: a small one).
  ASSERT_TRUE(summary["best_estimate"].is_object()) << summary.dump();
  EXPECT_EQ(summary["best_estimate"]["layout"], summary["best"][0]["layout"]) << summary.dump();
  EXPECT_GE(summary["best_estimate"]["measurements"].get<int>(), 1);
  EXPECT_LT(summary["best_estimate"]["relative_sd"].get<double>(), 0.05);
  const std::string study = OnlyStudy(store);
  const std::vector<Trial> trials = Trials(store, study);
  ASSERT_GE(trials.size(), 6u);
  std::set<std::string> commands;
  for (const Trial& t : trials) {
    EXPECT_NE(t.layout.find("-vpp1-fa0"), std::string::npos) << t.layout;
    if (t.role == "confirmation") continue;  // measured again on purpose
    EXPECT_EQ(t.layout.find("rcselective"), std::string::npos) << t.layout;  // renders as none
    const fs::path trial_dir = fs::path(store) / "trials" / study / ("n0-" + std::to_string(t.number));
    std::string text = testing::ReadFile(trial_dir / "command.txt");
    text = text.substr(0, text.find('#'));  // the per-trial placeholders follow the '#'
    EXPECT_TRUE(commands.insert(text).second) << "two trials ran " << text;
  }
  // Every distinct program was run once, and then the search had nothing left to try.
  EXPECT_LT(trials.size(), 40u);
  const testing::CliRun show = RunTunepar("--store " + store + " show " + study);
  EXPECT_NE(show.out.find("not measured (the program does not receive them): precision bf16, zero 0, seq_parallel "
                          "off, virtual_stages 1, flash_attention off"),
            std::string::npos)
      << show.out;
}

TEST(SearchLoop, FixPinsAKnobAndAnUnknownKnobIsRefused) {
  TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun bad = RunTunepar(SearchArgs(store, 3, "", "--fix tensor=2"));
  EXPECT_EQ(bad.exit_code, kExitUsage) << bad.err;
  EXPECT_NE(bad.err.find("unknown knob 'tensor'"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_FALSE(fs::exists(store));
  const testing::CliRun run = RunTunepar(SearchArgs(store, 4, "", "--fix tp=1 --fix micro_batch=1,2"));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  for (const Trial& t : Trials(store, OnlyStudy(store))) {
    EXPECT_EQ(t.layout.rfind("tp1-", 0), 0u) << t.layout;
    EXPECT_TRUE(t.layout.find("-mbs1-") != std::string::npos || t.layout.find("-mbs2-") != std::string::npos);
  }
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

// Real launchers through the command backend (issue 17, items 19-22 and 24).

// Three refusals under torchrun used to read alike ("exit code 1; last output: ====") and to end
// the run as "every trial failed the same way"; now each trial names its own error, and a run
// that does stop says that the program fails, not the regex.
TEST(RealLaunchers, EachCrashIsToldByTheProgramsOwnError) {
  TempDir dir;
  // (It may stop early when its first three trials happen to fail alike; the messages are the point.)
  const testing::CliRun mixed = RunTunepar(SearchArgs(dir / "a", 4, "--refuse-fp16 --refuse-tp", "--fix precision=fp16,bf16"));
  EXPECT_TRUE(mixed.exit_code == 0 || mixed.exit_code == kExitTrialsFailed) << mixed.out << mixed.err;
  std::set<std::string> messages;
  for (const Trial& t : Trials(dir / "a", OnlyStudy(dir / "a"))) {
    if (t.status == "crash") messages.insert(t.message);
  }
  EXPECT_FALSE(messages.empty());
  for (const std::string& m : messages) {
    EXPECT_TRUE(m == "exit code 1: [rank0]: ValueError: precision fp16 not supported" ||
                m.rfind("exit code 1: [rank0]: AssertionError: tensor parallelism (tp=", 0) == 0)
        << m;
  }
  const testing::CliRun same = RunTunepar(SearchArgs(dir / "b", 6, "--refuse-fp16", "--fix precision=fp16"));
  EXPECT_EQ(same.exit_code, kExitTrialsFailed) << same.out << same.err;
  EXPECT_NE(same.err.find("every trial failed the same way (3 trials): crash: exit code 1: [rank0]: ValueError: "
                          "precision fp16 not supported"),
            std::string::npos)
      << same.err;
  EXPECT_NE(same.err.find("the program itself fails"), std::string::npos) << same.err;
  EXPECT_EQ(same.err.find("regex"), std::string::npos) << same.err;
}

// `| tee` in the template used to turn this crash into `invalid` (the pipe's status is tee's).
TEST(RealLaunchers, APipeInTheTemplateKeepsTheCrash) {
  TempDir dir;
  const testing::CliRun run = RunTunepar(SearchArgs(dir / "s", 6, "--crash | tee " + (dir / "copy.log")));
  EXPECT_EQ(run.exit_code, kExitTrialsFailed) << run.out << run.err;
  EXPECT_NE(run.err.find("crash: exit code 3: Segmentation fault in the fake trainer"), std::string::npos) << run.err;
  for (const Trial& t : Trials(dir / "s", OnlyStudy(dir / "s"))) EXPECT_EQ(t.status, "crash") << t.message;
}

// A program that recovers from an OOM and prints its metric, exit 0: measured, the OOM noted.
TEST(RealLaunchers, AnOomWarningDoesNotOverrideASuccess) {
  TempDir dir;
  const testing::CliRun run = RunTunepar(SearchArgs(dir / "s", 3, "--warn-oom"));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  for (const Trial& t : Trials(dir / "s", OnlyStudy(dir / "s"))) {
    EXPECT_EQ(t.status, "ok") << t.message;
    EXPECT_TRUE(t.details.contains("oom_note")) << t.details.dump();
  }
}

// An OOM no pattern knew was recorded as a crash; --reclassify with the pattern reads the logs
// again, records oom and keeps the crash in the details.
TEST(RealLaunchers, ReclassifyReadsFailedTrialsAgainWithTheNewPattern) {
  TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun first = RunTunepar(SearchArgs(store, 2, "--arena-oom"));
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  const std::string study = OnlyStudy(store);
  for (const Trial& t : Trials(store, study)) EXPECT_EQ(t.status, "crash");
  // Without --reclassify the stored status stays (the study is the same: the pattern is no part of it).
  const testing::CliRun plain = RunTunepar(SearchArgs(store, 2, "--arena-oom", "--oom-pattern 'arena exhausted'"));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(Trials(store, study)[0].status, "crash");
  const testing::CliRun again =
      RunTunepar(SearchArgs(store, 2, "--arena-oom", "--oom-pattern 'arena exhausted' --reclassify"));
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("crash -> oom: out of memory: MyAllocator: arena exhausted"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("reclassified 2 of 2 failed trials read again from their logs"), std::string::npos)
      << again.out;
  EXPECT_EQ(OnlyStudy(store), study);
  const std::vector<Trial> trials = Trials(store, study);
  ASSERT_EQ(trials.size(), 2u);
  for (const Trial& t : trials) {
    EXPECT_EQ(t.status, "oom");
    ASSERT_TRUE(t.details.contains("reclassified_from")) << t.details.dump();
    EXPECT_EQ(t.details["reclassified_from"][0]["status"], "crash");
    EXPECT_EQ(t.details["reclassified_from"][0]["message"], "exit code 1: MyAllocator: arena exhausted");
  }
  // Only the command backend has logs to read again.
  const testing::CliRun model = RunTunepar("--store " + (dir / "m") + " search --world 2 --model tiny --hardware " +
                                           kTestCpu + " --backend model --reclassify");
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_NE(model.err.find("--reclassify reads the logs of the command backend's trials: it needs --backend command"),
            std::string::npos)
      << model.err;
  EXPECT_FALSE(fs::exists(dir / "m"));
}

// An interrupted trial takes no place in the budget: its line names it by its own number.
TEST(RealLaunchers, AnInterruptedTrialsLineNamesTheTrial) {
  TempDir dir;
  const std::string store = dir / "s";
  const pid_t pid = Spawn(SearchArgs(store, 3, "", "--env FAKE_TRAINER_SLEEP=3"), dir / "out.txt");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  kill(pid, SIGTERM);
  EXPECT_EQ(Wait(pid), 128 + SIGTERM);
  const std::string out = testing::ReadFile(dir / "out.txt");
  EXPECT_NE(out.find("trial n0/1 (not counted)  tp"), std::string::npos) << out;
  EXPECT_EQ(out.find("(0/3)"), std::string::npos) << out;
}

// TFLOP/s per GPU of a small run (a CPU, a tiny model) shows its significant digits, not 0.0.
TEST(RealLaunchers, SmallTflopsKeepTheirDigits) {
  store::TrialRecord small, large;
  small.status = large.status = TrialStatus::kOk;
  small.tflops_per_gpu = 0.0042;
  large.tflops_per_gpu = 152.34;
  const std::string table = TrialTable({&small, &large}, false).Render();
  EXPECT_NE(table.find("0.0042"), std::string::npos) << table;
  EXPECT_NE(table.find("152.3"), std::string::npos) << table;
}

// Issue 28 item 8: with a batch, trials finish in any order; each progress line names the trial
// as it is stored (what show and the summary say), beside its place in the budget.
TEST(SearchLoop, EachProgressLineNamesTheTrialAsStored) {
  TempDir dir;
  // Trials of a larger micro-batch end sooner: the batch's trials finish out of their order.
  const std::string command = std::string("'") + TUNEPAR_FAKE_TRAINER +
                              " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision} --recompute {recompute} "
                              "--vpp {vpp} --sleep 0.$(( 9 - {mbs} ))'";
  const testing::CliRun run = RunTunepar("--store " + (dir / "s") + " search --world 2 --model tiny --hardware " +
                                         kTestCpu + " --backend command --command " + command +
                                         " --metric-regex 'step_time: ([0-9.]+)' --budget 6 --batch 3 --confirm 0 "
                                         "--node-id n0");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::map<int64_t, std::string> stored;
  for (const Trial& t : Trials(dir / "s", OnlyStudy(dir / "s"))) stored[t.number] = t.layout;
  int lines = 0;
  std::istringstream out(run.out);
  for (std::string line; std::getline(out, line);) {
    if (line.rfind("trial n0/", 0) != 0) continue;
    ++lines;
    const int64_t number = std::stoll(line.substr(9));
    EXPECT_NE(line.find(stored[number]), std::string::npos) << line << " is stored as " << stored[number];
  }
  EXPECT_EQ(lines, 6) << run.out;
}

// Issue 28 item 10: --study naming another name for a stored study's inputs is said, not ignored.
TEST(SearchLoop, AStudyNameThatTheInputsOverruleIsSaid) {
  TempDir dir;
  ASSERT_EQ(RunTunepar(SearchArgs(dir / "s", 1, "", "--study first")).exit_code, 0);
  const testing::CliRun again = RunTunepar(SearchArgs(dir / "s", 2, "", "--study second"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("warning: --study second: these inputs are study 'first' already; resuming it"),
            std::string::npos)
      << again.err;
}

// Issue 28 item 5: an early stop speaks for every knob the program receives only once each has
// been varied among the finished layouts (and as many distinct layouts as such knobs finished;
// confirmations count once). The fake trainer receives tp, pp, mbs, precision, recompute and vpp.
TEST(SearchLoop, AnEarlyStopComesOnlyAfterEveryReceivedKnobWasVaried) {
  TempDir dir;
  const testing::CliRun run = RunTunepar(SearchArgs(dir / "s", 30, "", "--confirm 2 --early-stop 0.05"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::map<std::string, std::set<std::string>> values;  // knob field of the key -> values seen
  std::set<std::string> distinct;
  for (const Trial& t : Trials(dir / "s", OnlyStudy(dir / "s"))) {
    if (t.status == "running" || t.status == "interrupted") continue;
    distinct.insert(t.layout);
    std::istringstream fields(t.layout);
    for (std::string field; std::getline(fields, field, '-');) {
      const size_t digit = field.find_first_of("0123456789");
      const std::string name = field.rfind("rc", 0) == 0 ? "rc" : field.substr(0, digit);
      values[name == "fp" || name == "bf" ? "precision" : name].insert(field);
    }
  }
  ASSERT_NE(run.out.find("Stopped: early stop"), std::string::npos) << run.out;  // well before 30 trials
  EXPECT_GE(distinct.size(), 6u) << run.out;
  for (const std::string knob : {"tp", "pp", "mbs", "precision", "rc", "vpp"})
    EXPECT_GE(values[knob].size(), 2u) << knob << " never varied before the early stop\n" << run.out;
}

}  // namespace
}  // namespace tunepar
