// A command template: the text a user gives the `command` backend (and launch-script), whose
// placeholders take a layout's values.
//
// Placeholders: every knob of the table by its name and each alias (base/knobs.h; `tunepar knobs`
// lists them: {tp} {mbs} {micro_batch} {precision} {recompute} ...; switches give 1 or 0, choices
// their name); {dp} {gbs} {global_batch} {num_micro_batches} {nmb} {world} {nodes}
// {gpus_per_node} {layout} {trial} {trial_dir} {seed}
// {model}, every field of the model's shape table (base/model_shape.h: {layers} {hidden} {heads}
// {seq_len} {vocab} {ffn_hidden} {kv_heads} {mlp} {positions} {norm} ...; choices by name:
// {mlp=swiglu?--swiglu}), {layers_per_virtual_stage};
// {shared_expert_ffn_hidden}: a MoE model's shared experts' width together (shared_experts x f_e);
// {first_stage_layers} {last_stage_layers}: the layers of the first and last pipeline stage
// (base/pipeline_split.h SplitLayers: with {uneven_stages} on, Megatron-LM's first/last-stage rule);
// {torchtitan_model} {torchtitan_flavor}: torchtitan's names of the model's shape ("llama3", "8B";
// runner/torchtitan_models.h), for a program that takes a model by name and no dimensions;
// {local_batch} (sequences per data-parallel rank per step: micro_batch x num_micro_batches);
// {deepspeed_config}: the path of a DeepSpeed config written into the trial's directory from the
// layout before the command runs (DeepSpeedConfig), so that its batch sizes, ZeRO stage and
// precision always agree with the flags;
// {NAME?TEXT}, which is TEXT when NAME is on (not 0 or none), e.g. {zero?--use-distributed-optimizer};
// {NAME=VALUE?TEXT}, TEXT when NAME is VALUE, e.g. {recompute=full?--recompute-granularity full};
// and {NAME!=VALUE?TEXT}, TEXT when NAME is not VALUE, e.g. {recompute!=none?--recompute-activations}.
// {{ and }} are literal braces; shell expansions like ${VAR} are left alone.
//
// Values are quoted for where they stand in the shell text, so that no value (a store path with
// a space or a quote, a model name with `$(...)`) is ever read by the shell as anything but one
// word: a bare placeholder is quoted as a word (ShellQuote: a safe word such as 4, bf16 or
// /tmp/a-1 stays as it is); inside "..." the value is escaped for double quotes (\ " $ `); a
// placeholder inside '...' is refused (nothing can be quoted there). Conditional TEXT stays the
// words it is, each value in it quoted where it stands.
#pragma once

#include <set>
#include <string>

#include "base/layout.h"
#include "base/status.h"
#include "runner/backend.h"

namespace tunepar::runner {

// The template with the layout's values substituted, quoted for the shell; kInvalidArgument
// for an unknown placeholder, an unclosed brace or a placeholder inside single quotes.
Result<std::string> ExpandCommand(const std::string& command, const Layout& layout, const TrialContext& context);

// The names of the placeholders the template holds ("tp", "mlp", ...), conditional ones and those
// inside conditional text included: what the template passes to its program.
Result<std::set<std::string>> TemplatePlaceholders(const std::string& command);

// Where a trial's DeepSpeed config is written: "<trial_dir>/deepspeed_config.json".
std::string DeepSpeedConfigPath(const std::string& trial_dir);

}  // namespace tunepar::runner
