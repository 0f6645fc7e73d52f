// The `command` backend: tunes any training program. The user gives a command template whose
// placeholders take the layout's values, how to read the metric from the program's output,
// what output means out-of-memory, and a timeout. Each trial runs in its own process group
// (ProcessGroup), its output captured to a per-trial log; the outcome is classified:
//   interrupted (stopped by tunepar) > timeout > ok (exit 0 and the metric read; an OOM pattern
//   in the output is then only noted) > oom (an OOM pattern in the output) > crash (non-zero
//   exit or a signal, told by the program's own error line: ErrorLine) > invalid (exit 0 and
//   no metric).
// The peak memory is read when asked for (--memory-regex, --memory-json); an OOM message of
// PyTorch (CUDA or HIP) gives a lower bound of it: what was in use plus what it tried to allocate.
//
// The template and its placeholders: command_template.h.
//
// The template runs under bash with pipefail (/bin/sh without bash): a pipe in it (`| tee`)
// does not hide the program's exit code.
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "runner/backend.h"
#include "runner/command_template.h"
#include "runner/process_group.h"

namespace tunepar::runner {

enum class MetricKind {
  kStepTimeS,     // seconds per optimizer step (lower is better)
  kStepTimeMs,    // milliseconds per step, e.g. Megatron's "elapsed time per iteration (ms)"
  kTokensPerS,    // higher is better
  kTokensPerSPerGpu,  // tokens per second of one GPU, as torchtitan logs it ("tps"); higher is better
  kSamplesPerS,   // sequences per second, higher is better
  kTflopsPerGpu,  // as the program counts them, higher is better (converted with model FLOPs)
  kHigher,        // any other metric where higher is better
  kLower,         // any other metric where lower is better
};
Result<MetricKind> ParseMetricKind(std::string_view text);
std::string_view ToString(MetricKind kind);

// The values of one shape field a command config's program can train ([shape]): texts as the
// field's placeholder gives them ("rotary"; 1/0 for a switch).
struct ShapeValues {
  std::string field;
  std::vector<std::string> values;
};

struct CommandBackendOptions {
  std::string command;  // the template, run by bash -o pipefail
  // Where the template comes from, for messages: "command config megatron-lm.toml", or "--command".
  std::string source = "--command";
  // The shape values its program trains (a command config's [shape]); a field not listed: any.
  std::vector<ShapeValues> shape;
  MetricKind metric = MetricKind::kStepTimeS;
  std::string metric_regex;  // its first capture group, in the last matching line
  std::string metric_json;   // or: this key in the last JSON-object line that has it
  // The peak device memory, when the program prints it: the first capture group of this regex,
  // a size ("40.2 GiB", "4.3e10"), or the number under this key in JSON lines (bytes); the
  // largest of all matches (every rank may print its own). Neither: not measured.
  std::string memory_regex;
  std::string memory_json;
  // Case-insensitive regexes; "can't allocate memory" is PyTorch's CPU allocator
  // ("DefaultCPUAllocator: can't allocate memory: you tried to allocate ...").
  std::vector<std::string> oom_patterns = {"out of memory", "OutOfMemoryError", "hipErrorOutOfMemory",
                                           "cudaErrorMemoryAllocation", "RESOURCE_EXHAUSTED",
                                           "can't allocate memory"};
  double timeout_s = 3600;                                         // per trial
  double stop_grace_s = 10;  // SIGTERM before SIGKILL when stopping a trial
  std::vector<std::pair<std::string, std::string>> env;
  std::string workdir;
  // The program reads the layout from $TUNEPAR_LAYOUT (set for every trial): it receives every
  // knob, whatever the template passes. Without it, only the template counts.
  bool reads_layout_env = false;
};

// Checks the template's placeholders, the regexes, and that exactly one way to read the metric
// (and at most one to read the peak memory) is given; one line naming what is wrong.
Status ValidateCommandOptions(const CommandBackendOptions& options);

// Ok when the program the options run can train `model`: its shape is among the [shape] values,
// and the template passes every field the model does not leave at the value a model file gets
// by leaving the field out (kv_heads = heads, mlp gelu, positions learned, norm layernorm, tied
// embeddings, linear biases, no patch tokens; the required fields and the vocabulary, which a
// program takes from its tokenizer, are not checked). A template that passes {model} hands the
// program the model by name, and one that passes {torchtitan_flavor} or {torchtitan_model} the
// whole shape, which then must be a torchtitan flavour. Else kConfig (exit 3), naming the field:
// "command config megatron-deepspeed.toml does not pass {kv_heads}: ...".
Status CheckTrainsModel(const CommandBackendOptions& options, const ModelShape& model);

// The DeepSpeed config of a layout (JSON): train_batch_size (the global batch),
// train_micro_batch_size_per_gpu, gradient_accumulation_steps (the micro-batch count),
// zero_optimization.stage, bf16/fp16 enabled (fp16 with dynamic loss scaling), and for ZeRO 3
// with hybrid sharding (dp_replicate > 1) zero_optimization.mics_shard_size = dp / dp_replicate.
std::string DeepSpeedConfig(const Layout& layout);
// A trial's stored exit ("code 1", "signal 9": ExitText) read back; nullopt when it is not one.
std::optional<ExitInfo> ParseExitText(const std::string& text);

class CommandBackend : public Backend {
 public:
  // Call ValidateCommandOptions first.
  explicit CommandBackend(CommandBackendOptions options);

