#include "runner/core/result_format.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

namespace tunepar::core {

namespace {

constexpr CoreStatus kAllStatuses[] = {CoreStatus::kOk,       CoreStatus::kOom,     CoreStatus::kDiverged,
                                       CoreStatus::kNoDevice, CoreStatus::kInvalid, CoreStatus::kCrash};

// How a message says what the result states ("says out of memory but ...").
std::string_view Says(CoreStatus status) {
  switch (status) {
    case CoreStatus::kOk: return "ok";
    case CoreStatus::kOom: return "out of memory";
    case CoreStatus::kDiverged: return "the loss diverged";
    case CoreStatus::kNoDevice: return "no device";
    case CoreStatus::kInvalid: return "invalid";
    case CoreStatus::kCrash: return "crash";
  }
  return "?";
}

std::string_view TypeName(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "true or false";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: return "a number";
    default: return "something else";
  }
}

// Each Read returns false (and says what belongs) when `v` is not of the type; none throws.
bool Read(const nlohmann::json& v, double& out, std::string_view& expected) {
  expected = "a number";
  if (!v.is_number()) return false;
  out = v.get<double>();
  return true;
}

template <typename Int>
bool ReadInteger(const nlohmann::json& v, Int& out) {
  if (!v.is_number()) return false;
  const double d = v.get<double>();
  // Whole numbers only (a JSON writer may print 2 as 2.0), within the type's range: [-2^(b-1), 2^(b-1)).
  const double bound = -static_cast<double>(std::numeric_limits<Int>::min());
  if (!(d == std::floor(d)) || d < -bound || d >= bound) return false;
  out = v.is_number_float() ? static_cast<Int>(d) : v.get<Int>();
  return true;
}
bool Read(const nlohmann::json& v, int& out, std::string_view& expected) {
  expected = "a whole number";
  return ReadInteger(v, out);
}
bool Read(const nlohmann::json& v, int64_t& out, std::string_view& expected) {
  expected = "a whole number";
  return ReadInteger(v, out);
}
bool Read(const nlohmann::json& v, std::string& out, std::string_view& expected) {
  expected = "a string";
  if (!v.is_string()) return false;
  out = v.get<std::string>();
  return true;
}
bool Read(const nlohmann::json& v, std::vector<int>& out, std::string_view& expected) {
  expected = "an array of whole numbers";
  if (!v.is_array()) return false;
  std::vector<int> values(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    if (!ReadInteger(v[i], values[i])) return false;
  out = std::move(values);
  return true;
}
// Arrays of measurements: JSON has no NaN or infinity, so a non-finite value is written as null.
bool Read(const nlohmann::json& v, std::vector<double>& out, std::string_view& expected) {
  expected = "an array of numbers";
  if (!v.is_array()) return false;
  std::vector<double> values;
  for (const nlohmann::json& x : v) {
    if (x.is_null()) {
      values.push_back(std::numeric_limits<double>::quiet_NaN());
    } else if (x.is_number()) {
      values.push_back(x.get<double>());
    } else {
      return false;
    }
  }
  out = std::move(values);
  return true;
}
bool Read(const nlohmann::json& v, std::map<std::string, double>& out, std::string_view& expected) {
  expected = "an object of numbers";
  if (!v.is_object()) return false;
  std::map<std::string, double> values;
  for (const auto& [key, x] : v.items()) {
    if (!x.is_number()) return false;
    values[key] = x.get<double>();
  }
  out = std::move(values);
  return true;
}
bool Read(const nlohmann::json& v, std::map<std::string, std::string>& out, std::string_view& expected) {
  expected = "an object of strings";
  if (!v.is_object()) return false;
  std::map<std::string, std::string> values;
  for (const auto& [key, x] : v.items()) {
    if (!x.is_string()) return false;
    values[key] = x.get<std::string>();
  }
  out = std::move(values);
  return true;
}
bool Read(const nlohmann::json& v, nlohmann::json& out, std::string_view& expected) {
  expected = "an object";
  if (!v.is_object()) return false;
  out = v;
  return true;
}

// One JSON object read key by key. The first problem is kept (later reads do nothing), phrased
// to follow "result.json": "says ok but holds no step time (step_time_s)".
class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& j, std::string path, std::string says, std::string* problem)
      : j_(j), path_(std::move(path)), says_(std::move(says)), problem_(problem) {}

  bool failed() const { return !problem_->empty(); }

  // A key the result must hold; `what` says it in words.
  template <typename T>
  void Required(const char* key, std::string_view what, T& out) {
    if (failed()) return;
    const nlohmann::json* v = Find(key);
    if (v == nullptr) {
      Fail(fmt::format("holds no {} ({})", what, Path(key)));
      return;
    }
    std::string_view expected;
    if (!Read(*v, out, expected))
      Fail(fmt::format("holds no {} ({}): {} where {} belongs", what, Path(key), TypeName(*v), expected));
  }

