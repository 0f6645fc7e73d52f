// tunepar-core's result.json as one struct (runner/core/result_format.h): written and read back
// unchanged, read from a core that wrote no version (version 1), refused when newer; a missing,
// mistyped or damaged key is a Status naming it, never an exception; and the local backend turns
// such a result into a trial status with that message (issue 30 item 4).
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/core/result_format.h"
#include "runner/core_backend.h"
#include "tests/test_support.h"

namespace tunepar {
namespace {

using core::CoreResult;
using core::CoreStatus;
using core::FromJson;
using core::ParseCoreResult;
using core::ToJson;

// A result with every field set, as the core writes one for a measured fp16 run.
CoreResult EveryField() {
  CoreResult r;
  r.status = CoreStatus::kOk;
  r.model = {{"name", "tiny"}, {"layers", 2}};
  r.layout = "tp1-pp1-dp2-mbs1-nmb2-bf16-z0-rcnone-sp0-vpp1-fa0";
  r.stage_layers = {2};
  r.comm = "mpi";
  r.world = 2;
  r.global_batch = 4;
  r.tokens_per_step = 512;
  r.devices_per_node = 1;
  r.steps = 3;
  r.warmup = 1;
  r.step_time_s = 0.125;
  r.step_times_s = {0.12, 0.125, 0.13};
  r.tokens_per_s = 4096;
  r.model_flops_per_step = 1.5e9;
  r.tflops_per_gpu = 0.006;
  r.loss = {5.5, 5.25, std::numeric_limits<double>::quiet_NaN(), 5.0};
  r.loss_floor = 4.5;
  r.grad_norm = {1.0, 0.5, 0.25, 0.125};
  r.loss_scale = std::vector<double>{65536, 32768, 32768, 32768};
  r.skipped_steps = 1;
  r.mpi_wait = "sleep";
  r.data = "synthetic";
  r.phases = {{"compute", {0.1, 0.09}}, {"dp_comm", {0.02, 0.01}}};
  core::MemoryPeaks m;
  m.cap_bytes = 8e9;
  m.peak_bytes = 1e6;
  m.held_peak_bytes = 9e5;
  m.peak_by_category = {{"weights", 4e5}, {"activations", 6e5}};
  m.cap_why = "the device's share";
  r.memory = m;
  core::RankPlacement p;
  p.rank = 1;
  p.host = "node7";
  p.local_rank = 1;
  p.cpus = "2-3";
  p.cpu_binding = "as launched";
  p.device = "cpu";
  p.threads = 2;
  p.dp_rank = 1;
  p.slurm_step = "123.4";
  r.placement = {core::RankPlacement{}, p};
  r.startup = core::StartupTimes{1.5, 0.1, 0.4, 0.5, 0.5};
  r.versions = {{"tunepar", "0.1.0"}, {"backend", "cpu"}};
  r.gradient_check = {{"points", 12}, {"max_rel_error", 1e-7}};
  return r;
}

TEST(CoreResultFormat, EveryFieldRoundTripsThroughJsonText) {
  const CoreResult written = EveryField();
  const nlohmann::json j = ToJson(written);
  EXPECT_EQ(j["version"], core::kCoreResultVersion);
  EXPECT_TRUE(j["loss"][2].is_null()) << "a non-finite loss is null in JSON";
  const Result<CoreResult> read = ParseCoreResult(j.dump(2));
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(ToJson(*read), j);
  // Field by field where ToJson could hide a loss (NaN, optionals, nested structs).
  EXPECT_EQ(read->version, core::kCoreResultVersion);
  EXPECT_EQ(read->status, CoreStatus::kOk);
  ASSERT_EQ(read->loss.size(), 4u);
  EXPECT_TRUE(std::isnan(read->loss[2]));
  EXPECT_EQ(read->loss[3], 5.0);
  EXPECT_EQ(read->step_time_s, 0.125);
  EXPECT_EQ(read->devices_per_node, 1);
  EXPECT_EQ(read->skipped_steps, 1);
  ASSERT_TRUE(read->loss_scale.has_value());
  EXPECT_EQ(read->loss_scale->front(), 65536);
  ASSERT_TRUE(read->memory.has_value());
  EXPECT_EQ(read->memory->cap_bytes, 8e9);
  EXPECT_EQ(read->memory->peak_by_category.at("activations"), 6e5);
  EXPECT_FALSE(read->memory->oom_rank.has_value());
  ASSERT_EQ(read->placement.size(), 2u);
  EXPECT_EQ(read->placement[1].host, "node7");
  EXPECT_EQ(read->placement[1].slurm_step, "123.4");
  EXPECT_EQ(read->placement[0].slurm_step, "");
  EXPECT_EQ(read->phases.at("dp_comm").mean, 0.01);
  ASSERT_TRUE(read->startup.has_value());
  EXPECT_EQ(read->startup->total_s, 1.5);
  EXPECT_EQ(read->versions.at("backend"), "cpu");
  EXPECT_EQ(read->gradient_check["points"], 12);
  EXPECT_EQ(read->stage_layers, std::vector<int>{2});
}

TEST(CoreResultFormat, FailureResultsRoundTripWithoutTheMeasuredFields) {
  CoreResult oom;
  oom.status = CoreStatus::kOom;
  oom.error = "rank 1: out of memory allocating activations";
  core::MemoryPeaks m;  // no cap: null in JSON
  m.peak_bytes = 3e6;
  m.oom_rank = 1;
  m.oom_category = "activations";
  oom.memory = m;
  const nlohmann::json j = ToJson(oom);
  EXPECT_FALSE(j.contains("step_time_s")) << j.dump();
  EXPECT_TRUE(j["memory"]["cap_bytes"].is_null());
  const Result<CoreResult> read = FromJson(j);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->status, CoreStatus::kOom);
  EXPECT_EQ(read->error, oom.error);
  EXPECT_FALSE(read->step_time_s.has_value());
  EXPECT_FALSE(read->memory->cap_bytes.has_value());
  EXPECT_EQ(read->memory->oom_rank, 1);
  EXPECT_EQ(read->memory->oom_category, "activations");
  EXPECT_EQ(ToJson(*read), j);
  for (CoreStatus s :
       {CoreStatus::kDiverged, CoreStatus::kNoDevice, CoreStatus::kInvalid, CoreStatus::kCrash}) {
    CoreResult r;
    r.status = s;
    const Result<CoreResult> back = FromJson(ToJson(r));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->status, s);
  }
}

