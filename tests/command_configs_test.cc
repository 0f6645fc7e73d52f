// The shipped command configs (configs/commands/*.toml) against the shipped spaces
// (configs/spaces/*.toml) and three models (a GPT, a Llama-style model, the llama3-70b preset):
// every legal layout, as a search with that config would run it (the space restricted by the
// config's [knobs] and by what its template passes), is rendered (every 3rd of a large space,
// with every knob value kept), and its flags, and the DeepSpeed config written for it, must say
// the layout's ZeRO stage, precision, micro-batch, global batch and interleaving, and the model's
// shape (Megatron-LM's shape flags, torchtitan's flavour). A value the template drops silently
// (an interleaving it has no flag for, a shape field it does not pass) or a file that
// contradicts the flags fails here; a model a config cannot train is refused, and the test pins
// which.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/knobs.h"
#include "base/pipeline_split.h"
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

// Models whose 120 layers the pipelines and interleavings of the spaces divide (48 would leave
// vpp 5 unrendered): a GPT, and a Llama-style model of the same depth (GQA, SwiGLU, rotary,
// RMSNorm, untied, no biases) that is no torchtitan flavour; and the llama3-70b preset, which is.
std::vector<std::string> ModelFiles(const testing::TempDir& dir) {
  const std::string gpt = dir / "gpt-120l.toml", llama = dir / "llama-120l.toml";
  std::ofstream(gpt) << "name = \"gpt-120l\"\nlayers = 120\nhidden = 6144\nheads = 48\nseq_len = 2048\n"
                        "vocab = 51200\nglobal_batch = 960\n";
  std::ofstream(llama) << "name = \"llama-120l\"\nlayers = 120\nhidden = 6144\nheads = 48\nkv_heads = 8\n"
                          "seq_len = 2048\nvocab = 128256\nglobal_batch = 960\nmlp = \"swiglu\"\n"
                          "ffn_hidden = 16384\npositions = \"rotary\"\nnorm = \"rmsnorm\"\n"
                          "tied_embeddings = false\nlinear_biases = false\n";
  // A GPT-style mixture of experts (issue 36) with every MoE field away from its default.
  const std::string moe = dir / "moe-120l.toml";
  std::ofstream(moe) << "name = \"moe-120l\"\nlayers = 120\nhidden = 6144\nheads = 48\nseq_len = 2048\n"
                        "vocab = 51200\nglobal_batch = 960\nexperts = 8\ntop_k = 2\nexpert_ffn_hidden = 4096\n"
                        "shared_experts = 2\nmoe_every = 2\ncapacity_factor = 1.25\n";
  return {gpt, llama, "llama3-70b", moe};
}

// What each shipped config refuses to train, at study start (runner::CheckTrainsModel): a part
// of the message, by config and model; a pair not listed renders.
const std::map<std::pair<std::string, std::string>, std::string> kRefused = {
    {{"megatron-deepspeed", "llama-120l"}, "does not pass {ffn_hidden}"},
    {{"megatron-deepspeed", "llama3-70b"}, "does not pass {ffn_hidden}"},
    {{"torchtitan", "gpt-120l"}, "model gpt-120l has the shape of none of torchtitan's (llama3 8B, 70B, 405B"},
    {{"torchtitan", "llama-120l"}, "model llama-120l has the shape of none of torchtitan's"},
    {{"megatron-deepspeed", "moe-120l"}, "does not pass {experts}"},
    {{"torchtitan", "moe-120l"}, "model moe-120l has the shape of none of torchtitan's"},
};

// torchtitan's flavour of each model it trains (torchtitan/models/llama3/__init__.py @ v0.2.2).
const std::map<std::string, std::string> kTorchtitanFlavor = {{"llama3-70b", "70B"}, {"llama3-405b", "405B"}};

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

// The layouts rendered: all of them up to 1,500; above, every 3rd by index, plus the first that
// has each value of each knob not met yet, so that every value present still reaches the
// template (the test runs under the sanitizers in CI: its time stays about what it was).
std::vector<const Layout*> Rendered(const std::vector<Layout>& layouts) {
  constexpr size_t kAll = 1500, kEvery = 3;
  std::vector<const Layout*> rendered;
  std::set<std::pair<Knob, int>> met;
  for (size_t i = 0; i < layouts.size(); ++i) {
    bool brings_a_value = false;
    for (Knob k : Knobs()) brings_a_value = met.insert({k, KnobCode(k, layouts[i])}).second || brings_a_value;
    if (layouts.size() <= kAll || i % kEvery == 0 || brings_a_value) rendered.push_back(&layouts[i]);
  }
  return rendered;
}

// The flags of a rendered command, and what they say against the layout and the model.
class Verdict {
 public:
  explicit Verdict(const std::string& command) : flags_(Flags(command)) {}
  // A flag's value ("(absent)" when it is not there; the lookup adds nothing).
  std::string f(const std::string& flag) const {
    auto it = flags_.find(flag);
    return it == flags_.end() ? std::string("(absent)") : it->second;
  }
  bool has(const std::string& flag) const { return flags_.contains(flag); }
  void expect(const std::string& what, const std::string& said, const std::string& want) {
    if (said != want) wrong_.push_back(fmt::format("{} says '{}', the layout or model {}", what, said, want));
  }
  void expect_flag(const std::string& flag, const std::string& want) { expect(flag, f(flag), want); }
  void expect_on(const std::string& flag, bool want) { expect(flag, has(flag) ? "on" : "off", want ? "on" : "off"); }
  void wrong(const std::string& what) { wrong_.push_back(what); }
  std::string text() const { return fmt::format("{}", fmt::join(wrong_, "; ")); }

