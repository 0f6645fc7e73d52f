// The slurm backend on a real Slurm: scripts/slurm-cluster.sh runs slurmctld and two slurmd
// nodes (n1, n2) in namespaces on this machine (the ctest fixture `slurm_cluster`). tunepar
// runs inside an allocation; each trial is a job step with the profile's CPU masks; faults are
// data; a killed tunepar leaves no step and no rank; two nodes' shards meet in one store; the
// launch script runs under sbatch; a wrong setup is one line and changes nothing.
//
// What the nodes run must live outside /tmp (each node has its own): binaries and stores go to
// /var/tmp/tunepar-slurm-test.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/process_group.h"
#include "tests/test_support.h"

namespace tunepar {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::NoTrialProcessesLeft;
using testing::OnlyStudy;
using testing::ReadFile;
using testing::RunCommand;
using testing::SnapshotFiles;
using testing::StudyId;
using testing::Trial;
using testing::Trials;

const std::string kRoot = "/var/tmp/tunepar-slurm-test";

class SlurmBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RunCommand("sinfo -h -o %D").exit_code != 0) {
      GTEST_SKIP() << "no Slurm cluster (run as root: the fixture starts scripts/slurm-cluster.sh)";
    }
    bin_ = kRoot + "/bin";
    fs::create_directories(bin_);
    for (const std::string& f : {std::string(TUNEPAR_BINARY), std::string(TUNEPAR_CORE),
                                 std::string(TUNEPAR_SOURCE_DIR) + "/tests/faulty_core.sh"}) {
      fs::copy_file(f, bin_ + "/" + fs::path(f).filename().string(), fs::copy_options::overwrite_existing);
    }
    store_ = kRoot + "/store-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(store_);
  }

  // `salloc -N nodes --exclusive` running `tunepar <args>` with the test's store.
  CliRun InAllocation(int nodes, const std::string& args, const std::string& env = "") {
    return RunCommand(env + " salloc -N " + std::to_string(nodes) + " --exclusive " + bin_ +
                      "/tunepar --store " + store_ + " " + args);
  }

  std::string Search(int budget, const std::string& extra = "", const std::string& core = "tunepar-core") {
    return "search --model tiny --world 4 --hardware local-cpu --budget " + std::to_string(budget) +
           " --steps 2 --warmup 1 --node-id n0 --core " + bin_ + "/" + core + " " + extra;
  }

  std::string bin_, store_;
};

TEST_F(SlurmBackend, EveryTrialIsAJobStepWithTheProfilesPlacement) {
  const CliRun run = InAllocation(2, Search(4));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("no --backend given: slurm, inside Slurm job"), std::string::npos) << run.out;
  const std::vector<Trial> trials = Trials(store_, OnlyStudy(store_));
  ASSERT_EQ(trials.size(), 4u);
  std::set<std::string> steps;
  for (const Trial& t : trials) {
    EXPECT_EQ(t.status, "ok") << t.message;
    EXPECT_EQ(t.backend, "slurm");
    ASSERT_EQ(t.details["placement"].size(), 4u) << t.details.dump();
    std::set<std::string> hosts;
    for (const nlohmann::json& p : t.details["placement"]) {
      hosts.insert(p["host"].get<std::string>());
      // local-cpu: local rank 0 on CPU 0 (mask 0x1), local rank 1 on CPU 1 (0x2).
      EXPECT_EQ(p["cpus"], std::to_string(p["local_rank"].get<int>())) << p.dump();
      ASSERT_TRUE(p.contains("slurm_step")) << p.dump();
      steps.insert(p["slurm_step"].get<std::string>());
    }
    EXPECT_EQ(hosts, (std::set<std::string>{"n1", "n2"}));
  }
  EXPECT_EQ(steps.size(), 4u) << "one job step per trial";
}

TEST_F(SlurmBackend, CrashOomAndHangAreDataAndNoStepOutlivesItsTrial) {
  const CliRun run = InAllocation(2, Search(5, "--timeout 10", "faulty_core.sh"),
                                  "TUNEPAR_TEST_CORE=" + bin_ + "/tunepar-core");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::vector<Trial> trials = Trials(store_, OnlyStudy(store_));
  ASSERT_EQ(trials.size(), 5u);
  EXPECT_EQ(trials[0].status, "crash") << trials[0].message;
  EXPECT_EQ(trials[1].status, "oom") << trials[1].message;
  EXPECT_EQ(trials[2].status, "timeout") << trials[2].message;
  EXPECT_EQ(trials[3].status, "ok") << trials[3].message;
  EXPECT_TRUE(NoTrialProcessesLeft(StudyId(store_, OnlyStudy(store_))));
}

