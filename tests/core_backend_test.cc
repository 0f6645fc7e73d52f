// `tunepar search --backend local`: every trial runs tunepar-core through mpirun here. Trials
// land in the store with their launch record; failures (crash, OOM, hang) are data; a killed
// tunepar leaves no rank behind and its resume re-runs the interrupted trial; slices; bad input.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/layout.h"
#include "runner/core_backend.h"
#include "runner/launch_environment.h"
#include "runner/measured_runs.h"
#include "runner/process_group.h"
#include "tests/test_support.h"

namespace tunepar {
namespace {

namespace fs = std::filesystem;
using testing::NoTrialProcessesLeft;
using testing::OnlyStudy;
using testing::ReadFile;
using testing::RunTunepar;
using testing::SnapshotFiles;
using testing::Spawn;
using testing::StudyId;
using testing::TempDir;
using testing::Trial;
using testing::Trials;
using testing::Wait;

std::string LocalSearch(const std::string& store, int budget, const std::string& extra = "") {
  return "--store " + store +
         " search --backend local --world 4 --model tiny --hardware local-cpu --budget " +
         std::to_string(budget) + " --steps 2 --warmup 1 --node-id n0 --core " + TUNEPAR_CORE + " " + extra;
}

// The CPU core runs on this machine's CPUs: without --hardware the local backend prices it with
// local-cpu, not the embedded GPU default, and says so on its first line.
TEST(LocalBackend, WithoutHardwareTheCpuProfileIsTakenAndNamedFirst) {
  TempDir dir;
  const testing::CliRun run =
      RunTunepar("--store " + (dir / "s") + " search --backend local --world 2 --model tiny --budget 1 --steps 1 "
                 "--warmup 0 --node-id n0 --core " + TUNEPAR_CORE);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.out.rfind("hardware: local-cpu (", 0), 0u) << run.out;
  EXPECT_NE(run.out.find(", hardware local-cpu, world 2"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("frontier"), std::string::npos) << run.out;
}

TEST(LocalBackend, EveryTrialRunsTheCoreAndLandsInTheStore) {
  TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun run = RunTunepar(LocalSearch(store, 3));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("backend local"), std::string::npos) << run.out;
  const std::string study = OnlyStudy(store);
  const std::vector<Trial> trials = Trials(store, study);
  ASSERT_EQ(trials.size(), 3u);
  for (const Trial& t : trials) {
    EXPECT_EQ(t.status, "ok") << t.message;
    EXPECT_EQ(t.backend, "local");
    // The core's knobs only (the CPU build runs sequence parallelism and fused attention: sp0 or
    // sp1, fa0 or fa1; never interleaved stages).
    EXPECT_NE(t.layout.find("-vpp1-fa"), std::string::npos) << t.layout;
    ASSERT_TRUE(t.details.is_object());
    EXPECT_EQ(t.details["placement"].size(), 4u) << t.details.dump();
    EXPECT_EQ(t.details["core"]["status"], "ok");
    const std::string trial_dir = store + "/trials/" + study + "/n0-" + std::to_string(t.number);
    EXPECT_EQ(ReadFile(trial_dir + "/command.txt").rfind("mpirun -np 4", 0), 0u);
    EXPECT_TRUE(fs::exists(trial_dir + "/result.json"));
    EXPECT_TRUE(fs::exists(trial_dir + "/model.toml"));
    EXPECT_TRUE(fs::exists(trial_dir + "/output.log"));
  }
  EXPECT_TRUE(NoTrialProcessesLeft(StudyId(store, study)));
}

TEST(LocalBackend, CrashOomHangAndDeviceFailureAreDataAndTheSearchGoesOn) {
  TempDir dir;
  const std::string store = dir / "s";
  setenv("TUNEPAR_TEST_CORE", TUNEPAR_CORE, 1);
  const testing::CliRun run =
      RunTunepar("--store " + store + " search --backend local --world 4 --model tiny --hardware local-cpu " +
                 "--budget 6 --steps 2 --warmup 1 --node-id n0 --timeout 8 --core " + TUNEPAR_SOURCE_DIR +
                 "/tests/faulty_core.sh");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string study = OnlyStudy(store);
  const std::vector<Trial> trials = Trials(store, study);
  ASSERT_EQ(trials.size(), 6u) << run.out;
  EXPECT_EQ(trials[0].status, "crash") << trials[0].message;
  EXPECT_EQ(trials[1].status, "oom") << trials[1].message;
  EXPECT_NE(trials[1].message.find("out of memory"), std::string::npos) << trials[1].message;
  EXPECT_EQ(trials[2].status, "timeout") << trials[2].message;
  // Bad input "a trial that never writes a result": one line naming it and where the log stopped.
  EXPECT_NE(trials[2].message.find("killed after the 8 s timeout before writing its result; its log's last line: "
                                   "tunepar-core: rank 1: injected fault 'hang' at step"),
            std::string::npos)
      << trials[2].message;
  // A failed device call: the core's own line from its result.json.
  EXPECT_EQ(trials[3].status, "crash") << trials[3].message;
  EXPECT_EQ(trials[3].message, "rank 0: injected device fault");
  // A rank that died before every rank joined MPI: the launch failed, not the layout; launched
  // again, measured, and the first launch's log kept.
  EXPECT_EQ(trials[4].status, "ok") << trials[4].message;
  EXPECT_NE(trials[4].details.value("launch_retried", "").find("exited on signal 11"), std::string::npos)
      << trials[4].details.dump();
  EXPECT_TRUE(fs::exists(store + "/trials/" + study + "/n0-5/output.launch1.log"));
  // Launched twice and failed twice: a crash that says so, with the launcher's line.
  EXPECT_EQ(trials[5].status, "crash") << trials[5].message;
  EXPECT_EQ(trials[5].message.rfind("the ranks could not be launched (twice): mpirun noticed that process rank 1", 0),
            0u)
      << trials[5].message;
  EXPECT_TRUE(NoTrialProcessesLeft(StudyId(store, study)));
}

// Issue 29 item 1, the safety net: a core that wrote its result but does not exit (a teardown
// that hangs) is recorded from its result, with a note, once the exit grace (10 s) has passed,
// and its ranks are stopped; never a timeout that throws the measurement away.
TEST(LocalBackend, ACoreThatHangsAfterWritingItsResultIsRecordedFromItWithANote) {
  TempDir dir;
  const std::string store = dir / "s";
  setenv("TUNEPAR_TEST_CORE", TUNEPAR_CORE, 1);
  const auto start = std::chrono::steady_clock::now();
  const testing::CliRun run =
      RunTunepar("--store " + store + " search --backend local --world 2 --model tiny --hardware local-cpu " +
                 "--budget 1 --steps 2 --warmup 1 --node-id n0 --timeout 120 --core " + TUNEPAR_SOURCE_DIR +
                 "/tests/hanging_core.sh");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string study = OnlyStudy(store);
  const std::vector<Trial> trials = Trials(store, study);
  ASSERT_EQ(trials.size(), 1u) << run.out;
  EXPECT_EQ(trials[0].status, "ok") << trials[0].message;
  EXPECT_NE(trials[0].message.find("it wrote its result but had not exited 10 s later: its rank processes were "
                                   "stopped by tunepar"),
            std::string::npos)
      << trials[0].message;
  EXPECT_TRUE(trials[0].details.contains("ended_after_result")) << trials[0].details.dump();
  EXPECT_LT(took, 100) << "recorded after the grace, not the 120 s timeout";
  EXPECT_TRUE(NoTrialProcessesLeft(StudyId(store, study)));
}

// Issue 29 item 1: a rank stuck in its teardown is named in the trial's log by the core's
// watchdog (the stage it is in), and the trial is still recorded from its result.
TEST(LocalBackend, ARankStuckInItsTeardownIsNamedInTheLogAndTheTrialKept) {
  TempDir dir;
  const std::string store = dir / "s";
  setenv("TUNEPAR_TEST_CORE", TUNEPAR_CORE, 1);
  const testing::CliRun run =
      RunTunepar("--store " + store + " search --backend local --world 2 --model tiny --hardware local-cpu " +
                 "--budget 1 --steps 1 --warmup 0 --node-id n0 --timeout 120 --core " + TUNEPAR_SOURCE_DIR +
                 "/tests/teardown_hanging_core.sh");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string study = OnlyStudy(store);
  const std::vector<Trial> trials = Trials(store, study);
  ASSERT_EQ(trials.size(), 1u) << run.out;
  EXPECT_EQ(trials[0].status, "ok") << trials[0].message;
  EXPECT_TRUE(trials[0].details.contains("ended_after_result")) << trials[0].details.dump();
  const std::string log = ReadFile(store + "/trials/" + study + "/n0-1/output.log");
  EXPECT_NE(log.find("tunepar-core: rank 1: teardown +"), std::string::npos) << log;
  EXPECT_NE(log.find("still in 'injected teardown hang' after 3 s"), std::string::npos) << log;
  EXPECT_NE(log.find("tunepar-core: rank 0: teardown +"), std::string::npos) << "every stage, asked by the runner";
  EXPECT_TRUE(NoTrialProcessesLeft(StudyId(store, study)));
}

// Issue 29 item 2: a world-1 study on an 8-device profile ran 1 rank on its node, and its report
// says so (it said 8); a core that fails every trial gets the core's hint, not the command
// backend's --metric-regex one.
TEST(LocalBackend, AWorldOneStudySaysOneRankPerNodeAndFailuresGetTheCoresHint) {
  TempDir dir;
  const std::string store = dir / "s";
  ASSERT_EQ(RunTunepar("--store " + store + " search --backend local --world 1 --model tiny --hardware dgx-h100 "
                       "--budget 1 --steps 1 --warmup 0 --node-id n0 --core " + std::string(TUNEPAR_CORE))
                .exit_code,
            0);
  const testing::CliRun report = RunTunepar("--store " + store + " report");
  EXPECT_NE(report.out.find("; 1 rank per node, as the trials ran"), std::string::npos) << report.out;
  // Bad input "a profile whose device count differs from what the machine shows": said on the
  // trial (the core's host counts as one device; the profile's 8 H100s are not there).
  const std::vector<Trial> trials = Trials(store, OnlyStudy(store));
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_NE(trials[0].message.find("; the node shows 1 device(s), hardware profile dgx-h100 says 8 per node"),
            std::string::npos)
      << trials[0].message;
  EXPECT_EQ(trials[0].details["devices"]["node_shows"], 1) << trials[0].details.dump();
  // What each trial cost beyond its steps, and how it ran: in show's table and the report.
  EXPECT_TRUE(trials[0].details["startup"]["total_s"].is_number()) << trials[0].details.dump();
  EXPECT_NE(report.out.find("start-up (process start to first step, tunepar-core's clock): "), std::string::npos)
      << report.out;
  EXPECT_NE(report.out.find("communication, as the core chose it for each trial's placement: "), std::string::npos)
      << report.out;
  const testing::CliRun show = RunTunepar("--store " + store + " show");
  EXPECT_NE(show.out.find("comm  start-up s"), std::string::npos) << show.out;
  const nlohmann::json j = nlohmann::json::parse(RunTunepar("--store " + store + " --json report").out, nullptr, false);
  EXPECT_EQ(j["ranks_per_node"], 1) << j.dump().substr(0, 400);
  const testing::CliRun failing =
      RunTunepar("--store " + (dir / "f") + " search --backend local --world 2 --model tiny --hardware local-cpu "
                 "--budget 4 --steps 1 --warmup 0 --node-id n0 --core /bin/false");
  EXPECT_EQ(failing.exit_code, 8) << failing.err;
  EXPECT_NE(failing.err.find("tunepar-core itself fails"), std::string::npos) << failing.err;
  EXPECT_EQ(failing.err.find("--metric-regex"), std::string::npos) << failing.err;
}

// A result.json that lacks or mistypes what the runner reads (another build of the core, a
// damaged file) is a trial status with a message, never an exception inside Poll (issue 30 item 4).
TEST(LocalBackend, AResultThatLacksOrMistypesItsFieldsIsATrialStatusWithAMessage) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"status":"ok"})", "holds no step time (step_time_s)"},
      {R"({"status":"ok","step_time_s":"fast","memory":7,"placement":[3,{"host":4}],"error":[1]})",
       "holds no step time (step_time_s)"},
      {R"({"status":"oom","error":{"x":1},"memory":{"peak_bytes":"many"}})", "out of memory"},
      {R"({"status":5})", ""},
      {R"([1,2)", ""}};
  for (const auto& [result, message] : cases) {
    TempDir dir;
    const std::string store = dir / "s";
    setenv("TUNEPAR_TEST_RESULT", result.c_str(), 1);
    const testing::CliRun run =
        RunTunepar("--store " + store + " search --backend local --world 1 --model tiny --hardware local-cpu "
                   "--budget 1 --steps 1 --warmup 0 --node-id n0 --core " + std::string(TUNEPAR_SOURCE_DIR) +
                   "/tests/result_writing_core.sh");
    EXPECT_NE(run.exit_code, 1) << result << "\n" << run.err;  // no internal error
    EXPECT_EQ(run.err.find("internal"), std::string::npos) << result << "\n" << run.err;
    const std::vector<Trial> trials = Trials(store, OnlyStudy(store));
    ASSERT_EQ(trials.size(), 1u) << result << "\n" << run.err;
    EXPECT_NE(trials[0].status, "ok") << result;
    EXPECT_FALSE(trials[0].message.empty()) << result;
    if (!message.empty()) EXPECT_NE(trials[0].message.find(message), std::string::npos) << trials[0].message;
  }
  unsetenv("TUNEPAR_TEST_RESULT");
}

