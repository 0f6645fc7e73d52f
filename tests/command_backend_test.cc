// The command backend: templates, metric reading, outcome classification, process cleanup.
#include "runner/command_backend.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runner/launch_environment.h"
#include "runner/log_text.h"
#include "runner/process_group.h"
#include "tests/test_support.h"

namespace tunepar::runner {
namespace {

tunepar::Layout Layout(int tp, int mbs) {
  tunepar::Layout l;
  l.tp = tp;
  l.dp = 2;
  l.micro_batch = mbs;
  l.num_micro_batches = 4;
  l.precision = Precision::kBf16;
  l.seq_parallel = true;
  return l;
}

TrialContext Context(const std::string& dir, const ModelShape* model) {
  TrialContext c;
  c.trial_id = "test/" + dir;
  c.trial_dir = dir;
  c.number = 7;
  c.world = 4;
  c.gpus_per_node = 2;
  c.model = model;
  return c;
}

TEST(CommandTemplate, SubstitutesEveryKindOfPlaceholder) {
  ModelShape m = testing::PresetModel("tiny");
  const TrialContext c = Context("/tmp/t", &m);
  Result<std::string> s = ExpandCommand(
      "run --tp {tp} --pp {pp} --dp {dp} --mbs {mbs} --gbs {gbs} --nmb {num_micro_batches} --{precision} "
      "{seq_parallel?--sequence-parallel} {flash?--flash} --nodes {nodes} --trial {trial} ${HOME} {{x}} "
      "{layout}",
      Layout(2, 4), c);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(
      *s,
      "run --tp 2 --pp 1 --dp 2 --mbs 4 --gbs 32 --nmb 4 --bf16 --sequence-parallel  --nodes 2 --trial 7 "
      "${HOME} {x} tp2-pp1-dp2-mbs4-nmb4-bf16-zero0-rcnone-sp1-vpp1-fa0");
}

TEST(CommandTemplate, ValueConditionsAndModelShape) {
  ModelShape m = testing::PresetModel("gpt-22b");  // 48 layers
  tunepar::Layout l = Layout(2, 4);
  l.pp = 4;
  l.virtual_stages = 2;
  l.recompute = Recompute::kFull;
  Result<std::string> s = ExpandCommand(
      "{recompute=full?--recompute-granularity full}{recompute=selective?--recompute-granularity selective}"
      " {precision=bf16?--bf16}{precision=fp16?--fp16} --num-layers {layers} --hidden-size {hidden} "
      "{vpp=2?--num-layers-per-virtual-pipeline-stage {layers_per_virtual_stage}}",
      l, Context("/tmp/t", &m));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(*s,
            "--recompute-granularity full --bf16 --num-layers 48 --hidden-size 6144 "
            "--num-layers-per-virtual-pipeline-stage 6");
  EXPECT_FALSE(ExpandCommand("{recompute=full}", l, TrialContext{}).ok());
}

TEST(CommandTemplate, UnknownPlaceholderIsNamed) {
  Result<std::string> s = ExpandCommand("run --tp {tpp}", Layout(1, 1), TrialContext{});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown placeholder {tpp}"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("{tp}"), std::string::npos);  // lists the known ones
  EXPECT_FALSE(ExpandCommand("run {tp", Layout(1, 1), TrialContext{}).ok());
}

// What bash makes of an expanded template: the words `printf '%s\0' ...` prints, run in `dir`
// (where a `$(touch F)` that escaped its quoting would leave F).
std::vector<std::string> BashWords(const std::string& expanded, const std::string& dir,
                                   const std::string& env = "") {
  testing::WriteFile(dir + "/words.sh", "cd " + ShellQuote(dir) + "\n" + env + "printf '%s\\0' " + expanded + "\n");
  const testing::CliRun run = testing::RunCommand("bash " + ShellQuote(dir + "/words.sh"));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::string> words;
  size_t at = 0;
  for (size_t nul = run.out.find('\0'); nul != std::string::npos; nul = run.out.find('\0', at)) {
    words.push_back(run.out.substr(at, nul - at));
    at = nul + 1;
  }
  return words;
}

// A trial folder and a model name with every character a shell could misread.
const std::string kHostile = "a b/$(touch F)/`touch G`/'q'/\"d\"/\\/ü\n$HOME;x";

// Values are quoted for where they stand: bare, inside "...", as part of a word (--x={trial_dir}),
// inside conditional text; each comes out as exactly the words meant and nothing runs.
TEST(CommandTemplate, EveryValueIsQuotedForWhereItStands) {
  testing::TempDir dir;
  ModelShape m = testing::PresetModel("tiny");
  m.name = kHostile;
  TrialContext c = Context(dir.path() + "/" + kHostile, &m);
  const std::string trial_dir = c.trial_dir;
  Result<std::string> bare = ExpandCommand("{trial_dir} --x={trial_dir} {model} --mbs {mbs}", Layout(1, 4), c);
  ASSERT_TRUE(bare.ok()) << bare.status().message();
  EXPECT_EQ(BashWords(*bare, dir.path()),
            (std::vector<std::string>{trial_dir, "--x=" + trial_dir, kHostile, "--mbs", "4"}));
  Result<std::string> quoted = ExpandCommand("\"{trial_dir}/log\" \"pre {model} {mbs}\" '{{literal}}'", Layout(1, 4), c);
  ASSERT_TRUE(quoted.ok()) << quoted.status().message();
  EXPECT_EQ(BashWords(*quoted, dir.path()),
            (std::vector<std::string>{trial_dir + "/log", "pre " + kHostile + " 4", "{literal}"}));
  // Conditional text stays several words, each value in it quoted where it stands.
  Result<std::string> conditional = ExpandCommand("{sp?--sp {trial_dir}} \"{sp?x {model}}\" {sp!=1?--never}", Layout(1, 4), c);
  ASSERT_TRUE(conditional.ok()) << conditional.status().message();
  EXPECT_EQ(BashWords(*conditional, dir.path()), (std::vector<std::string>{"--sp", trial_dir, "x " + kHostile}));
  // An escaped quote opens nothing.
  EXPECT_EQ(BashWords(ExpandCommand("\\'{mbs} \"a\\\"{mbs}\"", Layout(1, 4), c).value(), dir.path()),
            (std::vector<std::string>{"'4", "a\"4"}));
  EXPECT_FALSE(std::filesystem::exists(dir / "F"));
  EXPECT_FALSE(std::filesystem::exists(dir / "G"));
  // Safe words stay as they are (the text users and tests compare).
  EXPECT_EQ(ExpandCommand("run --tp {tp} --ds {deepspeed_config}", Layout(2, 4), Context("/tmp/t", &m)).value(),
            "run --tp 2 --ds /tmp/t/deepspeed_config.json");
}

TEST(CommandTemplate, APlaceholderInsideSingleQuotesIsRefused) {
  Result<std::string> s = ExpandCommand("bash -c 'train --dir {trial_dir}'", Layout(1, 1), TrialContext{});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("{trial_dir} stands inside '...'"), std::string::npos) << s.status().message();
  // Also in conditional text that is off; literal conditional text substitutes no value, so it may
  // stand there; conditional text must not leave a quote open.
  tunepar::Layout off = Layout(1, 1);
  off.seq_parallel = false;
  EXPECT_FALSE(ExpandCommand("'{sp?--sp {mbs}}'", off, TrialContext{}).ok());
  EXPECT_EQ(ExpandCommand("'{sp?--sp}'", Layout(1, 1), TrialContext{}).value(), "'--sp'");
  EXPECT_FALSE(ExpandCommand("{sp?--sp \"}x\"", Layout(1, 1), TrialContext{}).ok());
  // Single quotes that close before it are fine, and a ' inside "..." is a character.
  EXPECT_TRUE(ExpandCommand("echo 'a' {mbs} \"it's {mbs}\"", Layout(1, 1), TrialContext{}).ok());
}

// In a launch script the trial folder is $job_dir, for the shell to expand: in double quotes
// wherever it stands, so a job folder with spaces stays one word.
TEST(CommandTemplate, AShellExpressionTrialFolderIsExpandedInDoubleQuotes) {
  testing::TempDir dir;
  TrialContext c;
  c.trial_dir = "$job_dir";
  c.trial_dir_is_expression = true;
  Result<std::string> s = ExpandCommand("{trial_dir} \"{trial_dir}/x\" --ds={deepspeed_config}", Layout(1, 1), c);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(*s, "\"$job_dir\" \"$job_dir/x\" --ds=\"$job_dir/deepspeed_config.json\"");
  EXPECT_EQ(BashWords(*s, dir.path(), "job_dir='/j o/b'\n"),
            (std::vector<std::string>{"/j o/b", "/j o/b/x", "--ds=/j o/b/deepspeed_config.json"}));
  EXPECT_FALSE(ExpandCommand("'{trial_dir}'", Layout(1, 1), c).ok());
}

// A space with every knob open (sizes as divisors of the world).
SpaceSpec OpenSpace() {
  SpaceSpec space;
  space.Set(Knob::kPrecision, testing::Codes({Precision::kBf16, Precision::kFp16, Precision::kFp32}));
  space.Set(Knob::kZero, testing::Codes({0, 1}));
  space.Set(Knob::kRecompute, testing::Codes({Recompute::kNone, Recompute::kSelective, Recompute::kFull}));
  space.Set(Knob::kSeqParallel, testing::Codes({false, true}));
  space.Set(Knob::kVirtualStages, testing::Codes({1, 2}));
  space.Set(Knob::kFlashAttention, testing::Codes({false, true}));
  space.Set(Knob::kDpReplicate, testing::Codes({1, 2}));
  return space;
}

CommandBackend Backend(const std::string& command, bool reads_layout_env = false) {
  CommandBackendOptions o;
  o.command = command;
  o.metric_regex = "step: ([0-9.]+)";
  o.reads_layout_env = reads_layout_env;
  return CommandBackend(o);
}

TEST(CommandKnobs, OnlyWhatTheTemplatePassesIsReceived) {
  const CommandBackend backend = Backend(
      "train --tp {tp} --pp {pp} --mbs {mbs} --{precision} {recompute=full?--recompute-full} "
      "--out {trial_dir}/t{trial} --seed {seed}");
  Result<KnobSupport> support = backend.SupportedKnobs(OpenSpace(), 8);
  ASSERT_TRUE(support.ok()) << support.status().message();
  // Not received: fixed at the value a program runs with untold; per-trial placeholders do not count.
  EXPECT_EQ(support->Of(Knob::kZero), std::vector<int>{0});
  EXPECT_EQ(support->Of(Knob::kSeqParallel), std::vector<int>{0});
  EXPECT_EQ(support->Of(Knob::kVirtualStages), std::vector<int>{1});
  EXPECT_EQ(support->Of(Knob::kFlashAttention), std::vector<int>{0});
  // Received in full.
  EXPECT_TRUE(support->Of(Knob::kTp).empty());
  EXPECT_TRUE(support->Of(Knob::kPp).empty());
  EXPECT_TRUE(support->Of(Knob::kMicroBatch).empty());
  EXPECT_TRUE(support->Of(Knob::kPrecision).empty());
  // Received in part: none and selective run the same program; none (listed first) stands for both.
  EXPECT_EQ(support->Of(Knob::kRecompute),
            (std::vector<int>{static_cast<int>(Recompute::kNone), static_cast<int>(Recompute::kFull)}));
  EXPECT_EQ(PinnedKnobs(*support), "zero0 rcnone rcfull sp0 vpp1 fa0 dpr1 cp1 uneven0 ep1");
  EXPECT_EQ(UnreceivedKnobs(*support),
            "zero 0, seq_parallel off, virtual_stages 1, flash_attention off, dp_replicate 1, cp 1, uneven_stages off, "
            "ep 1");
}

TEST(CommandKnobs, DerivedAndConditionalPlaceholdersCarryTheirKnobs) {
  // dp carries tp and pp; the micro-batch count carries the micro-batch size; a switch's text
  // carries the switch; layers per virtual stage carries the interleaving.
  Result<KnobSupport> support = Backend(
      "train --dp {dp} --nmb {nmb} {sp?--sequence-parallel} {flash_attention?--flash} --zero {zero} "
      "--layers-per-chunk {layers_per_virtual_stage} --{precision} --recompute {recompute}")
                                    .SupportedKnobs(OpenSpace(), 8);
  ASSERT_TRUE(support.ok()) << support.status().message();
  // Nothing carries hybrid sharding or uneven stages; dp carries cp (dp = world / (tp cp pp)).
  EXPECT_EQ(PinnedKnobs(*support), "dpr1 uneven0 ep1");
  // The shard group, dp / dp_replicate, carries it.
  Result<KnobSupport> hybrid = Backend(
      "train --dp {dp} --shard {dp_shard} --nmb {nmb} {sp?--sequence-parallel} {flash_attention?--flash} --zero {zero} "
      "--layers-per-chunk {layers_per_virtual_stage} --{precision} --recompute {recompute}")
                                   .SupportedKnobs(OpenSpace(), 8);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status().message();
  EXPECT_EQ(PinnedKnobs(*hybrid), "uneven0 ep1");
}

TEST(CommandKnobs, TheLayoutVariableCountsOnlyWhenTheProgramReadsIt) {
  EXPECT_EQ(PinnedKnobs(Backend("train {tp} {pp} {mbs} {precision}").SupportedKnobs(OpenSpace(), 8).value()),
            "zero0 rcnone sp0 vpp1 fa0 dpr1 cp1 uneven0 ep1");
  EXPECT_EQ(PinnedKnobs(Backend("train", true).SupportedKnobs(OpenSpace(), 8).value()), "");
}

TEST(CommandKnobs, TheDeepSpeedConfigCarriesItsKnobs) {
  // ZeRO stage, precision and micro-batch reach the program through the config file alone; it
  // carries no hybrid sharding.
  Result<KnobSupport> support =
      Backend("train --tp {tp} --pp {pp} --deepspeed_config {deepspeed_config}").SupportedKnobs(OpenSpace(), 8);
  ASSERT_TRUE(support.ok()) << support.status().message();
  EXPECT_EQ(PinnedKnobs(*support), "rcnone sp0 vpp1 fa0 dpr1 uneven0 ep1");
}

TEST(CommandKnobs, AKnobWithNoValueToRunAtMustBeDeclared) {
  SpaceSpec space = OpenSpace();
  const CommandBackend backend = Backend("train --tp {tp} --pp {pp} --{precision}");
  Result<KnobSupport> support = backend.SupportedKnobs(space, 8);
  ASSERT_FALSE(support.ok());
  EXPECT_EQ(support.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(support.status().message().find("never receives micro_batch"), std::string::npos)
      << support.status().message();
  EXPECT_NE(support.status().message().find("--fix micro_batch=VALUE"), std::string::npos);
  space.Set(Knob::kMicroBatch, testing::Codes({2}));  // declared: the program runs with 2
  support = backend.SupportedKnobs(space, 8);
  ASSERT_TRUE(support.ok()) << support.status().message();
  EXPECT_EQ(support->Of(Knob::kMicroBatch), std::vector<int>{2});
  // A neutral value the space does not allow: say which the program runs with.
  space.Set(Knob::kZero, testing::Codes({1}));
  EXPECT_EQ(backend.SupportedKnobs(space, 8).value().Of(Knob::kZero), std::vector<int>{1});
  space.Set(Knob::kVirtualStages, testing::Codes({2, 4}));
  EXPECT_NE(backend.SupportedKnobs(space, 8).status().message().find("never receives virtual_stages"),
            std::string::npos);
}

TEST(CommandOptions, Validation) {
  CommandBackendOptions o;
  o.command = "train {tp}";
  EXPECT_FALSE(ValidateCommandOptions(o).ok());  // no way to read the metric
  o.metric_regex = "step: ([0-9.]+)";
  EXPECT_TRUE(ValidateCommandOptions(o).ok());
  o.metric_json = "step";
  EXPECT_FALSE(ValidateCommandOptions(o).ok());  // both
  o.metric_json.clear();
  o.metric_regex = "step: [0-9.]+";
  EXPECT_NE(ValidateCommandOptions(o).message().find("no capture group"), std::string::npos);
  o.metric_regex = "step: ([0-9.]+";
  EXPECT_NE(ValidateCommandOptions(o).message().find("not a valid regular expression"), std::string::npos);
  o.metric_regex = "step: ([0-9.]+)";
  o.command = "train {bogus}";
  EXPECT_NE(ValidateCommandOptions(o).message().find("{bogus}"), std::string::npos);
  o.command = "train";
  o.timeout_s = 0;
  EXPECT_FALSE(ValidateCommandOptions(o).ok());
  EXPECT_TRUE(ParseMetricKind("tokens_per_s").ok());
  EXPECT_FALSE(ParseMetricKind("speed").ok());
}

class CommandRun : public ::testing::Test {
 protected:
  TrialResult Run(const std::string& flags, double timeout_s = 30,
                  const std::string& metric_regex = "step_time: ([0-9.]+)", const std::string& memory_regex = "") {
    CommandBackendOptions o;
    o.command = std::string(TUNEPAR_FAKE_TRAINER) + " --tp {tp} --mbs {mbs} " + flags;
    o.metric_regex = metric_regex;
    o.memory_regex = memory_regex;
    o.timeout_s = timeout_s;
    o.stop_grace_s = 0.5;
    EXPECT_TRUE(ValidateCommandOptions(o).ok());
    CommandBackend backend(o);
    context_ = Context(dir_.path(), &model_);
    return backend.Evaluate(Layout(2, 4), context_);
  }
  ModelShape model_ = testing::PresetModel("tiny");
  testing::TempDir dir_;
  TrialContext context_;
};

TEST_F(CommandRun, ReadsTheMetricAndConvertsIt) {
  const TrialResult r = Run("");
  EXPECT_EQ(r.status, TrialStatus::kOk) << r.message;
  ASSERT_TRUE(r.objective.has_value());
  EXPECT_NEAR(*r.objective, 1.0, 1e-6);  // the fake trainer's optimum: tp 2, mbs 4
  ASSERT_TRUE(r.metrics.tokens_per_s.has_value());
  EXPECT_NEAR(*r.metrics.tokens_per_s, 8.0 * 32 / 1.0, 1e-3);
  EXPECT_EQ(r.backend, "command");
  EXPECT_NE(testing::ReadFile(r.log_path).find("iteration 3"), std::string::npos);
  EXPECT_NE(testing::ReadFile(dir_ / "command.txt").find("--tp 2 --mbs 4"), std::string::npos);
}

TEST_F(CommandRun, ClassifiesOutOfMemoryCrashAndMissingMetric) {
  TrialResult oom = Run("--oom-above 1");
  EXPECT_EQ(oom.status, TrialStatus::kOom);
  EXPECT_NE(oom.message.find("CUDA out of memory"), std::string::npos);
  TrialResult crash = Run("--crash");
  EXPECT_EQ(crash.status, TrialStatus::kCrash);
  EXPECT_NE(crash.message.find("exit code 3"), std::string::npos) << crash.message;
  TrialResult quiet = Run("--quiet");
  EXPECT_EQ(quiet.status, TrialStatus::kInvalid);
  EXPECT_NE(quiet.message.find("no match for --metric-regex"), std::string::npos);
  TrialResult killed = Run("; kill -9 $$");
  EXPECT_EQ(killed.status, TrialStatus::kCrash);
  EXPECT_NE(killed.message.find("signal 9"), std::string::npos) << killed.message;
}

TEST_F(CommandRun, JsonMetricAndOtherKinds) {
  CommandBackendOptions o;
  o.command = "echo '{{\"tokens_per_s\": 512, \"x\": 1}}'";  // literal braces are doubled
  o.metric = MetricKind::kTokensPerS;
  o.metric_json = "tokens_per_s";
  ASSERT_TRUE(ValidateCommandOptions(o).ok());
  CommandBackend backend(o);
  const TrialResult r = backend.Evaluate(Layout(1, 1), Context(dir_.path(), &model_));
  ASSERT_EQ(r.status, TrialStatus::kOk) << r.message;
  EXPECT_NEAR(*r.metrics.step_time_s, 8.0 * 32 / 512, 1e-12);  // tiny: global batch 8, sequence 32
  EXPECT_NEAR(ObjectiveValue(MetricKind::kHigher, 4.0, model_, 4), 0.25, 1e-12);
  EXPECT_NEAR(ObjectiveValue(MetricKind::kLower, 4.0, model_, 4), 4.0, 1e-12);
  EXPECT_NEAR(ObjectiveValue(MetricKind::kStepTimeMs, 1500, model_, 4), 1.5, 1e-12);
  EXPECT_NEAR(ObjectiveValue(MetricKind::kSamplesPerS, 4, model_, 4), 2.0, 1e-12);
}

TEST_F(CommandRun, HangingTrialTimesOutAndTakesItsChildrenWithIt) {
  const auto start = std::chrono::steady_clock::now();
  const TrialResult r = Run("--hang", 1.0);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, TrialStatus::kTimeout);
  EXPECT_LT(took, 5.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // No process of the trial (the shell, the trainer, its sleeping child) is left.
  EXPECT_TRUE(ProcessesWithMarkerPrefix(context_.trial_id).empty());
}

TEST_F(CommandRun, InterruptStopsTheWholeGroup) {
  CommandBackendOptions o;
  o.command = std::string(TUNEPAR_FAKE_TRAINER) + " --hang";
  o.metric_regex = "step_time: ([0-9.]+)";
  o.stop_grace_s = 0.5;
  CommandBackend backend(o);
  std::unique_ptr<RunningTrial> trial = backend.Start(Layout(1, 1), Context(dir_.path(), &model_));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const pid_t pgid = static_cast<pid_t>(trial->process_group());
  ASSERT_GT(pgid, 0);
  EXPECT_TRUE(HasLeftovers(pgid, "test/" + dir_.path()));
  EXPECT_FALSE(trial->Poll().has_value());
  const TrialResult r = trial->Interrupt();
  EXPECT_EQ(r.status, TrialStatus::kInterrupted);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(HasLeftovers(pgid, "test/" + dir_.path()));
}

TEST(ProcessGroup, KillLeftoversTouchesOnlyMarkedProcesses) {
  testing::TempDir dir;
  ProcessOptions p;
  p.command = "sleep 30 & sleep 30; wait";
  p.log_path = dir / "log";
  p.trial_id = "marker-a";
  Result<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Start(p);
  ASSERT_TRUE(group.ok());
  // Wait for the shell to start both sleeps (a loaded machine takes longer than a quiet one): the
  // supervisor, the shell and the two sleeps carry the marker. Waiting for 3 let a loaded machine
  // count the supervisor and kill only the shell and one sleep.
  for (int i = 0; i < 200 && ProcessesWithMarkerPrefix("marker-a").size() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const pid_t pgid = (*group)->process_group();
  EXPECT_EQ(KillLeftovers(pgid, "another-marker"), 0);
  EXPECT_TRUE(HasLeftovers(pgid, "marker-a"));
  EXPECT_GE(KillLeftovers(pgid, "marker-a"), 3);  // the supervisor, the shell, the two sleeps
  // Killed processes end at once, but the kernel takes a moment to report it on a loaded machine.
  std::optional<ExitInfo> exit;
  for (int i = 0; i < 200 && !exit; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    exit = (*group)->Poll();
  }
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->signaled);
  EXPECT_FALSE(HasLeftovers(pgid, "marker-a"));
}

}  // namespace
}  // namespace tunepar::runner