 private:
  std::map<std::string, std::string> flags_;
  std::vector<std::string> wrong_;
};

// Megatron-LM and Megatron-DeepSpeed alike: parallelism, batch, precision, interleaving.
void CheckMegatron(Verdict& v, const Layout& l, const ModelShape& model) {
  v.expect_flag("--tensor-model-parallel-size", std::to_string(l.tp));
  v.expect_flag("--pipeline-model-parallel-size", std::to_string(l.pp));
  v.expect_flag("--micro-batch-size", std::to_string(l.micro_batch));
  v.expect_flag("--global-batch-size", std::to_string(l.GlobalBatch()));
  v.expect_on("--bf16", l.precision == Precision::kBf16 || l.precision == Precision::kFp8);
  v.expect_on("--fp16", l.precision == Precision::kFp16);
  const bool interleaved = l.virtual_stages > 1;
  v.expect_on("--num-layers-per-virtual-pipeline-stage", interleaved);
  if (interleaved) {
    v.expect_flag("--num-layers-per-virtual-pipeline-stage",
                  std::to_string(model.layers / (l.pp * l.virtual_stages)));
  }
  v.expect_flag("--num-layers", std::to_string(model.layers));
  v.expect_flag("--hidden-size", std::to_string(model.hidden));
  v.expect_flag("--num-attention-heads", std::to_string(model.heads));
  v.expect_flag("--seq-length", std::to_string(model.seq_len));
}

// Megatron-LM (core_v0.12.0 flags): the shape, sequence parallelism, attention, recomputation;
// no distributed optimizer, so ZeRO 0.
void CheckMegatronLm(Verdict& v, const Layout& l, const ModelShape& m) {
  v.expect_on("--group-query-attention", true);
  v.expect_flag("--num-query-groups", std::to_string(m.KvHeads()));
  v.expect_flag("--ffn-hidden-size", std::to_string(m.MlpWidth()));
  v.expect_on("--swiglu", m.mlp == MlpKind::kSwiglu);
  v.expect_flag("--normalization", m.norm == NormKind::kRmsNorm ? "RMSNorm" : "LayerNorm");
  v.expect_flag("--position-embedding-type", m.positions == Positions::kRotary    ? "rope"
                                              : m.positions == Positions::kLearned ? "learned_absolute"
                                              : m.positions == Positions::kNone    ? "none"
                                                                                   : "(refused: alibi)");
  v.expect_on("--untie-embeddings-and-output-weights", !m.tied_embeddings);
  v.expect_on("--disable-bias-linear", !m.linear_biases);
  v.expect_flag("--fp8-format", l.precision == Precision::kFp8 ? "hybrid" : "(absent)");
  v.expect_on("--sequence-parallel", l.seq_parallel);
  v.expect_flag("--attention-backend", l.flash_attention ? "flash" : "unfused");
  v.expect_flag("--recompute-granularity", l.recompute == Recompute::kFull        ? "full"
                                           : l.recompute == Recompute::kSelective ? "selective"
                                                                                  : "(absent)");
  if (l.recompute == Recompute::kFull) {
    v.expect_flag("--recompute-method", "uniform");
    v.expect_flag("--recompute-num-layers", "1");
  }
  // ZeRO 1: the distributed optimizer; 2 and 3: custom FSDP over it, gradients (and weights) sharded.
  const std::string strategy = v.has("--use-custom-fsdp") ? v.f("--data-parallel-sharding-strategy") : "";
  const int stage = !v.has("--use-distributed-optimizer") ? 0
                    : strategy.empty()                    ? 1
                    : strategy == "optim_grads"           ? 2
                    : strategy == "optim_grads_params"    ? 3
                                                          : -1;
  v.expect("ZeRO (distributed optimizer, custom FSDP strategy)", std::to_string(stage), std::to_string(l.zero));
  if (l.zero >= 2) v.expect_on("--no-gradient-accumulation-fusion", true);
  v.expect("hybrid sharding (not mapped)", "1", std::to_string(l.dp_replicate));
  v.expect_flag("--context-parallel-size", std::to_string(l.cp));
  // Mixtures of experts: ep always, the expert flags with experts (dropless without a capacity factor).
  v.expect_flag("--expert-model-parallel-size", std::to_string(l.ep));
  const bool moe = m.experts > 0;
  auto moe_flag = [&](const std::string& flag, bool given, int64_t value) {
    v.expect_flag(flag, moe && given ? std::to_string(value) : "(absent)");
  };
  moe_flag("--num-experts", true, m.experts);
  moe_flag("--moe-router-topk", true, m.top_k);
  moe_flag("--moe-layer-freq", true, m.moe_every);
  moe_flag("--moe-ffn-hidden-size", m.expert_ffn_hidden > 0, m.expert_ffn_hidden);
  moe_flag("--moe-shared-expert-intermediate-size", m.shared_experts > 0,
           static_cast<int64_t>(m.shared_experts) * m.ExpertMlpWidth());
  v.expect_flag("--moe-expert-capacity-factor", m.capacity_factor > 0 ? fmt::format("{}", m.capacity_factor) : "(absent)");
  v.expect_on("--moe-pad-expert-input-to-capacity", m.capacity_factor > 0);
  // Uneven stages: the first and last stage's counts of the one rule (base/pipeline_split.h).
  const StageSplit split = SplitLayers(m, l.pp, l.uneven_stages);
  v.expect_flag("--decoder-first-pipeline-num-layers", l.uneven_stages ? std::to_string(split.First()) : "(absent)");
  v.expect_flag("--decoder-last-pipeline-num-layers", l.uneven_stages ? std::to_string(split.Last()) : "(absent)");
}

