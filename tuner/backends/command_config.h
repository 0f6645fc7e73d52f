// The command backend's settings, from a TOML file (--command-config) and/or flags (which win):
//
//   command = "python train.py --tp {tp} --pp {pp} --micro-batch {mbs} {flash?--use-flash-attn}"
//   metric = "step_time_ms"                      # step_time_s|step_time_ms|tokens_per_s|
//                                                # tokens_per_s_per_gpu|samples_per_s|tflops_per_gpu|
//                                                # higher|lower
//   metric_regex = "elapsed time per iteration \\(ms\\): ([0-9.]+)"   # or: metric_json = "step_time"
//   memory_regex = "max memory allocated: ([0-9.]+ ?GiB)"   # or: memory_json = "peak_bytes" (optional)
//   oom_patterns = ["out of memory"]             # replaces the defaults
//   timeout_s = 1800
//   workdir = "/path/to/run"
//   reads_layout_env = false                     # true: the program reads $TUNEPAR_LAYOUT, so
//                                                # it receives every knob
//   [knobs]                                      # the values the program supports (they replace
//   tp = [1]                                     # the space's; same keys and values as a space file)
//   precision = ["fp32", "bf16"]
//   [[rules]]                                    # a combination the program refuses (any number):
//   when = { zero = [2, 3] }                     # a layout with these values (every knob listed)
//   then = { pp = [1] }                          # must have these (every knob listed), else it is
//   why = "DeepSpeed's pipeline engine ..."      # illegal (constraint program_runs_combination,
//                                                # base/layout_rules.h); why: said when one is refused
//   [shape]                                      # the shape values the program can train (a model
//   positions = ["learned", "rotary", "none"]    # with another is refused at study start, exit 3;
//                                                # runner::CheckTrainsModel); a field not listed: any
//   [env]
//   NCCL_DEBUG = "WARN"
#pragma once

#include <string>
#include <vector>

#include "base/layout.h"
#include "base/status.h"
#include "runner/command_backend.h"

namespace tunepar {

struct CommandFlags {
  std::string config_file;
  std::string command;
  std::string metric;
  std::string metric_regex;
  std::string metric_json;
  std::string memory_regex;
  std::string memory_json;
  std::vector<std::string> oom_patterns;  // added to the file's (or the default) patterns
  std::vector<std::string> env;           // KEY=VALUE
  double timeout_s = 0;                   // 0: the file's, or the default
  std::string workdir;
  bool reads_layout_env = false;
  bool reclassify = false;  // --reclassify: read this node's failed trials again from their logs
};

// The options; `knobs` (when given) receives the config's [knobs] table as TOML lines, and its
// [[rules]] as one line (KnobRulesToml), for LoadProblem (KnobDeclarations).
Result<runner::CommandBackendOptions> ResolveCommandOptions(const CommandFlags& flags, std::string* knobs = nullptr);

// Ok when `layout` has, for every knob a config declares (`knobs`: its [knobs] table and
// [[rules]] as TOML lines), one of the declared values, and breaks none of its rules; else one
// line naming the knob, the layout's value and what `program` runs, or the rule and its why (a
// launch of a layout its program cannot run would fail, or run another layout).
Status CheckDeclaredKnobs(const Layout& layout, const std::string& knobs, const std::string& program);

}  // namespace tunepar
