// The slurm backend on a real Slurm: scripts/slurm-cluster.sh runs slurmctld and two slurmd
// nodes (n1, n2) in namespaces on this machine (the ctest fixture `slurm_cluster`). tunepar
// runs inside an allocation; each trial is a job step with the profile's CPU masks; faults are
// data; a killed tunepar leaves no step and no rank; two nodes' shards meet in one store; the
// launch script runs under sbatch; a wrong setup is one line and changes nothing.
// Launch scripts on emulated GPUs (GRES gpu:2 backed by character devices the fixture makes in
// each node's /tmp): a correct setup runs the training; a missing variable, a missing device, a
// wrong CPU mask, a wrong device, a missing network plugin each stop the job early with one
// line; a container (a fake `singularity` that runs its command) and a node-level launcher (a
// fake `torchrun`) are wired as LUMI users run them.
//
// What the nodes run must live outside /tmp (each node has its own): binaries and stores go to
// /var/tmp/tunepar-slurm-test.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/launch_environment.h"
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

// Whether Slurm lists no tunepar job step, waiting up to 30 s: when an allocation ends, slurmctld
// drops its steps once the nodes report them ended, which can lag the ranks' exit by seconds on a
// loaded machine (CI once saw the step listed right after the ranks were gone).
bool NoTuneparStepsLeft() {
  for (int i = 0; i < 300; ++i) {
    if (RunCommand("squeue -h -s | grep -c tunepar:").out == "0\n") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

class SlurmBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RunCommand("sinfo -h -o %D").exit_code != 0) {
      GTEST_SKIP() << "no Slurm cluster (run as root: the fixture starts scripts/slurm-cluster.sh)";
    }
    // Open MPI's shared-memory transport keeps its segment in the session directory under the
    // node's /tmp, which the emulated nodes share with the steps before: a step that starts while
    // the previous one's ranks remove that directory fails to open its segment (ENOENT) and a rank
    // dies (seen once in several CI runs, a launch script's training right after its smoke test).
    // The ranks of these tests talk over TCP instead; what they check is tunepar's wiring.
    setenv("OMPI_MCA_btl", "self,tcp", 1);
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
  const CliRun run = InAllocation(2, Search(6, "--timeout 10", "faulty_core.sh"),
                                  "TUNEPAR_TEST_CORE=" + bin_ + "/tunepar-core");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::vector<Trial> trials = Trials(store_, OnlyStudy(store_));
  ASSERT_EQ(trials.size(), 6u);
  EXPECT_EQ(trials[0].status, "crash") << trials[0].message;
  EXPECT_EQ(trials[1].status, "oom") << trials[1].message;
  EXPECT_EQ(trials[2].status, "timeout") << trials[2].message;
  EXPECT_EQ(trials[3].status, "crash") << trials[3].message;  // a failed device call: the core's line
  EXPECT_EQ(trials[3].message, "rank 0: injected device fault");
  EXPECT_EQ(trials[4].status, "ok") << trials[4].message;  // after a second launch
  EXPECT_EQ(trials[4].details.value("launch_retried", ""), "srun: error: n1: task 1: Segmentation fault")
      << trials[4].details.dump();
  EXPECT_EQ(trials[5].status, "crash") << trials[5].message;
  EXPECT_EQ(trials[5].message, "the ranks could not be launched (twice): srun: error: n1: task 1: Segmentation fault");
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
  EXPECT_TRUE(NoTuneparStepsLeft()) << "a job step survived its tuner:\n" << RunCommand("squeue -s").out;

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
  EXPECT_NE(output.find("tunepar: node check ok on n1\n"), std::string::npos) << output;
  EXPECT_NE(output.find("tunepar: node check ok on n2\n"), std::string::npos) << output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(output.find("rank " + std::to_string(rank) + " (local " + std::to_string(rank % 2) + ")"),
              std::string::npos)
        << output;
  }
  // tunepar-core's smoke test (issue 18): one all-reduce over the 4 ranks, a line per node.
  for (const std::string node : {"n1", "n2"})
    EXPECT_NE(output.find("tunepar-core: smoke ok: 4 ranks, comm mpi, node " + node + ": "), std::string::npos) << output;
  EXPECT_LT(output.find("tunepar-core: smoke ok"), output.find("tunepar-core: tiny tp2-pp1-dp2")) << output;
  EXPECT_NE(output.find("tunepar-core: tiny tp2-pp1-dp2"), std::string::npos) << output;
}