TEST(LocalBackend, KilledTuneparLeavesNoRanksAndResumeRerunsTheTrial) {
  TempDir dir;
  const std::string store = dir / "s";
  // Long trials (small model, many steps): the kill lands while the first one runs.
  const std::string args = "--store " + store +
                           " search --backend local --world 4 --model small --hardware local-cpu --budget 1 "
                           "--steps 60 --warmup 0 --node-id n0 --core " +
                           TUNEPAR_CORE;
  const pid_t pid = Spawn(args, dir / "out.txt");
  std::string study;
  for (int i = 0; i < 300 && study.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    study = OnlyStudy(store);
  }
  ASSERT_FALSE(study.empty()) << ReadFile(dir / "out.txt");
  const std::string id = StudyId(store, study);
  bool ranks_running = false;
  for (int i = 0; i < 300 && !ranks_running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ranks_running = runner::ProcessesWithMarkerPrefix(id).size() >= 4;  // shell, mpirun, ranks
  }
  ASSERT_TRUE(ranks_running) << ReadFile(dir / "out.txt");
  kill(pid, SIGKILL);
  Wait(pid);
  EXPECT_TRUE(NoTrialProcessesLeft(id)) << "ranks survived their tuner";

  const testing::CliRun resume = RunTunepar(args);
  EXPECT_EQ(resume.exit_code, 0) << resume.out << resume.err;
  EXPECT_NE(resume.out.find("will be re-run first"), std::string::npos) << resume.out;
  // The interrupted trial is the first re-run: attempt 2 under its own number.
  const std::vector<Trial> trials = Trials(store, study);
  ASSERT_FALSE(trials.empty());
  EXPECT_EQ(trials[0].number, 1);
  EXPECT_EQ(trials[0].attempt, 2) << trials[0].status << " " << trials[0].message;
  EXPECT_EQ(trials[0].status, "ok") << trials[0].message;
  EXPECT_TRUE(NoTrialProcessesLeft(id));
}

