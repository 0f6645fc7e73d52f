// Stored studies keep their ids (issue 30 item 3). A store written by tunepar at cd78308
// (tests/data/fixture-store, made by its make-fixture.sh) reads with list and show, and
// `search --study NAME` resumes each of its studies under its id; the id rule for inputs added
// later (LateInputs) keeps those ids while the new inputs are neutral; and `--study NAME` of a
// study made when a preset said something else resumes from the inputs stored with it.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/knobs.h"
#include "store/store_reader.h"
#include "tests/test_support.h"
#include "tuner/study/study_identity.h"

namespace tunepar {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::PresetText;
using testing::RunTunepar;
using testing::TempDir;
using testing::WriteFile;

// `text` with the first `from` replaced by `to` (a test failure when there is none).
std::string Edit(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

const std::string kFixture = std::string(TUNEPAR_SOURCE_DIR) + "/tests/data/fixture-store";

// A study of the fixture, and the search that made it (make-fixture.sh) without --study,
// --node-id and --budget.
struct FixtureStudy {
  std::string name, id;
  std::string search;
  int trials = 0;  // as stored
  bool dry_run = false;  // the model backend: every legal layout, no budget
};

std::vector<FixtureStudy> Studies() {
  return {
      {"tiny-w8-8ad3f35e", "8ad3f35e39fc555a",
       "--backend model --world 8 --model tiny --hardware dgx-a100 --fix precision=bf16 --fix recompute=none "
       "--fix seq_parallel=false --fix zero=1 --fix micro_batch=1,2 --fix virtual_stages=1",
       22, true},
      {"fixture-small-megatron", "3e85b8980a74e1a0",
       "--backend model --world 16 --model small --hardware dgx-h100 --space megatron --fix precision=bf16 "
       "--fix recompute=selective --fix micro_batch=1",
       13, true},
      {"fixture-command", "1e6b7ab2edeb04c4",
       "--backend command --world 4 --model tiny --hardware local-cpu --command 'echo tps: $(( {mbs} * 100 + {tp} "
       "* 10 + {pp} ))' --metric-regex 'tps: ([0-9]+)' --metric higher --confirm 0 --seed 3 --fix precision=fp32",
       4},
      {"fixture-core", "cf38d0b22bff2dac",
       std::string("--backend local --world 2 --model tiny --hardware local-cpu --steps 1 --warmup 0 --max-ranks 2 "
                   "--seed 5 --core ") + TUNEPAR_CORE,
       2},
  };
}

// The fixture's dumps loaded into the shards they were read from.
void RebuildFixture(const std::string& store) {
  fs::create_directories(store + "/shards/n0");
  ASSERT_EQ(testing::RunCommand("sqlite3 " + store + "/shards/store-format.sqlite < " + kFixture + "/store-format.sql")
                .exit_code,
            0);
  for (const fs::directory_entry& dump : fs::directory_iterator(kFixture + "/n0")) {
    const std::string shard = store + "/shards/n0/" + dump.path().stem().string() + ".sqlite";
    const CliRun loaded = testing::RunCommand("sqlite3 " + shard + " < " + dump.path().string());
    ASSERT_EQ(loaded.exit_code, 0) << loaded.err;
  }
}

std::vector<store::StudyRecord> StoredStudies(const std::string& store) {
  Result<store::StoreView> view = store::ReadStore(store, {"-", ""});
  EXPECT_TRUE(view.ok()) << view.status().message();
  return view.ok() ? view->studies : std::vector<store::StudyRecord>{};
}

TEST(FixtureStore, ListAndShowReadEveryStudy) {
  TempDir dir;
  const std::string store = dir / "s";
  RebuildFixture(store);
  const CliRun list = RunTunepar("--store " + store + " list");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("4 studies from 4 shards"), std::string::npos) << list.out;
  for (const FixtureStudy& s : Studies()) {
    EXPECT_NE(list.out.find(s.name + std::string(24 - s.name.size(), ' ') + s.id.substr(0, 4)), std::string::npos)
        << s.name << "\n" << list.out;
    const CliRun show = RunTunepar("--store " + store + " --json show " + s.name);
    ASSERT_EQ(show.exit_code, 0) << show.err;
    const nlohmann::json j = nlohmann::json::parse(show.out);
    EXPECT_EQ(j["study_id"], s.id);
    EXPECT_EQ(j["trial_count"], s.trials) << s.name;
  }
}

// A build whose knob table gains a knob (a test-only row here) reads the fixture as it was: every
// stored layout keeps its key (claim files and the indexed layout_key are named by it), the new
// knob reads as neutral, and every study keeps its id under the rule the table now gives.
TEST(FixtureStore, ATestOnlyKnobRowLeavesEveryKeyAndIdAsStored) {
  TempDir dir;
  const std::string store = dir / "s";
  RebuildFixture(store);
  KnobRow row;
  row.name = "test_cp";
  row.key_prefix = "tcp";
  row.column = "tcp";
  row.kind = KnobKind::kSize;
  row.neutral = 1;
  row.space_default = {false, {1}};
  row.visit_rank = 100;
  const ScopedKnobRow added(row);
  Result<store::StoreView> view = store::ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  ASSERT_FALSE(view->trials.empty());
  EXPECT_TRUE(view->warnings.empty());
  for (const store::TrialRecord& t : view->trials) {
    EXPECT_EQ(KnobCode(added.knob(), t.layout), 1);
    const std::string key = LayoutKey(t.layout);
    EXPECT_EQ(key.find("tcp"), std::string::npos) << key;
    Result<Layout> parsed = ParseLayoutKey(key);
    ASSERT_TRUE(parsed.ok()) << key;
    EXPECT_EQ(*parsed, t.layout) << key;
  }
  for (const store::StudyRecord& s : view->studies) EXPECT_EQ(StudyId(s), s.id) << s.name;
}

// Today's rule gives every stored study the id it was stored under, and so does the rule with a
// late input (a test-only row of each kind) while its value is neutral; a value that is not
// neutral makes another id, and without the row even the neutral value does.
TEST(FixtureStore, LateInputsAtTheirNeutralValueKeepEveryStoredId) {
  TempDir dir;
  const std::string store = dir / "s";
  RebuildFixture(store);
  const std::vector<store::StudyRecord> studies = StoredStudies(store);
  ASSERT_EQ(studies.size(), Studies().size());
  const LateInput late[] = {{StudyInput::kModel, "experts", "1"},
                            {StudyInput::kHardware, "device.fp8_tflops", "0"},
                            {StudyInput::kSpace, "knobs.cp", "[1]"},
                            {StudyInput::kSpace, "knobs.uneven.first_stage_layers", "0"},
                            {StudyInput::kPinnedKnobs, "cp", "1"},
                            {StudyInput::kBackendSettings, "core.overlap", "false"}};
  // The study as a build with those inputs would store it: each late input at `value`.
  auto with = [](store::StudyRecord s, const std::string& experts, const std::string& cp, const std::string& pinned_cp,
                 const std::string& overlap) {
    s.model_toml = "experts = " + experts + "\n" + s.model_toml;
    s.hardware_toml = Edit(s.hardware_toml, "[device]\n", "[device]\nfp8_tflops = 0\n");
    s.space_toml = Edit(s.space_toml, "[knobs]\n", "[knobs]\ncp = " + cp + "\n") +
                   "\n[knobs.uneven]\nfirst_stage_layers = 0\n";
    s.pinned_knobs += " cp" + pinned_cp;
    nlohmann::json settings = nlohmann::json::parse(s.backend_settings);
    if (settings.contains("core")) {
      settings["core"]["knobs"] = settings["core"]["knobs"].get<std::string>() + " cp" + pinned_cp;
      settings["core"]["overlap"] = nlohmann::json::parse(overlap);
    }
    s.backend_settings = settings.dump();
    return s;
  };
  for (const store::StudyRecord& s : studies) {
    EXPECT_EQ(StudyId(s), s.id) << s.name;
    EXPECT_EQ(StudyId(s, late), s.id) << s.name;
    const store::StudyRecord neutral = with(s, "1", "[1]", "1", "false");
    EXPECT_EQ(StudyId(neutral, late), s.id) << s.name;
    EXPECT_FALSE(SameInputsOtherBuild(s, neutral, late)) << s.name;
    EXPECT_NE(StudyId(neutral), s.id) << s.name;  // the rows do the work
    EXPECT_NE(StudyId(with(s, "8", "[1]", "1", "false"), late), s.id) << s.name;
    EXPECT_NE(StudyId(with(s, "1", "[1, 2]", "1", "false"), late), s.id) << s.name;
    if (s.backend == "local") {  // the settings and pinned knobs of a core study
      EXPECT_NE(StudyId(with(s, "1", "[1]", "2", "false"), late), s.id) << s.name;
      EXPECT_NE(StudyId(with(s, "1", "[1]", "1", "true"), late), s.id) << s.name;
      EXPECT_TRUE(SameInputsOtherBuild(s, with(s, "1", "[1]", "2", "false"), late)) << s.name;
    }
  }
}

// The model-shape fields of issue 33 (base/model_shape.h, ShapeRow::neutral): a stored study keeps
// its id under the rule the shape table now gives, and so does its model file with every such
// field written at its neutral value; a value that says something (SwiGLU, a ViT's patches) makes
// another id, and so does kv_heads = heads, which has no constant neutral value.
TEST(FixtureStore, ShapeFieldsAtTheirNeutralValueKeepEveryStoredId) {
  TempDir dir;
  const std::string store = dir / "s";
  RebuildFixture(store);
  const std::vector<store::StudyRecord> studies = StoredStudies(store);
  ASSERT_EQ(studies.size(), Studies().size());
  const std::string neutral_fields =
      "mlp = \"gelu\"\npositions = \"learned\"\nnorm = \"layernorm\"\nlinear_biases = true\npatch_tokens = 0\n"
      "output_width = 0\n";
  auto with = [](store::StudyRecord s, const std::string& fields) {
    s.model_toml = fields + s.model_toml;
    return s;
  };
  for (const store::StudyRecord& s : studies) {
    EXPECT_EQ(StudyId(s), s.id) << s.name;
    EXPECT_EQ(StudyId(with(s, neutral_fields)), s.id) << s.name;
    EXPECT_NE(StudyId(with(s, "mlp = \"swiglu\"\n")), s.id) << s.name;
    EXPECT_NE(StudyId(with(s, "linear_biases = false\n")), s.id) << s.name;
    EXPECT_NE(StudyId(with(s, "positions = \"rotary\"\n")), s.id) << s.name;
    EXPECT_NE(StudyId(with(s, "kv_heads = 4\n")), s.id) << s.name;  // = heads for tiny, GQA for small
  }
}

// `search --study NAME` with the inputs that made each study resumes it under its id: no new
// study, a dry run evaluates nothing again, a Bayesian search goes on from its trials.
TEST(FixtureStore, SearchStudyNameResumesEveryStudyUnderItsId) {
  TempDir dir;
  const std::string store = dir / "s";
  RebuildFixture(store);
  for (const FixtureStudy& s : Studies()) {
    const std::string budget = s.dry_run ? "" : " --budget " + std::to_string(s.trials + 1);
    const CliRun run = RunTunepar("--store " + store + " search " + s.search + " --study " + s.name +
                                  " --node-id n0" + budget);
    ASSERT_EQ(run.exit_code, 0) << s.name << "\n" << run.out << run.err;
    if (s.dry_run) {
      EXPECT_NE(run.out.find("evaluated 0 layouts now"), std::string::npos) << run.out;
      EXPECT_NE(run.out.find(std::to_string(s.trials) + " already in the store"), std::string::npos) << run.out;
      EXPECT_EQ(testing::Trials(store, s.name).size(), static_cast<size_t>(s.trials));
    } else {
      EXPECT_NE(run.out.find("study " + s.name + " (resumed; " + std::to_string(s.trials) + " finished trials so far)"),
                std::string::npos)
          << run.out;
      EXPECT_EQ(testing::Trials(store, s.name).size(), static_cast<size_t>(s.trials + 1));
    }
    EXPECT_EQ(testing::StudyId(store, s.name), s.id);
  }
  EXPECT_EQ(StoredStudies(store).size(), Studies().size());
}

// `--study NAME` of a study made when the model preset said something else (here: a model named
// tiny with 2 layers, as a preset could have been) resumes it with the model stored with it,
// under its id, and says so; its trials go on.
TEST(ChangedPreset, StudyNameResumesWithTheStoredModelAndSaysWhich) {
  TempDir dir;
  const std::string store = dir / "s";
  const std::string old_tiny = dir / "tiny.toml";
  WriteFile(old_tiny, Edit(PresetText("models", "tiny"), "layers = 4", "layers = 2"));
  const std::string search = " search --backend command --world 8 --hardware dgx-a100 --command 'echo tps: $(( "
                             "{mbs} * 100 + {pp} * 10 + {tp} ))' --metric-regex 'tps: ([0-9]+)' --metric higher "
                             "--confirm 0 --fix precision=fp32 --study was-tiny --node-id n0";
  const CliRun made = RunTunepar("--store " + store + search + " --model " + old_tiny + " --budget 3");
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  const std::string id = testing::StudyId(store, "was-tiny");
  // The first line names the model (its parameters) and counts the legal layouts.
  auto first_line = [](const std::string& out) { return out.substr(0, out.find('\n')); };
  const CliRun preset = RunTunepar("--store " + dir / "other" + search + " --model tiny --budget 1");
  ASSERT_EQ(preset.exit_code, 0) << preset.out << preset.err;
  ASSERT_NE(first_line(preset.out), first_line(made.out));  // the preset says something else

  const CliRun resumed = RunTunepar("--store " + store + search + " --model tiny --budget 5");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.err.find("study was-tiny: model preset 'tiny' changed since the study was made; resuming with the "
                             "model stored with the study"),
            std::string::npos)
      << resumed.err;
  EXPECT_EQ(first_line(resumed.out), first_line(made.out));
  EXPECT_NE(resumed.out.find("study was-tiny (resumed; 3 finished trials so far)"), std::string::npos) << resumed.out;
  EXPECT_EQ(testing::StudyId(store, "was-tiny"), id);
  EXPECT_EQ(testing::Trials(store, "was-tiny").size(), 5u);
  for (const testing::Trial& t : testing::Trials(store, "was-tiny"))  // 2 layers: at most 2 stages
    EXPECT_EQ(t.layout.find("-pp4-"), std::string::npos) << t.layout;
  EXPECT_EQ(StoredStudies(store).size(), 1u);
}

