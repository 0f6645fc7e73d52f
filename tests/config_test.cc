#include <gtest/gtest.h>

#include "base/presets.h"
#include "runner/hardware_profile.h"
#include "base/model_shape.h"
#include "base/space_spec.h"
#include "tests/test_support.h"
#include "tuner/study/study_identity.h"

namespace tunepar {
namespace {

constexpr const char* kModel = R"(
name = "m"
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
global_batch = 512
)";

// Replaces the first occurrence of `from` in `text` (the test's edit of a valid config).
std::string Edit(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

// Expects a config error whose single line mentions every fragment.
template <typename T>
void ExpectConfigError(const Result<T>& r, std::vector<std::string> fragments) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kConfig);
  const std::string& m = r.status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  for (const std::string& f : fragments)
    EXPECT_NE(m.find(f), std::string::npos) << "'" << f << "' not in: " << m;
}

TEST(ModelConfig, ParsesAndDefaultsTheMlpWidth) {
  Result<ModelShape> m = ParseModelShape(kModel, "m.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->layers, 24);
  EXPECT_EQ(m->ffn_hidden, 4 * 2048);
  EXPECT_TRUE(m->tied_embeddings);
}

TEST(ModelConfig, NamesFileKeyAndProblem) {
  ExpectConfigError(ParseModelShape(Edit(kModel, "layers = 24", "layers = 24\nlayerz = 3"), "m.toml"),
                    {"m.toml:", "layerz", "unknown key"});
  ExpectConfigError(ParseModelShape(Edit(kModel, "layers = 24", "layers = \"24\""), "m.toml"),
                    {"m.toml:3:", "layers", "must be an integer, not a string"});
  ExpectConfigError(ParseModelShape(Edit(kModel, "hidden = 2048\n", ""), "m.toml"),
                    {"m.toml", "hidden", "missing"});
  ExpectConfigError(ParseModelShape(Edit(kModel, "heads = 16", "heads = 24"), "m.toml"),
                    {"m.toml", "heads", "must divide hidden"});
  ExpectConfigError(ParseModelShape(Edit(kModel, "layers = 24", "layers = -2"), "m.toml"),
                    {"layers", "positive"});
  ExpectConfigError(ParseModelShape(Edit(kModel, "layers = 24", "layers = 2.5"), "m.toml"),
                    {"layers", "not a float"});
  ExpectConfigError(ParseModelShape(Edit(kModel, "layers = 24", "layers = [24"), "m.toml"),
                    {"m.toml:", "malformed TOML"});
}

// One case per rule of BrokenShapeRule (base/model_shape.cc) and per unknown choice: a config
// error (exit 3) that names the file, the key and the rule.
TEST(ModelConfig, EveryShapeRuleNamesItsKey) {
  const auto with = [](const std::string& extra) { return Edit(kModel, "global_batch = 512", "global_batch = 512\n" + extra); };
  ExpectConfigError(ParseModelShape(with("kv_heads = 6"), "m.toml"),
                    {"m.toml", "kv_heads", "must divide heads (16 heads are not a multiple of 6 KV heads)"});
  ExpectConfigError(ParseModelShape(with("kv_heads = 32"), "m.toml"),
                    {"m.toml", "kv_heads", "at most heads (16 heads, 32 KV heads)"});
  ExpectConfigError(ParseModelShape(with("mlp = \"relu\""), "m.toml"),
                    {"m.toml:", "mlp", "unknown mlp 'relu' (expected gelu or swiglu)"});
  ExpectConfigError(ParseModelShape(with("positions = \"sinusoid\""), "m.toml"),
                    {"m.toml:", "positions", "unknown positions 'sinusoid' (expected learned or rotary or alibi or none)"});
  ExpectConfigError(ParseModelShape(with("norm = \"batchnorm\""), "m.toml"),
                    {"m.toml:", "norm", "unknown norm 'batchnorm' (expected layernorm or rmsnorm)"});
  ExpectConfigError(ParseModelShape(with("mlp = \"swiglu\""), "m.toml"),
                    {"m.toml", "ffn_hidden", "required with mlp = \"swiglu\""});
  ExpectConfigError(
      ParseModelShape(Edit(Edit(kModel, "hidden = 2048", "hidden = 528"), "global_batch = 512",
                           "global_batch = 512\npositions = \"rotary\""),
                      "m.toml"),
      {"m.toml", "positions", "rotary needs an even head size (hidden / heads = 33)"});
  ExpectConfigError(ParseModelShape(Edit(kModel, "vocab = 51200\n", ""), "m.toml"),
                    {"m.toml", "vocab", "required (or patch_tokens"});
  ExpectConfigError(ParseModelShape(with("patch_tokens = 192\noutput_width = 192\ntied_embeddings = false"), "m.toml"),
                    {"m.toml", "vocab", "give a vocabulary or patch_tokens, not both"});
  const std::string vit = Edit(kModel, "vocab = 51200\n", "patch_tokens = 192\n");
  ExpectConfigError(ParseModelShape(vit + "tied_embeddings = false\n", "m.toml"),
                    {"m.toml", "output_width", "required with patch_tokens"});
  ExpectConfigError(ParseModelShape(with("output_width = 192"), "m.toml"),
                    {"m.toml", "output_width", "only with patch_tokens"});
  ExpectConfigError(ParseModelShape(vit + "output_width = 192\n", "m.toml"),
                    {"m.toml", "tied_embeddings", "no token embedding to tie"});
  ExpectConfigError(ParseModelShape(with("patch_tokens = -1"), "m.toml"), {"m.toml", "patch_tokens", "non-negative"});
  Result<ModelShape> fine = ParseModelShape(vit + "output_width = 192\ntied_embeddings = false\n", "m.toml");
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  EXPECT_FALSE(fine->HasVocabulary());
  EXPECT_EQ(fine->vocab, 0);
}

constexpr const char* kSpace = R"(
name = "s"
[knobs]
tp = [1, 2, 4]
pp = "divisors"
micro_batch = [1, 2]
precision = ["bf16", "fp32"]
zero = [0, 1]
recompute = ["none", "full"]
seq_parallel = [false, true]
virtual_stages = [1, 2]
flash_attention = [true]
[constraints]
tp_cross_node = true
)";