  std::string_view Name() const override { return "command"; }
  std::unique_ptr<RunningTrial> Start(const Layout& layout, const TrialContext& context) override;
  // What the program receives, found by rendering the template for each value of each knob
  // (the per-trial placeholders {trial}, {trial_dir} and {seed} held fixed): a knob whose every
  // value renders the same command is not received, and is fixed at the space's only value or
  // at the value a program runs with untold (1, off, none, ZeRO 0); values that render the same
  // are one (the first the space lists). kInvalidArgument when a knob that is not received has
  // no such value in the space (micro_batch, precision: declare it with --fix or [knobs]).
  Result<KnobSupport> SupportedKnobs(const SpaceSpec& space, int world) const override;
  // CheckTrainsModel.
  Status SupportsModel(const ModelShape& model) const override { return CheckTrainsModel(options_, model); }

  const CommandBackendOptions& options() const { return options_; }

  // A trial that has ended, classified again from its log (`log_path`) with these options (the
  // OOM patterns, the metric) as it would be now: for re-reading stored failures after the
  // patterns changed. nullopt when the log cannot be read or `context` has no model.
  std::optional<TrialResult> Reclassify(const std::string& log_path, const ExitInfo& exit,
                                        const TrialContext& context) const;

 private:
  // What the program receives for `knobs` at `world`: the command (and $TUNEPAR_LAYOUT when it
  // reads it), the per-trial placeholders held fixed, dp and the micro-batch count derived.
  std::string Rendering(const Layout& knobs, int world) const;

  CommandBackendOptions options_;
  std::vector<std::regex> oom_;
  std::regex metric_;
  std::regex memory_;
};

// The value that the search minimises for a metric reading: a step time for the kinds that
// convert to one (seconds), 1 / value for other higher-is-better metrics, the value for
// lower-is-better ones.
double ObjectiveValue(MetricKind kind, double value, const ModelShape& model, int world);

// From an out-of-memory message like PyTorch's ("Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB
// total capacity; 75.80 GiB already allocated; ...)", "... this process has 79.13 GiB memory in
// use ...", or only "Of the allocated memory 75.10 GiB is allocated by PyTorch, and 2.12 GiB is
// reserved by PyTorch but unallocated"): what was in use (allocated plus reserved, in the short
// form) plus what it tried to allocate when it says, in bytes; nullopt when the line says
// nothing of what was in use.
std::optional<double> OomLowerBound(const std::string& line);

}  // namespace tunepar::runner