void CheckTorchtitan(Verdict& v, const Layout& l, const ModelShape& m) {
  v.expect_flag("--training.global_batch_size", std::to_string(l.GlobalBatch()));
  const std::string mbs = std::to_string(l.micro_batch);
  if (l.pp == 1) {
    v.expect_flag("--training.local_batch_size", mbs);
  } else {
    v.expect_flag("--parallelism.pipeline_parallel_microbatch_size", mbs);
    v.expect_flag("--training.local_batch_size", std::to_string(l.micro_batch * l.num_micro_batches));
  }
  v.expect_flag("--training.mixed_precision_param", l.precision == Precision::kFp32   ? "float32"
                                                    : l.precision == Precision::kFp16 ? "(none: fp16)"
                                                                                      : "bfloat16");
  v.expect_flag("--model.converters", l.precision == Precision::kFp8 ? "quantize.linear.float8" : "(absent)");
  // FSDP2 over the shard group, replicated across dp_replicate groups (HSDP); resharding after
  // forward is ZeRO 3, keeping the gathered weights until backward ZeRO 2.
  v.expect_flag("--parallelism.data_parallel_shard_degree", std::to_string(l.dp / l.dp_replicate));
  v.expect_flag("--parallelism.data_parallel_replicate_degree", std::to_string(l.dp_replicate));
  v.expect_flag("--parallelism.fsdp_reshard_after_forward", l.zero == 3   ? "always"
                                                            : l.zero == 2 ? "never"
                                                                          : "(none: ZeRO 0 or 1)");
  v.expect("interleaving (not mapped)", "1", std::to_string(l.virtual_stages));
  v.expect_flag("--parallelism.context_parallel_degree", std::to_string(l.cp));
  // Even stages: torchtitan counts no layer for the embedding and the head; uneven not mapped.
  v.expect_flag("--parallelism.pipeline_parallel_first_stage_less_layers", l.pp > 1 ? "0" : "(absent)");
  v.expect_flag("--parallelism.pipeline_parallel_last_stage_less_layers", l.pp > 1 ? "0" : "(absent)");
  v.expect("uneven stages (not mapped)", "0", std::to_string(l.uneven_stages));
  v.expect_flag("--model.name", "llama3");
  auto flavor = kTorchtitanFlavor.find(m.name);
  v.expect_flag("--model.flavor", flavor == kTorchtitanFlavor.end() ? "(none)" : flavor->second);
  v.expect_flag("--training.seq_len", std::to_string(m.seq_len));
}

// Megatron-DeepSpeed: ZeRO 2 and 3 through the plain DeepSpeed engine (pp 1, its [[rules]]),
// hybrid sharding as MiCS (ZeRO 3 only), built under MiCS_Init.
void CheckMegatronDeepSpeed(Verdict& v, const Layout& l) {
  v.expect_flag("--zero-stage", std::to_string(l.zero));
  v.expect_on("--no-pipeline-parallel", l.zero >= 2);
  if (l.zero >= 2) v.expect("pp with ZeRO 2 or 3 (the pipeline engine refuses them)", std::to_string(l.pp), "1");
  v.expect_on("--use-mics", l.dp_replicate > 1);
  v.expect("context parallelism (Ulysses is not mapped)", "1", std::to_string(l.cp));
  v.expect("uneven stages (not mapped)", "0", std::to_string(l.uneven_stages));
  if (l.dp_replicate > 1) v.expect("ZeRO with hybrid sharding (MiCS)", std::to_string(l.zero), "3");
}

// The DeepSpeed config written for the trial says what the flags say.
void CheckDeepSpeedConfig(Verdict& v, const Layout& l, const std::string& trial_dir) {
  const std::string gbs = std::to_string(l.GlobalBatch());
  v.expect_flag("--deepspeed_config", runner::DeepSpeedConfigPath(trial_dir));
  const nlohmann::json ds = nlohmann::json::parse(runner::DeepSpeedConfig(l));
  v.expect("train_batch_size", ds["train_batch_size"].dump(), gbs);
  v.expect("train_micro_batch_size_per_gpu", ds["train_micro_batch_size_per_gpu"].dump(), std::to_string(l.micro_batch));
  v.expect("micro x accumulation x dp",
           std::to_string(ds["train_micro_batch_size_per_gpu"].get<int>() * ds["gradient_accumulation_steps"].get<int>() *
                          l.dp),
           gbs);
  v.expect("zero_optimization.stage", ds["zero_optimization"]["stage"].dump(), std::to_string(l.zero));
  v.expect("bf16.enabled", ds["bf16"]["enabled"].dump(), l.precision == Precision::kBf16 ? "true" : "false");
  v.expect("fp16.enabled", ds["fp16"]["enabled"].dump(), l.precision == Precision::kFp16 ? "true" : "false");
  if (l.precision == Precision::kFp16) v.expect("fp16.loss_scale (dynamic)", ds["fp16"]["loss_scale"].dump(), "0");
  const nlohmann::json& zero = ds["zero_optimization"];
  v.expect("zero_optimization.mics_shard_size", zero.contains("mics_shard_size") ? zero["mics_shard_size"].dump() : "(absent)",
           l.zero == 3 && l.dp_replicate > 1 ? std::to_string(l.dp / l.dp_replicate) : "(absent)");
}