TEST(SpaceConfig, Parses) {
  Result<SpaceSpec> s = ParseSpaceSpec(kSpace, "s.toml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(s->Of(Knob::kTp).divisors_of_world);
  EXPECT_EQ(s->Of(Knob::kTp).codes, (std::vector<int>{1, 2, 4}));
  EXPECT_TRUE(s->Of(Knob::kPp).divisors_of_world);
  EXPECT_EQ(s->Of(Knob::kPrecision).codes.size(), 2u);
  EXPECT_EQ(s->Of(Knob::kRecompute).codes,
            (std::vector<int>{static_cast<int>(Recompute::kNone), static_cast<int>(Recompute::kFull)}));
  EXPECT_TRUE(s->tp_cross_node);
}

TEST(SpaceConfig, RejectsBadKnobs) {
  ExpectConfigError(ParseSpaceSpec(Edit(kSpace, "\"bf16\",", "\"bf15\","), "s.toml"),
                    {"s.toml:", "knobs.precision", "bf15"});
  ExpectConfigError(
      ParseSpaceSpec(Edit(kSpace, "micro_batch = [1, 2]", "micro_batch = [1, 1]"), "s.toml"),
      {"knobs.micro_batch", "twice"});
  ExpectConfigError(
      ParseSpaceSpec(Edit(kSpace, "micro_batch = [1, 2]", "micro_batch = []"), "s.toml"),
      {"knobs.micro_batch", "at least one"});
  ExpectConfigError(ParseSpaceSpec(Edit(kSpace, "micro_batch = [1, 2]\n", ""), "s.toml"),
                    {"knobs.micro_batch", "missing"});
  ExpectConfigError(ParseSpaceSpec(Edit(kSpace, "zero = [0, 1]", "zero = [0, 4]"), "s.toml"),
                    {"knobs.zero", "out of range"});
  ExpectConfigError(ParseSpaceSpec(Edit(kSpace, "pp = \"divisors\"", "pp = \"all\""), "s.toml"),
                    {"knobs.pp", "divisors"});
  ExpectConfigError(
      ParseSpaceSpec(Edit(kSpace, "tp_cross_node = true", "tp_cross_nodes = true"), "s.toml"),
      {"constraints.tp_cross_nodes", "unknown key"});
  ExpectConfigError(ParseSpaceSpec(Edit(kSpace, "[knobs]", "[knob]"), "s.toml"), {"knob"});
}

TEST(HardwareConfig, EveryNumberNeedsItsOrigin) {
  const std::string text = testing::PresetText("hardware", "frontier-mi250x");
  ASSERT_TRUE(runner::ParseHardwareProfile(text, "hw.toml").ok());
  ExpectConfigError(
      runner::ParseHardwareProfile(
          Edit(
              text,
              R"(memory_gb = { value = 64, origin = "published", source = "Frontier user guide: 64 GB HBM2e per GCD" })",
              "memory_gb = 64"),
          "hw.toml"),
      {"hw.toml", "device.memory_gb", "origin"});
  ExpectConfigError(
      runner::ParseHardwareProfile(Edit(text, "origin = \"published\"", "origin = \"guessed\""), "hw.toml"),
      {"hw.toml", "origin", "guessed"});
  ExpectConfigError(runner::ParseHardwareProfile(Edit(text, "value = 191.5", "value = -1"), "hw.toml"),
                    {"device.peak_tflops_bf16.value", "positive"});
  ExpectConfigError(runner::ParseHardwareProfile(Edit(text, "[node]", "[nodes]"), "hw.toml"),
                    {"node", "missing"});
  ExpectConfigError(runner::ParseHardwareProfile(Edit(text, "\"0xfe\", ", ""), "hw.toml"),
                    {"launch.cpu_masks", "7 masks", "8"});
  ExpectConfigError(runner::ParseHardwareProfile(Edit(text, "\"0xfe\", ", "\"fe\", "), "hw.toml"),
                    {"launch.cpu_masks", "'fe'"});
}

TEST(Presets, EveryEmbeddedPresetIsValid) {
  int models = 0, hardware = 0, spaces = 0;
  for (const EmbeddedPreset& p : EmbeddedPresets()) {
    const std::string text(p.text);
    if (p.kind == "models") {
      Result<ModelShape> m = ParseModelShape(text, p.path);
      ASSERT_TRUE(m.ok()) << m.status().message();
      EXPECT_EQ(m->name, p.name);
      ++models;
    } else if (p.kind == "hardware") {
      Result<runner::HardwareProfile> h = runner::ParseHardwareProfile(text, p.path);
      ASSERT_TRUE(h.ok()) << h.status().message();
      EXPECT_EQ(h->name, p.name);
      ++hardware;
    } else {
      Result<SpaceSpec> s = ParseSpaceSpec(text, p.path);
      ASSERT_TRUE(s.ok()) << s.status().message();
      EXPECT_EQ(s->name, p.name);
      ++spaces;
    }
  }
  EXPECT_GE(models, 6);
  EXPECT_GE(hardware, 5);
  EXPECT_GE(spaces, 1);
}

TEST(Presets, PublishedShapesAreThoseOfTheMeasuredRuns) {
  const ModelShape t = testing::PresetModel("gpt-1t");
  EXPECT_EQ(t.layers, 128);
  EXPECT_EQ(t.hidden, 25600);
  const ModelShape g = testing::PresetModel("gpt-175b");
  EXPECT_EQ(g.layers, 96);
  EXPECT_EQ(g.hidden, 12288);
  EXPECT_EQ(g.heads, 96);
  const runner::HardwareProfile f = testing::PresetHardware("frontier-mi250x");
  EXPECT_EQ(f.gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(f.peak_tflops_bf16.value, 191.5);
  EXPECT_EQ(f.peak_tflops_bf16.origin, runner::NumberOrigin::kPublished);
  EXPECT_EQ(f.launch.cpu_masks.size(), 8u);
  // An FP8 peak where the device has one (H100: 1979 dense), none on MI250X or A100.
  const runner::HardwareProfile h100 = testing::PresetHardware("dgx-h100");
  EXPECT_DOUBLE_EQ(h100.PeakFlops(Precision::kFp8), 1979e12);
  EXPECT_TRUE(h100.HasFp8());
  EXPECT_FALSE(f.HasFp8());
  EXPECT_FALSE(testing::PresetHardware("dgx-a100").HasFp8());
}

TEST(Presets, ResolveNamesAndPaths) {
  Result<ConfigText> unknown = ResolveConfig("models", "gpt-2t");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kConfig);
  EXPECT_NE(unknown.status().message().find("gpt-1t"), std::string::npos);  // lists the presets

  Result<ConfigText> missing = ResolveConfig("models", "/nonexistent/model.toml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/model.toml"), std::string::npos);

  testing::TempDir dir;
  testing::WriteFile(dir / "mine.toml", kModel);
  Result<ConfigText> file = ResolveConfig("models", dir / "mine.toml");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->name, "mine");
  EXPECT_EQ(file->text, kModel);
}

}  // namespace
}  // namespace tunepar

