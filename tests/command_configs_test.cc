// The shipped command configs (configs/commands/*.toml) against the shipped spaces
// (configs/spaces/*.toml): every legal layout, as a search with that config would run it (the
// space restricted by the config's [knobs] and by what its template passes), is rendered, and its
// flags, and the DeepSpeed config written for it, must say the layout's ZeRO stage, precision,
// micro-batch, global batch and interleaving. A value the template drops silently (an
// interleaving it has no flag for) or a file that contradicts the flags fails here.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/command_backend.h"
#include "tuner/backends/command_config.h"
#include "tuner/study/problem.h"
#include "tuner/study/study_context.h"
#include "tuner/study/study_identity.h"
#include "tests/test_support.h"

namespace tunepar {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Shipped(const std::string& folder) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(std::string(TUNEPAR_SOURCE_DIR) + "/configs/" + folder))
    if (entry.path().extension() == ".toml") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// The rendered command's options: "--flag value" and bare "--flag" (value ""); the last wins.
std::map<std::string, std::string> Flags(const std::string& command) {
  std::istringstream in(command);
  std::vector<std::string> words;
  for (std::string w; in >> w;)
    if (w != "\\") words.push_back(w);
  std::map<std::string, std::string> flags;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i].rfind("--", 0) != 0) continue;
    const size_t eq = words[i].find('=');
    if (eq != std::string::npos) {
      flags[words[i].substr(0, eq)] = words[i].substr(eq + 1);
    } else {
      const bool valued = i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0;
      flags[words[i]] = valued ? words[i + 1] : "";
    }
  }
  return flags;
}

// A model whose 120 layers the pipelines and interleavings of the spaces divide (48 would
// leave vpp 5 unrendered).
std::string ModelFile(const testing::TempDir& dir) {
  const std::string path = dir / "gpt-120l.toml";
  std::ofstream(path) << "name = \"gpt-120l\"\nlayers = 120\nhidden = 6144\nheads = 48\nseq_len = 2048\n"
                         "vocab = 51200\nglobal_batch = 960\n";
  return path;
}

// The legal layouts a search with this command config in this space would run at `world`.
std::vector<Layout> SearchedLayouts(const runner::CommandBackend& backend, const std::string& knobs,
                                    const std::string& model, const std::string& space, int world, ModelShape* shape) {
  Result<Problem> problem = LoadProblem(model, "lumi-g", space, knobs);
  EXPECT_TRUE(problem.ok()) << problem.status().message();
  if (!problem.ok()) return {};
  *shape = problem->model;
  StudySettings settings;
  settings.world = world;
  settings.backend = "command";
  Result<KnobSupport> support = backend.SupportedKnobs(problem->space, world);
  EXPECT_TRUE(support.ok()) << support.status().message();
  if (!support.ok()) return {};
  settings.pinned_knobs = PinnedKnobs(*support);
  Result<StudyContext> context = MakeStudyContext(MakeStudyRecord(*problem, settings, "id", "name", ""), 0);
  EXPECT_TRUE(context.ok()) << context.status().message();
  return context.ok() ? context->space.legal : std::vector<Layout>{};
}

// What the flags (and the DeepSpeed config, when the command passes one) say against the layout;
// "" when they agree.
std::string Disagreement(const std::string& command, const Layout& l, const ModelShape& model,
                         const std::string& trial_dir) {
  const std::map<std::string, std::string> flags = Flags(command);
  // A flag's value ("(absent)" when it is not there; the lookup adds nothing).
  auto f = [&](const std::string& flag) {
    auto it = flags.find(flag);
    return it == flags.end() ? std::string("(absent)") : it->second;
  };
  std::vector<std::string> wrong;
  auto expect = [&](const std::string& what, const std::string& said, const std::string& want) {
    if (said != want) wrong.push_back(fmt::format("{} says '{}', the layout {}", what, said, want));
  };
  auto has = [&](const std::string& flag) { return flags.contains(flag); };
  const std::string mbs = std::to_string(l.micro_batch), gbs = std::to_string(l.GlobalBatch());
  const bool interleaved = l.virtual_stages > 1;
  if (has("--micro-batch-size")) {  // Megatron(-DeepSpeed)
    expect("--micro-batch-size", f("--micro-batch-size"), mbs);
    expect("--global-batch-size", f("--global-batch-size"), gbs);
    expect("--zero-stage", f("--zero-stage"), std::to_string(l.zero));
    expect("--bf16", has("--bf16") ? "on" : "off", l.precision == Precision::kBf16 ? "on" : "off");
    expect("--fp16", has("--fp16") ? "on" : "off", l.precision == Precision::kFp16 ? "on" : "off");
    const std::string per_stage = f("--num-layers-per-virtual-pipeline-stage");
    expect("interleaving flag", has("--num-layers-per-virtual-pipeline-stage") ? "on" : "off",
           interleaved ? "on" : "off");
    if (interleaved) expect("layers per virtual stage", per_stage, std::to_string(model.layers / (l.pp * l.virtual_stages)));
  } else if (has("--training.global_batch_size")) {  // torchtitan
    expect("--training.global_batch_size", f("--training.global_batch_size"), gbs);
    if (l.pp == 1) {
      expect("--training.local_batch_size", f("--training.local_batch_size"), mbs);
    } else {
      expect("--parallelism.pipeline_parallel_microbatch_size", f("--parallelism.pipeline_parallel_microbatch_size"), mbs);
      expect("--training.local_batch_size", f("--training.local_batch_size"),
             std::to_string(l.micro_batch * l.num_micro_batches));
    }
    expect("--training.mixed_precision_param", f("--training.mixed_precision_param"),
           l.precision == Precision::kBf16 ? "bfloat16" : l.precision == Precision::kFp32 ? "float32" : "(none: fp16)");
    // FSDP over data parallelism shards the optimizer states: ZeRO 1 (and more), never 0.
    expect("FSDP over dp (ZeRO 1)", f("--parallelism.data_parallel_shard_degree") == std::to_string(l.dp) ? "1" : "0",
           std::to_string(l.zero));
    expect("interleaving (not mapped)", "1", std::to_string(l.virtual_stages));
  } else {
    wrong.push_back("no micro-batch flag this test knows");
  }
  if (has("--deepspeed_config")) {
    expect("--deepspeed_config", f("--deepspeed_config"), runner::DeepSpeedConfigPath(trial_dir));
    const nlohmann::json ds = nlohmann::json::parse(runner::DeepSpeedConfig(l));
    expect("train_batch_size", ds["train_batch_size"].dump(), gbs);
    expect("train_micro_batch_size_per_gpu", ds["train_micro_batch_size_per_gpu"].dump(), mbs);
    expect("micro x accumulation x dp",
           std::to_string(ds["train_micro_batch_size_per_gpu"].get<int>() *
                          ds["gradient_accumulation_steps"].get<int>() * l.dp),
           gbs);
    expect("zero_optimization.stage", ds["zero_optimization"]["stage"].dump(), std::to_string(l.zero));
    expect("bf16.enabled", ds["bf16"]["enabled"].dump(), l.precision == Precision::kBf16 ? "true" : "false");
    expect("fp16.enabled", ds["fp16"]["enabled"].dump(), l.precision == Precision::kFp16 ? "true" : "false");
    if (l.precision == Precision::kFp16) expect("fp16.loss_scale (dynamic)", ds["fp16"]["loss_scale"].dump(), "0");
  }
  return fmt::format("{}", fmt::join(wrong, "; "));
}