// A profile like local-cpu with emulated GPUs: one device per core, ROCR_VISIBLE_DEVICES (Slurm
// sets it with the GRES), the fixture's device files, a stand-in network plugin and one
// environment setting with its source.
std::string EmulatedGpuProfile() {
  std::string profile = testing::PresetText("hardware", "local-cpu");
  const std::string name = "name = \"local-cpu\"";
  profile.replace(profile.find(name), name.size(), "name = \"gpu-emulated\"");
  profile.erase(profile.find("[launch]"));
  return profile + R"([launch]
visible_devices_env = "ROCR_VISIBLE_DEVICES"
cpus_per_task = 1
mpi = "pmix"
cpu_masks = ["0x1", "0x2"]
device_files = "/tmp/tunepar-gpus/gpu*"

[launch.net_plugin]
name = "fake-ofi"
libraries = ["libfake-net.so"]
source = "the test's stand-in for aws-ofi-rccl"

[launch.env]
TUNEPAR_TEST_SETTING = { value = "on", source = "the test" }
)";
}

class LaunchScriptOnSlurm : public SlurmBackend {
 protected:
  void SetUp() override {
    SlurmBackend::SetUp();
    if (IsSkipped()) return;
    dir_ = store_ + "-job";
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/plugin");
    fs::create_directories(dir_ + "/bin");
    profile_ = dir_ + "/gpu-emulated.toml";
    testing::WriteFile(profile_, EmulatedGpuProfile());
    testing::WriteFile(dir_ + "/plugin/libfake-net.so", "");
  }

  // Writes the script for a 4-rank layout on both nodes; returns its path.
  std::string Write(const std::string& args, const std::string& name = "train.sbatch") {
    const std::string script = dir_ + "/" + name;
    const CliRun write = RunCommand(bin_ + "/tunepar launch-script --model tiny --hardware " + profile_ +
                                    " --layout tp2-pp1-dp2-mbs2-nmb2-fp32-zero1-rcnone-sp0-vpp1-fa0 " + args +
                                    " -o " + script);
    EXPECT_EQ(write.exit_code, 0) << write.err;
    return script;
  }

  // sbatch --wait in the job directory with DATA_PATH and the plugin's directory set, then `env`
  // (NAME=VALUE words that override them; the caller's environment passes to the job); the
  // job's exit code and its output file.
  std::pair<int, std::string> Submit(const std::string& script, const std::string& env = "") {
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".out") fs::remove(e.path());
    }
    const CliRun job = RunCommand("cd " + dir_ + " && env DATA_PATH=/data/tokens LD_LIBRARY_PATH=" + dir_ +
                                  "/plugin " + env + " sbatch --wait " + script);
    std::string output;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".out") output = ReadFile(e.path().string());
    }
    return {job.exit_code, output};
  }

  // The lines of `output` that tunepar's checks wrote ("tunepar: ..." but not "node check ok").
  static std::vector<std::string> Refusals(const std::string& output) {
    std::vector<std::string> lines;
    std::istringstream in(output);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("tunepar: ", 0) == 0 && line.find("node check ok") == std::string::npos) lines.push_back(line);
    }
    return lines;
  }

  // A per-rank program that shows what it received: rank, device, data path, the profile's setting.
  const std::string kTraining =
      "--training-command \"bash -c 'echo training rank \\$RANK of \\$WORLD_SIZE device \\$ROCR_VISIBLE_DEVICES "
      "setting \\$TUNEPAR_TEST_SETTING threads \\$OMP_NUM_THREADS data \\$0' \\${DATA_PATH}\"";

  std::string dir_, profile_;
};