// As tunepar-core wrote it before the version key (its measured trial of tiny, abridged): read as
// version 1, every field the runner uses in place.
TEST(CoreResultFormat, AResultWithoutAVersionIsVersionOne) {
  const std::string v1 = R"({
    "tool": "tunepar-core", "status": "ok", "layout": "tp1-pp1-dp1-mbs1-nmb1-fp32-z0-rcnone-sp0-vpp1-fa0",
    "comm": "mpi", "world": 1, "global_batch": 1, "tokens_per_step": 128, "devices_per_node": 1,
    "model": {"name": "tiny", "layers": 2}, "steps": 2, "warmup": 1, "step_time_s": 0.0042,
    "step_times_s": [0.0041, 0.0043], "tokens_per_s": 30476.2, "model_flops_per_step": 1.2e8,
    "tflops_per_gpu": 0.03, "loss": [6.1, 6.0, 5.9], "loss_floor": 5.2, "grad_norm": [1.1, 1.0, 0.9],
    "mpi_wait": "spin", "data": "synthetic",
    "phases": {"compute": {"max": 0.004, "mean": 0.004}, "tp_comm": {"max": 0, "mean": 0}},
    "memory": {"cap_bytes": null, "peak_bytes": 2.5e6, "held_peak_bytes": 2.5e6,
               "peak_by_category": {"weights": 1e6, "activations": 1.5e6}},
    "placement": [{"rank": 0, "host": "h", "local_rank": 0, "cpus": "0-1", "device": "cpu", "threads": 2,
                   "tp_rank": 0, "pp_rank": 0, "dp_rank": 0}],
    "startup": {"total_s": 0.3, "process_to_main_s": 0.01, "mpi_init_s": 0.1, "device_and_comm_s": 0.1,
                "model_setup_s": 0.09, "note": "each stage: its slowest rank"},
    "versions": {"tunepar": "0.1.0", "compiler": "12.2.0"}})";
  const Result<CoreResult> r = ParseCoreResult(v1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version, 1);
  EXPECT_EQ(r->status, CoreStatus::kOk);
  EXPECT_EQ(r->step_time_s, 0.0042);
  EXPECT_EQ(r->steps, 2);
  EXPECT_EQ(r->warmup, 1);
  EXPECT_EQ(r->comm, "mpi");
  EXPECT_EQ(r->devices_per_node, 1);
  ASSERT_TRUE(r->memory.has_value());
  EXPECT_EQ(r->memory->peak_bytes, 2.5e6);
  EXPECT_FALSE(r->memory->cap_bytes.has_value());
  ASSERT_EQ(r->placement.size(), 1u);
  EXPECT_EQ(r->placement[0].cpus, "0-1");
  EXPECT_EQ(r->placement[0].cpu_binding, "");  // not written by every version-1 core
  EXPECT_EQ(r->phases.size(), 2u);
  EXPECT_EQ(r->startup->total_s, 0.3);
}

