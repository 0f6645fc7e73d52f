#include "tuner/problem.h"

#include <fmt/format.h>

namespace tunepar {

Result<Problem> LoadProblem(const std::string& model, const std::string& hardware, const std::string& space) {
  Result<ConfigText> m = ResolveConfig("models", model);
  if (!m.ok()) return m.status();
  Result<ConfigText> h = ResolveConfig("hardware", hardware);
  if (!h.ok()) return h.status();
  Result<ConfigText> s = ResolveConfig("spaces", space);
  if (!s.ok()) return s.status();
  return ParseProblem(std::move(*m), std::move(*h), std::move(*s));
}

Result<Problem> ParseProblem(ConfigText model, ConfigText hardware, ConfigText space) {
  Problem p;
  p.model_text = std::move(model);
  p.hardware_text = std::move(hardware);
  p.space_text = std::move(space);

  Result<ModelShape> shape = ParseModelShape(p.model_text.text, p.model_text.origin);
  if (!shape.ok()) return shape.status();
  Result<runner::HardwareProfile> profile =
      runner::ParseHardwareProfile(p.hardware_text.text, p.hardware_text.origin);
  if (!profile.ok()) return profile.status();
  Result<SpaceSpec> spec = ParseSpaceSpec(p.space_text.text, p.space_text.origin);
  if (!spec.ok()) return spec.status();
  p.model = std::move(*shape);
  p.hardware = std::move(*profile);
  p.space = std::move(*spec);
  return p;
}

Status CheckWorld(int64_t world, const runner::HardwareProfile& hw) {
  if (world < 1)
    return InvalidArgument(fmt::format("--world must be a positive number of GPUs, got {}", world));
  if (world > (1 << 24)) return InvalidArgument(fmt::format("--world {} is beyond any machine", world));
  if (world > hw.gpus_per_node && world % hw.gpus_per_node != 0) {
    return InvalidArgument(fmt::format(
        "--world {} does not fill whole nodes of {} GPUs ({}); use a multiple of {} (or at most {})", world,
        hw.gpus_per_node, hw.name, hw.gpus_per_node, hw.gpus_per_node));
  }
  return Status::Ok();
}

search::SpaceQuery MakeSpaceQuery(const Problem& p, int world) {
  return search::SpaceQuery{world, p.hardware.gpus_per_node, &p.model, &p.space};
}

}  // namespace tunepar