// What the flags (and the DeepSpeed config, when the command passes one) say against the layout
// and the model; "" when they agree.
std::string Disagreement(const std::string& command, const Layout& l, const ModelShape& model,
                         const std::string& trial_dir) {
  Verdict v(command);
  if (v.has("--num-query-groups")) {  // Megatron-LM
    CheckMegatron(v, l, model);
    CheckMegatronLm(v, l, model);
  } else if (v.has("--micro-batch-size")) {  // Megatron-DeepSpeed
    CheckMegatron(v, l, model);
    CheckMegatronDeepSpeed(v, l);
  } else if (v.has("--training.global_batch_size")) {
    CheckTorchtitan(v, l, model);
  } else {
    v.wrong("no micro-batch flag this test knows");
  }
  if (v.has("--deepspeed_config")) CheckDeepSpeedConfig(v, l, trial_dir);
  return v.text();
}

std::string Stem(const std::string& path) { return fs::path(path).stem().string(); }

// Renders `layouts` (sampled) through the config; the count of layouts whose flags disagree.
int RenderAndCheck(const runner::CommandBackendOptions& options, const std::vector<Layout>& layouts,
                   const ModelShape& shape, int world, std::set<int>* interleavings) {
  int failures = 0;
  for (const Layout* l : Rendered(layouts)) {
    runner::TrialContext context;
    context.trial_dir = "/store/trials/s/n0-1";
    context.number = 1;
    context.world = world;
    context.gpus_per_node = 8;
    context.model = &shape;
    Result<std::string> command = runner::ExpandCommand(options.command, *l, context);
    if (!command.ok()) {
      ADD_FAILURE() << command.status().message();
      return failures + 1;
    }
    const std::string wrong = Disagreement(*command, *l, shape, context.trial_dir);
    if (!wrong.empty() && ++failures <= 3) ADD_FAILURE() << LayoutKey(*l) << ": " << wrong << "\n" << *command;
    interleavings->insert(l->virtual_stages);
  }
  return failures;
}

TEST(ShippedCommandConfigs, EveryLayoutOfEverySpaceRendersFlagsThatAgree) {
  testing::TempDir dir;
  const int world = 32;  // 4 nodes of lumi-g
  int rendered_pairs = 0;
  for (const std::string& config : Shipped("commands")) {
    CommandFlags flags;
    flags.config_file = config;
    std::string knobs;
    Result<runner::CommandBackendOptions> options = ResolveCommandOptions(flags, &knobs);
    ASSERT_TRUE(options.ok()) << config << ": " << options.status().message();
    const runner::CommandBackend backend(*options);
    for (const std::string& model : ModelFiles(dir)) {
      Result<Problem> problem = LoadProblem(model, "lumi-g", "default");
      ASSERT_TRUE(problem.ok()) << problem.status().message();
      const Status trains = backend.SupportsModel(problem->model);
      auto refused = kRefused.find({Stem(config), problem->model.name});
      if (refused != kRefused.end()) {  // refused at study start, exit 3, naming why
        EXPECT_EQ(trains.code(), StatusCode::kConfig) << Stem(config) << " trains " << problem->model.name;
        EXPECT_NE(trains.message().find(refused->second), std::string::npos) << trains.message();
        continue;
      }
      ASSERT_TRUE(trains.ok()) << trains.message();
      ++rendered_pairs;
      for (const std::string& space : Shipped("spaces")) {
        SCOPED_TRACE(Stem(config) + " x " + problem->model.name + " in " + Stem(space));
        ModelShape shape;
        const std::vector<Layout> layouts = SearchedLayouts(backend, knobs, model, space, world, &shape);
        ASSERT_FALSE(layouts.empty());
        std::set<int> interleavings;
        const int failures = RenderAndCheck(*options, layouts, shape, world, &interleavings);
        EXPECT_EQ(failures, 0) << "of " << layouts.size() << " layouts";
        // The megatron space's interleavings all reach Megatron-DeepSpeed and Megatron-LM (3 and 5 too).
        if (config.find("megatron") != std::string::npos && space.find("megatron") != std::string::npos &&
            shape.layers == 120) {
          EXPECT_EQ(interleavings, (std::set<int>{1, 2, 3, 4, 5}));
        }
      }
    }
  }
  // megatron-deepspeed x gpt, megatron-lm x 4 models, torchtitan x llama3-70b.
  EXPECT_EQ(rendered_pairs, 6);
}

// A Megatron-LM model it cannot train is refused at study start with the field that says why:
// ALiBi (no such position type in Megatron-LM: its [shape]) and a ViT (pretrain_gpt.py does not
// take {patch_tokens}).
TEST(ShippedCommandConfigs, MegatronLmRefusesAlibiAndVisionModels) {
  CommandFlags flags;
  flags.config_file = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/megatron-lm.toml";
  Result<runner::CommandBackendOptions> options = ResolveCommandOptions(flags);
  ASSERT_TRUE(options.ok()) << options.status().message();
  const runner::CommandBackend backend(*options);
  ModelShape alibi = testing::PresetModel("gpt-22b");
  alibi.name = "gpt-22b-alibi";
  alibi.positions = Positions::kAlibi;
  const Status refused = backend.SupportsModel(alibi);
  EXPECT_EQ(refused.code(), StatusCode::kConfig);
  EXPECT_EQ(refused.message(),
            "command config megatron-lm.toml trains positions learned, rotary, none only (its [shape]); model "
            "gpt-22b-alibi has positions alibi");
  ModelShape vit = testing::PresetModel("gpt-22b");
  vit.name = "vit";
  vit.vocab = 0;
  vit.patch_tokens = 192;
  vit.output_width = 192;
  vit.tied_embeddings = false;
  const Status no_patches = backend.SupportsModel(vit);
  EXPECT_EQ(no_patches.code(), StatusCode::kConfig);
  EXPECT_NE(no_patches.message().find("command config megatron-lm.toml does not pass {patch_tokens}: its program "
                                      "would train model vit with patch_tokens 0 (what it takes untold), not 192"),
            std::string::npos)
      << no_patches.message();
  EXPECT_TRUE(backend.SupportsModel(testing::PresetModel("llama3-405b")).ok());
}

