#include "base/model_shape.h"

#include <fmt/format.h>

#include "base/toml_fields.h"

namespace tunepar {

double ModelShape::Parameters() const {
  const double h = hidden, f = MlpWidth(), L = layers;
  const double per_layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
  const double embeddings = (static_cast<double>(vocab) + seq_len) * h;
  const double lm_head = tied_embeddings ? 0.0 : static_cast<double>(vocab) * h;
  return L * per_layer + embeddings + lm_head + 2 * h;
}

Result<ModelShape> ParseModelShape(std::string_view toml_text, std::string_view source,
                                   std::string_view file_stem) {
  Result<toml::table> doc = ParseToml(toml_text, source);
  if (!doc.ok()) return doc.status();
  TomlFields f(*doc, source);
  ModelShape m;
  TUNEPAR_RETURN_IF_ERROR(f.Name(&m.name, file_stem));
  TUNEPAR_RETURN_IF_ERROR(f.String("description", &m.description, false));
  TUNEPAR_RETURN_IF_ERROR(f.PositiveInt("layers", &m.layers));
  TUNEPAR_RETURN_IF_ERROR(f.PositiveInt("hidden", &m.hidden));
  TUNEPAR_RETURN_IF_ERROR(f.PositiveInt("heads", &m.heads));
  TUNEPAR_RETURN_IF_ERROR(f.PositiveInt("seq_len", &m.seq_len));
  TUNEPAR_RETURN_IF_ERROR(f.PositiveInt("vocab", &m.vocab));
  TUNEPAR_RETURN_IF_ERROR(f.PositiveInt("global_batch", &m.global_batch));
  TUNEPAR_RETURN_IF_ERROR(f.PositiveInt("ffn_hidden", &m.ffn_hidden, false));
  TUNEPAR_RETURN_IF_ERROR(f.Bool("tied_embeddings", &m.tied_embeddings, false));
  TUNEPAR_RETURN_IF_ERROR(f.RejectUnknownKeys());
  if (m.ffn_hidden == 0) m.ffn_hidden = DefaultMlpWidth(m.hidden);
  if (m.hidden % m.heads != 0) {
    return f.Error("heads", fmt::format("must divide hidden (hidden {} is not a multiple of {} heads)",
                                        m.hidden, m.heads));
  }
  return m;
}

}  // namespace tunepar