namespace tunepar::runner {
namespace {

// The peak memory: read when the program prints it (the largest reading), a lower bound from a
// PyTorch out-of-memory message, and a note, not a failure, when it never appears.
TEST_F(CommandRun, ReadsThePeakMemoryAndAnOomsLowerBound) {
  const std::string memory = "max memory allocated: ([0-9.]+ GiB)";
  const TrialResult r = Run("--print-memory", 30, "step_time: ([0-9.]+)", memory);
  ASSERT_EQ(r.status, TrialStatus::kOk) << r.message;
  ASSERT_TRUE(r.metrics.peak_memory_bytes.has_value());
  EXPECT_NEAR(*r.metrics.peak_memory_bytes, 4.0 * (4.0 / 2) * 2 * (1 << 30), 1e6);  // mbs 4, tp 2, no recompute
  const TrialResult oom = Run("--oom-above 10", 30, "step_time: ([0-9.]+)", memory);
  ASSERT_EQ(oom.status, TrialStatus::kOom);
  ASSERT_TRUE(oom.metrics.peak_memory_bytes.has_value());
  EXPECT_NEAR(*oom.metrics.peak_memory_bytes, (9.0 + 2.0) * (1 << 30), 1e6);  // 9 GiB in use + 2 GiB asked
  const TrialResult silent = Run("", 30, "step_time: ([0-9.]+)", memory);
  EXPECT_EQ(silent.status, TrialStatus::kOk) << silent.message;
  EXPECT_FALSE(silent.metrics.peak_memory_bytes.has_value());
  EXPECT_NE(silent.details_json.find("no match for --memory-regex"), std::string::npos) << silent.details_json;
}

TEST(OomLowerBound, ReadsBothOfPyTorchsMessages) {
  EXPECT_NEAR(*OomLowerBound("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total "
                             "capacity; 75.80 GiB already allocated; 1.2 GiB free)"),
              77.80 * (1 << 30), 1e3);
  EXPECT_NEAR(*OomLowerBound("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
                             "total capacity of 63.98 GiB of which 3.44 MiB is free. Including non-PyTorch memory, "
                             "this process has 63.97 GiB memory in use."),
              63.97 * (1 << 30) + 20.0 * (1 << 20), 1e3);
  EXPECT_FALSE(OomLowerBound("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB").has_value());
}

// Issue 28 item 10: PyTorch's short form says only what its allocator holds: allocated plus
// reserved is what was in use at least (with the request when the line has it).
TEST(OomLowerBound, ReadsPyTorchsShortForm) {
  EXPECT_NEAR(*OomLowerBound("torch.OutOfMemoryError: CUDA out of memory. Of the allocated memory 75.10 GiB is "
                             "allocated by PyTorch, and 2.12 GiB is reserved by PyTorch but unallocated."),
              (75.10 + 2.12) * (1 << 30), 1e3);
  EXPECT_NEAR(*OomLowerBound("OutOfMemoryError: Tried to allocate 1.00 GiB. Of the allocated memory 70.00 GiB is "
                             "allocated by PyTorch"),
              71.0 * (1 << 30), 1e3);
}

TEST(CommandOptions, MemoryRegexNeedsACaptureGroup) {
  CommandBackendOptions o;
  o.command = "train";
  o.metric_regex = "t: ([0-9.]+)";
  o.memory_regex = "peak memory [0-9.]+ GiB";
  const Status s = ValidateCommandOptions(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--memory-regex 'peak memory [0-9.]+ GiB' has no capture group"), std::string::npos)
      << s.message();
  o.memory_regex = "peak ([0-9.]+ GiB)";
  EXPECT_TRUE(ValidateCommandOptions(o).ok());
  o.memory_json = "peak_bytes";
  EXPECT_FALSE(ValidateCommandOptions(o).ok());
}

}  // namespace
}  // namespace tunepar::runner

namespace tunepar::runner {
namespace {

// What real launchers print (issue 17, items 19-22): torchrun's report after the error, a pipe in
// the template, PyTorch's CPU allocator, a program that recovers from an OOM and reports its
// metric.
class LauncherOutput : public ::testing::Test {
 protected:
  TrialResult Run(const std::string& command, const std::vector<std::string>& extra_oom = {}) {
    CommandBackendOptions o;
    o.command = command;
    o.metric_regex = "step_time: ([0-9.,]+)";
    o.stop_grace_s = 0.5;
    for (const std::string& p : extra_oom) o.oom_patterns.push_back(p);
    EXPECT_TRUE(ValidateCommandOptions(o).ok());
    return CommandBackend(o).Evaluate(Layout(2, 4), Context(dir_.path(), &model_));
  }
  // A shell command that prints `text` (a file, so that no quoting gets in the way) and exits.
  std::string Printing(const std::string& text, int code) {
    const std::string path = dir_ / fmt::format("out{}.txt", files_++);
    std::ofstream(path) << text;
    return fmt::format("cat {}; exit {}", path, code);
  }
  ModelShape model_ = testing::PresetModel("tiny");
  testing::TempDir dir_;
  int files_ = 0;
};

// torchrun's report after a worker's error: the same for every error, so the message must be
// the worker's own line.
std::string TorchrunFailure(const std::string& error) {
  return "[rank0]: Traceback (most recent call last):\n"
         "[rank0]:   File \"/work/train.py\", line 12, in <module>\n"
         "[rank0]:     main()\n"
         "[rank0]: " + error + "\n"
         "E1126 14:22:01.123000 4242 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
         "local_rank: 0 (pid: 4243) of binary: /usr/bin/python3\n"
         "Traceback (most recent call last):\n"
         "  File \"/usr/bin/torchrun\", line 8, in <module>\n"
         "    sys.exit(main())\n"
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
         "============================================================\n"
         "train.py FAILED\n"
         "------------------------------------------------------------\n"
         "Failures:\n"
         "  <NO_OTHER_FAILURES>\n"
         "------------------------------------------------------------\n"
         "Root Cause (first observed failure):\n"
         "[0]:\n"
         "  time      : 2026-11-26_14:22:01\n"
         "  host      : nid005001\n"
         "  rank      : 0 (local_rank: 0)\n"
         "  exitcode  : 1 (pid: 4243)\n"
         "  error_file: <N/A>\n"
         "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
         "============================================================\n";
}

TEST_F(LauncherOutput, ACrashUnderTorchrunIsToldByTheWorkersError) {
  const TrialResult fp16 = Run(Printing(TorchrunFailure("ValueError: precision fp16 not supported"), 1));
  EXPECT_EQ(fp16.status, TrialStatus::kCrash);
  EXPECT_EQ(fp16.message, "exit code 1: [rank0]: ValueError: precision fp16 not supported");
  const TrialResult tp = Run(Printing(TorchrunFailure("AssertionError: tensor parallelism (tp=2) is not implemented"), 1));
  EXPECT_EQ(tp.message, "exit code 1: [rank0]: AssertionError: tensor parallelism (tp=2) is not implemented");
  // Without an exception: the last line that speaks of an error, not the launcher's rule.
  const TrialResult plain = Run(Printing("starting\nfatal: pipeline parallelism not supported here\n=====\n", 2));
  EXPECT_EQ(plain.message, "exit code 2: fatal: pipeline parallelism not supported here");
  EXPECT_EQ(Run("exit 5").message, "exit code 5 (no output)");
}

TEST(ErrorLine, SkipsTheLaunchersReport) {
  testing::TempDir dir;
  const std::string log = dir / "log";
  std::ofstream(log) << TorchrunFailure("RuntimeError: NCCL error in: init.cpp:42, unhandled system error");
  EXPECT_EQ(ErrorLine(log), "[rank0]: RuntimeError: NCCL error in: init.cpp:42, unhandled system error");
  std::ofstream(log) << "step 1\nstep 2\n====\n";
  EXPECT_EQ(ErrorLine(log), "step 2");
  std::ofstream(log) << "";
  EXPECT_EQ(ErrorLine(log), "");
}

TEST_F(LauncherOutput, APipeDoesNotHideTheExitCode) {
  // `| tee` (and torchtitan's old `| python3`) used to record this crash as `invalid`, blaming
  // the metric regex.
  const TrialResult r = Run(std::string(TUNEPAR_FAKE_TRAINER) + " --crash | tee " + (dir_ / "copy.log"));
  EXPECT_EQ(r.status, TrialStatus::kCrash) << r.message;
  EXPECT_EQ(r.message, "exit code 3: Segmentation fault in the fake trainer");
  // A program that exits 0 and prints no metric: then it is the metric that is missing.
  const TrialResult quiet = Run(std::string(TUNEPAR_FAKE_TRAINER) + " --quiet | cat");
  EXPECT_EQ(quiet.status, TrialStatus::kInvalid);
  EXPECT_NE(quiet.message.find("exited 0, but its output has no match for --metric-regex"), std::string::npos)
      << quiet.message;
}

TEST_F(LauncherOutput, PyTorchsCpuAllocatorRunsOutOfMemory) {
  const TrialResult r = Run(Printing(
      "RuntimeError: [enforce fail at alloc_cpu.cpp:83] data. DefaultCPUAllocator: can't allocate memory: you tried "
      "to allocate 4294967296 bytes. Error code 12 (Cannot allocate memory)\n",
      1));
  EXPECT_EQ(r.status, TrialStatus::kOom) << r.message;
  EXPECT_NE(r.message.find("DefaultCPUAllocator: can't allocate memory"), std::string::npos);
}

TEST_F(LauncherOutput, ExitZeroWithTheMetricIsMeasuredWhateverElseItSaid) {
  const TrialResult r =
      Run(Printing("warning: rank 3 ran out of memory, continuing with a smaller bucket\nstep_time: 1,250.5\n", 0));
  ASSERT_EQ(r.status, TrialStatus::kOk) << r.message;
  EXPECT_NEAR(*r.objective, 1250.5, 1e-9);  // the comma groups thousands
  EXPECT_NE(r.details_json.find("oom_note"), std::string::npos) << r.details_json;
  // A non-zero exit after the same warning is out of memory.
  EXPECT_EQ(Run(Printing("ran out of memory\nstep_time: 1.5\n", 1)).status, TrialStatus::kOom);
}

TEST_F(LauncherOutput, TokensPerSecondPerGpu) {
  CommandBackendOptions o;
  o.command = "echo 'step: 10  loss: 3.2  tps: 1,024  mfu: 1%'";
  o.metric = MetricKind::kTokensPerSPerGpu;
  o.metric_regex = "tps: ([0-9,.]+)";
  ASSERT_TRUE(ValidateCommandOptions(o).ok());
  const TrialResult r = CommandBackend(o).Evaluate(Layout(1, 1), Context(dir_.path(), &model_));
  ASSERT_EQ(r.status, TrialStatus::kOk) << r.message;
  EXPECT_NEAR(*r.metrics.tokens_per_s, 1024.0 * 4, 1e-6);  // world 4
}

// --reclassify's reading: a stored failure's log, classified again with the current patterns.
TEST_F(LauncherOutput, ReclassifyReadsALogAgainWithTheCurrentPatterns) {
  const std::string log = dir_ / "old.log";
  std::ofstream(log) << "MyAllocator: arena exhausted\n";
  CommandBackendOptions o;
  o.command = "train";
  o.metric_regex = "step_time: ([0-9.]+)";
  const TrialContext context = Context(dir_.path(), &model_);
  const ExitInfo exit = *ParseExitText("code 1");
  EXPECT_EQ(CommandBackend(o).Reclassify(log, exit, context)->status, TrialStatus::kCrash);
  o.oom_patterns.push_back("arena exhausted");
  const std::optional<TrialResult> again = CommandBackend(o).Reclassify(log, exit, context);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status, TrialStatus::kOom);
  EXPECT_EQ(again->message, "out of memory: MyAllocator: arena exhausted");
  EXPECT_FALSE(CommandBackend(o).Reclassify(dir_ / "missing.log", exit, context).has_value());
  EXPECT_TRUE(ParseExitText("signal 9")->signaled);
  EXPECT_FALSE(ParseExitText("exit 1").has_value());
}

TEST(CommandTemplate, NotEqualConditionLocalBatchAndDeepSpeedConfig) {
  ModelShape m = testing::PresetModel("gpt-22b");
  tunepar::Layout l = Layout(2, 4);
  l.pp = 4;
  l.virtual_stages = 3;
  TrialContext c = Context("/tmp/t", &m);
  EXPECT_EQ(ExpandCommand("{vpp!=1?--vp {layers_per_virtual_stage}} --lb {local_batch} --ds {deepspeed_config}", l, c)
                .value(),
            "--vp 4 --lb 16 --ds /tmp/t/deepspeed_config.json");
  l.virtual_stages = 1;
  EXPECT_EQ(ExpandCommand("{vpp!=1?--vp}x", l, c).value(), "x");
}

}  // namespace
}  // namespace tunepar::runner