// A template that leaves a shape field out trains the value a program takes untold; one that
// names the model hands it over by name.
TEST(CommandTemplates, AShapeFieldTheTemplateDropsIsRefused) {
  runner::CommandBackendOptions o;
  o.command = "train --layers {layers} --hidden {hidden}";
  const ModelShape llama = testing::PresetModel("llama3-8b");
  const Status refused = runner::CheckTrainsModel(o, llama);
  EXPECT_EQ(refused.code(), StatusCode::kConfig);
  EXPECT_EQ(refused.message(),
            "--command does not pass {ffn_hidden}: its program would train model llama3-8b with ffn_hidden 16384 (what "
            "it takes untold), not 14336");
  o.command += " --ffn {ffn_hidden} {mlp=swiglu?--swiglu} {tied_embeddings=0?--untie} --kv {kv_heads}";
  EXPECT_NE(runner::CheckTrainsModel(o, llama).message().find("does not pass {positions}"), std::string::npos);
  o.command += " --pos {positions} --norm {norm} {linear_biases?--bias}";
  EXPECT_TRUE(runner::CheckTrainsModel(o, llama).ok());
  EXPECT_TRUE(runner::CheckTrainsModel({.command = "train --model {model}"}, llama).ok());
  EXPECT_TRUE(runner::CheckTrainsModel({.command = "train"}, testing::PresetModel("gpt-22b")).ok());
}

// [shape] names shape fields and their values; anything else is a config error (exit 3) at the
// key.
TEST(CommandTemplates, TheShapeTableIsChecked) {
  testing::TempDir dir;
  const std::string base = "command = \"train\"\nmetric_regex = \"t: ([0-9.]+)\"\n[shape]\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"colour = [\"red\"]", "key 'shape.colour': is no shape field (layers, hidden"},
      {"positions = [\"sinusoidal\"]", "key 'shape.positions': values must be learned, rotary, alibi, none"},
      {"positions = \"rotary\"", "key 'shape.positions': must be a non-empty list of values"},
      {"tied_embeddings = [1]", "key 'shape.tied_embeddings': values must be true or false"},
      {"kv_heads = [0]", "key 'shape.kv_heads': values must be integers of at least 1"},
  };
  for (const auto& [line, message] : cases) {
    std::ofstream(dir / "c.toml") << base << line << "\n";
    CommandFlags flags;
    flags.config_file = dir / "c.toml";
    Result<runner::CommandBackendOptions> options = ResolveCommandOptions(flags);
    ASSERT_FALSE(options.ok()) << line;
    EXPECT_EQ(options.status().code(), StatusCode::kConfig) << line;
    EXPECT_NE(options.status().message().find(message), std::string::npos) << options.status().message();
  }
  std::ofstream(dir / "c.toml") << base << "tied_embeddings = [true]\nkv_heads = [8, 16]\n";
  CommandFlags flags;
  flags.config_file = dir / "c.toml";
  Result<runner::CommandBackendOptions> options = ResolveCommandOptions(flags);
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->source, "command config c.toml");
  ASSERT_EQ(options->shape.size(), 2u);  // in key order
  EXPECT_EQ(options->shape[0].field, "kv_heads");
  EXPECT_EQ(options->shape[0].values, (std::vector<std::string>{"8", "16"}));
  const Status untied = runner::CheckTrainsModel(*options, testing::PresetModel("llama3-8b"));
  EXPECT_EQ(untied.message(), "command config c.toml trains tied_embeddings 1 only (its [shape]); model llama3-8b has "
                              "tied_embeddings 0");
}

// torchtitan is started the way a multi-node run needs: one torchrun per node under srun, a
// c10d rendezvous on the allocation's first node, and no pipe that would hide its exit code.
TEST(ShippedCommandConfigs, TorchtitanLaunchesOneTorchrunPerNodeWithARendezvous) {
  CommandFlags flags;
  flags.config_file = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/torchtitan.toml";
  Result<runner::CommandBackendOptions> options = ResolveCommandOptions(flags);
  ASSERT_TRUE(options.ok()) << options.status().message();
  ModelShape model = testing::PresetModel("llama3-8b");
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
  EXPECT_EQ(f["--model.name"], "llama3");
  EXPECT_EQ(f["--model.flavor"], "8B");
  EXPECT_EQ(f["--training.seq_len"], "8192");
  EXPECT_EQ(f["--rdzv_endpoint"], "$MASTER_ADDR:$((29500+7%1000))");
  EXPECT_NE(command->find("MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)"),
            std::string::npos);
  EXPECT_LT(command->find("MASTER_ADDR="), command->find("srun"));  // outside srun: one address for all
  // The only pipe is the one that finds the first node, before the launch.
  EXPECT_EQ(command->find('|', command->find("srun")), std::string::npos) << *command;
}