TEST_F(LaunchScriptOnSlurm, ACorrectSetupPassesTheChecksAndRunsTheTraining) {
  const std::string script = Write(kTraining);
  const std::string text = ReadFile(script);
  EXPECT_NE(text.find("#SBATCH --gpus-per-node=2"), std::string::npos);
  EXPECT_NE(text.find("#SBATCH --exclusive"), std::string::npos);
  const auto [code, output] = Submit(script);
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(Refusals(output).empty()) << output;
  for (const std::string node : {"n1", "n2"}) {
    EXPECT_NE(output.find("tunepar: node check ok on " + node + ": 2 devices, fake-ofi at " + dir_ +
                          "/plugin/libfake-net.so"),
              std::string::npos)
        << output;
  }
  for (int rank = 0; rank < 4; ++rank) {
    const std::string r = std::to_string(rank), local = std::to_string(rank % 2);
    EXPECT_NE(output.find("rank " + r + " (local " + local + ") on n" + std::to_string(rank / 2 + 1) + ": CPUs " +
                          local + " (mask 0x" + std::to_string(1 << (rank % 2)) + "), device " + local +
                          " (/tmp/tunepar-gpus/gpu" + local + "): as gpu-emulated maps it"),
              std::string::npos)
        << output;
    EXPECT_NE(output.find("training rank " + r + " of 4 device " + local +
                          " setting on threads 1 data /data/tokens"),
              std::string::npos)
        << output;
  }
}

TEST_F(LaunchScriptOnSlurm, AMissingRequiredVariableStopsTheJobBeforeAnyStep) {
  const std::string script = Write(kTraining);
  const auto [code, output] = Submit(script, "DATA_PATH=");
  EXPECT_NE(code, 0) << output;
  EXPECT_EQ(Refusals(output),
            std::vector<std::string>{"tunepar: DATA_PATH is not set: the training command needs it; export it before "
                                     "sbatch (sbatch passes your environment to the job)"})
      << output;
  EXPECT_EQ(output.find("node check"), std::string::npos) << "a step ran:\n" << output;
}

TEST_F(LaunchScriptOnSlurm, AMissingDeviceStopsTheJobAtTheNodeCheck) {
  const std::string device = kRoot + "/cluster/tmp-n2/tunepar-gpus/gpu1";  // n2's /tmp
  ASSERT_TRUE(fs::exists(device));
  fs::remove(device);
  const std::string script = Write(kTraining);
  const auto [code, output] = Submit(script);
  ASSERT_EQ(RunCommand("mknod -m 666 " + device + " c 1 3").exit_code, 0);
  EXPECT_NE(code, 0) << output;
  EXPECT_EQ(Refusals(output),
            std::vector<std::string>{"tunepar: n2: 1 of the 2 devices of gpu-emulated can be opened "
                                     "(/tmp/tunepar-gpus/gpu*): a device is missing or not given to this job"})
      << output;
  EXPECT_EQ(output.find("training rank"), std::string::npos) << output;
  EXPECT_EQ(output.find("rank 0 (local 0)"), std::string::npos) << "the rank check ran:\n" << output;
}