TEST_F(SlurmBackend, KilledTuneparLeavesNoStepAndResumeRerunsTheTrial) {
  // A long first trial; tunepar is SIGKILLed while its job step runs.
  const std::string search =
      "search --model small --world 4 --hardware local-cpu --budget 1 --steps 40 --warmup 0 "
      "--node-id n0 --core " +
      bin_ + "/tunepar-core";
  const pid_t salloc = fork();
  if (salloc == 0) {
    const std::string command = "exec salloc -N 2 --exclusive bash -c 'echo $$ > " + store_ + ".pid; exec " +
                                bin_ + "/tunepar --store " + store_ + " " + search + "' >" + store_ +
                                ".out 2>&1";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string study;
  bool step_running = false;
  for (int i = 0; i < 600 && !step_running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (study.empty()) study = OnlyStudy(store_);
    step_running = !study.empty() && runner::ProcessesWithMarkerPrefix(StudyId(store_, study)).size() >= 4;
  }
  ASSERT_TRUE(step_running) << ReadFile(store_ + ".out");
  const pid_t tunepar = std::stoi(ReadFile(store_ + ".pid"));
  kill(tunepar, SIGKILL);
  testing::Wait(salloc);
  const std::string id = StudyId(store_, study);
  EXPECT_TRUE(NoTrialProcessesLeft(id)) << "ranks survived their tuner";
  EXPECT_EQ(RunCommand("squeue -h -s | grep -c tunepar:").out, "0\n") << "a job step survived its tuner";

  const CliRun resume = InAllocation(2, search);
  ASSERT_EQ(resume.exit_code, 0) << resume.out << resume.err;
  EXPECT_NE(resume.out.find("will be re-run first"), std::string::npos) << resume.out;
  const std::vector<Trial> trials = Trials(store_, study);
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].attempt, 2);
  EXPECT_EQ(trials[0].status, "ok") << trials[0].message;
  EXPECT_TRUE(NoTrialProcessesLeft(id));
}

TEST_F(SlurmBackend, TwoNodesShardsMeetInOneStore) {
  // One tunepar per node (node ids from SLURMD_NODENAME), one store on a shared filesystem.
  const CliRun run =
      RunCommand("salloc -N 2 --exclusive srun --ntasks-per-node=1 " + bin_ + "/tunepar --store " + store_ +
                 " search --backend model --world 4 --model tiny --hardware local-cpu");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_FALSE(testing::NodeShard(store_, "n1").empty());
  EXPECT_FALSE(testing::NodeShard(store_, "n2").empty());
  const CliRun list = RunCommand(bin_ + "/tunepar --store " + store_ + " list");
  EXPECT_NE(list.out.find("1 study from 2 shards"), std::string::npos) << list.out;
}

TEST_F(SlurmBackend, TheLaunchScriptRunsUnderSbatch) {
  fs::create_directories(store_);
  const std::string script = store_ + "/train.sbatch";
  const CliRun write = RunCommand(bin_ +
                                  "/tunepar launch-script --model tiny --hardware local-cpu --layout "
                                  "tp2-pp1-dp2-mbs2-nmb2-fp32-zero1-rcnone-sp0-vpp1-fa0 --steps 3 --core " +
                                  bin_ + "/tunepar-core -o " + script);
  ASSERT_EQ(write.exit_code, 0) << write.err;
  const std::string text = ReadFile(script);
  EXPECT_EQ(RunCommand("bash -n " + script).exit_code, 0);
  EXPECT_NE(text.find("#SBATCH --nodes=2"), std::string::npos);
  EXPECT_NE(text.find("#SBATCH --ntasks-per-node=2"), std::string::npos);
  EXPECT_NE(text.find("--cpu-bind=mask_cpu:0x1,0x2"), std::string::npos);
  const CliRun job = RunCommand("cd " + store_ + " && sbatch --wait --exclusive " + script);
  ASSERT_EQ(job.exit_code, 0) << job.out << job.err;
  std::string output;
  for (const auto& e : fs::directory_iterator(store_)) {
    if (e.path().extension() == ".out") output = ReadFile(e.path().string());
  }
  EXPECT_NE(output.find("smoke: n1"), std::string::npos) << output;
  EXPECT_NE(output.find("smoke: n2"), std::string::npos) << output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(output.find("rank " + std::to_string(rank) + " (local " + std::to_string(rank % 2) + ")"),
              std::string::npos)
        << output;
  }
  EXPECT_NE(output.find("tunepar-core: tiny tp2-pp1-dp2"), std::string::npos) << output;
}

TEST_F(SlurmBackend, WrongSetupIsOneLineAndChangesNothing) {
  ASSERT_EQ(InAllocation(2, Search(1)).exit_code, 0);
  const auto before = SnapshotFiles(store_);
  const std::string no_masks = kRoot + "/no-masks.toml";
  {
    std::string profile = testing::PresetText("hardware", "local-cpu");
    const size_t at = profile.find("cpu_masks");
    profile.erase(at, profile.find('\n', at) - at);
    testing::WriteFile(no_masks, profile);
  }
  struct Case {
    int nodes;
    std::string args, env;
    int code;
  };
  const Case cases[] = {
      {1, Search(1, "--backend slurm"), "", 2},  // allocation too small
      {2, Search(1, "--backend slurm").replace(Search(1).find("local-cpu"), 9, no_masks), "", 3},  // no masks
      {2, Search(1, "--backend slurm", "nonexistent"), "", 2},            // core missing
      {2, Search(1, "--backend slurm"), "PATH=/nonexistent:" + bin_, 2},  // srun missing
  };
  for (const Case& c : cases) {
    const std::string env = c.env.empty() ? "" : "env " + c.env;
    const CliRun run = RunCommand("salloc -N " + std::to_string(c.nodes) + " --exclusive " + env + " " +
                                  bin_ + "/tunepar --store " + store_ + " " + c.args);
    EXPECT_EQ(run.exit_code, c.code) << c.args << "\n" << run.out << run.err;
    EXPECT_NE(run.err.find("tunepar: error:"), std::string::npos) << run.err;
  }
  EXPECT_EQ(SnapshotFiles(store_), before);
}

}  // namespace
}  // namespace tunepar
