// `tunepar launch-script` as a LUMI or Frontier user runs it (issue 17, items 12-15 and 23): what
// the site requires is refused when missing, --time is checked, the script is exclusive, loads
// modules, sets OMP_NUM_THREADS and the profile's environment with sources, follows the MPI the
// program links, checks the required environment before any step, runs checks that can fail,
// runs every step in a container on request, runs training (not a trial's length), writes the
// top K layouts, and gives a node-level launcher one task per node with its rendezvous. The
// scripts run under Slurm in slurm_backend_test.cc (LaunchScriptOnSlurm).
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/hardware_profile.h"
#include "runner/launch_environment.h"
#include "runner/launch_script.h"
#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"

namespace tunepar {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;

const std::string kMegatron = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/megatron-deepspeed.toml";
const std::string kTorchtitan = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/torchtitan.toml";
const std::string kLumiLayout = "tp8-pp4-dp4-mbs1-nmb256-bf16-zero1-rcnone-sp0-vpp1-fa0";  // gpt-22b, 16 nodes
const std::string kLumi = "launch-script --model gpt-22b --hardware lumi-g --layout " + kLumiLayout;
const std::string kSite = " --account project_465000123 --partition standard-g";
const std::string kCpuLayout = "tp2-pp1-dp2-mbs2-nmb2-fp32-zero1-rcnone-sp0-vpp1-fa0";  // tiny, world 4

// tunepar as installed with every tunepar-core build: lumi-g's scripts run tunepar-core-hip.
CliRun RunTunepar(const std::string& args) { return testing::RunTuneparWithEveryCoreBuild(args); }

// One line on stderr, "tunepar: error: ...", containing `fragment`.
void ExpectOneLineError(const CliRun& run, int exit_code, const std::string& fragment) {
  EXPECT_EQ(run.exit_code, exit_code) << run.out << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.err.rfind("tunepar: error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find(fragment), std::string::npos) << run.err;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The script's step lines (srun ...), in order.
std::vector<std::string> Steps(const std::string& script) {
  std::vector<std::string> steps;
  for (const std::string& line : Lines(script)) {
    if (line.rfind("srun ", 0) == 0) steps.push_back(line);
  }
  return steps;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// ---- Item 12: what LUMI and Frontier need.

TEST(LaunchScript, ASiteThatBillsAProjectOrHasNoDefaultPartitionGetsNoScriptWithoutThem) {
  TempDir dir;
  const std::string out = " -o " + (dir / "train.sbatch");
  ExpectOneLineError(RunTunepar(kLumi + " --partition standard-g" + out), kExitUsage,
                     "lumi-g bills every job to a project (launch.requires_account): give --account PROJECT");
  ExpectOneLineError(RunTunepar(kLumi + " --account project_465000123" + out), kExitUsage,
                     "lumi-g has no default partition (launch.requires_partition): give --partition");
  ExpectOneLineError(RunTunepar("launch-script --model gpt-22b --hardware frontier-mi250x --layout " + kLumiLayout + out),
                     kExitUsage, "frontier-mi250x bills every job to a project");
  EXPECT_FALSE(fs::exists(dir / "train.sbatch"));
  // Frontier has a default partition (batch).
  const CliRun frontier = RunTunepar("launch-script --model gpt-22b --hardware frontier-mi250x --layout " +
                                     kLumiLayout + " --account abc123");
  ASSERT_EQ(frontier.exit_code, 0) << frontier.err;
  EXPECT_NE(frontier.out.find("#SBATCH --account=abc123\n"), std::string::npos);
  EXPECT_EQ(frontier.out.find("#SBATCH --partition"), std::string::npos);
}

TEST(LaunchScript, TimeMustBeOneOfSlurmsForms) {
  for (const std::string bad : {"1h", "0", "1:75:00", "1-25", "90:61", "00:00:00", "-5", "1-2-3"}) {
    ExpectOneLineError(RunTunepar("launch-script --model tiny --hardware local-cpu --layout " + kCpuLayout +
                                  " --time " + bad),
                       kExitUsage, "--time '" + bad + "': ");
  }
  for (const std::string good : {"30", "90:30", "2:30:00", "1-12", "1-12:30", "2-00:00:00"}) {
    const CliRun run =
        RunTunepar("launch-script --model tiny --hardware local-cpu --layout " + kCpuLayout + " --time " + good);
    EXPECT_EQ(run.exit_code, 0) << good << ": " << run.err;
    EXPECT_NE(run.out.find("#SBATCH --time=" + good + "\n"), std::string::npos) << good;
  }
}

TEST(LaunchScript, ALumiScriptIsExclusiveLoadsModulesAndSaysWhereEachSettingComesFrom) {
  const CliRun run = RunTunepar(kLumi + kSite + " --module LUMI/24.03 --module partition/G --time 2-00:00:00");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string& s = run.out;
  TempDir dir;
  testing::WriteFile(dir / "train.sbatch", s);
  EXPECT_EQ(RunCommand("bash -n " + (dir / "train.sbatch")).exit_code, 0);
  for (const std::string line : {"#SBATCH --nodes=16", "#SBATCH --ntasks-per-node=8", "#SBATCH --cpus-per-task=7",
                                 "#SBATCH --gpus-per-node=8", "#SBATCH --exclusive", "#SBATCH --time=2-00:00:00",
                                 "#SBATCH --account=project_465000123", "#SBATCH --partition=standard-g",
                                 "module load LUMI/24.03", "module load partition/G",
                                 "export NCCL_DEBUG=INFO", "export NCCL_DEBUG_SUBSYS=INIT"}) {
    EXPECT_NE(s.find("\n" + line + "\n"), std::string::npos) << line << "\n" << s;
  }
  EXPECT_LT(s.find("module load LUMI/24.03"), s.find("module load partition/G"));
  EXPECT_NE(s.find("\nexport OMP_NUM_THREADS=7  # one thread per CPU"), std::string::npos) << s;
  // Every setting of the profile, with its source.
  int settings = 0;
  for (const std::string& line : Lines(s)) {
    if (line.rfind("export FI_", 0) == 0 || line.rfind("export NCCL_SOCKET", 0) == 0 ||
        line.rfind("export NCCL_NET", 0) == 0 || line.rfind("export HSA_", 0) == 0) {
      ++settings;
      EXPECT_NE(line.find("  # seed"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(settings, 12);
  EXPECT_EQ(s.find("no source"), std::string::npos);
}

TEST(LaunchScript, SrunsMpiPluginFollowsTheMpiTheProgramLinks) {
  const CliRun core = RunTunepar(kLumi + kSite);  // tunepar-core-hip as installed here links Open MPI
  ASSERT_EQ(core.exit_code, 0) << core.err;
  EXPECT_NE(core.out.find("# srun --mpi=pmix: tunepar-core-hip links open-mpi (ldd; lumi-g launch.mpi_plugins)"),
            std::string::npos)
      << core.out;
  const CliRun cray = RunTunepar(kLumi + kSite + " --mpi cray-mpich");
  ASSERT_EQ(cray.exit_code, 0) << cray.err;
  EXPECT_NE(cray.out.find("# srun --mpi=cray_shasta: the program links cray-mpich (--mpi; lumi-g launch.mpi_plugins)"),
            std::string::npos)
      << cray.out;
  const std::vector<std::string> steps = Steps(cray.out);
  ASSERT_EQ(steps.size(), 4u);
  for (size_t i = 1; i < steps.size(); ++i) {  // the rank check, the smoke test and the training
    EXPECT_NE(steps[i].find(" --mpi=cray_shasta "), std::string::npos) << steps[i];
    EXPECT_EQ(steps[i].find("pmix"), std::string::npos) << steps[i];
  }
  ExpectOneLineError(RunTunepar(kLumi + kSite + " --mpi mvapich"), kExitUsage,
                     "--mpi mvapich: not an MPI of lumi-g (cray-mpich, open-mpi) nor a Slurm MPI plugin");
}

TEST(LaunchScript, AProfilesEnvironmentSettingNeedsASource) {
  const std::string profile = testing::PresetText("hardware", "lumi-g");
  const std::string with = R"x(NCCL_NET_GDR_LEVEL = { value = "PHB", source = "seeds 000/001: GPU RDMA (default from ROCm 6.2)" })x";
  ASSERT_NE(profile.find(with), std::string::npos);
  std::string without = profile;
  without.replace(without.find(with), with.size(), R"x(NCCL_NET_GDR_LEVEL = { value = "PHB", source = "" })x");
  Result<runner::HardwareProfile> bad = runner::ParseHardwareProfile(without, "mine.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("key 'launch.env.NCCL_NET_GDR_LEVEL.source': must say where the setting comes from"),
            std::string::npos)
      << bad.status().message();
  // A plain string still reads (profiles stored with studies before sources were asked for).
  std::string plain = profile;
  plain.replace(plain.find(with), with.size(), R"x(NCCL_NET_GDR_LEVEL = "PHB")x");
  Result<runner::HardwareProfile> old = runner::ParseHardwareProfile(plain, "stored");
  ASSERT_TRUE(old.ok()) << old.status().message();
  TempDir dir;
  testing::WriteFile(dir / "old.toml", plain);
  const CliRun run =
      RunTunepar("launch-script --model gpt-22b --hardware " + (dir / "old.toml") + " --layout " + kLumiLayout + kSite);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("export NCCL_NET_GDR_LEVEL=PHB  # (the profile gives no source)"), std::string::npos);
}

// ---- Item 13: checks that can fail (run under Slurm in slurm_backend_test.cc).

TEST(LaunchScript, TheNodeAndRankChecksRunBeforeTheTrainingWithItsBinding) {
  const CliRun run = RunTunepar(kLumi + kSite);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> steps = Steps(run.out);
  ASSERT_EQ(steps.size(), 4u) << run.out;  // node check, rank check, smoke test (issue 18), training
  EXPECT_NE(steps[0].find("--ntasks-per-node=1 --gpus-per-node=8 --kill-on-bad-exit=1 bash \"$checks\" node"),
            std::string::npos)
      << steps[0];
  EXPECT_NE(steps[1].find("bash \"$rank_setup\" bash \"$checks\" rank"), std::string::npos) << steps[1];
  // The rank check and the smoke test run with exactly the training's srun options.
  const std::string training_srun = steps[3].substr(0, steps[3].find(" bash \"$rank_setup\""));
  EXPECT_EQ(steps[1].substr(0, steps[1].find(" bash \"$rank_setup\"")), training_srun);
  EXPECT_EQ(steps[2].substr(0, steps[2].find(" bash \"$rank_setup\"")), training_srun);
  // The checks compare with the profile's map and stop with one line.
  EXPECT_NE(run.out.find("cpu_masks=(fe000000000000 fe00000000000000 fe0000 fe000000 fe fe00 fe00000000 fe0000000000)"),
            std::string::npos);
  EXPECT_NE(run.out.find("devices_per_node=8"), std::string::npos);
  EXPECT_NE(run.out.find("device_files='/dev/dri/renderD*'"), std::string::npos);
  EXPECT_NE(run.out.find("plugin_libraries=(librccl-net.so librccl-net-ofi.so)"), std::string::npos);
  EXPECT_NE(run.out.find("fail() { echo \"tunepar: $host: $*\" >&2; exit 3; }"), std::string::npos);
  EXPECT_EQ(run.out.find("no GPU tool"), std::string::npos) << "the smoke test that could not fail is gone";
}

// ---- Item 14: containers.

TEST(LaunchScript, WithAContainerEveryStepRunsInsideItWithTheProfilesBindsAndHook) {
  const CliRun run = RunTunepar(kLumi + kSite + " --container /appl/local/containers/pytorch.sif --bind /scratch/project_465000123");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string in =
      " singularity exec --bind \"$job_dir\" --bind /var/spool/slurmd --bind /opt/cray --bind /usr/lib64/libcxi.so.1 "
      "--bind /scratch/project_465000123 /appl/local/containers/pytorch.sif bash ";
  const std::vector<std::string> steps = Steps(run.out);
  ASSERT_EQ(steps.size(), 4u);
  for (const std::string& step : steps) EXPECT_NE(step.find(in), std::string::npos) << step;
  // The environment activation runs inside, before the checks and the program.
  EXPECT_EQ(Count(run.out, "\n$WITH_CONDA\n"), 2) << run.out;
  // MASTER_ADDR comes from Slurm's tools outside the image, before any step.
  const size_t master = run.out.find("MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n");
  ASSERT_NE(master, std::string::npos);
  EXPECT_LT(master, run.out.find("\nsrun "));
  EXPECT_NE(run.out.find("Binds and hook: lumi-g launch.container: seed 000"), std::string::npos);
  const CliRun apptainer = RunTunepar(kLumi + kSite + " --container img.sif --container-runtime apptainer "
                                      "--container-hook 'source /opt/venv/bin/activate'");
  ASSERT_EQ(apptainer.exit_code, 0) << apptainer.err;
  EXPECT_EQ(Count(apptainer.out, " apptainer exec --bind \"$job_dir\" "), 4);
  EXPECT_EQ(Count(apptainer.out, "\nsource /opt/venv/bin/activate\n"), 2);
  EXPECT_EQ(apptainer.out.find("$WITH_CONDA"), std::string::npos);
}

// ---- Item 15: the required environment first, training not a trial, the top K.

TEST(LaunchScript, ALaunchRunsTrainingNotATrialsLengthAndChecksTheEnvironmentFirst) {
  TempDir dir;
  ExpectOneLineError(RunTunepar(kLumi + kSite + " --command-config " + kMegatron + " -o " + (dir / "t.sbatch")),
                     kExitUsage,
                     "the command runs a trial's length (--train-iters 8): give --steps N for the training's length");
  EXPECT_FALSE(fs::exists(dir / "t.sbatch"));
  const CliRun run = RunTunepar(kLumi + kSite + " --command-config " + kMegatron + " --steps 250000");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string training = Steps(run.out).back();
  EXPECT_NE(training.find(" --train-iters 250000 "), std::string::npos) << training;
  EXPECT_EQ(training.find("--exit-interval"), std::string::npos) << training;
  EXPECT_EQ(training.find("srun", 4), std::string::npos) << "the config's own srun is dropped: " << training;
  // The DeepSpeed config the command names is written next to the job, from the layout.
  EXPECT_NE(training.find("--deepspeed_config \"$job_dir/deepspeed_config.json\""), std::string::npos) << training;
  const size_t file = run.out.find("cat >\"$job_dir/deepspeed_config.json\" <<'JOB_FILE'\n");
  ASSERT_NE(file, std::string::npos) << run.out;
  EXPECT_LT(file, run.out.find("\nsrun "));
  const std::string json = run.out.substr(file, run.out.find("JOB_FILE\n", file + 40) - file);
  EXPECT_NE(json.find("\"train_batch_size\": 1024"), std::string::npos) << json;
  EXPECT_NE(json.find("\"train_micro_batch_size_per_gpu\": 1"), std::string::npos) << json;
  // The variables the command reads are checked before any step, with one line each.
  const size_t check = run.out.find("for name in DATA_PATH VOCAB_FILE MERGE_FILE; do");
  ASSERT_NE(check, std::string::npos) << run.out;
  EXPECT_LT(check, run.out.find("\nsrun "));
  // A template's trial-only text ({trial?...}) is left out; --require-env adds a variable.
  const CliRun marked = RunTunepar(kLumi + kSite + " --training-command 'python train.py {trial?--train-iters 8} "
                                   "--data $DATA_DIR --cache ${CACHE:-/tmp}' --require-env HF_TOKEN");
  ASSERT_EQ(marked.exit_code, 0) << marked.err;
  EXPECT_NE(Steps(marked.out).back().find(" python train.py  --data $DATA_DIR --cache ${CACHE:-/tmp}"), std::string::npos)
      << marked.out;
  EXPECT_NE(marked.out.find("for name in DATA_DIR HF_TOKEN; do"), std::string::npos) << marked.out;
}

TEST(LaunchScript, TopKWritesOneScriptPerLayoutBestFirst) {
  TempDir dir;
  const std::string store = "--store " + (dir / "store");
  ASSERT_EQ(RunTunepar(store + " search --backend model --world 4 --model tiny --hardware local-cpu").exit_code, 0);
  const CliRun run = RunTunepar(store + " launch-script --top 3 --training-command 'python train.py --tp {tp}' -o " + (dir / "train.sbatch"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::set<std::string> layouts;
  for (int k = 1; k <= 3; ++k) {
    const std::string path = dir / ("train-" + std::to_string(k) + ".sbatch");
    ASSERT_TRUE(fs::exists(path)) << run.err;
    EXPECT_NE(run.err.find("wrote " + path + ": "), std::string::npos) << run.err;
    const std::string text = ReadFile(path);
    const size_t at = text.find("# Layout ");
    layouts.insert(text.substr(at, text.find(':', at) - at));
    EXPECT_NE(text.find(k == 1 ? ": best of study" : ": number " + std::to_string(k) + " of the top 3 of study"),
              std::string::npos)
        << text.substr(0, 400);
  }
  EXPECT_EQ(layouts.size(), 3u);
  ExpectOneLineError(RunTunepar(store + " launch-script --top 2"), kExitUsage, "--top writes one script per layout: give -o FILE");
  ExpectOneLineError(RunTunepar(store + " launch-script --top 0 -o x"), kExitUsage, "--top 0");
}

// ---- Item 23: node-level launchers.

TEST(LaunchScript, TorchrunRunsOncePerNodeWithTheAllocationsRendezvous) {
  // The issue's case: a world-2 layout whose command is torchrun with 2 workers.
  const CliRun run = RunTunepar(
      "launch-script --model tiny --hardware local-cpu --layout tp1-pp1-dp2-mbs4-nmb1-fp32-zero1-rcnone-sp0-vpp1-fa0 "
      "--training-command 'torchrun --nproc_per_node={gpus_per_node} --standalone train.py --dp {dp}'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("#SBATCH --ntasks-per-node=1\n#SBATCH --cpus-per-task=2\n"), std::string::npos) << run.out;
  const std::string training = Steps(run.out).back();
  EXPECT_EQ(training,
            "srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --cpus-per-task=2 --cpu-bind=mask_cpu:0x3 --mpi=none "
            "--kill-on-bad-exit=1 bash \"$rank_setup\" bash -c 'torchrun --nnodes=1 --nproc-per-node=2 "
            "--node-rank=\"$SLURM_NODEID\" --rdzv-backend=static --rdzv-endpoint=\"$MASTER_ADDR:$MASTER_PORT\" "
            "train.py --dp 2'");
  // The shipped torchtitan config on 8 nodes: 8 launchers of 8 workers, not 512 trainers.
  const CliRun titan = RunTunepar(
      "launch-script --model llama3-8b --hardware dgx-h100 --layout tp8-pp2-dp4-mbs1-nmb256-bf16-zero3-rcnone-sp0-vpp1-fa0 "
      "--command-config " + kTorchtitan + " --steps 1000");
  ASSERT_EQ(titan.exit_code, 0) << titan.err;
  const std::string step = Steps(titan.out).back();
  EXPECT_NE(step.find("srun --nodes=8 --ntasks=8 --ntasks-per-node=1 --cpus-per-task=112 "), std::string::npos) << step;
  EXPECT_NE(step.find("'torchrun --nnodes=8 --nproc-per-node=8 --node-rank=\"$SLURM_NODEID\" --rdzv-backend=static "
                      "--rdzv-endpoint=\"$MASTER_ADDR:$MASTER_PORT\" "),
            std::string::npos)
      << step;
  EXPECT_EQ(Count(step, "torchrun"), 1) << step;
  EXPECT_EQ(Count(step, "--nnodes"), 1) << step;
  EXPECT_NE(step.find("--training.steps 1000"), std::string::npos) << step;
  EXPECT_NE(step.find("--model.name llama3 --model.flavor 8B --training.seq_len 8192"), std::string::npos) << step;
}

// A command config says in [knobs] what its program runs: a layout outside them (torchtitan has
// no fp16, no interleaving, and shards with FSDP2: ZeRO 2 or 3) gets no script, whose program
// would fail or run another layout.
TEST(LaunchScript, ALayoutTheCommandConfigDoesNotRunGetsNoScript) {
  const std::string layout = " --layout tp8-pp2-dp4-mbs1-nmb256-";
  const std::string titan = "launch-script --model llama3-8b --hardware dgx-h100 --steps 1000 --command-config " + kTorchtitan;
  ExpectOneLineError(RunTunepar(titan + layout + "fp16-zero3-rcnone-sp0-vpp1-fa0"), kExitUsage,
                     "runs precision bf16, fp32, fp8 only (its [knobs]); layout tp8-pp2-dp4-mbs1-nmb256-fp16-zero3-rcnone-"
                     "sp0-vpp1-fa0 has precision fp16");
  ExpectOneLineError(RunTunepar(titan + " --layout tp8-pp2-dp4-mbs1-nmb256-bf16-zero3-rcnone-sp0-vpp2-fa0"),
                     kExitUsage, "runs virtual_stages 1 only");
  ExpectOneLineError(RunTunepar(titan + layout + "bf16-zero1-rcnone-sp0-vpp1-fa0"), kExitUsage, "runs zero 2, 3 only");
  EXPECT_EQ(RunTunepar(titan + layout + "bf16-zero3-rcnone-sp0-vpp1-fa0").exit_code, 0);
  // Hybrid sharding reaches FSDP2's 2-D mesh: 2 replicas of shard groups of 2.
  const CliRun hybrid = RunTunepar(titan + layout + "bf16-zero2-rcnone-sp0-vpp1-fa0-dpr2");
  ASSERT_EQ(hybrid.exit_code, 0) << hybrid.err;
  EXPECT_NE(hybrid.out.find("--parallelism.data_parallel_shard_degree 2 --parallelism.data_parallel_replicate_degree 2 "
                            "--parallelism.fsdp_reshard_after_forward never"),
            std::string::npos)
      << hybrid.out;
}

// The Megatron-LM config's launch carries the layout and the model's shape as its flags (llama3-70b:
// GQA, SwiGLU, rotary, RMSNorm, untied, no biases; 80 layers over 4 stages of 2 chunks).
TEST(LaunchScript, MegatronLmLaunchCarriesTheShapeFlags) {
  const CliRun run = RunTunepar(
      "launch-script --model llama3-70b --hardware dgx-h100 --layout tp8-pp4-dp2-mbs1-nmb512-bf16-zero0-rcselective-"
      "sp1-vpp2-fa1 --steps 1000 --command-config " + std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/megatron-lm.toml");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string training = Steps(run.out).back();
  EXPECT_NE(training.find(
                " python pretrain_gpt.py --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
                "--context-parallel-size 1 --expert-model-parallel-size 1 --num-layers-per-virtual-pipeline-stage 10 --sequence-parallel --micro-batch-size 1 --global-batch-size "
                "1024 --num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 "
                "--group-query-attention --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 "
                "--position-embedding-type rope --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights "
                "--disable-bias-linear --attention-backend flash --recompute-granularity selective --bf16 "
                "--train-iters 1000 "),
            std::string::npos)
      << training;
}

// Context parallelism and uneven stages reach the launch as Megatron-LM's flags (Llama 3 70B on
// 4 stages of 19 + 2 x 21 + 19 layers, base/pipeline_split.h), and tunepar-core's line carries
// them in its layout key.
TEST(LaunchScript, MegatronLmLaunchCarriesContextParallelismAndTheStageSplit) {
  const std::string layout = "tp8-pp4-dp2-mbs1-nmb512-bf16-zero1-rcselective-sp1-vpp1-fa1-cp2-uneven1";
  const CliRun run = RunTunepar("launch-script --model llama3-70b --hardware dgx-h100 --layout " + layout +
                                " --steps 1000 --command-config " + std::string(TUNEPAR_SOURCE_DIR) +
                                "/configs/commands/megatron-lm.toml");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string training = Steps(run.out).back();
  EXPECT_NE(training.find(" --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --context-parallel-size 2 "
                          "--expert-model-parallel-size 1 --decoder-first-pipeline-num-layers 19 --decoder-last-pipeline-num-layers 19 "),
            std::string::npos)
      << training;
  const std::string even = "tp8-pp4-dp4-mbs1-nmb256-bf16-zero1-rcselective-sp1-vpp1-fa1";
  const CliRun core = RunTunepar("launch-script --model llama3-70b --hardware dgx-h100 --layout " + even + "-uneven1");
  ASSERT_EQ(core.exit_code, 0) << core.err;
  EXPECT_NE(Steps(core.out).back().find(" --layout " + even + "-uneven1 "), std::string::npos) << Steps(core.out).back();
}

// A MoE model's launch (issue 36): Mixtral with ep 8 carries Megatron-LM's expert flags
// (dropless: no capacity factor; no shared experts); tunepar-core, which has no MoE layer, and
// torchtitan's config (no MoE flavour mapped) give no script, naming why.
TEST(LaunchScript, MegatronLmLaunchCarriesTheExpertFlags) {
  const std::string layout = " --layout tp1-pp4-dp64-mbs1-nmb8-bf16-zero1-rcnone-sp0-vpp1-fa1-ep8 --steps 1000";
  const CliRun run = RunTunepar("launch-script --model mixtral-8x7b --hardware dgx-h100 --command-config " +
                                std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/megatron-lm.toml" + layout);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string training = Steps(run.out).back();
  EXPECT_NE(training.find(" --context-parallel-size 1 --expert-model-parallel-size 8 --num-experts 8 --moe-router-topk 2 "
                          "--moe-layer-freq 1 --moe-token-dispatcher-type alltoall --moe-ffn-hidden-size 14336 "),
            std::string::npos)
      << training;
  EXPECT_EQ(training.find("--moe-expert-capacity-factor"), std::string::npos) << training;
  EXPECT_EQ(training.find("--moe-shared-expert-intermediate-size"), std::string::npos) << training;
  ExpectOneLineError(RunTunepar("launch-script --model mixtral-8x7b --hardware dgx-h100" + layout), kExitConfig,
                     "tunepar-core has no MoE layer yet");
}

// A model the command config's program cannot train gets no script either (exit 3, the field
// named): torchtitan trains its flavours only, Megatron-DeepSpeed no Llama shape, and a
// --training-command that does not pass a field the model sets.
TEST(LaunchScript, AModelTheProgramCannotTrainGetsNoScript) {
  const std::string layout = " --layout tp8-pp2-dp4-mbs1-nmb256-bf16-zero1-rcnone-sp0-vpp1-fa0 --steps 1000";
  const std::string fsdp = " --layout tp8-pp2-dp4-mbs1-nmb256-bf16-zero3-rcnone-sp0-vpp1-fa0 --steps 1000";
  ExpectOneLineError(RunTunepar("launch-script --model gpt-22b --hardware dgx-h100 --command-config " + kTorchtitan +
                                fsdp),
                     kExitConfig, "command config torchtitan.toml passes the model as a torchtitan flavour "
                                  "({torchtitan_flavor}): model gpt-22b has the shape of none of torchtitan's");
  ExpectOneLineError(RunTunepar("launch-script --model llama3-8b --hardware dgx-h100 --command-config " + kMegatron +
                                layout),
                     kExitConfig, "command config megatron-deepspeed.toml does not pass {ffn_hidden}");
  ExpectOneLineError(RunTunepar("launch-script --model llama3-8b --hardware dgx-h100 --training-command 'python "
                                "train.py --tp {tp} --ffn {ffn_hidden} {tied_embeddings=0?--untie}'" + layout),
                     kExitConfig, "--training-command does not pass {kv_heads}: its program would train model "
                                  "llama3-8b with kv_heads 32 (what it takes untold), not 8");
}

TEST(LaunchScript, LaunchersThatStartEveryNodesRanksThemselvesAreRefused) {
  for (const std::string launcher : {"deepspeed --num_gpus 2 train.py", "accelerate launch train.py"}) {
    ExpectOneLineError(RunTunepar("launch-script --model tiny --hardware local-cpu --layout " + kCpuLayout +
                                  " --training-command '" + launcher + "'"),
                       kExitUsage, "launcher, which starts the ranks of every node itself: give --training-command");
  }
}

// ---- Issue 18 item 2: the tunepar-core build of the profile's devices.

// The script's training step and the header line that says which program it runs.
struct CoreLaunch {
  std::string step, header;
};
CoreLaunch CoreLaunchOf(const CliRun& run) {
  CoreLaunch launch;
  launch.step = Steps(run.out).empty() ? "" : Steps(run.out).back();
  for (const std::string& line : Lines(run.out)) {
    if (line.rfind("# The program: ", 0) == 0) launch.header = line;
  }
  return launch;
}

TEST(LaunchScript, RunsTheCoreBuildOfTheProfilesDevicesAndSaysWhich) {
  struct Case {
    std::string args, binary, header;
  };
  const std::string gpt22b = " --model gpt-22b --layout " + kLumiLayout;
  for (const Case& c : std::vector<Case>{
           {"--hardware lumi-g" + gpt22b + kSite, "tunepar-core-hip",
            "tunepar-core-hip beside tunepar (the AMD build, for lumi-g: its launch.visible_devices_env is ROCR_VISIBLE_DEVICES)."},
           {"--hardware frontier-mi250x --account abc" + gpt22b, "tunepar-core-hip", "the AMD build, for frontier-mi250x"},
           {"--hardware dgx-h100" + gpt22b, "tunepar-core-cuda",
            "tunepar-core-cuda beside tunepar (the NVIDIA build, for dgx-h100: its launch.visible_devices_env is CUDA_VISIBLE_DEVICES)."},
           {"--hardware dgx-a100" + gpt22b, "tunepar-core-cuda", "the NVIDIA build, for dgx-a100"},
           {"--hardware local-cpu --model tiny --layout " + kCpuLayout, "tunepar-core",
            "tunepar-core beside tunepar (the CPU build, for local-cpu: its device 'CPU core' and launch.visible_devices_env name no "
            "GPU vendor)."}}) {
    const CliRun run = RunTunepar("launch-script " + c.args);
    ASSERT_EQ(run.exit_code, 0) << c.args << "\n" << run.err;
    const CoreLaunch launch = CoreLaunchOf(run);
    EXPECT_NE(launch.step.find("/" + c.binary + " --model \"$TUNEPAR_MODEL\""), std::string::npos) << launch.step;
    EXPECT_NE(launch.header.find(c.header), std::string::npos) << launch.header;
    // lumi-g and frontier map the MPI a program links to srun's plugin; the others do not.
    EXPECT_NE(run.out.find(c.binary == "tunepar-core-hip" ? ": tunepar-core-hip links open-mpi (ldd; "
                                                          : ": the profile's launch.mpi (" + c.binary +
                                                                " links open-mpi, which "),
              std::string::npos)
        << run.out;
  }
}

// Issue 18 item 6: before training, tunepar-core's smoke test (one all-reduce over every rank's
// device with its communication library) runs with the training's binding; a program of a
// template has no such mode, so its script has none.
TEST(LaunchScript, TheCoresSmokeTestRunsBeforeItsTraining) {
  const std::vector<std::string> core = Steps(RunTunepar(kLumi + kSite).out);
  ASSERT_EQ(core.size(), 4u);
  EXPECT_NE(core[2].find(" bash \"$rank_setup\" "), std::string::npos) << core[2];
  const std::string smoke = "/tunepar-core-hip --smoke 2>&1 | tee \"$smoke_log\"";  // its log is searched (issue 28)
  EXPECT_EQ(core[2].substr(core[2].size() - smoke.size()), smoke);
  const CliRun script = RunTunepar(kLumi + kSite + " --training-command 'python train.py --tp {tp}'");
  ASSERT_EQ(script.exit_code, 0) << script.err;
  EXPECT_EQ(Steps(script.out).size(), 3u);
  EXPECT_EQ(script.out.find("--smoke"), std::string::npos);
}

// Without the GPU build the profile needs, no script (it would start the CPU build on every GPU);
// --core names the program to run instead, and the script says so.
TEST(LaunchScript, WithoutTheProfilesCoreBuildOnlyCoreGivesAScript) {
  TempDir dir;
  const std::string cpu_only = testing::InstallTunepar(dir.path(), {"tunepar-core"});
  const std::string h100 = " launch-script --hardware dgx-h100 --model gpt-22b --layout " + kLumiLayout;
  ExpectOneLineError(RunCommand("PATH=/usr/bin:/bin " + cpu_only + h100), kExitUsage,
                     "tunepar-core-cuda (the NVIDIA build, for dgx-h100) not found next to tunepar or on $PATH: cmake "
                     "builds it where it finds nvcc with cuBLAS and NCCL, or give --core PATH");
  const CliRun given = RunCommand("PATH=/usr/bin:/bin " + cpu_only + h100 + " --core " + (dir / "tunepar-core"));
  ASSERT_EQ(given.exit_code, 0) << given.err;
  const CoreLaunch launch = CoreLaunchOf(given);
  EXPECT_NE(launch.step.find(" bash \"$rank_setup\" " + (dir / "tunepar-core") + " --model"), std::string::npos)
      << launch.step;
  EXPECT_NE(launch.header.find((dir / "tunepar-core") + " (--core, in place of tunepar-core-cuda: the NVIDIA build, "
                               "for dgx-h100)"),
            std::string::npos)
      << launch.header;
}

// ---- The pieces.

TEST(LaunchScriptText, ShellWordsKeepQuotesAndCommandSubstitutions) {
  EXPECT_EQ(runner::ShellWords("a 'b c' \"d $e\" --x=$((1 + 2 % 3)) $(f g) \\\n h"),
            (std::vector<std::string>{"a", "'b c'", "\"d $e\"", "--x=$((1 + 2 % 3))", "$(f g)", "h"}));
}

TEST(LaunchScriptText, TheProgramOfATemplateWithoutItsLauncher) {
  Result<runner::LaunchProgram> srun =
      runner::LaunchProgramOf("MASTER_ADDR=$(scontrol show hostnames x | head -n1)\nsrun -N 2 --ntasks-per-node=8 "
                              "--exclusive python train.py --a 1",
                              2, 8);
  ASSERT_TRUE(srun.ok());
  EXPECT_EQ(srun->command, "python train.py --a 1");
  EXPECT_FALSE(srun->node_launcher);
  EXPECT_EQ(srun->dropped, "MASTER_ADDR=$(scontrol show hostnames x | head -n1) srun -N 2 --ntasks-per-node=8 --exclusive");
  Result<runner::LaunchProgram> torchrun = runner::LaunchProgramOf(
      "srun --ntasks-per-node=1 torchrun --nnodes=4 --nproc_per_node 8 --rdzv_backend=c10d "
      "--rdzv_endpoint=$MASTER_ADDR:$((29500 + 3 % 1000)) --rdzv_id=x --max-restarts 0 -m torchtitan.train --steps 5",
      2, 4);
  ASSERT_TRUE(torchrun.ok());
  EXPECT_TRUE(torchrun->node_launcher);
  EXPECT_EQ(torchrun->command,
            "torchrun --nnodes=2 --nproc-per-node=4 --node-rank=\"$SLURM_NODEID\" --rdzv-backend=static "
            "--rdzv-endpoint=\"$MASTER_ADDR:$MASTER_PORT\" --max-restarts 0 -m torchtitan.train --steps 5");
  Result<runner::LaunchProgram> module = runner::LaunchProgramOf("python3 -m torch.distributed.run --nnodes 2 t.py", 1, 2);
  ASSERT_TRUE(module.ok());
  EXPECT_TRUE(module->node_launcher);
  EXPECT_EQ(module->command.rfind("python3 -m torch.distributed.run --nnodes=1 --nproc-per-node=2 ", 0), 0u)
      << module->command;
  EXPECT_EQ(runner::LaunchProgramOf("python train.py --deepspeed --deepspeed_config x.json", 1, 2)->command,
            "python train.py --deepspeed --deepspeed_config x.json");
  EXPECT_FALSE(runner::LaunchProgramOf("srun --exclusive", 1, 2).ok());
}

TEST(LaunchScriptText, ATrialsLengthBecomesTheLaunchs) {
  EXPECT_EQ(*runner::WithTrainingLength("x --train-iters 8 --log-interval 1 --exit-interval 8 --y", 5000),
            "x --train-iters 5000 --log-interval 1 --y");
  EXPECT_EQ(*runner::WithTrainingLength("x --training.steps=10 --z", 7), "x --training.steps=7 --z");
  EXPECT_EQ(*runner::WithTrainingLength("python train.py", 0), "python train.py");
  EXPECT_FALSE(runner::WithTrainingLength("x --max-steps 3", 0).ok());
}

TEST(LaunchScriptText, TheVariablesACommandNeeds) {
  EXPECT_EQ(runner::VariablesTheCommandNeeds(
                "p --a ${DATA} --b $VOCAB --c ${OPT:-x} --d ${ALT-y} '$QUOTED' $RANK $SLURM_JOB_ID $DATA", {"RANK"}),
            (std::vector<std::string>{"DATA", "VOCAB"}));
}

TEST(LaunchScriptText, SlurmTimeForms) {
  for (const std::string good : {"1", "59:59", "100:00:00", "7-0", "1-23:59", "1-00:00:01"})
    EXPECT_TRUE(runner::CheckSlurmTime(good).ok()) << good;
  for (const std::string bad : {"", "x", "1:60", "1:60:00", "1-24", "1-1:1:60", "0:00", "1:2:3:4", "1h"})
    EXPECT_FALSE(runner::CheckSlurmTime(bad).ok()) << bad;
}

// Names a user gave never become lines or words of the script (issue 27): a study stored under a
// name with newlines and `$(...)` (as a tunepar before the name rule could store it) in a store
// whose path holds quotes and spaces, written to a path like it; the script parses, every line
// that names them is one comment line, and a job name or account that would end its #SBATCH line
// is refused.
TEST(LaunchScript, HostileNamesNeverBecomeLinesOrWordsOfTheScript) {
  TempDir dir;
  const std::string store = dir / "st ore 'q' ü";
  ASSERT_EQ(RunTunepar("--store " + runner::ShellQuote(store) +
                       " search --world 4 --model tiny --hardware local-cpu --study plain --node-id n0")
                .exit_code,
            0);
  const nlohmann::json show =
      nlohmann::json::parse(RunTunepar("--store " + runner::ShellQuote(store) + " --json show plain").out);
  const std::string name = "x\n$(touch F)\ntouch G\n";
  testing::RenameStoredStudy(store, "n0", show["study_id"].get<std::string>(), name);
  const std::string script = dir / "out 'put' $(x).sbatch";
  const CliRun run = RunTunepar("--store " + runner::ShellQuote(store) + " launch-script " + runner::ShellQuote(name) +
                                " --training-command 'python train.py' -o " + runner::ShellQuote(script));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string text = ReadFile(script);
  EXPECT_EQ(RunCommand("bash -n " + runner::ShellQuote(script)).exit_code, 0);
  for (const std::string& line : Lines(text)) {
    EXPECT_NE(line.rfind("$(touch F)", 0), 0u) << line;
    EXPECT_NE(line.rfind("touch G", 0), 0u) << line;
  }
  EXPECT_NE(text.find("best of study x\\n$(touch F)\\ntouch G\\n"), std::string::npos) << text.substr(0, 600);
  EXPECT_FALSE(fs::exists(dir / "F"));
  const std::map<std::string, std::string> others = {{"--job-name", kSite},
                                                      {"--account", " --partition standard-g"},
                                                      {"--partition", " --account project_465000123"}};
  for (const auto& [flag, rest] : others) {
    ExpectOneLineError(RunTunepar(kLumi + rest + " " + flag + " " + runner::ShellQuote("a\nb")), kExitUsage,
                       flag + " 'a\\nb' must be one word");
  }
}

// Issue 28 item 1: a study measured with the user's own command launches that command for its
// best layout (its $TUNEPAR_LAYOUT too), never tunepar-core.
TEST(LaunchScript, AStudyMeasuredWithItsOwnCommandLaunchesThatProgram) {
  TempDir dir;
  const std::string store = dir / "s";
  const std::string command = std::string(TUNEPAR_FAKE_TRAINER) +
                              " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision} --recompute {recompute}";
  ASSERT_EQ(RunTunepar("--store " + store + " search --world 4 --model tiny --hardware local-cpu --backend command "
                       "--command " + runner::ShellQuote(command) + " --metric-regex 'step_time: ([0-9.]+)' "
                       "--budget 3 --confirm 0 --node-id n0 --reads-layout-env")
                .exit_code,
            0);
  const CliRun run = RunTunepar("--store " + store + " launch-script -o " + (dir / "x.sbatch"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string script = ReadFile(dir / "x.sbatch");
  const std::vector<std::string> steps = Steps(script);
  ASSERT_FALSE(steps.empty());
  EXPECT_NE(steps.back().find(std::string(TUNEPAR_FAKE_TRAINER) + " --tp "), std::string::npos) << steps.back();
  EXPECT_EQ(steps.back().find("tunepar-core"), std::string::npos) << steps.back();
  EXPECT_NE(script.find("own command, as its trials ran it"), std::string::npos);
  const std::string best = script.substr(script.find("# Layout ") + 9, script.find(':', script.find("# Layout ")) - script.find("# Layout ") - 9);
  EXPECT_NE(script.find("export TUNEPAR_LAYOUT=" + best), std::string::npos) << best;
}

// Issue 28 item 2: --layout with no study and no model or hardware is for the store's only study
// (its profile); with several studies, one must be named.
TEST(LaunchScript, ALayoutWithNoStudyNamedIsForTheStoresOnlyStudy) {
  TempDir dir;
  const std::string store = "--store " + (dir / "s");
  ASSERT_EQ(RunTunepar(store + " search --world 128 --model gpt-22b --hardware lumi-g").exit_code, 0);
  const CliRun only = RunTunepar(store + " launch-script --layout " + kLumiLayout + kSite);
  ASSERT_EQ(only.exit_code, 0) << only.err;
  EXPECT_NE(only.out.find("on lumi-g ("), std::string::npos) << only.out.substr(0, 500);
  EXPECT_EQ(only.out.find("frontier"), std::string::npos);
  // Given --model and --hardware, the layout is launched outside any study.
  EXPECT_EQ(RunTunepar(store + " " + kLumi + kSite).exit_code, 0);
  ASSERT_EQ(RunTunepar(store + " search --world 64 --model gpt-22b --hardware lumi-g").exit_code, 0);
  ExpectOneLineError(RunTunepar(store + " launch-script --layout " + kLumiLayout + kSite), kExitUsage,
                     "has 2 studies; name one");
}

// ---- Issue 28 item 3: what LUMI's guidance still asked of a script.

// The memory request the seed slides make on LUMI (--mem-per-gpu=60G, the profile's
// launch.mem_per_gpu, with its source); profiles without one ask none. A bad size is refused.
TEST(LaunchScript, ALumiScriptAsksTheProfilesMemoryPerDevice) {
  const CliRun lumi = RunTunepar(kLumi + kSite);
  ASSERT_EQ(lumi.exit_code, 0) << lumi.err;
  EXPECT_NE(lumi.out.find("\n#SBATCH --mem-per-gpu=60G\n"), std::string::npos) << lumi.out.substr(0, 800);
  EXPECT_NE(lumi.out.find("# --mem-per-gpu (launch.mem_per_gpu): seed 001"), std::string::npos);
  const CliRun frontier = RunTunepar("launch-script --model gpt-22b --hardware frontier-mi250x --layout " + kLumiLayout +
                                     " --account abc123");
  ASSERT_EQ(frontier.exit_code, 0) << frontier.err;
  EXPECT_EQ(frontier.out.find("--mem-per-gpu"), std::string::npos);
  const std::string profile = testing::PresetText("hardware", "lumi-g");
  const std::string request = "mem_per_gpu = { value = \"60G\"";
  ASSERT_NE(profile.find(request), std::string::npos);
  std::string bad = profile;
  bad.replace(bad.find(request), request.size(), "mem_per_gpu = { value = \"60 GB\"");
  Result<runner::HardwareProfile> parsed = runner::ParseHardwareProfile(bad, "mine.toml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("launch.mem_per_gpu.value': '60 GB' is not a Slurm memory size"),
            std::string::npos)
      << parsed.status().message();
}

// The smoke test's log is searched for the line RCCL prints when it uses the network plugin: the
// job stops there with one line when it is missing, and goes on to training when it is there.
TEST(LaunchScript, TheSmokeTestsLogMustShowTheNetworkPlugin) {
  const CliRun run = RunTunepar(kLumi + kSite);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const size_t start = run.out.find("smoke_log=");
  ASSERT_NE(start, std::string::npos) << run.out;
  const size_t end = run.out.find("\nfi\n", start);
  ASSERT_NE(end, std::string::npos);
  std::string block = run.out.substr(start, end + 4 - start);
  // The smoke step's srun, replaced by what its ranks would print.
  const size_t srun = block.find("\nsrun ");
  ASSERT_NE(srun, std::string::npos) << block;
  const size_t tee = block.find(" 2>&1 | tee \"$smoke_log\"", srun);
  ASSERT_NE(tee, std::string::npos) << block;
  block.replace(srun + 1, tee - srun - 1, "printf '%s\\n' \"$SMOKE_OUTPUT\"");
  TempDir dir;
  testing::WriteFile(dir / "smoke.sh", "set -euo pipefail\njob_dir=" + dir.path() + "\nSLURM_JOB_ID=7\n" + block +
                                           "echo training starts\n");
  const CliRun with = RunCommand("SMOKE_OUTPUT='[0] NCCL INFO NET/OFI Using aws-ofi-rccl 1.4.0' bash " + (dir / "smoke.sh"));
  EXPECT_EQ(with.exit_code, 0) << with.err;
  EXPECT_NE(with.out.find("training starts"), std::string::npos) << with.out;
  const CliRun without = RunCommand("SMOKE_OUTPUT='[0] NCCL INFO NET/Socket : Using [0]hsn0' bash " + (dir / "smoke.sh"));
  EXPECT_EQ(without.exit_code, 3) << without.out << without.err;
  EXPECT_EQ(without.out.find("training starts"), std::string::npos);
  EXPECT_EQ(std::count(without.err.begin(), without.err.end(), '\n'), 1) << without.err;
  EXPECT_NE(without.err.find("tunepar: the smoke test's log (" + dir.path() + "/tunepar-smoke-7.log) has no line "
                             "NET/OFI Using aws-ofi-rccl: the communication library did not load the aws-ofi-rccl plugin"),
            std::string::npos)
      << without.err;
  // A profile without a network plugin has nothing to search for.
  const CliRun local = RunTunepar("launch-script --model tiny --hardware local-cpu --layout " + kCpuLayout);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  EXPECT_NE(local.out.find("--smoke\n"), std::string::npos);
  EXPECT_EQ(local.out.find("smoke_log"), std::string::npos);
}

// In a container, the host directories the command names (data, checkpoints) are bound at a
// project directory's level, once, unless a bind covers them already; not the image's own system
// directories, /tmp or $HOME (bound by default).
TEST(LaunchScript, AContainerBindsTheDirectoriesTheCommandNames) {
  const std::string command =
      "python /scratch/project_465000123/megatron/pretrain_gpt.py --tp {tp} "
      "--data-path=/scratch/project_465000123/data/owt --save '/flash/project_465000123/ckpt' "
      "--tokenizer /usr/share/tok.json --cache /tmp/c --log $HOME/x --vocab /opt/miniconda3/vocab.json";
  const CliRun run = RunTunepar(kLumi + kSite + " --container img.sif --training-command " + runner::ShellQuote(command));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> steps = Steps(run.out);
  ASSERT_FALSE(steps.empty());
  EXPECT_NE(steps.back().find("--bind /usr/lib64/libcxi.so.1 --bind /scratch/project_465000123 --bind "
                              "/flash/project_465000123 img.sif "),
            std::string::npos)
      << steps.back();
  EXPECT_EQ(Count(steps.back(), "--bind"), 6) << steps.back();  // the job directory, 3 of the profile's, 2
  EXPECT_NE(run.out.find("/scratch/project_465000123, /flash/project_465000123: the training command names paths "
                         "under them"),
            std::string::npos);
  // A bind given for a directory (its container side) covers the paths under it.
  const CliRun given = RunTunepar(kLumi + kSite + " --container img.sif --bind /pfs/lustrep2/scratch/project_465000123:"
                                  "/scratch/project_465000123 --training-command " + runner::ShellQuote(command));
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_EQ(Count(Steps(given.out).back(), "--bind /scratch/project_465000123"), 0) << Steps(given.out).back();
  EXPECT_EQ(Count(Steps(given.out).back(), "--bind"), 6) << Steps(given.out).back();
  EXPECT_NE(Steps(given.out).back().find("--bind /flash/project_465000123 img.sif"), std::string::npos);
  // Without a container, nothing is bound.
  const CliRun bare = RunTunepar(kLumi + kSite + " --training-command " + runner::ShellQuote(command));
  EXPECT_EQ(bare.out.find("--bind"), std::string::npos);
}

TEST(LaunchScriptText, TheDirectoriesACommandNames) {
  EXPECT_EQ(runner::DirectoriesTheCommandNames(
                "python train.py --data /scratch/p1/d/x.bin --out=/project/p1 \"/flash/p1/a b\" ${HOME}/y /data "
                "/users/me/z /usr/bin/x /var/tmp/q /scratch/p1/other --x=$D/q",
                "/users/me"),
            (std::vector<std::string>{"/scratch/p1", "/project/p1", "/flash/p1", "/data"}));
  EXPECT_TRUE(runner::DirectoriesTheCommandNames("torchrun train.py --steps 5 ../rel/x", "").empty());
}

// A Python program links no MPI: srun --mpi=none, said in the script; --mpi overrides; a command
// that uses MPI from Python (DeepSpeed's --deepspeed_mpi) or a binary keeps the profile's plugin.
TEST(LaunchScript, APythonProgramRunsWithoutSrunsMpiPlugin) {
  const CliRun python = RunTunepar(kLumi + kSite + " --training-command 'python3.11 train.py --tp {tp}'");
  ASSERT_EQ(python.exit_code, 0) << python.err;
  for (const std::string& step : Steps(python.out)) {
    if (step.find("\"$checks\" node") != std::string::npos) continue;
    EXPECT_NE(step.find(" --mpi=none "), std::string::npos) << step;
  }
  EXPECT_NE(python.out.find("# srun --mpi=none: python3.11 is a Python program, which links no MPI"),
            std::string::npos);
  const CliRun torchrun =
      RunTunepar(kLumi + kSite + " --training-command 'torchrun --nproc-per-node 8 train.py --tp {tp}'");
  ASSERT_EQ(torchrun.exit_code, 0) << torchrun.err;
  EXPECT_NE(torchrun.out.find("# srun --mpi=none: torchrun is a Python program"), std::string::npos);
  const CliRun given = RunTunepar(kLumi + kSite + " --mpi pmix --training-command 'python train.py --tp {tp}'");
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_NE(Steps(given.out).back().find(" --mpi=pmix "), std::string::npos);
  for (const std::string mpi_user : {"python train.py --deepspeed_mpi --tp {tp}", "./train --tp {tp}"}) {
    const CliRun run = RunTunepar(kLumi + kSite + " --training-command " + runner::ShellQuote(mpi_user));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(Steps(run.out).back().find(" --mpi=pmix "), std::string::npos) << mpi_user;
  }
  EXPECT_EQ(runner::PythonProgramOf("CUDA_LAUNCH_BLOCKING=1 env /opt/conda/bin/python -u x.py"), "python");
  EXPECT_EQ(runner::PythonProgramOf("./pretrain.py --x 1"), "pretrain.py");
  EXPECT_EQ(runner::PythonProgramOf("bash run.sh"), "");
}

}  // namespace
}  // namespace tunepar