namespace tunepar {
namespace {

TEST(StudyIdentity, IgnoresDocumentationButNotValues) {
  const std::string model = testing::PresetText("models", "gpt-22b");
  const std::string base = CanonicalToml(model);
  EXPECT_EQ(CanonicalToml("# a comment\n" + model), base);
  EXPECT_EQ(CanonicalToml(Edit(model, "description = \"", "description = \"edited: ")), base);
  EXPECT_NE(CanonicalToml(Edit(model, "layers = 48", "layers = 24")), base);
  const std::string hw = testing::PresetText("hardware", "frontier-mi250x");
  EXPECT_EQ(CanonicalToml(Edit(hw, "source = \"Frontier user guide: 64 GB", "source = \"spec sheet: 64 GB")),
            CanonicalToml(hw));
  EXPECT_NE(CanonicalToml(Edit(hw, "value = 64,", "value = 32,")), CanonicalToml(hw));
}

// Studies made before launch settings carried their source, and before the settings only launch
// scripts read existed, keep their ids: the profile as it was written then reads the same.
TEST(StudyIdentity, LaunchScriptSettingsAndSourcesOfTheEnvironmentDoNotChangeAStudy) {
  const std::string before =
      "name = \"m\"\n[launch]\ncpus_per_task = 7\nmpi = \"pmix\"\n[launch.env]\nFI_CXI_RDZV_PROTO = \"alt_read\"\n";
  const std::string after =
      "name = \"m\"\n[launch]\ncpus_per_task = 7\nmpi = \"pmix\"\nrequires_account = true\nmodules = [\"rocm\"]\n"
      "device_files = \"/dev/dri/renderD*\"\nmpi_plugins = { open-mpi = \"pmix\" }\n"
      "[launch.env]\nFI_CXI_RDZV_PROTO = { value = \"alt_read\", source = \"seed 001\" }\n"
      "[launch.net_plugin]\nname = \"aws-ofi-rccl\"\n[launch.container]\nruntime = \"apptainer\"\n";
  EXPECT_EQ(CanonicalToml(after), CanonicalToml(before));
  // What trials run with still counts.
  EXPECT_NE(CanonicalToml(Edit(after, "value = \"alt_read\"", "value = \"rendezvous\"")), CanonicalToml(before));
  EXPECT_NE(CanonicalToml(Edit(after, "cpus_per_task = 7", "cpus_per_task = 6")), CanonicalToml(before));
}

// Issue 29 item 4: a build that gains a capability (fa1) pins fewer knobs, so the same inputs make
// a new study; the new study names the stored one, found by everything but the pinned knobs.
TEST(StudyIdentity, ASearchOnABuildThatGainedAKnobFindsTheOldStudyOfTheSameInputs) {
  auto record = [](const std::string& layers, const std::string& pinned, int world) {
    store::StudyRecord r;
    r.id = layers + pinned + std::to_string(world);
    r.name = "study-" + r.id;
    r.world = world;
    r.backend = "local";
    r.objective = "max_tokens_per_s";
    r.model_toml = "name = \"m\"\nlayers = " + layers + "\n";
    r.hardware_toml = "name = \"h\"\n";
    r.space_toml = "name = \"s\"\n";
    r.pinned_knobs = pinned;
    r.backend_settings = R"({"core":{"knobs":")" + pinned + R"(","slice":"never","steps":3},"seed":1})";
    return r;
  };
  const std::vector<store::StudyRecord> stored = {record("4", "sp0 vpp1 fa0", 8), record("2", "sp0 vpp1 fa0", 2),
                                                  record("2", "sp0 vpp1 fa0", 1)};
  const store::StudyRecord gained = record("2", "sp0 vpp1", 2);
  const store::StudyRecord* old = SameInputsOtherBuild(stored, gained);
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->name, stored[1].name);
  EXPECT_EQ(SameInputsOtherBuild(stored, record("2", "sp0 vpp1 fa0", 2)), nullptr);  // the same build: itself
  EXPECT_EQ(SameInputsOtherBuild(stored, record("3", "sp0 vpp1", 2)), nullptr);      // other inputs
  store::StudyRecord other_steps = gained;
  other_steps.backend_settings = R"({"core":{"knobs":"sp0 vpp1","slice":"never","steps":5},"seed":1})";
  EXPECT_EQ(SameInputsOtherBuild(stored, other_steps), nullptr);  // other settings than the build's
}

}  // namespace
}  // namespace tunepar
