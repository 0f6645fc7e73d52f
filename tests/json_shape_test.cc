// Every command's --json output against its schema (schemas/<command>.schema.json), on the
// model, command and local backends: one documented shape per command, whatever the backend.
// The validator covers the part of JSON Schema the schemas use: type, required, properties,
// additionalProperties, items, enum, anyOf and $ref (to another file in schemas/).
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"

namespace tunepar {
namespace {

using nlohmann::json;
using testing::RunTunepar;
using testing::TempDir;

const std::string kSchemas = std::string(TUNEPAR_SOURCE_DIR) + "/schemas/";

json LoadSchema(const std::string& file) {
  return json::parse(testing::ReadFile(kSchemas + file));
}

bool HasType(const json& value, const std::string& type) {
  if (type == "null") return value.is_null();
  if (type == "boolean") return value.is_boolean();
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "string") return value.is_string();
  if (type == "array") return value.is_array();
  if (type == "object") return value.is_object();
  ADD_FAILURE() << "unknown type in a schema: " << type;
  return false;
}

class Validator {
 public:
  // The places where `value` breaks `schema`, as "path: what" lines (empty: it conforms).
  std::vector<std::string> Check(const json& value, const json& schema) {
    errors_.clear();
    Validate(value, schema, "$");
    return errors_;
  }

 private:
  void Fail(const std::string& path, const std::string& what) { errors_.push_back(path + ": " + what); }

  bool CheckType(const json& value, const json& schema, const std::string& path) {
    if (!schema.contains("type")) return true;
    const json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    for (const json& t : types) {
      if (HasType(value, t.get<std::string>())) return true;
    }
    Fail(path, "is " + std::string(value.type_name()) + ", not " + types.dump());
    return false;
  }

  void CheckObject(const json& value, const json& schema, const std::string& path) {
    for (const json& key : schema.value("required", json::array())) {
      if (!value.contains(key.get<std::string>())) Fail(path, "lacks required key '" + key.get<std::string>() + "'");
    }
    const json properties = schema.value("properties", json::object());
    for (const auto& [key, item] : value.items()) {
      const std::string at = path + "." + key;
      if (properties.contains(key)) {
        Validate(item, properties[key], at);
      } else if (schema.contains("additionalProperties")) {
        const json& extra = schema["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>()) {
          Fail(at, "is not in the schema");
        } else if (extra.is_object()) {
          Validate(item, extra, at);
        }
      }
    }
  }

  void Validate(const json& value, const json& schema, const std::string& path) {
    if (schema.contains("$ref")) Validate(value, LoadSchema(schema["$ref"].get<std::string>()), path);
    if (schema.contains("anyOf")) {
      const std::vector<std::string> outer = errors_;
      bool any = false;
      for (const json& option : schema["anyOf"]) {
        errors_.clear();
        Validate(value, option, path);
        any = any || errors_.empty();
      }
      errors_ = outer;
      if (!any) Fail(path, "matches none of anyOf " + schema["anyOf"].dump());
    }
    if (!CheckType(value, schema, path)) return;
    if (schema.contains("enum") && std::find(schema["enum"].begin(), schema["enum"].end(), value) == schema["enum"].end())
      Fail(path, value.dump() + " is not one of " + schema["enum"].dump());
    if (value.is_object()) CheckObject(value, schema, path);
    if (value.is_array() && schema.contains("items")) {
      for (size_t i = 0; i < value.size(); ++i) Validate(value[i], schema["items"], path + "[" + std::to_string(i) + "]");
    }
  }

