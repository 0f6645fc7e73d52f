// The command backend: templates, metric reading, outcome classification, process cleanup.
#include "runner/command_backend.h"

#include <signal.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

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

// A space with every knob open (sizes as divisors of the world).
SpaceSpec OpenSpace() {
  SpaceSpec space;
  space.precision = {Precision::kBf16, Precision::kFp16, Precision::kFp32};
  space.zero = {0, 1};
  space.recompute = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  space.seq_parallel = {false, true};
  space.virtual_stages = {1, 2};
  space.flash_attention = {false, true};
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
  EXPECT_EQ(PinnedKnobs(*support), "zero0 rcnone rcfull sp0 vpp1 fa0");
  EXPECT_EQ(UnreceivedKnobs(*support), "zero 0, seq_parallel off, virtual_stages 1, flash_attention off");
}

TEST(CommandKnobs, DerivedAndConditionalPlaceholdersCarryTheirKnobs) {
  // dp carries tp and pp; the micro-batch count carries the micro-batch size; a switch's text
  // carries the switch; layers per virtual stage carries the interleaving.
  Result<KnobSupport> support = Backend(
      "train --dp {dp} --nmb {nmb} {sp?--sequence-parallel} {flash_attention?--flash} --zero {zero} "
      "--layers-per-chunk {layers_per_virtual_stage} --{precision} --recompute {recompute}")
                                    .SupportedKnobs(OpenSpace(), 8);
  ASSERT_TRUE(support.ok()) << support.status().message();
  EXPECT_EQ(PinnedKnobs(*support), "");
}

TEST(CommandKnobs, TheLayoutVariableCountsOnlyWhenTheProgramReadsIt) {
  EXPECT_EQ(PinnedKnobs(Backend("train {tp} {pp} {mbs} {precision}").SupportedKnobs(OpenSpace(), 8).value()),
            "zero0 rcnone sp0 vpp1 fa0");
  EXPECT_EQ(PinnedKnobs(Backend("train", true).SupportedKnobs(OpenSpace(), 8).value()), "");
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
  space.micro_batch = {2};  // declared: the program runs with 2
  support = backend.SupportedKnobs(space, 8);
  ASSERT_TRUE(support.ok()) << support.status().message();
  EXPECT_EQ(support->Of(Knob::kMicroBatch), std::vector<int>{2});
  // A neutral value the space does not allow: say which the program runs with.
  space.zero = {1};
  EXPECT_EQ(backend.SupportedKnobs(space, 8).value().Of(Knob::kZero), std::vector<int>{1});
  space.virtual_stages = {2, 4};
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
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const pid_t pgid = (*group)->process_group();
  EXPECT_EQ(KillLeftovers(pgid, "another-marker"), 0);
  EXPECT_TRUE(HasLeftovers(pgid, "marker-a"));
  EXPECT_GE(KillLeftovers(pgid, "marker-a"), 3);  // the supervisor, the shell, the two sleeps
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::optional<ExitInfo> exit = (*group)->Poll();
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
