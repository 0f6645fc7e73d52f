#include "runner/command_template.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/knobs.h"
#include "base/pipeline_split.h"
#include "runner/launch_environment.h"
#include "runner/torchtitan_models.h"

namespace tunepar::runner {

namespace {

// The placeholder values of a layout, by name; booleans as "1"/"0".
std::map<std::string, std::string> Texts(const Layout& l, const TrialContext& c) {
  const int gpn = std::max(1, c.gpus_per_node);
  const int world = c.world > 0 ? c.world : l.World();
  const std::string gbs = std::to_string(l.GlobalBatch());
  std::map<std::string, std::string> texts = {
      {"dp", std::to_string(l.dp)},
      {"dp_shard", std::to_string(l.ShardGroup())},
      {"gbs", gbs},
      {"global_batch", gbs},
      {"num_micro_batches", std::to_string(l.num_micro_batches)},
      {"local_batch", std::to_string(l.GlobalBatch() / std::max(1, l.dp))},
      {"nmb", std::to_string(l.num_micro_batches)},
      {"world", std::to_string(world)},
      {"nodes", std::to_string((world + gpn - 1) / gpn)},
      {"gpus_per_node", std::to_string(std::min(gpn, world))},
      {"layout", LayoutKey(l)},
      {"trial", std::to_string(c.number)},
      {"trial_dir", c.trial_dir},
      {"deepspeed_config", DeepSpeedConfigPath(c.trial_dir)},
      {"seed", std::to_string(c.seed)},
      {"model", c.model != nullptr ? c.model->name : ""},
      {"layers_per_virtual_stage",
       c.model != nullptr ? std::to_string(c.model->layers / std::max(1, l.ModelChunks())) : "0"}};
  // The layers of the first and last pipeline stage, by the one rule (base/pipeline_split.h): the
  // even split's, or with uneven_stages the first/last-stage rule's; "0" without a model or a split.
  const StageSplit split = c.model != nullptr ? SplitLayers(*c.model, l.pp, l.uneven_stages) : StageSplit{};
  texts["first_stage_layers"] = split.layers.empty() ? "0" : std::to_string(split.First());
  texts["last_stage_layers"] = split.layers.empty() ? "0" : std::to_string(split.Last());
  // The shared experts' MLP width all together (Megatron-LM's --moe-shared-expert-intermediate-size:
  // shared_experts x f_e); "0" without them.
  texts["shared_expert_ffn_hidden"] =
      c.model != nullptr ? std::to_string(static_cast<int64_t>(c.model->shared_experts) * c.model->ExpertMlpWidth())
                         : "0";
  // Every field of the model's shape table ({global_batch} is the layout's, above).
  for (const ShapeRow& row : ShapeRows())
    texts.emplace(std::string(row.name), c.model != nullptr ? ShapeFieldText(row, *c.model) : "0");
  // torchtitan's names of the shape; empty when it has none (a study of such a model is refused
  // before a trial runs: CheckTrainsModel).
  const std::optional<TorchtitanModel> titan = c.model != nullptr ? TorchtitanModelOf(*c.model) : std::nullopt;
  texts["torchtitan_model"] = titan ? titan->name : "";
  texts["torchtitan_flavor"] = titan ? titan->flavor : "";
  // Every knob of the table, by its name and each alias.
  for (Knob k : Knobs()) {
    const std::string text = KnobPlaceholderText(k, KnobCode(k, l));
    texts[std::string(KnobName(k))] = text;
    for (std::string_view alias : RowOf(k).aliases) texts[std::string(alias)] = text;
  }
  return texts;
}

std::string KnownNames() {
  std::vector<std::string> names;
  for (const auto& [name, value] : Texts(Layout{}, TrialContext{}))
    names.push_back("{" + name + "}");
  return fmt::format("{}", fmt::join(names, " "));
}


// Where the shell stands in the template's text: outside quotes, inside "...", inside '...'.
enum class Quoting { kBare, kDouble, kSingle };

// A placeholder's value and whether it is a shell expression for the shell to expand ("$job_dir"
// in a launch script) rather than text to pass as it is.
struct Value {
  std::string text;
  bool expression = false;
};

std::map<std::string, Value> Values(const Layout& layout, const TrialContext& context) {
  std::map<std::string, Value> values;
  for (auto& [name, text] : Texts(layout, context)) values[name] = {std::move(text), false};
  if (context.trial_dir_is_expression) {
    values["trial_dir"].expression = true;
    values["deepspeed_config"].expression = true;
  }
  return values;
}

// `text` inside "...": the characters that keep their meaning there escaped.
std::string InDoubleQuotes(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"' || c == '$' || c == '`') out += '\\';
    out += c;
  }
  return out;
}

Result<std::string> Quoted(const std::string& name, const Value& value, Quoting quoting) {
  switch (quoting) {
    case Quoting::kBare: return value.expression ? "\"" + value.text + "\"" : ShellQuote(value.text);
    case Quoting::kDouble: return value.expression ? value.text : InDoubleQuotes(value.text);
    case Quoting::kSingle: break;
  }
  return InvalidArgument(fmt::format(
      "command template: {{{}}} stands inside '...', where the shell takes every character as it is, so its value "
      "cannot be quoted: close the single quotes before it, or use \"...\"",
      name));
}

// The quoting after `c` (a character of the template's own text) when the shell stood at `quoting`;
// `escaped` is set when `c` is a backslash that escapes the next character.
Quoting After(char c, Quoting quoting, bool* escaped) {
  *escaped = c == '\\' && quoting != Quoting::kSingle;
  if (c == '\'' && quoting != Quoting::kDouble) return quoting == Quoting::kSingle ? Quoting::kBare : Quoting::kSingle;
  if (c == '"' && quoting != Quoting::kSingle) return quoting == Quoting::kDouble ? Quoting::kBare : Quoting::kDouble;
  return quoting;
}

// The index of the '}' that closes the '{' at `open` (conditional text may hold placeholders of
// its own), or npos.
size_t MatchingBrace(std::string_view text, size_t open) {
  for (size_t j = open + 1, depth = 1; j < text.size(); ++j) {
    if (text[j] == '{') ++depth;
    if (text[j] == '}' && --depth == 0) return j;
  }
  return std::string_view::npos;
}

class Expansion {
 public:
  // `names` (when given) receives the name of every placeholder the text holds, conditional ones
  // and those inside conditional text included.
  Expansion(const Layout& layout, const TrialContext& context, std::set<std::string>* names = nullptr)
      : values_(Values(layout, context)), names_(names) {}