TEST(CoreResultFormat, ANewerVersionIsRefusedWithAMessage) {
  nlohmann::json j = ToJson(EveryField());
  j["version"] = core::kCoreResultVersion + 1;
  const Result<CoreResult> r = FromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(fmt::format("is version {}, newer than this tunepar reads (up to {})",
                                                  core::kCoreResultVersion + 1, core::kCoreResultVersion)),
            std::string::npos)
      << r.status().message();
}

// Each broken result, and the words its message must hold (the key, what was there, what belongs).
TEST(CoreResultFormat, AMissingOrMistypedKeyIsAStatusNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"status":"ok"})", "says ok but holds no step time (step_time_s)"},
      {R"({"status":"ok","step_time_s":"fast","steps":1,"warmup":0})",
       "holds no step time (step_time_s): a string where a number belongs"},
      {R"({"status":"ok","step_time_s":null,"steps":1,"warmup":0})",
       "(step_time_s): null where a number belongs"},
      // The step time is named first, whatever else is wrong.
      {R"({"status":"ok","step_time_s":"fast","memory":7,"placement":[3,{"host":4}],"error":[1]})",
       "says ok but holds no step time (step_time_s): a string where a number belongs"},
      {R"({"status":"ok","step_time_s":0.1,"warmup":0})", "holds no count of measured steps (steps)"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1.5,"warmup":0})",
       "(steps): a number where a whole number belongs"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1e300,"warmup":0})",
       "(steps): a number where a whole number"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"memory":7})",
       "its memory is a number where an object belongs"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"memory":{}})",
       "holds no peak memory (memory.peak_bytes)"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"memory":{"peak_bytes":1,"cap_bytes":"8G"}})",
       "its memory.cap_bytes is a string where a number belongs"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"placement":[3]})",
       "its placement[0] is a number where an object belongs"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"placement":{"rank":0}})",
       "its placement is an object where an array belongs"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"placement":[{"host":4}]})",
       "holds no rank (placement[0].rank)"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"placement":[{"rank":0,"host":4}]})",
       "holds no host (placement[0].host): a number where a string belongs"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"phases":{"compute":3}})",
       "its phases.compute is a number where an object belongs"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"phases":{"compute":{"max":"x","mean":0}}})",
       "(phases.compute.max): a string where a number belongs"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"loss":[1,"x"]})",
       "its loss is an array where an array of numbers belongs"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"stage_layers":[5,2.5]})",
       "its stage_layers is an array where an array of whole numbers belongs"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"startup":{}})",
       "holds no total start-up time (startup.total_s)"},
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"versions":{"mpi":3}})",
       "its versions is an object where an object of strings belongs"},
      {R"({"status":"oom","error":{"x":1}})",
       "says out of memory but its error is an object where a string belongs"},
      {R"({"status":"oom","memory":{"peak_bytes":"many"}})",
       "says out of memory but holds no peak memory (memory.peak_bytes): a string"},
      {R"({"status":5})", "holds no status (status): a number where a string belongs"},
      {R"({"status":"fine"})", "\"fine\" where ok, oom, diverged, no_device, invalid or crash belongs"},
      {R"({})", "holds no status (status)"},
      {R"({"version":"2","status":"ok"})", "its version is a string where a whole number belongs"},
      {R"({"version":0,"status":"ok"})", "holds version 0"},
      {R"([1,2])", "is not a JSON object (an array)"},
      {R"("ok")", "is not a JSON object (a string)"},
      {R"(null)", "is not a JSON object (null)"},
      {R"([1,2)", "is not JSON"},
      {"", "is not JSON"}};
  for (const auto& [text, words] : cases) {
    Result<CoreResult> r(InternalError("not read"));
    ASSERT_NO_THROW(r = ParseCoreResult(text)) << text;
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << text << "\n" << r.status().message();
  }
}

// Every key of a whole result, left out or given each kind of wrong value: never an exception;
// a key the status needs (status, step_time_s, steps, warmup) is an error when it goes.
TEST(CoreResultFormat, NoKeyLeftOutOrMistypedThrows) {
  const nlohmann::json whole = ToJson(EveryField());
  const std::vector<nlohmann::json> wrong = {
      nullptr, "x", 7, -1.5, true, nlohmann::json::array({1, "y"}), nlohmann::json::object({{"z", nullptr}}),
      1e308};
  for (const auto& [key, value] : whole.items()) {
    nlohmann::json without = whole;
    without.erase(key);
    Result<CoreResult> r(InternalError("not read"));
    ASSERT_NO_THROW(r = FromJson(without)) << key;
    const bool needed = key == "status" || key == "step_time_s" || key == "steps" || key == "warmup";
    EXPECT_EQ(r.ok(), !needed) << key << ": " << (r.ok() ? "read" : r.status().message());
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
    }
    for (const nlohmann::json& w : wrong) {
      nlohmann::json mistyped = whole;
      mistyped[key] = w;
      ASSERT_NO_THROW(r = FromJson(mistyped)) << key << " = " << w.dump();
      if (!r.ok()) {
        EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
      }
    }
    // One level down too (memory, phases, placement entries, startup).
    if (!value.is_object() && !value.is_array()) continue;
    for (const auto& inner : value.items()) {
      for (const nlohmann::json& w : wrong) {
        nlohmann::json mistyped = whole;
        mistyped[key][nlohmann::json::json_pointer("/" + inner.key())] = w;
        ASSERT_NO_THROW(r = FromJson(mistyped)) << key << "/" << inner.key() << " = " << w.dump();
      }
    }
  }
}

