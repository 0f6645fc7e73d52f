#include "runner/hardware_profile.h"

#include <cmath>

#include <fmt/format.h>

#include "search/toml_fields.h"

namespace tunepar::runner {

using search::TomlFields;

std::string_view ToString(NumberOrigin origin) {
  switch (origin) {
    case NumberOrigin::kPublished: return "published";
    case NumberOrigin::kMeasured: return "measured";
    case NumberOrigin::kFitted: return "fitted";
    case NumberOrigin::kAssumed: return "assumed";
  }
  return "?";
}

double HardwareProfile::PeakFlops(search::Precision precision) const {
  switch (precision) {
    case search::Precision::kFp32: return peak_tflops_fp32.value * 1e12;
    case search::Precision::kFp16: return peak_tflops_fp16.value * 1e12;
    case search::Precision::kBf16: return peak_tflops_bf16.value * 1e12;
  }
  return 0.0;
}

namespace {

constexpr std::string_view kNumberForm =
    "must be a table { value = <number>, origin = \"published\"|\"measured\"|\"fitted\"|\"assumed\", "
    "source = \"...\" }";

// Reads `key` = { value = x, origin = "...", source = "..." }; value must be > 0.
Status ReadNumber(TomlFields& f, std::string_view key, ProfileNumber* out, bool required = true) {
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
  if (!(out->value > 0) || !std::isfinite(out->value))
    return n.Error("value", fmt::format("must be a positive number, got {}", out->value));
  if (out->source.empty()) return n.Error("source", "must say where the number comes from");
  return Status::Ok();
}

Status ReadLaunch(const toml::table& t, std::string_view source, int gpus_per_node, LaunchSettings* out) {
  TomlFields f(t, source, "launch.");
  TUNEPAR_RETURN_IF_ERROR(f.String("visible_devices_env", &out->visible_devices_env, false));
  TUNEPAR_RETURN_IF_ERROR(f.PositiveInt("cpus_per_task", &out->cpus_per_task));
  TUNEPAR_RETURN_IF_ERROR(f.String("mpi", &out->mpi, false));
  TUNEPAR_RETURN_IF_ERROR(f.String("kernel_cache_dir", &out->kernel_cache_dir, false));
  if (const toml::node* masks = f.Take("cpu_masks")) {
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
      return f.Error("cpu_masks",
                     fmt::format("lists {} masks; node.gpus_per_node is {} (one mask per local rank)",
                                 out->cpu_masks.size(), gpus_per_node));
  }
  const toml::table* env = nullptr;
  TUNEPAR_RETURN_IF_ERROR(f.Table("env", &env, false));
  if (env != nullptr) {
    for (auto&& [k, v] : *env) {
      if (!v.is_string())
        return f.ErrorAt(v, "env." + std::string(k.str()), "environment values must be strings");
      out->env.emplace_back(std::string(k.str()), v.as_string()->get());
    }
  }
  return f.RejectUnknownKeys();
}

}  // namespace

Result<HardwareProfile> ParseHardwareProfile(std::string_view toml_text, std::string_view source) {
  Result<toml::table> doc = search::ParseToml(toml_text, source);
  if (!doc.ok()) return doc.status();
  TomlFields root(*doc, source);
  HardwareProfile p;
  const toml::table *device = nullptr, *node = nullptr, *efficiency = nullptr, *launch = nullptr;
  TUNEPAR_RETURN_IF_ERROR(root.String("name", &p.name));
  TUNEPAR_RETURN_IF_ERROR(root.String("description", &p.description, false));
  TUNEPAR_RETURN_IF_ERROR(root.Table("device", &device));
  TUNEPAR_RETURN_IF_ERROR(root.Table("node", &node));
  TUNEPAR_RETURN_IF_ERROR(root.Table("efficiency", &efficiency, false));
  TUNEPAR_RETURN_IF_ERROR(root.Table("launch", &launch, false));
  TUNEPAR_RETURN_IF_ERROR(root.RejectUnknownKeys());
  if (p.name.empty()) return root.Error("name", "must not be empty");

  TomlFields d(*device, source, "device.");
  TUNEPAR_RETURN_IF_ERROR(d.String("name", &p.device_name));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(d, "peak_tflops_fp32", &p.peak_tflops_fp32));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(d, "peak_tflops_fp16", &p.peak_tflops_fp16));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(d, "peak_tflops_bf16", &p.peak_tflops_bf16));
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
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(n, "nics_per_node", &p.nics_per_node));
  TUNEPAR_RETURN_IF_ERROR(ReadNumber(n, "nic_bandwidth_gbs", &p.nic_bandwidth_gbs));
  TUNEPAR_RETURN_IF_ERROR(n.RejectUnknownKeys());

  if (efficiency != nullptr) {
    TomlFields e(*efficiency, source, "efficiency.");
    for (auto&& [k, v] : *efficiency) {
      ProfileNumber number;
      TUNEPAR_RETURN_IF_ERROR(ReadNumber(e, k.str(), &number));
      p.efficiency.emplace(std::string(k.str()), number);
    }
  }
  if (launch != nullptr) TUNEPAR_RETURN_IF_ERROR(ReadLaunch(*launch, source, p.gpus_per_node, &p.launch));
  return p;
}

}  // namespace tunepar::runner
