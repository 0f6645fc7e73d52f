// The knob table (base/knobs.h) as the one place a knob is written: a row added here, by this
// test alone, goes through the layout key, the space TOML, --fix, the enumeration and legality,
// the JSON output, the command placeholders and the store, with nothing else written for it.
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/knobs.h"
#include "base/layout_rules.h"
#include "runner/command_template.h"
#include "search/space.h"
#include "store/shard_writer.h"
#include "store/store_reader.h"
#include "tests/test_support.h"
#include "runner/measured_runs.h"
#include "tuner/loops/calibration_sweep.h"
#include "tuner/study/problem.h"
#include "tuner/study/study_identity.h"
#include "tuner/output/trial_output.h"

namespace tunepar {
namespace {

// A size no program has: chunks of something, 1 (neutral) to 64.
KnobRow TestKnobRow() {
  KnobRow row;
  row.name = "test_chunks";
  row.aliases = {"tch"};
  row.flag = "--test-chunks";
  row.column = "tch";
  row.key_prefix = "tch";
  row.kind = KnobKind::kSize;
  row.min = 1;
  row.max = 64;
  row.neutral = 1;
  row.space_default = {false, {1}};
  row.visit_rank = 100;  // innermost
  row.encoding = KnobEncoding::kLog2;
  row.in_every_key = false;
  row.help = "a knob only this test has";
  return row;
}

Layout SmallLayout() {
  Layout l;
  l.tp = 2;
  l.pp = 2;
  l.dp = 2;
  l.micro_batch = 1;
  l.num_micro_batches = 4;
  return l;
}

constexpr const char* kTodaysKey = "tp2-pp2-dp2-mbs1-nmb4-bf16-zero0-rcnone-sp0-vpp1-fa0";

TEST(KnobTable, ATestOnlyRowEntersTheKeyOnlyAwayFromItsNeutralValue) {
  const ScopedKnobRow added(TestKnobRow());
  const Knob k = added.knob();
  EXPECT_EQ(LayoutKey(SmallLayout()), kTodaysKey);
  const Layout four = WithKnob(SmallLayout(), k, 4);
  EXPECT_EQ(KnobCode(k, four), 4);
  EXPECT_EQ(LayoutKey(four), std::string(kTodaysKey) + "-tch4");
  Result<Layout> parsed = ParseLayoutKey(LayoutKey(four));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, four);
  EXPECT_EQ(*ParseLayoutKey(kTodaysKey), SmallLayout());
  // Keys are canonical: the neutral value is left out, and a fragment comes once.
  EXPECT_FALSE(ParseLayoutKey(std::string(kTodaysKey) + "-tch1").ok());
  EXPECT_FALSE(ParseLayoutKey(std::string(kTodaysKey) + "-tch4-tch2").ok());
  // Setting it back to neutral gives today's layout, equal to one that never had it.
  EXPECT_EQ(WithKnob(four, k, 1), SmallLayout());
}

TEST(KnobTable, AKeyWithAKnobThisBuildDoesNotKnowIsRefused) {
  EXPECT_FALSE(ParseLayoutKey(std::string(kTodaysKey) + "-tch4").ok());
}

TEST(KnobTable, ATestOnlyRowIsReadFromSpaceFilesAndFixAndEnumerated) {
  const ScopedKnobRow added(TestKnobRow());
  const Knob k = added.knob();
  const std::string space_text = "name = \"t\"\n[knobs]\nmicro_batch = [1]\ntest_chunks = [1, 4]\n";
  Result<SpaceSpec> space = ParseSpaceSpec(space_text, "t.toml");
  ASSERT_TRUE(space.ok()) << space.status().message();
  EXPECT_EQ(space->Of(k).codes, (std::vector<int>{1, 4}));
  Result<SpaceSpec> bad = ParseSpaceSpec("name = \"t\"\n[knobs]\nmicro_batch = [1]\ntest_chunks = [0]\n", "t.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("knobs.test_chunks"), std::string::npos) << bad.status().message();

  // Enumerated as one more nested knob: the legal set doubles, and both values are legal.
  const ModelShape tiny = testing::PresetModel("tiny");
  SpaceSpec without = *space;
  without.Of(k) = {false, {1}};
  const search::SpaceQuery with_query{8, 8, &tiny, &*space};
  const search::SpaceQuery without_query{8, 8, &tiny, &without};
  Result<search::SpaceEnumeration> with_it = search::EnumerateSpace(with_query);
  Result<search::SpaceEnumeration> plain = search::EnumerateSpace(without_query);
  ASSERT_TRUE(with_it.ok() && plain.ok());
  ASSERT_GT(plain->legal.size(), 0u);
  EXPECT_EQ(with_it->legal.size(), 2 * plain->legal.size());
  EXPECT_EQ(with_it->candidates, 2 * plain->candidates);
  int fours = 0;
  for (const Layout& l : with_it->legal) {
    EXPECT_TRUE(search::CheckLegal(with_query, l).ok()) << LayoutKey(l);
    fours += KnobCode(k, l) == 4 ? 1 : 0;
  }
  EXPECT_EQ(fours, static_cast<int>(plain->legal.size()));
  const Layout outside = WithKnob(plain->legal.front(), k, 8);
  EXPECT_NE(search::CheckLegal(with_query, outside).message().find("test_chunks 8"), std::string::npos);

  // --fix by its alias: a TOML line that the space takes in place of its own list.
  Result<std::string> declared = KnobDeclarations("", {"tch=4"});
  ASSERT_TRUE(declared.ok()) << declared.status().message();
  EXPECT_EQ(*declared, "test_chunks = [4]\n");
  Result<Problem> problem = LoadProblem("tiny", "local-cpu", "default", *declared);
  ASSERT_TRUE(problem.ok()) << problem.status().message();
  EXPECT_EQ(problem->space.Of(k).codes, std::vector<int>{4});
}

TEST(KnobTable, ATestOnlyRowReachesJsonTablesAndCommandPlaceholders) {
  const ScopedKnobRow added(TestKnobRow());
  const Knob k = added.knob();
  store::TrialRecord trial;
  trial.layout = WithKnob(SmallLayout(), k, 4);
  const nlohmann::json j = TrialJson(trial);
  EXPECT_EQ(j["test_chunks"], 4);
  EXPECT_EQ(j["layout"], std::string(kTodaysKey) + "-tch4");
  const std::string table = TrialTable({&trial}, false).Render();
  EXPECT_NE(table.find("tch"), std::string::npos) << table;

  runner::TrialContext context;
  context.world = 8;
  Result<std::string> command = runner::ExpandCommand("train --chunks {test_chunks} --c {tch} {tch!=1?--chunked}",
                                                      trial.layout, context);
  ASSERT_TRUE(command.ok()) << command.status().message();
  EXPECT_EQ(*command, "train --chunks 4 --c 4 --chunked");
}

TEST(KnobTable, ATestOnlyRowIsStoredAndReadBackWithNoColumnOfItsOwn) {
  const ScopedKnobRow added(TestKnobRow());
  const Knob k = added.knob();
  testing::TempDir dir;
  const std::string store = dir / "store";
  store::StudyRecord study;
  study.id = "00112233aabbccdd";
  study.name = "knob-table";
  study.world = 8;
  study.model_name = "tiny";
  study.hardware_name = "local-cpu";
  study.space_name = "t";
  study.backend = "model";
  study.created_at = "2026-11-28T00:00:00Z";
  study.created_by = "n0";
  Result<std::unique_ptr<store::ShardWriter>> writer = store::ShardWriter::Open({store, "n0", study.id, ""});
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  ASSERT_TRUE((*writer)->PutStudy(study).ok());
  std::vector<store::TrialRecord> trials(2);
  for (int i = 0; i < 2; ++i) {
    trials[i].study_id = study.id;
    trials[i].node_id = "n0";
    trials[i].number = i + 1;
    trials[i].layout = WithKnob(SmallLayout(), k, i == 0 ? 1 : 4);
    trials[i].status = TrialStatus::kOk;
    trials[i].step_time_s = 1.0 + i;
    trials[i].started_at = trials[i].finished_at = "2026-11-28T00:00:01Z";
  }
  ASSERT_TRUE((*writer)->PutTrials(trials).ok());
  ASSERT_TRUE((*writer)->Publish().ok());
  Result<store::StoreView> view = store::ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  ASSERT_EQ(view->trials.size(), 2u);
  EXPECT_TRUE(view->warnings.empty());
  EXPECT_EQ(view->trials[0].layout, SmallLayout());
  EXPECT_EQ(KnobCode(k, view->trials[1].layout), 4);
  EXPECT_EQ(view->trials[1].layout, trials[1].layout);
}

// A study's id: a knob added after issue 30 enters it only away from its neutral value, in the
// space's lists and in the pinned knobs (which the backend settings hold) alike, so every stored
// study keeps its id.
TEST(KnobTable, ATestOnlyRowAtItsNeutralValueKeepsEveryStudyId) {
  store::StudyRecord study;
  study.world = 8;
  study.model_toml = testing::PresetText("models", "tiny");
  study.hardware_toml = testing::PresetText("hardware", "local-cpu");
  study.space_toml = "name = \"t\"\n[knobs]\nmicro_batch = [1, 2]\n";
  study.objective = "max_tokens_per_s";
  study.backend = "local";
  study.backend_settings = R"({"core":{"knobs":"sp0 vpp1"}})";
  const std::string before = StudyId(study);
  const ScopedKnobRow added(TestKnobRow());
  EXPECT_EQ(StudyId(study), before);
  store::StudyRecord neutral = study;
  neutral.space_toml += "test_chunks = [1]\n";
  neutral.backend_settings = R"({"core":{"knobs":"sp0 vpp1 tch1"}})";
  EXPECT_EQ(StudyId(neutral), before);
  store::StudyRecord searched = study;
  searched.space_toml += "test_chunks = [1, 4]\n";
  EXPECT_NE(StudyId(searched), before);
  store::StudyRecord pinned = study;
  pinned.backend_settings = R"({"core":{"knobs":"sp0 vpp1 tch4"}})";
  EXPECT_NE(StudyId(pinned), before);
}

// A study of a preset keeps the id it has always had (the one the README's dry run prints for
// gpt-1t at 3072), and writing the shape fields of issue 33 at their neutral values keeps it.
TEST(KnobTable, NeutralShapeFieldsKeepAPresetsStudyId) {
  store::StudyRecord study;
  study.world = 3072;
  study.model_toml = testing::PresetText("models", "gpt-1t");
  study.hardware_toml = testing::PresetText("hardware", "frontier-mi250x");
  study.space_toml = testing::PresetText("spaces", "default");
  study.objective = "max_tokens_per_s";
  study.backend = "model";
  study.backend_settings = R"({"performance_model":"roofline-v1"})";
  const std::string before = StudyId(study);
  EXPECT_EQ(before.substr(0, 8), "289750b7");  // README.md: Study gpt-1t-w3072-289750b7 (the default space with fp8)
  store::StudyRecord neutral = study;
  neutral.model_toml += "mlp = \"gelu\"\npositions = \"learned\"\nnorm = \"layernorm\"\nlinear_biases = true\n"
                        "patch_tokens = 0\noutput_width = 0\n";
  EXPECT_EQ(StudyId(neutral), before);
  store::StudyRecord rms = study;
  rms.model_toml += "norm = \"rmsnorm\"\n";
  EXPECT_NE(StudyId(rms), before);
}

// schemas/trial.schema.json states every knob of the table, with the JSON type its kind gives.
TEST(KnobTable, TheTrialSchemaListsEveryKnobAsItsRowSays) {
  std::ifstream in(std::string(TUNEPAR_SOURCE_DIR) + "/schemas/trial.schema.json");
  const nlohmann::json schema = nlohmann::json::parse(in);
  const nlohmann::json& properties = schema["properties"];
  const nlohmann::json& required = schema["required"];
  for (const LayoutField& f : LayoutFields()) {
    const std::string name(f.name);
    ASSERT_TRUE(properties.contains(name)) << name;
    EXPECT_NE(std::find(required.begin(), required.end(), name), required.end()) << name;
    std::string type = "integer";
    if (f.knob >= 0 && RowOf(static_cast<Knob>(f.knob)).kind == KnobKind::kSwitch) type = "boolean";
    if (f.knob >= 0 && RowOf(static_cast<Knob>(f.knob)).kind == KnobKind::kChoice) {
      type = "string";
      const std::vector<std::string_view>& choices = RowOf(static_cast<Knob>(f.knob)).choices;
      EXPECT_EQ(properties[name]["enum"], nlohmann::json(std::vector<std::string>(choices.begin(), choices.end())))
          << name;
    }
    EXPECT_EQ(properties[name]["type"], type) << name;
  }
}

// The shape table: a model file's fields, and a measured run written by calibrate's sweep and read
// back with every field (a Llama-style model whose MLP is not 4h, with named choices, GQA and its
// own LM head).
TEST(ShapeTable, EveryFieldRoundTripsThroughAMeasuredRunsFile) {
  runner::MeasuredRun run;
  run.label = "r1";
  run.source = "test";
  run.model = testing::PresetModel("tiny-llama");
  run.model.ffn_hidden = 3 * run.model.hidden;
  run.model.norm = NormKind::kLayerNorm;
  run.model.positions = Positions::kNone;
  run.layout = WithKnob(SmallLayout(), Knob::kSeqParallel, 1);
  run.layout.num_micro_batches = run.model.global_batch / (run.layout.micro_batch * run.layout.dp);
  run.step_time_s = 1.25;
  Result<std::vector<runner::MeasuredRun>> read = runner::ParseMeasuredRuns(MeasuredRunsCsv({run}), "sweep.csv");
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->size(), 1u);
  for (const ShapeRow& row : ShapeRows()) EXPECT_EQ(row.get((*read)[0].model), row.get(run.model)) << row.name;
  EXPECT_EQ((*read)[0].layout, run.layout);
  EXPECT_DOUBLE_EQ((*read)[0].step_time_s, 1.25);
  // Every field is a key of the model file, read by its row.
  std::string text = "name = \"t\"\n";
  for (const ShapeRow& row : ShapeRows())
    text += fmt::format("{} = {}\n", row.name,
                        row.is_switch            ? (row.get(run.model) ? "true" : "false")
                        : !row.choices.empty() ? fmt::format("\"{}\"", ShapeFieldText(row, run.model))
                                                 : ShapeFieldText(row, run.model));
  Result<ModelShape> parsed = ParseModelShape(text, "t.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  for (const ShapeRow& row : ShapeRows()) EXPECT_EQ(row.get(*parsed), row.get(run.model)) << row.name;
}

// The rules are one table: each is decided at a knob, and CanonicalLayout moves a layout that
// breaks a twin rule to the knob's neutral value (and nothing else).
TEST(KnobTable, TwinRulesMoveTheirKnobToNeutral) {
  Layout l = SmallLayout();
  l.dp = 1;
  l.zero = 1;
  EXPECT_EQ(CanonicalLayout(l).zero, 0);
  l.tp = 1;
  l.seq_parallel = true;
  EXPECT_FALSE(CanonicalLayout(l).seq_parallel);
  l.pp = 1;
  l.virtual_stages = 2;
  EXPECT_EQ(CanonicalLayout(l).virtual_stages, 1);
  l.precision = Precision::kFp32;
  l.flash_attention = true;
  EXPECT_FALSE(CanonicalLayout(l).flash_attention);
  EXPECT_EQ(CanonicalLayout(SmallLayout()), SmallLayout());
}

}  // namespace
}  // namespace tunepar