// On hardware with an FP8 peak the space offers fp8: Megatron-LM receives it as --bf16 with
// TransformerEngine's hybrid FP8 format, torchtitan as torchao's Float8Linear converter (LM head
// filtered out); Megatron-DeepSpeed has no FP8 and runs none of it.
TEST(ShippedCommandConfigs, Fp8ReachesMegatronLmAndTorchtitanAsTheirFlags) {
  testing::TempDir dir;
  const int world = 64;
  for (const char* name : {"megatron-lm", "torchtitan", "megatron-deepspeed"}) {
    SCOPED_TRACE(name);
    CommandFlags flags;
    flags.config_file = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/" + name + ".toml";
    std::string knobs;
    Result<runner::CommandBackendOptions> options = ResolveCommandOptions(flags, &knobs);
    ASSERT_TRUE(options.ok()) << options.status().message();
    const runner::CommandBackend backend(*options);
    Result<KnobSupport> support =
        backend.SupportedKnobs(testing::PresetSpace("default"), world);
    ASSERT_TRUE(support.ok()) << support.status().message();
    const std::vector<int>& precisions = support->Of(Knob::kPrecision);
    const bool runs_fp8 = precisions.empty() || std::count(precisions.begin(), precisions.end(), 3) == 1;
    EXPECT_EQ(runs_fp8, std::string(name) != "megatron-deepspeed");
    if (!runs_fp8) continue;
    const ModelShape model = testing::PresetModel(std::string(name) == "torchtitan" ? "llama3-70b" : "llama3-8b");
    Layout l;
    l.tp = 2;
    l.pp = 2;
    l.dp = 16;
    l.micro_batch = 1;
    l.num_micro_batches = model.global_batch / 16;
    l.precision = Precision::kFp8;
    l.flash_attention = true;
    l.zero = std::string(name) == "torchtitan" ? 3 : 1;
    runner::TrialContext context;
    context.trial_dir = dir.path();
    context.number = 1;
    context.world = world;
    context.gpus_per_node = 8;
    context.model = &model;
    Result<std::string> command = runner::ExpandCommand(options->command, l, context);
    ASSERT_TRUE(command.ok()) << command.status().message();
    EXPECT_EQ(Disagreement(*command, l, model, context.trial_dir), "") << *command;
    EXPECT_NE(command->find(std::string(name) == "torchtitan" ? "--model.converters quantize.linear.float8"
                                                             : "--bf16 --fp8-format hybrid"),
              std::string::npos)
        << *command;
  }
}

// The options of a shipped command config, and its backend's support at `world` in the default space.
struct ShippedConfig {
  runner::CommandBackendOptions options;
  KnobSupport support;
  std::string knobs;  // its [knobs] and [[rules]], as a space file's text
};
ShippedConfig LoadShipped(const std::string& name, int world) {
  CommandFlags flags;
  flags.config_file = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/" + name + ".toml";
  std::string knobs;
  Result<runner::CommandBackendOptions> options = ResolveCommandOptions(flags, &knobs);
  EXPECT_TRUE(options.ok()) << options.status().message();
  if (!options.ok()) return {};
  Result<KnobSupport> support = runner::CommandBackend(*options).SupportedKnobs(testing::PresetSpace("default"), world);
  EXPECT_TRUE(support.ok()) << support.status().message();
  return {*options, support.ok() ? *support : KnobSupport{}, knobs};
}

// Llama 3 405B on 16 stages with cp 2: Megatron-LM gets --context-parallel-size 2 and, with uneven
// stages, the rule's 7 layers on the first and on the last stage (7 + 14 x 8 + 7, the split Meta
// trained with); torchtitan gets its context-parallel degree and declares uneven stages unmapped;
// Megatron-DeepSpeed declares both unmapped.
TEST(ShippedCommandConfigs, ContextParallelismAndUnevenStagesReachTheirFlags) {
  testing::TempDir dir;
  const int world = 1024;
  const ModelShape model = testing::PresetModel("llama3-405b");
  Layout l;
  l.tp = 8;
  l.cp = 2;
  l.pp = 16;
  l.dp = world / (l.tp * l.cp * l.pp);
  l.micro_batch = 1;
  l.num_micro_batches = model.global_batch / l.dp;
  l.precision = Precision::kBf16;
  l.flash_attention = true;
  l.zero = 3;
  runner::TrialContext context;
  context.trial_dir = dir.path();
  context.number = 1;
  context.world = world;
  context.gpus_per_node = 8;
  context.model = &model;
  for (const char* name : {"megatron-lm", "torchtitan"}) {
    SCOPED_TRACE(name);
    const ShippedConfig config = LoadShipped(name, world);
    EXPECT_FALSE(config.support.Unreceived(Knob::kCp));
    EXPECT_EQ(config.support.Unreceived(Knob::kUnevenStages), std::string(name) == "torchtitan");
    for (bool uneven : {false, true}) {
      if (uneven && std::string(name) == "torchtitan") continue;
      l.uneven_stages = uneven;
      Result<std::string> command = runner::ExpandCommand(config.options.command, l, context);
      ASSERT_TRUE(command.ok()) << command.status().message();
      EXPECT_EQ(Disagreement(*command, l, model, context.trial_dir), "") << *command;
      const std::map<std::string, std::string> flags = Flags(*command);
      if (std::string(name) == "torchtitan") {
        EXPECT_EQ(flags.at("--parallelism.context_parallel_degree"), "2");
        continue;
      }
      EXPECT_EQ(flags.at("--context-parallel-size"), "2");
      EXPECT_EQ(flags.contains("--decoder-first-pipeline-num-layers"), uneven) << *command;
      if (!uneven) continue;
      EXPECT_EQ(flags.at("--decoder-first-pipeline-num-layers"), "7");
      EXPECT_EQ(flags.at("--decoder-last-pipeline-num-layers"), "7");
    }
  }
  // Megatron-DeepSpeed declares both off (its cp would be Ulysses; {dp} and {gbs} follow from cp,
  // so the template alone would not fix it): a space offering them keeps cp 1 and even stages.
  const ShippedConfig deepspeed = LoadShipped("megatron-deepspeed", world);
  testing::WriteFile(dir / "wide.toml", "name = \"wide\"\n[knobs]\ntp = [1, 8]\ncp = [1, 2]\npp = [1, 16]\nuneven_stages = [false, true]\n"
                                         "micro_batch = [1]\nprecision = [\"bf16\"]\n");
  Result<Problem> problem = LoadProblem("llama3-405b", "dgx-h100", dir / "wide.toml", deepspeed.knobs);
  ASSERT_TRUE(problem.ok()) << problem.status().message();
  EXPECT_EQ(problem->space.Values(Knob::kCp, world), std::vector<int>{1});
  EXPECT_EQ(problem->space.Values(Knob::kUnevenStages, world), std::vector<int>{0});
}

