// `tunepar configs`: the built-in model, hardware and space presets, one line each.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/knobs.h"

#include "base/presets.h"
#include "runner/hardware_profile.h"
#include "base/model_shape.h"
#include "base/space_spec.h"
#include "tuner/cli/commands.h"
#include "tuner/output/text_table.h"

namespace tunepar {

namespace {

// "tp divisors pp divisors mbs 1,2,4,8 prec bf16 ...": each knob's column and its candidates.
std::string SpaceSummary(const SpaceSpec& space) {
  std::vector<std::string> parts;
  for (Knob k : Knobs()) {
    const KnobCandidates& c = space.Of(k);
    std::vector<std::string> values;
    for (int code : c.codes) values.push_back(KnobValueText(k, code));
    const std::string text = c.divisors_of_world     ? std::string("divisors")
                             : c.divisors_of_experts ? std::string("experts' divisors")
                             : c.sequence_splits     ? std::string("sequence splits")
                                                     : fmt::format("{}", fmt::join(values, ","));
    parts.push_back(fmt::format("{} {}", RowOf(k).column, text));
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

Status RunConfigs(const GlobalOptions& global) {
  nlohmann::json out = nlohmann::json::array();
  TextTable models, hardware, spaces;
  for (auto* t : {&models, &hardware, &spaces}) {
    t->AddColumn("name", TextTable::Align::kLeft);
    t->AddColumn("summary", TextTable::Align::kLeft);
    t->AddColumn("description", TextTable::Align::kLeft);
  }
  for (const EmbeddedPreset& p : EmbeddedPresets()) {
    const std::string origin = fmt::format("preset {}", p.name);
    std::string summary, description;
    if (p.kind == "models") {
      Result<ModelShape> m = ParseModelShape(p.text, origin);
      if (!m.ok()) return m.status();
      summary = fmt::format("{} params: L {} h {} a {} s {} {} batch {}", HumanCount(m->Parameters()),
                            m->layers, m->hidden, m->heads, m->seq_len, m->VocabularyText(), m->global_batch);
      description = m->description;
      models.AddRow({m->name, summary, description});
    } else if (p.kind == "hardware") {
      Result<runner::HardwareProfile> h = runner::ParseHardwareProfile(p.text, origin);
      if (!h.ok()) return h.status();
      summary = fmt::format("{} x {}: {:g} TF bf16, {:g} GB; {:g} x {:g} GB/s NICs", h->gpus_per_node,
                            h->device_name, h->peak_tflops_bf16.value, h->memory_gb.value,
                            h->nics_per_node.value, h->nic_bandwidth_gbs.value);
      description = h->description;
      hardware.AddRow({h->name, summary, description});
    } else {
      Result<SpaceSpec> s = ParseSpaceSpec(p.text, origin);
      if (!s.ok()) return s.status();
      summary = SpaceSummary(*s);
      description = s->description;
      spaces.AddRow({s->name, summary, description});
    }
    out.push_back({{"kind", p.kind},
                   {"name", p.name},
                   {"path", p.path},
                   {"summary", summary},
                   {"description", description}});
  }
  if (global.json) {
    fmt::print("{}\n", out.dump(2));
    return Status::Ok();
  }
  fmt::print("Models (--model NAME or a .toml path)\n{}\n", models.Render());
  fmt::print("Hardware (--hardware NAME or a .toml path)\n{}\n", hardware.Render());
  fmt::print("Search spaces (--space NAME or a .toml path)\n{}", spaces.Render());
  return Status::Ok();
}

}  // namespace

void AddConfigsCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  CLI::App* cmd = app.add_subcommand("configs", "List the built-in model, hardware and space presets");
  cmd->callback([&global, result] { *result = RunConfigs(global); });
}

}  // namespace tunepar