// Non-finite values the core may hold: written as null where JSON allows none, read back.
TEST(CoreResultFormat, NonFiniteMeasurementsAreWrittenAsNull) {
  CoreResult r = EveryField();
  r.status = CoreStatus::kDiverged;
  r.loss = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  r.tokens_per_s = std::numeric_limits<double>::quiet_NaN();
  const std::string text = ToJson(r).dump();
  EXPECT_EQ(text.find("NaN"), std::string::npos) << text;
  const Result<CoreResult> back = ParseCoreResult(text);
  // tokens_per_s is a plain number: null there is refused, with its name.
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("tokens_per_s"), std::string::npos) << back.status().message();
  r.tokens_per_s = 0;
  const Result<CoreResult> again = ParseCoreResult(ToJson(r).dump());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(std::isnan(again->loss[0]));
}

// The local backend, with a stand-in core that writes a result and exits 0 (tests/
// result_writing_core.sh, given as mpirun so no MPI starts): a result the runner cannot use is
// a failed trial whose message names what was missing, not a crash of tunepar.
runner::TrialResult RunWithResult(const std::string& result_text) {
  testing::TempDir dir;
  runner::CoreBackendOptions o;
  o.mpirun = std::string(TUNEPAR_SOURCE_DIR) + "/tests/result_writing_core.sh";
  o.core_binary = "tunepar-core-not-run";
  o.capacity = 4;
  o.cores = 1;
  o.steps = 1;
  o.warmup = 0;
  o.timeout_s = 30;
  o.stop_grace_s = 0.5;
  o.env = {{"TUNEPAR_TEST_RESULT", result_text}};
  ModelShape model = testing::PresetModel("tiny");
  runner::CoreBackend backend(o, model, testing::PresetHardware("local-cpu"));
  runner::TrialContext c;
  c.trial_id = "core-result-test/" + dir.path();
  c.trial_dir = dir.path();
  c.number = 1;
  c.world = 1;
  c.model = &model;
  return backend.Evaluate(Layout(1, 1), c);
}

TEST(CoreBackendResult, AnOkResultWithNothingElseIsACrashNamingTheStepTime) {
  const runner::TrialResult r = RunWithResult(R"({"status":"ok"})");
  EXPECT_EQ(r.status, TrialStatus::kCrash) << r.message;
  EXPECT_NE(r.message.find("tunepar-core's result.json says ok but holds no step time (step_time_s)"),
            std::string::npos)
      << r.message;
  EXPECT_FALSE(r.objective.has_value());
  const nlohmann::json details = nlohmann::json::parse(r.details_json, nullptr, false);
  EXPECT_NE(details.value("result_error", "").find("step_time_s"), std::string::npos) << r.details_json;
}

TEST(CoreBackendResult, MistypedNewerOrDamagedResultsAreTrialStatusesWithMessages) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"status":"ok","step_time_s":0.1,"steps":1,"warmup":0,"placement":[{"rank":"0"}]})",
       "holds no rank (placement[0].rank): a string where a whole number belongs"},
      {R"({"version":99,"status":"ok","step_time_s":0.1,"steps":1,"warmup":0})", "is version 99, newer"},
      {R"({"status":"oom","memory":{"peak_bytes":[]}})", "says out of memory but holds no peak memory"},
      {R"([1,2)", "is not JSON"}};
  for (const auto& [text, words] : cases) {
    const runner::TrialResult r = RunWithResult(text);
    EXPECT_EQ(r.status, TrialStatus::kCrash) << text << "\n" << r.message;
    EXPECT_NE(r.message.find(words), std::string::npos) << text << "\n" << r.message;
  }
}

TEST(CoreBackendResult, AVersionOneResultIsMeasured) {
  const runner::TrialResult r = RunWithResult(
      R"({"status":"ok","step_time_s":0.25,"steps":3,"warmup":1,"memory":{"peak_bytes":1000,"cap_bytes":null}})");
  EXPECT_EQ(r.status, TrialStatus::kOk) << r.message;
  EXPECT_EQ(r.objective, 0.25);
  EXPECT_EQ(r.metrics.peak_memory_bytes, 1000);
  EXPECT_NE(r.message.find("measured 3 steps after 1 warm-up"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace tunepar