TEST_F(LaunchScriptOnSlurm, AWrongCpuMaskStopsTheJobAtTheRankCheck) {
  // Masks that do not follow the profile's map by local rank (seed 000: "Allocations do not
  // follow GPU ranking"), as a hand edit of the srun lines would make them.
  const std::string script = Write(kTraining);
  std::string text = ReadFile(script);
  for (size_t at = text.find("mask_cpu:0x1,0x2"); at != std::string::npos; at = text.find("mask_cpu:0x1,0x2"))
    text.replace(at, 16, "mask_cpu:0x2,0x1");
  testing::WriteFile(script, text);
  const auto [code, output] = Submit(script);
  EXPECT_NE(code, 0) << output;
  // Every rank fails the check; the first to fail stops the job, others may print theirs first.
  const std::vector<std::string> refusals = Refusals(output);
  ASSERT_FALSE(refusals.empty()) << output;
  const std::regex wrong_mask(
      "tunepar: n[12]: rank [0-3] \\(local rank ([01])\\) runs on CPU mask 0x[12], but gpu-emulated maps local rank "
      "\\1 to 0x[12]: the CPU binding is not the profile's \\(srun --cpu-bind\\)");
  for (const std::string& line : refusals) EXPECT_TRUE(std::regex_match(line, wrong_mask)) << line;
  EXPECT_EQ(output.find("training rank"), std::string::npos) << output;
}

TEST_F(LaunchScriptOnSlurm, ADeviceOtherThanTheLocalRanksStopsTheJobAtTheRankCheck) {
  // Slurm hands each task one device, the other one than its local rank names.
  const std::string script = Write(kTraining);
  const auto [code, output] = Submit(script, "SLURM_GPU_BIND=map_gpu:1,0");
  EXPECT_NE(code, 0) << output;
  const std::vector<std::string> refusals = Refusals(output);
  ASSERT_FALSE(refusals.empty()) << output;
  const std::regex wrong_device(
      "tunepar: n[12]: rank [0-3] \\(local rank ([01])\\): Slurm gives it devices [01], not device \\1 that "
      "gpu-emulated maps local rank \\1 to");
  for (const std::string& line : refusals) EXPECT_TRUE(std::regex_match(line, wrong_device)) << line;
  EXPECT_EQ(output.find("training rank"), std::string::npos) << output;
}

TEST_F(LaunchScriptOnSlurm, AMissingNetworkPluginStopsTheJobAtTheNodeCheck) {
  const std::string script = Write(kTraining);
  const auto [code, output] = Submit(script, "LD_LIBRARY_PATH=/nonexistent");
  EXPECT_NE(code, 0) << output;
  const std::vector<std::string> refusals = Refusals(output);
  ASSERT_FALSE(refusals.empty()) << output;
  EXPECT_NE(refusals[0].find(": the fake-ofi plugin (libfake-net.so) is not on LD_LIBRARY_PATH: RCCL would fall back "
                             "to TCP sockets"),
            std::string::npos)
      << output;
  EXPECT_EQ(output.find("training rank"), std::string::npos) << output;
}

TEST_F(LaunchScriptOnSlurm, EveryStepRunsInsideTheContainerWithItsBindsAndHook) {
  // A stand-in for singularity: logs its binds and image, then runs the command after the image
  // with Slurm's tools out of reach (there are none inside a real image).
  const std::string fake = dir_ + "/bin/singularity";
  testing::WriteFile(fake, "#!/bin/bash\n"
                           "[ \"$1\" = exec ] && shift\n"
                           "binds=\"\"\n"
                           "while [ \"$1\" = --bind ]; do binds=\"$binds $2\"; shift 2; done\n"
                           "image=$1; shift\n"
                           "echo \"singularity on $(hostname): image $image binds$binds: $1 ${@: -1}\" >>" +
                               dir_ + "/singularity.log\n"
                               "scontrol() { echo 'scontrol is not in the image' >&2; exit 99; }\n"
                               "export -f scontrol\n"
                               "exec \"$@\"\n");
  fs::permissions(fake, fs::perms::owner_all);
  const std::string script =
      Write("--container /images/pytorch.sif --bind " + dir_ + ":/work --container-hook 'export HOOK_RAN=yes' "
            "--training-command \"bash -c 'echo training rank \\$RANK hook \\$HOOK_RAN master \\$MASTER_ADDR'\"");
  const auto [code, output] = Submit(script, "PATH=" + dir_ + "/bin:$PATH");
  ASSERT_EQ(code, 0) << output;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_NE(output.find("training rank " + std::to_string(rank) + " hook yes master n1"), std::string::npos) << output;
  const std::string log = ReadFile(dir_ + "/singularity.log");
  const std::string binds = "image /images/pytorch.sif binds " + dir_ + " " + dir_ + ":/work: bash ";
  for (const std::string node : {"n1", "n2"}) {
    EXPECT_NE(log.find("singularity on " + node + ": " + binds + "node"), std::string::npos) << log;  // node check
    EXPECT_NE(log.find("singularity on " + node + ": " + binds + "rank"), std::string::npos) << log;  // rank check
  }
  int steps = 0;
  for (size_t at = log.find("singularity on"); at != std::string::npos; at = log.find("singularity on", at + 1)) ++steps;
  EXPECT_EQ(steps, 2 + 4 + 4) << log;  // node check per node, rank check and training per rank
}