// A study of the core resumed from its stored model runs its trials with that model.
TEST(ChangedPreset, ACoreStudyResumedFromItsStoredModelRunsThatModel) {
  TempDir dir;
  const std::string store = dir / "s";
  const std::string old_tiny = dir / "tiny.toml";
  WriteFile(old_tiny, Edit(PresetText("models", "tiny"), "layers = 4", "layers = 2"));
  const std::string search = " search --backend local --world 2 --hardware local-cpu --steps 1 --warmup 0 "
                             "--max-ranks 2 --study was-tiny --node-id n0 --core " + std::string(TUNEPAR_CORE);
  const CliRun made = RunTunepar("--store " + store + search + " --model " + old_tiny + " --budget 1");
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  const CliRun resumed = RunTunepar("--store " + store + search + " --model tiny --budget 2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.err.find("study was-tiny: model preset 'tiny' changed since the study was made"), std::string::npos)
      << resumed.err;
  ASSERT_EQ(testing::Trials(store, "was-tiny").size(), 2u);
  const std::string model = testing::ReadFile(store + "/trials/was-tiny/n0-2/model.toml");
  EXPECT_NE(model.find("layers = 2\n"), std::string::npos) << model;
}

// The space preset with --fix: the same --fix resumes with the stored space (saying so); another
// --fix is another study's inputs (refused as before); a search without --study starts a new
// study and names the old one.
TEST(ChangedPreset, ASpacePresetChangedUnderTheSameFixResumesAndAnotherFixIsRefused) {
  TempDir dir;
  const std::string store = dir / "s";
  const std::string old_default = dir / "default.toml";
  WriteFile(old_default, Edit(PresetText("spaces", "default"),
                                                        "micro_batch = [1, 2, 4, 8, 16]", "micro_batch = [1, 2]"));
  const std::string search = " search --backend model --world 8 --model tiny --hardware dgx-a100 --fix precision=bf16 "
                             "--fix recompute=none --node-id n0";
  const CliRun made = RunTunepar("--store " + store + search + " --space " + old_default + " --study was-default");
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  const std::string id = testing::StudyId(store, "was-default");

  const CliRun resumed = RunTunepar("--store " + store + search + " --space default --study was-default");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.err.find("study was-default: space preset 'default' changed since the study was made; resuming "
                             "with the space stored with the study"),
            std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.out.find("evaluated 0 layouts now"), std::string::npos) << resumed.out;
  EXPECT_EQ(testing::StudyId(store, "was-default"), id);

  const CliRun other_fix = RunTunepar("--store " + store + Edit(search, "bf16", "fp16") +
                                      " --space default --study was-default");
  EXPECT_EQ(other_fix.exit_code, 2) << other_fix.out << other_fix.err;
  EXPECT_NE(other_fix.err.find("study 'was-default' already exists with a different"), std::string::npos)
      << other_fix.err;

  const CliRun fresh = RunTunepar("--store " + store + search + " --space default");
  ASSERT_EQ(fresh.exit_code, 0) << fresh.out << fresh.err;
  EXPECT_NE(fresh.err.find("these inputs were searched as study 'was-default' (id " + id +
                           ") before space preset 'default' changed: a new study"),
            std::string::npos)
      << fresh.err;
  EXPECT_EQ(StoredStudies(store).size(), 2u);
  EXPECT_EQ(testing::StudyId(store, "was-default"), id);
}

}  // namespace
}  // namespace tunepar