TEST(LocalBackend, SlicesKeepTpAndPpAndAddTheModelsDpCommunication) {
  TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun run =
      RunTunepar("--store " + store +
                 " search --backend local --world 16 --model tiny --hardware local-cpu "
                 "--budget 2 --steps 2 --warmup 1 --max-ranks 4 --slice auto --core " +
                 TUNEPAR_CORE);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("slice trials: auto"), std::string::npos) << run.out;
  for (const Trial& t : Trials(store, OnlyStudy(store))) {
    if (t.status != "ok") continue;
    ASSERT_TRUE(t.details.contains("slice")) << t.details.dump();
    const nlohmann::json& slice = t.details["slice"];
    EXPECT_LE(slice["measured_world"].get<int>(), 4);
    EXPECT_NE(t.message.find("sliced"), std::string::npos) << t.message;
    EXPECT_GE(slice["dp_comm_added_s"].get<double>(), 0.0);
  }
  const testing::CliRun show = RunTunepar("--store " + store + " show " + OnlyStudy(store) + " --all");
  EXPECT_NE(show.out.find("ok (sliced)"), std::string::npos) << show.out;
  const testing::CliRun report = RunTunepar("--store " + store + " report " + OnlyStudy(store));
  EXPECT_NE(report.out.find(" sliced"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("(sliced: measured on fewer data-parallel replicas"), std::string::npos) << report.out;
}