  std::vector<std::string> errors_;
};

// The output of `tunepar <args>` (which must succeed) conforms to schemas/<schema>.
void ExpectShape(const std::string& args, const std::string& schema) {
  const testing::CliRun run = RunTunepar(args);
  ASSERT_EQ(run.exit_code, 0) << args << "\n" << run.err;
  const json out = json::parse(run.out, nullptr, false);
  ASSERT_FALSE(out.is_discarded()) << args << ": not JSON:\n" << run.out;
  const std::vector<std::string> errors = Validator().Check(out, LoadSchema(schema));
  EXPECT_TRUE(errors.empty()) << args << " against " << schema << ":\n"
                              << ::testing::PrintToString(errors) << "\n"
                              << out.dump(2).substr(0, 4000);
}

// The readers of one study: the shape is the same whichever backend made it.
void ExpectReadersShape(const std::string& store) {
  ExpectShape("--json --store " + store + " list", "list.schema.json");
  ExpectShape("--json --store " + store + " show", "show.schema.json");
  ExpectShape("--json --store " + store + " show --all", "show.schema.json");
  ExpectShape("--json --store " + store + " export", "export.schema.json");
  ExpectShape("--json --store " + store + " report --shap", "report.schema.json");
  ExpectShape("--json --store " + store + " best", "best.schema.json");
}

TEST(JsonShape, TheValidatorRejectsWhatTheSchemasForbid) {
  const json schema = LoadSchema("search.schema.json");
  Validator v;
  EXPECT_FALSE(v.Check(json::object(), schema).empty());  // every required key missing
  const json list_schema = LoadSchema("list.schema.json");
  EXPECT_TRUE(v.Check(json::array(), list_schema).empty());
  EXPECT_FALSE(v.Check(json::object(), list_schema).empty());
  // A trial with a count where a list belongs, an unknown key, a status outside the enum.
  TempDir dir;
  const testing::CliRun run = RunTunepar("--json --store " + (dir / "s") + " search --world 8 --model tiny --hardware local-cpu");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json search = json::parse(run.out);
  ASSERT_TRUE(v.Check(search, schema).empty()) << ::testing::PrintToString(v.Check(search, schema));
  json broken = search;
  broken["best"] = broken["best"][0];  // one object where the list belongs
  EXPECT_FALSE(v.Check(broken, schema).empty());
  broken = search;
  broken["rows"] = json::array();
  EXPECT_FALSE(v.Check(broken, schema).empty());
  broken = search;
  broken["best"][0]["status"] = "fine";
  EXPECT_FALSE(v.Check(broken, schema).empty());
  broken = search;
  broken["best"][0]["step_time_s"] = "1.0";
  EXPECT_FALSE(v.Check(broken, schema).empty());
  broken = search;
  broken["model_best"]["measured"] = 3;
  EXPECT_FALSE(v.Check(broken, schema).empty());
}

TEST(JsonShape, ModelBackend) {
  TempDir dir;
  const std::string store = dir / "s";
  ExpectShape("--json --store " + store + " search --world 64 --model gpt-22b --top 3", "search.schema.json");
  ExpectShape("--json --store " + store + " search --world 64 --model gpt-22b", "search.schema.json");  // resumed
  ExpectReadersShape(store);
}

TEST(JsonShape, CommandBackend) {
  TempDir dir;
  const std::string store = dir / "s";
  const std::string command = std::string("'") + TUNEPAR_FAKE_TRAINER + " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision}'";
  ExpectShape("--json --store " + store + " search --world 2 --model tiny --hardware " + testing::kTestCpu +
                  " --backend command --command " + command +
                  " --metric-regex 'step_time: ([0-9.]+)' --budget 3 --node-id n0",
              "search.schema.json");
  ExpectReadersShape(store);
  ExpectShape("--json --store " + store + " forget --node-id n0 1 --dry-run", "forget.schema.json");
  ExpectShape("--json --store " + store + " forget --node-id n0 1", "forget.schema.json");
  ExpectShape("--json --store " + store + " export", "export.schema.json");  // with a forgotten row
}

TEST(JsonShape, LocalBackend) {
  TempDir dir;
  const std::string store = dir / "s";
  ExpectShape("--json --store " + store +
                  " search --backend local --world 2 --model tiny --hardware local-cpu --budget 2 --steps 2 --warmup 1"
                  " --node-id n0 --core " + TUNEPAR_CORE,
              "search.schema.json");
  ExpectReadersShape(store);
}

TEST(JsonShape, CommandsWithoutAStore) {
  ExpectShape("--json configs", "configs.schema.json");
  ExpectShape("--json knobs", "knobs.schema.json");
  ExpectShape("--json space --world 64 --model gpt-22b", "space.schema.json");
  ExpectShape("--json space --world 64 --model gpt-22b --list", "space.schema.json");
  ExpectShape("--json predict --world 1024 --model gpt-175b --tp 4 --pp 16 --mbs 1", "predict.schema.json");
  // Issue 33: compute_terms (qkv_projections_s, mlp_s, ...) for a Llama-style shape.
  ExpectShape("--json predict --world 1024 --model llama3-70b --hardware lumi-g --tp 8 --pp 4 --mbs 1",
              "predict.schema.json");
  ExpectShape("--json report --of-model --world 64 --model gpt-22b --background-size 20", "report.schema.json");
  ExpectShape("--json calibrate --from " + std::string(TUNEPAR_SOURCE_DIR) +
                  "/bench/data/megatron_table1.csv --hardware dgx-a100 --fit gemm_efficiency",
              "calibrate.schema.json");
}

}  // namespace
}  // namespace tunepar