TEST(ShippedCommandConfigs, EveryLayoutOfEverySpaceRendersFlagsThatAgree) {
  testing::TempDir dir;
  const std::string model = ModelFile(dir);
  const int world = 32;  // 4 nodes of lumi-g
  for (const std::string& config : Shipped("commands")) {
    CommandFlags flags;
    flags.config_file = config;
    std::string knobs;
    Result<runner::CommandBackendOptions> options = ResolveCommandOptions(flags, &knobs);
    ASSERT_TRUE(options.ok()) << config << ": " << options.status().message();
    const runner::CommandBackend backend(*options);
    for (const std::string& space : Shipped("spaces")) {
      SCOPED_TRACE(fs::path(config).filename().string() + " in " + fs::path(space).filename().string());
      ModelShape shape;
      const std::vector<Layout> layouts = SearchedLayouts(backend, knobs, model, space, world, &shape);
      ASSERT_FALSE(layouts.empty());
      std::set<int> interleavings;
      int failures = 0;
      for (const Layout& l : layouts) {
        runner::TrialContext context;
        context.trial_dir = "/store/trials/s/n0-1";
        context.number = 1;
        context.world = world;
        context.gpus_per_node = 8;
        context.model = &shape;
        Result<std::string> command = runner::ExpandCommand(options->command, l, context);
        ASSERT_TRUE(command.ok()) << command.status().message();
        const std::string wrong = Disagreement(*command, l, shape, context.trial_dir);
        if (!wrong.empty() && ++failures <= 3) ADD_FAILURE() << LayoutKey(l) << ": " << wrong << "\n" << *command;
        interleavings.insert(l.virtual_stages);
      }
      EXPECT_EQ(failures, 0) << "of " << layouts.size() << " layouts";
      // The megatron space's interleavings all reach Megatron-DeepSpeed (3 and 5 too).
      if (config.find("megatron") != std::string::npos && space.find("megatron") != std::string::npos) {
        EXPECT_EQ(interleavings, (std::set<int>{1, 2, 3, 4, 5}));
      }
    }
  }
}

// torchtitan is started the way a multi-node run needs: one torchrun per node under srun, a
// c10d rendezvous on the allocation's first node, and no pipe that would hide its exit code.
TEST(ShippedCommandConfigs, TorchtitanLaunchesOneTorchrunPerNodeWithARendezvous) {
  CommandFlags flags;
  flags.config_file = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/torchtitan.toml";
  Result<runner::CommandBackendOptions> options = ResolveCommandOptions(flags);
  ASSERT_TRUE(options.ok()) << options.status().message();
  ModelShape model = testing::PresetModel("gpt-22b");
  Layout l;
  l.tp = 8;
  l.pp = 2;
  l.dp = 4;
  l.micro_batch = 1;
  l.num_micro_batches = 256;
  runner::TrialContext context;
  context.number = 7;
  context.world = 64;
  context.gpus_per_node = 8;
  context.model = &model;
  Result<std::string> command = runner::ExpandCommand(options->command, l, context);
  ASSERT_TRUE(command.ok()) << command.status().message();
  std::map<std::string, std::string> f = Flags(*command);
  EXPECT_EQ(f["--nodes"], "8");
  EXPECT_EQ(f["--ntasks-per-node"], "1");
  EXPECT_EQ(f["--nnodes"], "8");
  EXPECT_EQ(f["--nproc_per_node"], "8");
  EXPECT_EQ(f["--rdzv_backend"], "c10d");
  EXPECT_EQ(f["--rdzv_endpoint"], "$MASTER_ADDR:$((29500+7%1000))");
  EXPECT_NE(command->find("MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)"),
            std::string::npos);
  EXPECT_LT(command->find("MASTER_ADDR="), command->find("srun"));  // outside srun: one address for all
  // The only pipe is the one that finds the first node, before the launch.
  EXPECT_EQ(command->find('|', command->find("srun")), std::string::npos) << *command;
}

}  // namespace
}  // namespace tunepar