// A slice of a hybrid-sharded layout is one shard group of at most two replicas (dp_replicate 1:
// the core refuses a shard group of one rank), with the layout's ZeRO stage; a layout that fits
// is launched with its dp_replicate (the key's -dprN fragment).
TEST(LocalBackend, AHybridLayoutsSliceIsOneShardGroup) {
  TempDir dir;
  runner::CoreBackendOptions o;
  o.core_binary = TUNEPAR_CORE;
  o.capacity = 4;
  o.slice = runner::SliceMode::kAuto;
  const runner::CoreBackend backend(o, testing::PresetModel("tiny"), testing::PresetHardware("local-cpu"));
  const Result<Layout> wide = ParseLayoutKey("tp1-pp2-dp8-mbs1-nmb1-fp32-zero3-rcnone-sp0-vpp1-fa0-dpr4");
  ASSERT_TRUE(wide.ok()) << wide.status().message();
  const runner::TrialPlan sliced = backend.Plan(*wide);
  EXPECT_TRUE(sliced.sliced);
  EXPECT_EQ(sliced.measured.dp, 2);
  EXPECT_EQ(sliced.measured.dp_replicate, 1);
  EXPECT_EQ(sliced.measured.zero, 3);
  const Result<Layout> fits = ParseLayoutKey("tp1-pp1-dp4-mbs1-nmb2-fp32-zero2-rcnone-sp0-vpp1-fa0-dpr2");
  ASSERT_TRUE(fits.ok()) << fits.status().message();
  const runner::TrialPlan whole = backend.Plan(*fits);
  EXPECT_FALSE(whole.sliced);
  EXPECT_EQ(whole.measured.dp_replicate, 2);
  const std::string command = backend.LaunchCommand(whole.measured, dir.path(), "hybrid");
  EXPECT_NE(command.find("-zero2-rcnone-sp0-vpp1-fa0-dpr2"), std::string::npos) << command;
}