  // A key the result may leave out: absent, `out` keeps its default.
  template <typename T>
  void Optional(const char* key, T& out) {
    if (failed()) return;
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return;
    std::string_view expected;
    if (!Read(*v, out, expected)) Mistyped(key, *v, expected);
  }
  template <typename T>
  void Optional(const char* key, std::optional<T>& out) {
    if (failed() || Find(key) == nullptr) return;
    T value{};
    Optional(key, value);
    if (!failed()) out = std::move(value);
  }

  // A nested object, or nullptr (absent, or not an object: then the problem is said).
  const nlohmann::json* Object(const char* key) {
    if (failed()) return nullptr;
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return nullptr;
    if (!v->is_object()) {
      Mistyped(key, *v, "an object");
      return nullptr;
    }
    return v;
  }
  const nlohmann::json* Array(const char* key) {
    if (failed()) return nullptr;
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return nullptr;
    if (!v->is_array()) {
      Mistyped(key, *v, "an array");
      return nullptr;
    }
    return v;
  }

  // A reader of a nested object, for what `Object` returned.
  ObjectReader Inside(const char* key, const nlohmann::json& child) const {
    return ObjectReader(child, Path(key), says_, problem_);
  }
  ObjectReader Element(const char* key, size_t index, const nlohmann::json& element) {
    const std::string path = fmt::format("{}[{}]", Path(key), index);
    if (!failed() && !element.is_object())
      Fail(fmt::format("its {} is {} where an object belongs", path, TypeName(element)));
    return ObjectReader(element, path, says_, problem_);
  }

  void Fail(const std::string& problem) {
    if (!failed()) *problem_ = says_.empty() ? problem : fmt::format("says {} but {}", says_, problem);
  }
  void set_says(std::string says) { says_ = std::move(says); }