  // `text` expanded from where the shell stands (`quoting`, updated to where it stands after).
  Result<std::string> Expand(std::string_view text, Quoting& quoting) const {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {  // {{ and }}
        out += c;
        ++i;
        continue;
      }
      if (c != '{') {
        bool escaped = false;
        quoting = After(c, quoting, &escaped);
        out += c;
        if (escaped && i + 1 < text.size()) out += text[++i];
        continue;
      }
      const size_t close = MatchingBrace(text, i);
      if (i > 0 && text[i - 1] == '$') {  // a shell expansion ${VAR}: not ours
        if (close == std::string_view::npos) return InvalidArgument("command template: unclosed '${'");
        out += text.substr(i, close - i + 1);
        i = close;
        continue;
      }
      if (close == std::string_view::npos)
        return InvalidArgument(fmt::format("command template: unclosed '{{' at position {}", i));
      Result<std::string> placeholder = Placeholder(text.substr(i + 1, close - i - 1), quoting);
      if (!placeholder.ok()) return placeholder.status();
      out += *placeholder;
      i = close;
    }
    return out;
  }

 private:
  // {NAME}, {NAME?TEXT} (TEXT when NAME is on), {NAME=VALUE?TEXT} (TEXT when NAME is VALUE),
  // {NAME!=VALUE?TEXT} (TEXT when NAME is not VALUE).
  Result<std::string> Placeholder(std::string_view inside, Quoting quoting) const {
    const size_t question = inside.find('?');
    const std::string head(inside.substr(0, question));
    const size_t equals = head.find('=');
    const bool negated = equals != std::string::npos && equals > 0 && head[equals - 1] == '!';
    const std::string name = head.substr(0, negated ? equals - 1 : equals);
    auto it = values_.find(name);
    if (it == values_.end()) {
      return InvalidArgument(fmt::format(
          "command template: unknown placeholder {{{}}} (known: {}, and {{NAME?TEXT}}, {{NAME=VALUE?TEXT}}, "
          "{{NAME!=VALUE?TEXT}})",
          name, KnownNames()));
    }
    if (names_ != nullptr) names_->insert(name);
    if (equals != std::string::npos && question == std::string::npos)
      return InvalidArgument(fmt::format("command template: {{{}}} needs ?TEXT after the value", inside));
    if (question == std::string::npos) return Quoted(name, it->second, quoting);
    const std::string& value = it->second.text;
    const bool on = equals != std::string::npos ? (value == head.substr(equals + 1)) != negated
                                                : value != "0" && value != "none" && !value.empty();
    Quoting inner = quoting;
    Result<std::string> text = Expand(inside.substr(question + 1), inner);
    if (!text.ok()) return text.status();
    if (inner != quoting)
      return InvalidArgument(fmt::format("command template: the quotes in {{{}}} must close within it", inside));
    return on ? *text : std::string();
  }

  std::map<std::string, Value> values_;
  std::set<std::string>* names_;
};

}  // namespace

Result<std::string> ExpandCommand(const std::string& command, const Layout& layout, const TrialContext& context) {
  Quoting quoting = Quoting::kBare;
  return Expansion(layout, context).Expand(command, quoting);
}

Result<std::set<std::string>> TemplatePlaceholders(const std::string& command) {
  std::set<std::string> names;
  Quoting quoting = Quoting::kBare;
  Result<std::string> expanded = Expansion(Layout{}, TrialContext{}, &names).Expand(command, quoting);
  if (!expanded.ok()) return expanded.status();
  return names;
}

std::string DeepSpeedConfigPath(const std::string& trial_dir) {
  return trial_dir.empty() ? "deepspeed_config.json" : trial_dir + "/deepspeed_config.json";
}

}  // namespace tunepar::runner