// The split's placeholders (runner/command_template.h): the rule's first and last stage, the even
// split's without uneven stages, 0 without a model.
TEST(CommandTemplates, TheStageSplitPlaceholders) {
  const std::string text = "run {first_stage_layers} {last_stage_layers}";
  ModelShape model = testing::PresetModel("llama3-405b");
  Layout l;
  l.pp = 16;
  runner::TrialContext context;
  EXPECT_EQ(runner::ExpandCommand(text, l, context).value(), "run 0 0");
  context.model = &model;
  model.layers = 128;
  EXPECT_EQ(runner::ExpandCommand(text, l, context).value(), "run 8 8");
  model.layers = 126;
  l.uneven_stages = true;
  EXPECT_EQ(runner::ExpandCommand(text, l, context).value(), "run 7 7");
  l.pp = 2;
  const StageSplit two = UnevenSplit(model, 2);
  EXPECT_EQ(runner::ExpandCommand(text, l, context).value(),
            "run " + std::to_string(two.First()) + " " + std::to_string(two.Last()));
  EXPECT_EQ(two.First() + two.Last(), 126);
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

const char kRulesBase[] = "command = \"train {zero} {pp}\"\nmetric_regex = \"t: ([0-9.]+)\"\n";

// [[rules]] name knobs and values as [knobs] does; anything else is a config error (exit 3) that
// names the file and the key.
TEST(CommandTemplates, TheRulesAreChecked) {
  testing::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[[rules]]\nwhen = { zeros = [2] }\nthen = { pp = [1] }\nwhy = \"w\"\n",
       "c.toml:4:18: key 'rules[1].when.zeros': is no knob (expected tp, pp"},
      {"[[rules]]\nwhen = { zero = [4] }\nthen = { pp = [1] }\nwhy = \"w\"\n",
       "c.toml:4:18: key 'rules[1].when.zero': item 4 is out of range [0, 3]"},
      {"[[rules]]\nwhen = { zero = [2] }\nthen = { precision = [\"bf32\"] }\nwhy = \"w\"\n",
       "key 'rules[1].then.precision': "},
      {"[[rules]]\nthen = { pp = [1] }\nwhy = \"w\"\n", "c.toml: key 'rules[1].when': missing (a table is required)"},
      {"[[rules]]\nwhen = { zero = [2] }\nwhy = \"w\"\n", "key 'rules[1].then': missing (a table is required)"},
      {"[[rules]]\nwhen = { zero = [2] }\nthen = { pp = [1] }\n", "key 'rules[1].why': missing (a string is required)"},
      {"[[rules]]\nwhen = { zero = [2] }\nthen = {}\nwhy = \"w\"\n", "key 'rules[1].then': must list at least one knob"},
      {"[[rules]]\nwhen = { zero = 2 }\nthen = { pp = [1] }\nwhy = \"w\"\n",
       "key 'rules[1].when.zero': must be an array, not an integer"},
      {"[[rules]]\nwhen = { zero = [2] }\nthen = { pp = [1] }\nwhy = \"w\"\nif = 1\n", "rules[1].if"},
      {"rules = { when = 1 }\n", "key 'rules': must be an array of tables: [[rules]] with when"},
  };
  for (const auto& [text, message] : cases) {
    std::ofstream(dir / "c.toml") << kRulesBase << text;
    CommandFlags flags;
    flags.config_file = dir / "c.toml";
    Result<runner::CommandBackendOptions> options = ResolveCommandOptions(flags);
    ASSERT_FALSE(options.ok()) << text;
    EXPECT_EQ(options.status().code(), StatusCode::kConfig) << text;
    EXPECT_NE(options.status().message().find(message), std::string::npos) << options.status().message();
    EXPECT_EQ(options.status().message().find('\n'), std::string::npos) << options.status().message();
  }
}

// The rules reach the space as a space file writes them: parsed back the same, and counted.
TEST(CommandTemplates, TheRulesReachTheSpace) {
  testing::TempDir dir;
  std::ofstream(dir / "c.toml") << kRulesBase
                                << "[knobs]\nzero = [0, 1, 2, 3]\n[[rules]]\nwhen = { zero = [2, 3] }\n"
                                   "then = { pp = [1] }\nwhy = \"the \\\"pipeline\\\" engine refuses them\"\n";
  CommandFlags flags;
  flags.config_file = dir / "c.toml";
  std::string knobs;
  ASSERT_TRUE(ResolveCommandOptions(flags, &knobs).ok());
  EXPECT_NE(knobs.find("\nrules = [{ when = { zero = [2, 3] }, then = { pp = [1] }, why = "), std::string::npos) << knobs;
  Result<Problem> problem = LoadProblem("gpt-22b", "lumi-g", "default", knobs);
  ASSERT_TRUE(problem.ok()) << problem.status().message();
  ASSERT_EQ(problem->space.rules.size(), 1u);
  EXPECT_EQ(problem->space.rules[0].Text(), "zero 2 or 3 needs pp 1");
  EXPECT_EQ(problem->space.rules[0].why, "the \"pipeline\" engine refuses them");
  EXPECT_EQ(KnobRulesToml(problem->space.rules), knobs.substr(knobs.find("rules = ")));
  // A study's stored space takes its rules again as the same space (a resumed study's inputs).
  Result<ConfigText> again = WithDeclaredKnobs(problem->space_text, knobs);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->text, problem->space_text.text);
  // --fix of a declared knob replaces its list (TOML would refuse the key twice); the rules stay.
  Result<std::string> fixed = KnobDeclarations(knobs, {"zero=3", "pp=2"});
  ASSERT_TRUE(fixed.ok()) << fixed.status().message();
  Result<Problem> refused = LoadProblem("gpt-22b", "lumi-g", "default", *fixed);
  ASSERT_TRUE(refused.ok()) << refused.status().message();
  EXPECT_EQ(refused->space.Values(Knob::kZero, 32), (std::vector<int>{3}));
  Result<search::SpaceEnumeration> none = search::EnumerateSpace(MakeSpaceQuery(*refused, 32));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->legal.empty());
  EXPECT_GT(none->Excluded(Constraint::kProgramRunsCombination), 0);
}

