// `tunepar space`: how many layouts are legal for a world size, and what each constraint excluded.
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "search/encoding.h"
#include "search/space.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/problem_options.h"
#include "tuner/output/text_table.h"
#include "tuner/study/problem.h"

namespace tunepar {

namespace {

struct SpaceOptions {
  ProblemOptions problem;
  bool list = false;
};

std::string DimensionName(const search::EncodedDimension& d) {
  using Kind = search::EncodedDimension::Kind;
  switch (d.kind) {
    case Kind::kLog2: return d.knob + "(log2)";
    case Kind::kOrdinal: return d.knob + "(ordinal)";
    case Kind::kBinary: return d.knob + "(0/1)";
    case Kind::kOneHot: return d.knob + "=" + d.value;
  }
  return d.knob;
}

Status RunSpace(const GlobalOptions& global, const SpaceOptions& o) {
  Result<Problem> problem = o.problem.Load();
  if (!problem.ok()) return problem.status();
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(o.problem.world, problem->hardware));
  TUNEPAR_RETURN_IF_ERROR(CheckHardwareRunsPrecisions(*problem, static_cast<int>(o.problem.world)));
  const search::SpaceQuery query = MakeSpaceQuery(*problem, static_cast<int>(o.problem.world));
  const auto start = std::chrono::steady_clock::now();
  Result<search::SpaceEnumeration> e = search::EnumerateSpace(query);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!e.ok()) return e.status();
  // Nothing on stdout when nothing is legal: the error line names the constraint that excluded
  // the last candidates, and a script reading the table would take it for an answer.
  if (e->legal.empty()) return {StatusCode::kNoLegalLayout, search::ExplainEmpty(query, *e)};
  const search::LayoutEncoder encoder = search::LayoutEncoder::Fit(e->legal);

  if (global.json) {
    nlohmann::json j = {
        {"world", query.world},         {"model", problem->model.name}, {"hardware", problem->hardware.name},
        {"space", problem->space.name}, {"candidates", e->candidates},  {"legal", e->legal.size()},
        {"enumeration_ms", ms}};
    nlohmann::json excluded = nlohmann::json::array();
    for (int c = 0; c < search::kNumConstraints; ++c) {
      auto constraint = static_cast<search::Constraint>(c);
      excluded.push_back({{"constraint", search::ConstraintId(constraint)},
                          {"rule", search::ConstraintRule(constraint)},
                          {"excluded", e->excluded[c]}});
    }
    j["excluded"] = excluded;
    nlohmann::json dims = nlohmann::json::array();
    for (const auto& d : encoder.Dimensions()) dims.push_back(DimensionName(d));
    j["encoded_dimensions"] = dims;
    if (o.list) {
      nlohmann::json keys = nlohmann::json::array();
      for (const Layout& l : e->legal) keys.push_back(LayoutKey(l));
      j["layouts"] = keys;
    }
    fmt::print("{}\n", j.dump(2));
  } else if (o.list) {
    for (const Layout& l : e->legal) fmt::print("{}\n", LayoutKey(l));
  } else {
    const int nodes = (query.world + query.gpus_per_node - 1) / query.gpus_per_node;
    fmt::print("Space '{}' for model {} on {}, world {} ({} node{} x {} GPUs)\n", problem->space.name,
               problem->model.name, problem->hardware.name, query.world, nodes, nodes == 1 ? "" : "s",
               std::min(query.world, query.gpus_per_node));
    fmt::print("candidates {}  legal {}  (enumerated in {:.1f} ms)\n\n", WithCommas(e->candidates),
               WithCommas(static_cast<int64_t>(e->legal.size())), ms);
    TextTable t;
    t.AddColumn("constraint (checked in this order)", TextTable::Align::kLeft);
    t.AddColumn("rule", TextTable::Align::kLeft);
    t.AddColumn("excluded");
    for (int c = 0; c < search::kNumConstraints; ++c) {
      auto constraint = static_cast<search::Constraint>(c);
      t.AddRow({std::string(search::ConstraintId(constraint)), search::ConstraintRule(constraint),
                WithCommas(e->excluded[c])});
    }
    fmt::print("{}", t.Render());
    std::vector<std::string> dims;
    for (const auto& d : encoder.Dimensions()) dims.push_back(DimensionName(d));
    fmt::print("\nGP encoding: {} dimensions: {}\n", dims.size(), fmt::join(dims, " "));
    fmt::print(
        "(each candidate is counted against the first constraint it fails; --list prints the legal "
        "layouts)\n");
  }
  return Status::Ok();
}

}  // namespace

void AddSpaceCommand(CLI::App& app, const GlobalOptions& global, Status* result) {
  auto options = std::make_shared<SpaceOptions>();
  CLI::App* cmd = app.add_subcommand("space", "Count (or list) the legal layouts for a world size");
  options->problem.AddTo(cmd);
  cmd->add_flag("--list", options->list, "Print every legal layout key, one per line");
  cmd->callback([&global, result, options] { *result = RunSpace(global, *options); });
}

}  // namespace tunepar