TEST(LocalBackend, BadSetupIsOneLineAndTouchesNothing) {
  TempDir dir;
  const std::string store = dir / "s";
  ASSERT_EQ(RunTunepar(LocalSearch(store, 1)).exit_code, 0);
  const auto before = SnapshotFiles(store);
  const std::string base = "--store " + store + " search --world 4 --model tiny --hardware local-cpu ";
  unsetenv("SLURM_JOB_ID");  // --backend slurm outside an allocation is one of the mistakes
  for (const std::string& args :
       {base + "--backend local --core /nonexistent/tunepar-core", base + "--backend slurm",
        "--store " + store +
            " search --world 64 --model tiny --hardware local-cpu --backend local --max-ranks 8",
        base + "--backend local --slice sometimes"}) {
    const testing::CliRun run = RunTunepar(args);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
  EXPECT_EQ(SnapshotFiles(store), before);
}

// A model the core does not train (a ViT, ALiBi positions) is refused when the study starts, as a
// config contradiction (exit 3), before anything is stored.
TEST(LocalBackend, AModelTheCoreCannotTrainIsRefusedBeforeAnythingIsStored) {
  TempDir dir;
  const std::string store = dir / "s";
  ASSERT_EQ(RunTunepar(LocalSearch(store, 1)).exit_code, 0);
  const auto before = SnapshotFiles(store);
  testing::WriteFile(dir / "alibi.toml", "layers = 2\nhidden = 32\nheads = 2\nseq_len = 16\nvocab = 64\n"
                                         "global_batch = 4\npositions = \"alibi\"\n");
  for (const std::string model : {std::string("climax"), dir / "alibi.toml"}) {
    const testing::CliRun run =
        RunTunepar("--store " + store + " search --backend local --world 4 --hardware local-cpu --budget 1 --model " +
                   model + " --core " + TUNEPAR_CORE);
    EXPECT_EQ(run.exit_code, 3) << model << "\n" << run.err;
    EXPECT_NE(run.err.find(model == "climax" ? "no vocabulary" : "ALiBi"), std::string::npos) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
  EXPECT_EQ(SnapshotFiles(store), before);
}

// A local search of three trials of tiny-llama at world 4, with `fixes` (e.g. "--fix tp=4").
testing::CliRun TinyLlamaSearch(const std::string& store, const std::string& fixes) {
  return RunTunepar("--store " + store + " search --backend local --world 4 --model tiny-llama --hardware local-cpu "
                    "--budget 3 --steps 2 --warmup 1 --node-id n0 " + fixes + " --core " + TUNEPAR_CORE);
}

// The result.json tunepar-core wrote for trial `t` of `study`.
nlohmann::json CoreResultOf(const std::string& store, const std::string& study, const Trial& t) {
  const std::string trial_dir = store + "/trials/" + study + "/n0-" + std::to_string(t.number);
  return nlohmann::json::parse(ReadFile(trial_dir + "/result.json"));
}

// A local search of the Llama-style model measures it (GQA, SwiGLU, rotary, RMSNorm, untied, no
// biases reach the core's model file) and proposes only the tp sizes that split its 2 K/V heads.
TEST(LocalBackend, ALlamaStyleSearchMeasuresOnlyTpSizesThatSplitItsKvHeads) {
  TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun run = TinyLlamaSearch(store, "--fix tp=4");
  EXPECT_NE(run.exit_code, 0) << "tp 4 splits no 2 K/V heads: " << run.out;
  EXPECT_NE(run.err.find("the local backend cannot run the space's tp4 (it runs tp1 tp2)"), std::string::npos)
      << run.err;
  const testing::CliRun ok = TinyLlamaSearch(store, "");
  ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  const std::string study = OnlyStudy(store);
  const std::vector<Trial> trials = Trials(store, study);
  ASSERT_EQ(trials.size(), 3u);
  for (const Trial& t : trials) {
    EXPECT_EQ(t.status, "ok") << t.layout << ": " << t.message;
    EXPECT_EQ(t.layout.find("tp4"), std::string::npos) << t.layout;
    const std::string trial_dir = store + "/trials/" + study + "/n0-" + std::to_string(t.number);
    EXPECT_NE(ReadFile(trial_dir + "/model.toml").find("kv_heads = 2"), std::string::npos);
    const nlohmann::json result = CoreResultOf(store, study, t);
    EXPECT_EQ(result["model"]["kv_heads"], 2) << result["model"].dump();
    EXPECT_EQ(result["model"]["mlp"], "swiglu");
    EXPECT_EQ(result["model"]["norm"], "rmsnorm");
  }
}

// Issue 34's check: a local search of the tiny Llama-style model at world 4 (dp 4) measures
// ZeRO-2, ZeRO-3 and hybrid-sharded layouts (2 replicas of shard groups of 2): the four legal
// layouts of zero 2-3 x dp_replicate 1-2, each run by the core as its key says, ZeRO-3 holding
// gathered units and a quarter (or, hybrid, half) of the weights.
// The core has no FP8 GEMMs: a space that offers fp8 (the default, on an H100 profile) runs the
// other three precisions; a space without it keeps its support, and its studies their ids.
TEST(CoreKnobs, Fp8IsLeftOutWhereTheSpaceOffersIt) {
  const ModelShape tiny = testing::PresetModel("tiny");
  const std::vector<int> all = {0, 1, 2, 3}, without = {0, 1, 2};
  for (core::CoreBuild build : {core::CoreBuild::kCpu, core::CoreBuild::kCuda, core::CoreBuild::kHip}) {
    EXPECT_EQ(core::SupportedKnobs(build, tiny, all).Of(Knob::kPrecision), without);
    EXPECT_EQ(core::SupportedKnobs(build, tiny, without), core::SupportedKnobs(build, tiny));
  }
  // tunepar-core --precision fp8 exits 2 naming it (CoreInput.BadInputIsOneLineAndExitTwo).
}

TEST(LocalBackend, ALocalSearchMeasuresShardedAndHybridLayouts) {
  TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun run = RunTunepar(
      "--store " + store + " search --backend local --world 4 --model tiny-llama --hardware local-cpu --budget 4 "
      "--steps 2 --warmup 1 --node-id n0 --fix tp=1 --fix pp=1 --fix micro_batch=2 --fix precision=fp32 "
      "--fix recompute=none --fix seq_parallel=off --fix flash_attention=off --fix zero=2,3 --fix dp_replicate=1,2 "
      "--core " + std::string(TUNEPAR_CORE));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string study = OnlyStudy(store);
  const std::vector<Trial> trials = Trials(store, study);
  ASSERT_EQ(trials.size(), 4u);
  std::map<std::string, double> weights;  // "zero2", "zero3", "zero3-dpr2", ... -> peak weight bytes
  for (const Trial& t : trials) {
    EXPECT_EQ(t.status, "ok") << t.layout << ": " << t.message;
    const nlohmann::json result = CoreResultOf(store, study, t);
    EXPECT_EQ(result["layout"], t.layout);
    const nlohmann::json& peak = result["memory"]["peak_by_category"];
    const bool zero3 = t.layout.find("-zero3-") != std::string::npos;
    const bool hybrid = t.layout.find("-dpr2") != std::string::npos;
    EXPECT_EQ(peak.value("gathered_weights", 0.0) > 0, zero3) << t.layout << ": " << peak.dump();
    weights[std::string(zero3 ? "zero3" : "zero2") + (hybrid ? "-dpr2" : "")] = peak["weights"].get<double>();
  }
  ASSERT_EQ(weights.size(), 4u);
  // ZeRO-3 shards the weights over the shard group (4, or 2 when hybrid); ZeRO-2 keeps them whole.
  EXPECT_EQ(weights["zero2"], weights["zero2-dpr2"]);
  EXPECT_NEAR(weights["zero3"] * 4, weights["zero2"], 0.01 * weights["zero2"]);
  EXPECT_NEAR(weights["zero3-dpr2"] * 2, weights["zero2"], 0.01 * weights["zero2"]);
}

// The issue's check: a local search of the tiny Llama-style model at world 4 measures
// sequence-parallel layouts (the core runs sp1; before, it pinned sp0 and such a study had no
// candidates). Each trial's core result is of that layout, with its TP communication timed.
TEST(LocalBackend, ALocalSearchMeasuresSequenceParallelLayouts) {
  TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun run = TinyLlamaSearch(store, "--fix seq_parallel=on");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string study = OnlyStudy(store);
  const std::vector<Trial> trials = Trials(store, study);
  ASSERT_EQ(trials.size(), 3u);
  for (const Trial& t : trials) {
    EXPECT_EQ(t.status, "ok") << t.layout << ": " << t.message;
    EXPECT_NE(t.layout.find("tp2-"), std::string::npos) << t.layout;
    EXPECT_NE(t.layout.find("-sp1-"), std::string::npos) << t.layout;
    const nlohmann::json result = CoreResultOf(store, study, t);
    EXPECT_EQ(result["layout"], t.layout);
    EXPECT_GT(result["phases"]["tp_comm"]["max"].get<double>(), 0) << result.dump();
  }
}

// Issue 35's check: a local search of the tiny model measures context-parallel layouts with
// uneven stages (cp 2 x pp 3 at world 6: 4 layers split 1 + 2 + 1 by the rule, the even split
// being 2 + 1 + 1), each trial's core result of that layout, its stages holding the rule's
// layer counts.
TEST(LocalBackend, ALocalSearchMeasuresContextParallelAndUnevenStageLayouts) {
  TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun run = RunTunepar(
      "--store " + store + " search --backend local --world 6 --model tiny --hardware local-cpu --budget 2 "
      "--steps 2 --warmup 1 --node-id n0 --fix tp=1 --fix cp=2 --fix pp=3 --fix uneven_stages=on "
      "--fix precision=bf16 --fix flash_attention=on --fix recompute=none --fix zero=0 --core " +
      std::string(TUNEPAR_CORE));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string study = OnlyStudy(store);
  const std::vector<Trial> trials = Trials(store, study);
  ASSERT_EQ(trials.size(), 2u);
  for (const Trial& t : trials) {
    EXPECT_EQ(t.status, "ok") << t.layout << ": " << t.message;
    EXPECT_NE(t.layout.find("-cp2"), std::string::npos) << t.layout;
    EXPECT_NE(t.layout.find("-uneven1"), std::string::npos) << t.layout;
    const nlohmann::json result = CoreResultOf(store, study, t);
    EXPECT_EQ(result["layout"], t.layout);
    EXPECT_EQ(result["stage_layers"], nlohmann::json::parse("[1, 2, 1]")) << result.dump().substr(0, 400);
  }
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

TEST(LaunchScript, EncodesTheProfilesPlacementAndEnvironment) {
  testing::TempDir dir;
  const std::string script = dir / "train.sbatch";
  const testing::CliRun run = testing::RunTuneparWithEveryCoreBuild(
      "launch-script --model gpt-22b --hardware frontier-mi250x --layout "
      "tp8-pp4-dp4-mbs1-nmb256-bf16-zero1-rcselective-sp0-vpp1-fa0 --time 02:00:00 --account abc123 -o " +
      script);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("sbatch " + script), std::string::npos) << run.err;
  EXPECT_EQ(testing::RunCommand("bash -n " + script).exit_code, 0);
  const std::string s = testing::ReadFile(script);
  for (const char* line :
       {"#SBATCH --nodes=16", "#SBATCH --ntasks-per-node=8", "#SBATCH --cpus-per-task=7",
        "#SBATCH --gpus-per-node=8", "#SBATCH --exclusive", "#SBATCH --time=02:00:00", "#SBATCH --account=abc123",
        "--cpu-bind=mask_cpu:0xfe000000000000,0xfe00000000000000,0xfe0000,0xfe000000,"
        "0xfe,0xfe00,0xfe00000000,0xfe0000000000",
        "--mpi=pmix", "export ROCR_VISIBLE_DEVICES=$LOCAL_RANK", "export LOCAL_RANK=${SLURM_LOCALID",
        "MIOPEN_USER_DB_PATH=\"/tmp/${USER}-miopen-cache-${SLURM_NODEID}\"",
        "export NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3", "export FI_CXI_RX_MATCH_MODE=hybrid",
        "MASTER_ADDR=$(scontrol show hostnames",
        "bash \"$checks\" node", "--layout tp8-pp4-dp4-mbs1-nmb256-bf16-zero1-rcselective-sp0-vpp1-fa0"}) {
    EXPECT_NE(s.find(line), std::string::npos) << line;
  }
}

TEST(LaunchScript, ChoosesTheStudysBestAndRefusesWhatItCannotRun) {
  testing::TempDir dir;
  const std::string store = dir / "s";
  ASSERT_EQ(testing::RunTunepar("--store " + store + " search --backend model --world 3072").exit_code, 0);
  // The best predicted layout uses sequence parallelism: tunepar-core cannot run it.
  const testing::CliRun core = testing::RunTunepar("--store " + store + " launch-script --account abc123");
  EXPECT_EQ(core.exit_code, 2) << core.err;
  EXPECT_NE(core.err.find("--command-config"), std::string::npos) << core.err;
  const testing::CliRun megatron =
      testing::RunTunepar("--store " + store + " launch-script --account abc123 --steps 1000 --command-config " +
                          std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/megatron-deepspeed.toml");
  ASSERT_EQ(megatron.exit_code, 0) << megatron.err;
  EXPECT_NE(megatron.out.find("best of study gpt-1t-w3072"), std::string::npos);
  EXPECT_NE(megatron.out.find("bash \"$rank_setup\" python pretrain_gpt.py --tensor-model-parallel-size 8"),
            std::string::npos)
      << megatron.out;
  const testing::CliRun empty =
      testing::RunTunepar("--store " + std::string(dir / "none") + " launch-script");
  EXPECT_EQ(empty.exit_code, 7) << empty.err;  // no study: the store does not exist
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

TEST(CalibrateSweep, MeasuresLayoutsWithTheCoreAndWritesAFittedProfile) {
  testing::TempDir dir;
  const std::string store = dir / "s";
  const std::string profile = dir / "fitted.toml";
  const testing::CliRun run = testing::RunTunepar(
      "--store " + store +
      " calibrate --backend local --hardware local-cpu --model tiny --world 2 --layouts 8 "
      "--steps 2 --warmup 1 --force --core " +
      std::string(TUNEPAR_CORE) + " -o " + profile);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("Sweeping 8 layouts of tiny in 4 shapes at world 2"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Spearman rank correlation"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("out of sample (2-fold"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("wrote " + profile), std::string::npos) << run.out;
  const std::string text = testing::ReadFile(profile);
  EXPECT_NE(text.find("origin = \"fitted\""), std::string::npos);
  EXPECT_NE(text.find("[calibration]"), std::string::npos);
  // The measured runs are kept, and refit as they are.
  const std::string csv = store + "/calibration/local-cpu-tiny-w2/runs.csv";
  ASSERT_TRUE(std::filesystem::exists(csv));
  // Four shapes (as given, twice the batch, half the hidden size, twice the sequence), all ranks
  // on this machine.
  Result<std::vector<runner::MeasuredRun>> measured = runner::ParseMeasuredRuns(testing::ReadFile(csv), csv);
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  std::set<std::tuple<int, int, int>> shapes;
  for (const runner::MeasuredRun& r : *measured) {
    shapes.insert({r.model.global_batch, r.model.hidden, r.model.seq_len});
    EXPECT_EQ(r.ranks_per_node, 2);
  }
  EXPECT_EQ(shapes.size(), 4u);
  // --force: two steps of the tiny model on a shared machine are too noisy for calibrate to
  // vouch for the fit (exit 10); the sweep and the refit are what is tested here.
  const testing::CliRun refit = testing::RunTunepar("calibrate --from " + csv + " --hardware local-cpu --force");
  EXPECT_EQ(refit.exit_code, 0) << refit.err;
  // Exactly one source of runs.
  EXPECT_EQ(testing::RunTunepar("calibrate --hardware local-cpu").exit_code, 2);
  EXPECT_EQ(
      testing::RunTunepar("calibrate --from " + csv + " --backend local --hardware local-cpu").exit_code, 2);
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

// One study, one context: a local search measured with fewer ranks than its world (slices on
// at most 3 ranks of this machine) is read back by report, launch-script and calibrate with the
// search's legal set (tunepar-core's knobs only) and the search's placement (3 ranks per node).
TEST(StudyContext, ReportLaunchScriptAndCalibrateSeeWhatTheSearchSaw) {
  testing::TempDir dir;
  const std::string store = dir / "s";
  const testing::CliRun search = testing::RunTunepar(
      "--json --store " + store +
      " search --backend local --world 4 --model tiny --hardware local-cpu --budget 4 --steps 1 --warmup 0 "
      "--max-ranks 3 --slice auto --node-id n0 --core " + TUNEPAR_CORE);
  ASSERT_EQ(search.exit_code, 0) << search.out << search.err;
  const nlohmann::json searched = nlohmann::json::parse(search.out);
  ASSERT_TRUE(searched.contains("legal_layouts")) << search.out;
  const int legal = searched["legal_layouts"].get<int>();
  EXPECT_EQ(searched["ranks_per_node"].get<int>(), 3) << search.out;
  const std::string study = searched["study"].get<std::string>();
  // A trial measured on a slice is marked sliced whatever its outcome.
  const testing::CliRun show = testing::RunTunepar("--json --store " + store + " show " + study + " --all");
  const nlohmann::json shown = nlohmann::json::parse(show.out);
  for (const auto& row : shown["trials"]) {
    EXPECT_EQ(row["sliced"].get<bool>(), row["details"].contains("slice")) << row.dump();
    EXPECT_EQ(row["ranks_per_node"].get<int>(), 3) << row.dump();
  }

  // report: the same legal set (no knob that tunepar-core cannot run, interleaving, is ranked) and
  // placement.
  const testing::CliRun report = testing::RunTunepar("--json --store " + store + " report " + study +
                                                     " --shap --background legal");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const nlohmann::json reported = nlohmann::json::parse(report.out);
  EXPECT_EQ(reported["legal_layouts"].get<int>(), legal) << report.out;
  EXPECT_EQ(reported["ranks_per_node"].get<int>(), 3) << report.out;
  for (const auto& knob : reported["shap"]["knobs"]) {
    const std::string name = knob["knob"].get<std::string>();
    EXPECT_NE(name, "virtual_stages");
  }

  // launch-script: a layout outside the study's legal set is refused with the constraint named
  // (tp 4 spans two 2-device nodes of local-cpu), and the study's best names its placement.
  const testing::CliRun outside = testing::RunTunepar(
      "--store " + store + " launch-script " + study + " --layout tp4-pp1-dp1-mbs1-nmb8-fp32-zero0-rcnone-sp0-vpp1-fa0");
  EXPECT_EQ(outside.exit_code, 2) << outside.out << outside.err;
  EXPECT_NE(outside.err.find("tp fits in one node"), std::string::npos) << outside.err;
  const testing::CliRun best = testing::RunTunepar("--store " + store + " launch-script " + study +
                                                   " --core " + TUNEPAR_CORE);
  ASSERT_EQ(best.exit_code, 0) << best.err;
  EXPECT_NE(best.out.find("3 ranks per node"), std::string::npos) << best.out;

  // calibrate --from the study: each run placed as its trial was.
  const testing::CliRun fit = testing::RunTunepar("--json --store " + store + " calibrate --from " + study +
                                                  " --hardware local-cpu --fit link_efficiency --force");
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  const nlohmann::json fitted = nlohmann::json::parse(fit.out);
  ASSERT_FALSE(fitted["rows"].empty()) << fit.out;
  for (const auto& row : fitted["rows"]) EXPECT_EQ(row["ranks_per_node"].get<int>(), 3) << row.dump();
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

// The local study of a schema-1 store (tests/data/v1-store) was searched with a CPU core that
// pinned "sp0 vpp1 fa0"; today's CPU core runs fused attention and sequence parallelism too
// (pinned "vpp1"), so the same search is a new study (tiny-w4-19f6db81) beside the migrated one,
// which keeps its id and its two trials, and is named by the new one; `--study` of the old one
// resumes it as it was made (sp and fa fixed at 0), under its id (issue 29 item 4, the id rule of
// the issue "A knob is one row").
TEST(LocalBackend, AStudyFromSchemaOneStaysBesideTheStudyOfACoreWithFusedAttention) {
  testing::TempDir dir;
  const std::string store = dir / "s";
  const std::string data = std::string(TUNEPAR_SOURCE_DIR) + "/tests/data/";
  std::filesystem::create_directories(store + "/shards");
  ASSERT_EQ(std::system(("sqlite3 " + store + "/shards/n0.sqlite < " + data + "v1-store/n0.sql").c_str()), 0);
  const testing::CliRun run = testing::RunTunepar(
      "--store " + store + " search --backend local --world 4 --model " + data + "v1-store/model.toml --space " +
      data + "v1-store/space.toml --hardware " + data +
      "test-cpu.toml --budget 2 --steps 1 --warmup 0 --max-ranks 2 --slice auto --node-id n0 --core " + TUNEPAR_CORE);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("study tiny-w4-19f6db81 (new; 0 finished trials so far)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("the budget of 2 trials is reached"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("these inputs were searched as study 'tiny-w4-4a864f6e' (id 4a864f6e"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("with sp0 vpp1 fa0 fixed; this one fixes vpp1: a new study, 'tiny-w4-19f6db81'"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(testing::Trials(store, "tiny-w4-4a864f6e").size(), 2u);
  EXPECT_EQ(testing::Trials(store, "tiny-w4-19f6db81").size(), 2u);
  const testing::CliRun resumed = testing::RunTunepar(
      "--store " + store + " search --backend local --world 4 --model " + data + "v1-store/model.toml --space " +
      data + "v1-store/space.toml --hardware " + data +
      "test-cpu.toml --budget 3 --steps 1 --warmup 0 --max-ranks 2 --slice auto --node-id n0 --study tiny-w4-4a864f6e "
      "--core " + TUNEPAR_CORE);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.err.find("--study tiny-w4-4a864f6e: resuming it as it was made, with sp0 vpp1 fa0 fixed"),
            std::string::npos)
      << resumed.err;
  const std::vector<testing::Trial> old = testing::Trials(store, "tiny-w4-4a864f6e");
  ASSERT_EQ(old.size(), 3u);
  for (const testing::Trial& t : old) EXPECT_NE(t.layout.find("-fa0"), std::string::npos) << t.layout;
  EXPECT_EQ(testing::Trials(store, "tiny-w4-19f6db81").size(), 2u);
}

// A store path with every character a shell misreads: the core's trials run healthy through
// mpirun, their files land in their own folders, and nothing of the path ever runs (issue 27).
TEST(LocalBackend, AHostileStorePathRunsHealthyTrialsAndRunsNothingOfIt) {
  TempDir dir;
  fs::create_directories(dir / "cwd");
  const std::string store = dir / "cwd/st ore 'q' \"d\" ü $(touch F) `touch G` ;x";
  const testing::CliRun run = testing::RunCommand(
      "cd " + runner::ShellQuote(dir / "cwd") + " && " + testing::TuneparBinary() + " --store " +
      runner::ShellQuote(store) + " search --backend local --world 2 --model tiny --hardware local-cpu --budget 2 "
      "--steps 2 --warmup 1 --node-id n0 --study plain --core " + TUNEPAR_CORE);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const nlohmann::json show = nlohmann::json::parse(
      testing::RunCommand(testing::TuneparBinary() + " --store " + runner::ShellQuote(store) + " --json show plain --all").out);
  ASSERT_EQ(show["trials"].size(), 2u);
  for (const auto& t : show["trials"]) {
    EXPECT_EQ(t["status"], "ok") << t.dump();
    const std::string folder = store + "/trials/plain/n0-" + std::to_string(t["number"].get<int>());
    EXPECT_TRUE(fs::exists(folder + "/result.json")) << folder;
  }
  for (const std::string& stray : {dir / "F", dir / "G", dir / "cwd/F", dir / "cwd/G"}) EXPECT_FALSE(fs::exists(stray));
}

}  // namespace
}  // namespace tunepar