 private:
  const nlohmann::json* Find(const char* key) const {
    if (!j_.is_object()) return nullptr;
    const auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  std::string Path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  void Mistyped(const char* key, const nlohmann::json& v, std::string_view expected) {
    Fail(fmt::format("its {} is {} where {} belongs", Path(key), TypeName(v), expected));
  }

  const nlohmann::json& j_;
  std::string path_;
  std::string says_;
  std::string* problem_;
};

void ReadPlacement(ObjectReader in, RankPlacement& p) {
  in.Required("rank", "rank", p.rank);
  in.Required("host", "host", p.host);
  in.Required("local_rank", "local rank", p.local_rank);
  in.Required("cpus", "CPU list", p.cpus);
  in.Optional("cpu_binding", p.cpu_binding);
  in.Optional("device", p.device);
  in.Optional("threads", p.threads);
  in.Optional("tp_rank", p.tp_rank);
  in.Optional("pp_rank", p.pp_rank);
  in.Optional("dp_rank", p.dp_rank);
  in.Optional("slurm_step", p.slurm_step);
}

void ReadMemory(ObjectReader in, const nlohmann::json& j, MemoryPeaks& m) {
  if (const auto cap = j.find("cap_bytes"); cap != j.end() && !cap->is_null())
    in.Optional("cap_bytes", m.cap_bytes);
  in.Required("peak_bytes", "peak memory", m.peak_bytes);
  in.Optional("held_peak_bytes", m.held_peak_bytes);
  in.Optional("peak_by_category", m.peak_by_category);
  in.Optional("cap_why", m.cap_why);
  in.Optional("rank", m.oom_rank);
  in.Optional("category", m.oom_category);
}

void ReadResult(ObjectReader& in, const nlohmann::json& j, CoreResult& r) {
  if (r.status == CoreStatus::kOk) {
    // What the runner cannot measure without: read before any other key, so the
    // message names it whatever else is wrong (a bare {"status": "ok"}, another build's result).
    double step_time = 0;
    in.Required("step_time_s", "step time", step_time);
    r.step_time_s = step_time;
    in.Required("steps", "count of measured steps", r.steps);
    in.Required("warmup", "count of warm-up steps", r.warmup);
  } else {
    in.Optional("step_time_s", r.step_time_s);
    in.Optional("steps", r.steps);
    in.Optional("warmup", r.warmup);
  }
  in.Optional("error", r.error);
  in.Optional("model", r.model);
  in.Optional("layout", r.layout);
  in.Optional("stage_layers", r.stage_layers);
  in.Optional("comm", r.comm);
  in.Optional("world", r.world);
  in.Optional("global_batch", r.global_batch);
  in.Optional("tokens_per_step", r.tokens_per_step);
  in.Optional("devices_per_node", r.devices_per_node);
  in.Optional("step_times_s", r.step_times_s);
  in.Optional("tokens_per_s", r.tokens_per_s);
  in.Optional("model_flops_per_step", r.model_flops_per_step);
  in.Optional("tflops_per_gpu", r.tflops_per_gpu);
  in.Optional("loss", r.loss);
  in.Optional("loss_floor", r.loss_floor);
  in.Optional("grad_norm", r.grad_norm);
  in.Optional("loss_scale", r.loss_scale);
  in.Optional("skipped_steps", r.skipped_steps);
  in.Optional("mpi_wait", r.mpi_wait);
  in.Optional("data", r.data);
  if (const nlohmann::json* phases = in.Object("phases")) {
    for (const auto& [name, times] : phases->items()) {
      ObjectReader phase = in.Inside("phases", *phases).Inside(name.c_str(), times);
      if (!times.is_object()) {
        in.Fail(fmt::format("its phases.{} is {} where an object belongs", name, TypeName(times)));
        break;
      }
      PhaseSummary t;
      phase.Required("max", "slowest rank's time", t.max);
      phase.Required("mean", "mean time over ranks", t.mean);
      r.phases[name] = t;
    }
  }
  if (const nlohmann::json* memory = in.Object("memory")) {
    MemoryPeaks m;
    ReadMemory(in.Inside("memory", *memory), *memory, m);
    if (!in.failed()) r.memory = m;
  }
  if (const nlohmann::json* placement = in.Array("placement")) {
    for (size_t i = 0; i < placement->size() && !in.failed(); ++i) {
      RankPlacement p;
      ReadPlacement(in.Element("placement", i, (*placement)[i]), p);
      r.placement.push_back(p);
    }
  }
  if (const nlohmann::json* startup = in.Object("startup")) {
    ObjectReader s = in.Inside("startup", *startup);
    StartupTimes t;
    s.Required("total_s", "total start-up time", t.total_s);
    s.Optional("process_to_main_s", t.process_to_main_s);
    s.Optional("mpi_init_s", t.mpi_init_s);
    s.Optional("device_and_comm_s", t.device_and_comm_s);
    s.Optional("model_setup_s", t.model_setup_s);
    r.startup = t;
  }
  in.Optional("versions", r.versions);
  if (const auto check = j.find("gradient_check"); check != j.end() && !check->is_null())
    in.Optional("gradient_check", r.gradient_check);
}

// Non-finite numbers go out as null (JSON has no NaN): nlohmann writes them so too, said here
// because FromJson relies on it.
nlohmann::json Number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

}  // namespace

std::string_view ToString(CoreStatus status) {
  switch (status) {
    case CoreStatus::kOk: return "ok";
    case CoreStatus::kOom: return "oom";
    case CoreStatus::kDiverged: return "diverged";
    case CoreStatus::kNoDevice: return "no_device";
    case CoreStatus::kInvalid: return "invalid";
    case CoreStatus::kCrash: return "crash";
  }
  return "?";
}

nlohmann::json ToJson(const MemoryPeaks& m) {
  nlohmann::json j = {{"cap_bytes", m.cap_bytes ? nlohmann::json(*m.cap_bytes) : nlohmann::json(nullptr)},
                      {"peak_bytes", m.peak_bytes},
                      {"held_peak_bytes", m.held_peak_bytes},
                      {"peak_by_category", m.peak_by_category}};
  if (!m.cap_why.empty()) j["cap_why"] = m.cap_why;
  if (m.oom_rank) j["rank"] = *m.oom_rank;
  if (!m.oom_category.empty()) j["category"] = m.oom_category;
  return j;
}

nlohmann::json ToJson(const RankPlacement& p) {
  nlohmann::json j = {{"rank", p.rank},
                      {"host", p.host},
                      {"local_rank", p.local_rank},
                      {"cpus", p.cpus},
                      {"cpu_binding", p.cpu_binding},
                      {"device", p.device},
                      {"threads", p.threads},
                      {"tp_rank", p.tp_rank},
                      {"pp_rank", p.pp_rank},
                      {"dp_rank", p.dp_rank}};
  if (!p.slurm_step.empty()) j["slurm_step"] = p.slurm_step;
  return j;
}

nlohmann::json ToJson(const std::vector<RankPlacement>& placement) {
  nlohmann::json j = nlohmann::json::array();
  for (const RankPlacement& p : placement) j.push_back(ToJson(p));
  return j;
}

nlohmann::json ToJson(const std::map<std::string, PhaseSummary>& phases) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, t] : phases) j[name] = {{"max", t.max}, {"mean", t.mean}};
  return j;
}