TEST_F(LaunchScriptOnSlurm, ANodeLevelLauncherRunsOncePerNodeWithTheRendezvousOfTheFirstNode) {
  // A stand-in for torchrun: shows the node it runs on, its CPUs and its arguments.
  const std::string fake = dir_ + "/bin/torchrun";
  testing::WriteFile(fake, "#!/bin/bash\necho \"torchrun on $(hostname) CPUs $(taskset -cp $$ | sed 's/.*: //'): $*\"\n");
  fs::permissions(fake, fs::perms::owner_all);
  const std::string script =
      Write("--training-command 'torchrun --standalone --nnodes=1 --nproc-per-node=8 train.py --data ${DATA_PATH}'");
  const std::string text = ReadFile(script);
  EXPECT_NE(text.find("#SBATCH --ntasks-per-node=1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("#SBATCH --cpus-per-task=2\n"), std::string::npos) << text;
  const auto [code, output] = Submit(script, "PATH=" + dir_ + "/bin:$PATH");
  ASSERT_EQ(code, 0) << output;
  for (int node = 0; node < 2; ++node) {
    EXPECT_NE(output.find("torchrun on n" + std::to_string(node + 1) +
                          " CPUs 0,1: --nnodes=2 --nproc-per-node=2 --node-rank=" + std::to_string(node) +
                          " --rdzv-backend=static --rdzv-endpoint=n1:29500 train.py --data /data/tokens"),
              std::string::npos)
        << output;
  }
  int launchers = 0;
  for (size_t at = output.find("torchrun on"); at != std::string::npos; at = output.find("torchrun on", at + 1)) ++launchers;
  EXPECT_EQ(launchers, 2) << output;
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

// A store path with every character a shell misreads, through salloc, srun and the rank script:
// the steps run healthy on both nodes and nothing of the path ever runs (issue 27).
TEST_F(SlurmBackend, AHostileStorePathRunsHealthyStepsAndRunsNothingOfIt) {
  const std::string hostile = store_ + "/st ore 'q' \"d\" ü $(touch F) `touch G` ;x";
  fs::create_directories(store_);
  const CliRun run = RunCommand("cd " + runner::ShellQuote(store_) + " && salloc -N 2 --exclusive " + bin_ +
                                "/tunepar --store " + runner::ShellQuote(hostile) + " " + Search(2, "--study plain"));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const nlohmann::json show = nlohmann::json::parse(
      RunCommand(bin_ + "/tunepar --store " + runner::ShellQuote(hostile) + " --json show plain --all").out);
  ASSERT_EQ(show["trials"].size(), 2u);
  for (const auto& t : show["trials"]) {
    EXPECT_EQ(t["status"], "ok") << t.dump();
    EXPECT_EQ(t["details"]["placement"].size(), 4u) << t.dump();
  }
  for (const std::string& stray : {store_ + "/F", store_ + "/G", kRoot + "/F", kRoot + "/G"})
    EXPECT_FALSE(fs::exists(stray)) << stray;
}

}  // namespace
}  // namespace tunepar
