#include "runner/hardware_profile.h"

#include <cmath>

#include <regex>

#include <fmt/format.h>

#include "runner/efficiency_parameters.h"
#include "base/toml_fields.h"

namespace tunepar::runner {


std::string_view ToString(NumberOrigin origin) {
  switch (origin) {
    case NumberOrigin::kPublished: return "published";
    case NumberOrigin::kMeasured: return "measured";
    case NumberOrigin::kFitted: return "fitted";
    case NumberOrigin::kAssumed: return "assumed";
  }
  return "?";
}

double HardwareProfile::PeakFlops(Precision precision) const {
  switch (precision) {
    case Precision::kFp32: return peak_tflops_fp32.value * 1e12;
    case Precision::kFp16: return peak_tflops_fp16.value * 1e12;
    case Precision::kBf16: return peak_tflops_bf16.value * 1e12;
    case Precision::kFp8: return peak_tflops_fp8.value * 1e12;
  }
  return 0.0;
}

namespace {

constexpr std::string_view kNumberForm =
    "must be a table { value = <number>, origin = \"published\"|\"measured\"|\"fitted\"|\"assumed\", "
    "source = \"...\" }";

// Reads `key` = { value = x, origin = "...", source = "..." }; value must lie in [lo, hi] and,
// unless zero is allowed, be positive.
Status ReadNumber(TomlFields& f, std::string_view key, ProfileNumber* out, bool required = true,
                  double lo = 0.0, double hi = 1e30, bool zero_allowed = false) {
  const toml::node* node = f.Take(key);
  if (node == nullptr)
    return required ? f.Error(key, fmt::format("missing ({})", kNumberForm)) : Status::Ok();
  const toml::table* t = node->as_table();
  if (t == nullptr) return f.Error(key, kNumberForm);
  TomlFields n(*t, f.source(), f.Path(key) + ".");
  std::string origin;
  TUNEPAR_RETURN_IF_ERROR(n.Number("value", &out->value));
  TUNEPAR_RETURN_IF_ERROR(n.String("origin", &origin));
  TUNEPAR_RETURN_IF_ERROR(n.String("source", &out->source));
  TUNEPAR_RETURN_IF_ERROR(n.RejectUnknownKeys());
  if (origin == "published")
    out->origin = NumberOrigin::kPublished;
  else if (origin == "measured")
    out->origin = NumberOrigin::kMeasured;
  else if (origin == "fitted")
    out->origin = NumberOrigin::kFitted;
  else if (origin == "assumed")
    out->origin = NumberOrigin::kAssumed;
  else
    return n.Error("origin", fmt::format("'{}' is not one of published, measured, fitted, assumed", origin));
  if (!std::isfinite(out->value) || out->value < lo || out->value > hi ||
      (!zero_allowed && out->value <= 0)) {
    if (lo == 0.0 && hi == 1e30)
      return n.Error("value", fmt::format("must be a positive number, got {}", out->value));
    return n.Error("value", fmt::format("must lie in [{}, {}], got {}", lo, hi, out->value));
  }
  if (out->source.empty()) return n.Error("source", "must say where the number comes from");
  return Status::Ok();
}

// An optional array of strings under `key`.
Status ReadStrings(TomlFields& f, std::string_view key, std::vector<std::string>* out) {
  const toml::node* node = f.Take(key);
  if (node == nullptr) return Status::Ok();
  const toml::array* a = node->as_array();
  if (a == nullptr) return f.Error(key, "must be an array of strings");
  for (const toml::node& item : *a) {
    if (!item.is_string()) return f.ErrorAt(item, key, "items must be strings");
    out->push_back(item.as_string()->get());
  }
  return Status::Ok();
}

Status ReadCpuMasks(TomlFields& f, int gpus_per_node, LaunchSettings* out) {
  const toml::node* masks = f.Take("cpu_masks");
  if (masks == nullptr) return Status::Ok();
  const toml::array* a = masks->as_array();
  if (a == nullptr) return f.Error("cpu_masks", "must be an array of hex CPU masks, one per local rank");
  for (const toml::node& m : *a) {
    if (!m.is_string()) return f.ErrorAt(m, "cpu_masks", "items must be strings like \"0xfe\"");
    const std::string& s = m.as_string()->get();
    if (s.size() < 3 || s.rfind("0x", 0) != 0 ||
        s.find_first_not_of("0123456789abcdefABCDEF", 2) != std::string::npos)
      return f.ErrorAt(m, "cpu_masks", fmt::format("'{}' is not a hex mask like \"0xfe00\"", s));
    out->cpu_masks.push_back(s);
  }
  if (static_cast<int>(out->cpu_masks.size()) != gpus_per_node)
    return f.Error("cpu_masks", fmt::format("lists {} masks; node.gpus_per_node is {} (one mask per local rank)",
                                            out->cpu_masks.size(), gpus_per_node));
  return Status::Ok();
}

// [launch.env]: NAME = { value = "...", source = "..." } (a plain string is read too: profiles
// stored with studies before sources were asked for).
Status ReadEnv(TomlFields& f, LaunchSettings* out) {
  const toml::table* env = nullptr;
  TUNEPAR_RETURN_IF_ERROR(f.Table("env", &env, false));
  if (env == nullptr) return Status::Ok();
  for (auto&& [k, v] : *env) {
    const std::string key = "env." + std::string(k.str());
    EnvSetting setting{std::string(k.str()), "", ""};
    if (v.is_string()) {
      setting.value = v.as_string()->get();
    } else if (const toml::table* t = v.as_table()) {
      TomlFields e(*t, f.source(), f.Path(key) + ".");
      TUNEPAR_RETURN_IF_ERROR(e.String("value", &setting.value));
      TUNEPAR_RETURN_IF_ERROR(e.String("source", &setting.source));
      TUNEPAR_RETURN_IF_ERROR(e.RejectUnknownKeys());
      if (setting.source.empty()) return e.Error("source", "must say where the setting comes from");
    } else {
      return f.ErrorAt(v, key, "must be { value = \"...\", source = \"where it comes from\" }");
    }
    out->env.push_back(std::move(setting));
  }
  return Status::Ok();
}

Status ReadMpiPlugins(TomlFields& f, LaunchSettings* out) {
  const toml::table* plugins = nullptr;
  TUNEPAR_RETURN_IF_ERROR(f.Table("mpi_plugins", &plugins, false));
  if (plugins == nullptr) return Status::Ok();
  for (auto&& [k, v] : *plugins) {
    if (!v.is_string() || v.as_string()->get().empty())
      return f.ErrorAt(v, "mpi_plugins." + std::string(k.str()),
                       "must name srun's --mpi plugin for programs linked with this MPI (e.g. \"pmix\")");
    out->mpi_plugins.emplace(std::string(k.str()), v.as_string()->get());
  }
  return Status::Ok();
}

Status ReadNetPlugin(TomlFields& f, NetPlugin* out) {
  const toml::table* t = nullptr;
  TUNEPAR_RETURN_IF_ERROR(f.Table("net_plugin", &t, false));
  if (t == nullptr) return Status::Ok();
  TomlFields n(*t, f.source(), f.Path("net_plugin."));
  TUNEPAR_RETURN_IF_ERROR(n.String("name", &out->name));
  TUNEPAR_RETURN_IF_ERROR(ReadStrings(n, "libraries", &out->libraries));
  TUNEPAR_RETURN_IF_ERROR(n.String("source", &out->source));
  TUNEPAR_RETURN_IF_ERROR(n.RejectUnknownKeys());
  if (out->libraries.empty()) return n.Error("libraries", "must name the plugin's library files");
  if (out->source.empty()) return n.Error("source", "must say where the requirement comes from");
  return Status::Ok();
}

// mem_per_gpu = { value = "60G", source = "..." }: Slurm's size form, a number and K, M, G or T.
Status ReadMemoryRequest(TomlFields& f, MemoryRequest* out) {
  const toml::table* t = nullptr;
  TUNEPAR_RETURN_IF_ERROR(f.Table("mem_per_gpu", &t, false));
  if (t == nullptr) return Status::Ok();
  TomlFields m(*t, f.source(), f.Path("mem_per_gpu."));
  TUNEPAR_RETURN_IF_ERROR(m.String("value", &out->per_gpu));
  TUNEPAR_RETURN_IF_ERROR(m.String("source", &out->source));
  TUNEPAR_RETURN_IF_ERROR(m.RejectUnknownKeys());
  static const std::regex kSize("[1-9][0-9]*[KMGT]?");
  if (!std::regex_match(out->per_gpu, kSize))
    return m.Error("value", fmt::format("'{}' is not a Slurm memory size (e.g. \"60G\")", out->per_gpu));
  if (out->source.empty()) return m.Error("source", "must say where the request comes from");
  return Status::Ok();
}

Status ReadContainer(TomlFields& f, ContainerSettings* out) {
  const toml::table* t = nullptr;
  TUNEPAR_RETURN_IF_ERROR(f.Table("container", &t, false));
  if (t == nullptr) return Status::Ok();
  TomlFields c(*t, f.source(), f.Path("container."));
  TUNEPAR_RETURN_IF_ERROR(c.String("runtime", &out->runtime, false));
  TUNEPAR_RETURN_IF_ERROR(ReadStrings(c, "binds", &out->binds));
  TUNEPAR_RETURN_IF_ERROR(c.String("hook", &out->hook, false));
  TUNEPAR_RETURN_IF_ERROR(c.String("source", &out->source));
  TUNEPAR_RETURN_IF_ERROR(c.RejectUnknownKeys());
  if (out->runtime != "singularity" && out->runtime != "apptainer")
    return c.Error("runtime", fmt::format("'{}' is not singularity or apptainer", out->runtime));
  return Status::Ok();
}

Status ReadLaunch(const toml::table& t, std::string_view source, int gpus_per_node, LaunchSettings* out) {
  TomlFields f(t, source, "launch.");
  TUNEPAR_RETURN_IF_ERROR(f.String("visible_devices_env", &out->visible_devices_env, false));
  TUNEPAR_RETURN_IF_ERROR(f.PositiveInt("cpus_per_task", &out->cpus_per_task));
  TUNEPAR_RETURN_IF_ERROR(f.String("mpi", &out->mpi, false));
  TUNEPAR_RETURN_IF_ERROR(f.String("kernel_cache_dir", &out->kernel_cache_dir, false));
  TUNEPAR_RETURN_IF_ERROR(f.String("device_files", &out->device_files, false));
  TUNEPAR_RETURN_IF_ERROR(f.Bool("requires_account", &out->requires_account, false));
  TUNEPAR_RETURN_IF_ERROR(f.Bool("requires_partition", &out->requires_partition, false));
  TUNEPAR_RETURN_IF_ERROR(ReadStrings(f, "modules", &out->modules));
  TUNEPAR_RETURN_IF_ERROR(ReadCpuMasks(f, gpus_per_node, out));
  TUNEPAR_RETURN_IF_ERROR(ReadMpiPlugins(f, out));
  TUNEPAR_RETURN_IF_ERROR(ReadEnv(f, out));
  TUNEPAR_RETURN_IF_ERROR(ReadMemoryRequest(f, &out->memory));
  TUNEPAR_RETURN_IF_ERROR(ReadNetPlugin(f, &out->net_plugin));
  TUNEPAR_RETURN_IF_ERROR(ReadContainer(f, &out->container));
  return f.RejectUnknownKeys();
}

Status ReadCalibration(const toml::table& t, std::string_view source, CalibrationRecord* out) {
  TomlFields f(t, source, "calibration.");
  TUNEPAR_RETURN_IF_ERROR(f.String("data", &out->data));
  TUNEPAR_RETURN_IF_ERROR(f.String("date", &out->date));
  TUNEPAR_RETURN_IF_ERROR(f.PositiveInt("runs", &out->runs));
  TUNEPAR_RETURN_IF_ERROR(f.Number("mean_abs_error_pct", &out->mean_abs_error_pct));
  TUNEPAR_RETURN_IF_ERROR(f.Number("max_abs_error_pct", &out->max_abs_error_pct));
  const toml::node* fitted = f.Take("fitted");
  if (fitted == nullptr || !fitted->is_array())
    return f.Error("fitted", "must be an array of parameter names");
  for (const toml::node& name : *fitted->as_array()) {
    if (!name.is_string() || FindEfficiencyParameter(name.as_string()->get()) == nullptr)
      return f.ErrorAt(name, "fitted", "items must name efficiency parameters");
    out->fitted.push_back(name.as_string()->get());
  }
  return f.RejectUnknownKeys();
}

}  // namespace

Result<HardwareProfile> ParseHardwareProfile(std::string_view toml_text, std::string_view source,
                                             std::string_view file_stem) {
  Result<toml::table> doc = ParseToml(toml_text, source);
  if (!doc.ok()) return doc.status();
  TomlFields root(*doc, source);
  HardwareProfile p;
  const toml::table *device = nullptr, *node = nullptr, *efficiency = nullptr, *launch = nullptr,
                    *calibration = nullptr;
  TUNEPAR_RETURN_IF_ERROR(root.Name(&p.name, file_stem));
  TUNEPAR_RETURN_IF_ERROR(root.String("description", &p.description, false));
  TUNEPAR_RETURN_IF_ERROR(root.Table("device", &device));
  TUNEPAR_RETURN_IF_ERROR(root.Table("node", &node));
  TUNEPAR_RETURN_IF_ERROR(root.Table("efficiency", &efficiency, false));
  TUNEPAR_RETURN_IF_ERROR(root.Table("launch", &launch, false));
  TUNEPAR_RETURN_IF_ERROR(root.Table("calibration", &calibration, false));
  TUNEPAR_RETURN_IF_ERROR(root.RejectUnknownKeys());

  TomlFields d(*device, source, "device.");
  TUNEPAR_RETURN_IF_ERROR(d.String("name", &p.device_name));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(d, "peak_tflops_fp32", &p.peak_tflops_fp32));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(d, "peak_tflops_fp16", &p.peak_tflops_fp16));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(d, "peak_tflops_bf16", &p.peak_tflops_bf16));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(d, "peak_tflops_fp8", &p.peak_tflops_fp8, false));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(d, "memory_gb", &p.memory_gb));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(d, "memory_bandwidth_gbs", &p.memory_bandwidth_gbs));
  TUNEPAR_RETURN_IF_ERROR(d.RejectUnknownKeys());

  TomlFields n(*node, source, "node.");
  ProfileNumber gpus;
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(n, "gpus_per_node", &gpus));
  if (gpus.value != std::floor(gpus.value) || gpus.value > 1024)
    return n.Error("gpus_per_node", fmt::format("must be a whole number of devices, got {}", gpus.value));
  p.gpus_per_node = static_cast<int>(gpus.value);
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(n, "intra_node_bandwidth_gbs", &p.intra_node_bandwidth_gbs));
  ProfileNumber package_gpus;
  package_gpus.value = 1;
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(n, "gpus_per_package", &package_gpus, false));
  if (package_gpus.value != std::floor(package_gpus.value) ||
      p.gpus_per_node % static_cast<int>(package_gpus.value) != 0)
    return n.Error("gpus_per_package",
                   fmt::format("must be a whole number dividing gpus_per_node ({}), got {}", p.gpus_per_node,
                               package_gpus.value));
  p.gpus_per_package = static_cast<int>(package_gpus.value);
  TUNEPAR_RETURN_IF_ERROR(
      ReadNumber(n, "package_bandwidth_gbs", &p.package_bandwidth_gbs, p.gpus_per_package > 1));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(n, "nics_per_node", &p.nics_per_node));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(n, "nic_bandwidth_gbs", &p.nic_bandwidth_gbs));
  TUNEPAR_RETURN_IF_ERROR(n.RejectUnknownKeys());

  if (efficiency != nullptr) {
    TomlFields e(*efficiency, source, "efficiency.");
    for (auto&& [k, v] : *efficiency) {
      const EfficiencyParameter* param = FindEfficiencyParameter(k.str());
      if (param == nullptr) {
        std::string allowed;
        for (const EfficiencyParameter& q : EfficiencyParameters())
          allowed += (allowed.empty() ? "" : ", ") + std::string(q.name);
        return e.ErrorAt(v, k.str(), fmt::format("unknown efficiency parameter (known: {})", allowed));
      }
      ProfileNumber number;
      TUNEPAR_RETURN_IF_ERROR(ReadNumber(e, k.str(), &number, true, param->lo, param->hi, true));
      p.efficiency.emplace(std::string(k.str()), number);
    }
  }
  if (launch != nullptr) TUNEPAR_RETURN_IF_ERROR(ReadLaunch(*launch, source, p.gpus_per_node, &p.launch));
  if (calibration != nullptr) {
    p.calibration.emplace();
    TUNEPAR_RETURN_IF_ERROR(ReadCalibration(*calibration, source, &*p.calibration));
  }
  return p;
}

}  // namespace tunepar::runner