nlohmann::json ToJson(const StartupTimes& s) {
  return {{"total_s", s.total_s},
          {"process_to_main_s", s.process_to_main_s},
          {"mpi_init_s", s.mpi_init_s},
          {"device_and_comm_s", s.device_and_comm_s},
          {"model_setup_s", s.model_setup_s},
          {"note", "each stage: its slowest rank; total_s: the slowest rank's process start to first step"}};
}

nlohmann::json ToJson(const CoreResult& r) {
  nlohmann::json j = {{"version", r.version},
                      {"status", std::string(ToString(r.status))},
                      {"tool", "tunepar-core"},
                      {"model", r.model},
                      {"layout", r.layout},
                      {"comm", r.comm},
                      {"world", r.world},
                      {"global_batch", r.global_batch},
                      {"tokens_per_step", r.tokens_per_step}};
  if (!r.error.empty()) j["error"] = r.error;
  if (!r.stage_layers.empty()) j["stage_layers"] = r.stage_layers;
  if (r.devices_per_node) j["devices_per_node"] = *r.devices_per_node;
  if (r.step_time_s) {
    j["steps"] = r.steps;
    j["warmup"] = r.warmup;
    j["step_time_s"] = Number(*r.step_time_s);
    j["step_times_s"] = r.step_times_s;
    j["tokens_per_s"] = Number(r.tokens_per_s);
    j["model_flops_per_step"] = Number(r.model_flops_per_step);
    j["tflops_per_gpu"] = Number(r.tflops_per_gpu);
    j["loss"] = nlohmann::json::array();
    for (double v : r.loss) j["loss"].push_back(Number(v));
    j["grad_norm"] = nlohmann::json::array();
    for (double v : r.grad_norm) j["grad_norm"].push_back(Number(v));
    if (r.loss_floor) j["loss_floor"] = Number(*r.loss_floor);
    j["mpi_wait"] = r.mpi_wait;
    j["data"] = r.data;
  }
  if (r.loss_scale) {
    j["loss_scale"] = nlohmann::json::array();
    for (double v : *r.loss_scale) j["loss_scale"].push_back(Number(v));
  }
  if (r.skipped_steps) j["skipped_steps"] = *r.skipped_steps;
  if (!r.phases.empty()) j["phases"] = ToJson(r.phases);
  if (r.memory) j["memory"] = ToJson(*r.memory);
  if (!r.placement.empty()) j["placement"] = ToJson(r.placement);
  if (r.startup) j["startup"] = ToJson(*r.startup);
  if (!r.versions.empty()) j["versions"] = r.versions;
  if (!r.gradient_check.is_null()) j["gradient_check"] = r.gradient_check;
  return j;
}

Result<CoreResult> FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument(fmt::format("is not a JSON object ({})", TypeName(j)));
  std::string problem;
  ObjectReader in(j, "", "", &problem);
  CoreResult r;
  r.version = 1;  // written before the key existed
  in.Optional("version", r.version);
  if (in.failed()) return InvalidArgument(problem);
  if (r.version < 1)
    return InvalidArgument(fmt::format("holds version {}, where 1 or more belongs", r.version));
  if (r.version > kCoreResultVersion) {
    return InvalidArgument(fmt::format(
        "is version {}, newer than this tunepar reads (up to {}): written by a newer tunepar-core (--core); "
        "upgrade tunepar to read it",
        r.version, kCoreResultVersion));
  }
  std::string status;
  in.Required("status", "status", status);
  if (in.failed()) return InvalidArgument(problem);
  bool known = false;
  for (CoreStatus s : kAllStatuses) {
    if (ToString(s) == status) {
      r.status = s;
      known = true;
    }
  }
  if (!known) {
    return InvalidArgument(
        fmt::format("holds no status a trial can have (status): \"{}\" where ok, oom, diverged, no_device, "
                    "invalid or crash belongs",
                    status));
  }
  in.set_says(std::string(Says(r.status)));
  ReadResult(in, j, r);
  if (in.failed()) return InvalidArgument(problem);
  return r;
}

Result<CoreResult> ParseCoreResult(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return InvalidArgument("is not JSON (a damaged or partly written file)");
  return FromJson(j);
}

Result<RankPlacement> PlacementFromJson(const nlohmann::json& j) {
  std::string problem;
  ObjectReader in(j, "", "", &problem);
  if (!j.is_object())
    return InvalidArgument(fmt::format("a placement is {} where an object belongs", TypeName(j)));
  RankPlacement p;
  ReadPlacement(in, p);
  if (in.failed()) return InvalidArgument(problem);
  return p;
}

}  // namespace tunepar::core