// A config without rules leaves the space's text, and so every study id, as it was; rules change it.
TEST(ShippedCommandConfigs, StudyIdsChangeWithRulesOnly) {
  for (const char* name : {"megatron-lm", "torchtitan"}) {
    CommandFlags flags;
    flags.config_file = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/" + name + ".toml";
    std::string knobs;
    ASSERT_TRUE(ResolveCommandOptions(flags, &knobs).ok()) << name;
    EXPECT_EQ(knobs.find("rules"), std::string::npos) << knobs;
    Result<Problem> problem = LoadProblem("gpt-22b", "lumi-g", "default", knobs);
    ASSERT_TRUE(problem.ok()) << problem.status().message();
    EXPECT_EQ(problem->space_text.text.find("rules"), std::string::npos) << name;
    EXPECT_TRUE(problem->space.rules.empty());
  }
  StudySettings settings;
  settings.world = 32;
  settings.backend = "command";
  const std::string knobs = "zero = [0, 1, 2, 3]\n";
  const std::string rule = "rules = [{ when = { zero = [2, 3] }, then = { pp = [1] }, why = \"w\" }]\n";
  const std::string other = "rules = [{ when = { zero = [3] }, then = { pp = [1] }, why = \"w\" }]\n";
  std::set<std::string> ids;
  for (const std::string& declared : {knobs, knobs + rule, knobs + other}) {
    Result<Problem> problem = LoadProblem("gpt-22b", "lumi-g", "default", declared);
    ASSERT_TRUE(problem.ok()) << problem.status().message();
    ids.insert(StudyId(*problem, settings));
  }
  EXPECT_EQ(ids.size(), 3u);
}

// Megatron-DeepSpeed runs ZeRO 2 and 3 with pp 1 only, and hybrid sharding (MiCS, whose shard
// group is dp / dp_replicate) with ZeRO 3 only; the launch script refuses a layout its rules
// exclude, with their why.
TEST(ShippedCommandConfigs, MegatronDeepSpeedRunsZero3WithoutPipelinesAndMicsWithZero3) {
  CommandFlags flags;
  flags.config_file = std::string(TUNEPAR_SOURCE_DIR) + "/configs/commands/megatron-deepspeed.toml";
  std::string knobs;
  Result<runner::CommandBackendOptions> options = ResolveCommandOptions(flags, &knobs);
  ASSERT_TRUE(options.ok()) << options.status().message();
  const runner::CommandBackend backend(*options);
  ModelShape shape;
  const std::vector<Layout> layouts = SearchedLayouts(backend, knobs, "gpt-22b", "default", 64, &shape);
  std::set<int> zeros;
  const Layout* mics = nullptr;
  for (const Layout& l : layouts) {
    zeros.insert(l.zero);
    if (l.zero >= 2) {
      EXPECT_EQ(l.pp, 1) << LayoutKey(l);
    }
    if (l.dp_replicate > 1) {
      EXPECT_EQ(l.zero, 3) << LayoutKey(l);
    }
    if (l.dp_replicate > 1 && mics == nullptr) mics = &l;
  }
  EXPECT_EQ(zeros, (std::set<int>{0, 1, 2, 3}));
  ASSERT_NE(mics, nullptr);
  const nlohmann::json ds = nlohmann::json::parse(runner::DeepSpeedConfig(*mics));
  EXPECT_EQ(ds["zero_optimization"]["mics_shard_size"], mics->dp / mics->dp_replicate) << LayoutKey(*mics);
  Layout plain = *mics;
  plain.dp_replicate = 1;
  EXPECT_FALSE(nlohmann::json::parse(runner::DeepSpeedConfig(plain))["zero_optimization"].contains("mics_shard_size"));
  Layout zero2 = *mics;  // MiCS is ZeRO 3's: another stage's config says nothing of it
  zero2.zero = 2;
  EXPECT_FALSE(nlohmann::json::parse(runner::DeepSpeedConfig(zero2))["zero_optimization"].contains("mics_shard_size"));

  Layout piped = plain;
  piped.pp = 2;
  piped.dp /= 2;
  const Status refused = CheckDeclaredKnobs(piped, knobs, "megatron-deepspeed.toml");
  EXPECT_NE(refused.message().find("megatron-deepspeed.toml does not run layout " + LayoutKey(piped) +
                                   ": zero 2 or 3 needs pp 1 (its [[rules]]: DeepSpeed's pipeline engine refuses "
                                   "ZeRO-2 and 3 with pipeline parallelism)"),
            std::string::npos)
      << refused.message();
  EXPECT_TRUE(CheckDeclaredKnobs(*mics, knobs, "megatron-deepspeed.toml").ok());
}

}  // namespace
}  // namespace tunepar
