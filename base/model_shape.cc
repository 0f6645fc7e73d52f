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

#define TUNEPAR_SHAPE_FIELD(field) \
  [](const ModelShape& m) { return static_cast<int>(m.field); }, [](ModelShape& m, int v) { m.field = v; }

const std::vector<ShapeRow>& ShapeRows() {
  static const std::vector<ShapeRow> rows = {
      {"layers", "L", true, false, "transformer layers", TUNEPAR_SHAPE_FIELD(layers)},
      {"hidden", "h", true, false, "hidden size", TUNEPAR_SHAPE_FIELD(hidden)},
      {"heads", "a", true, false, "attention heads", TUNEPAR_SHAPE_FIELD(heads)},
      {"seq_len", "s", true, false, "sequence length", TUNEPAR_SHAPE_FIELD(seq_len)},
      {"vocab", "V", true, false, "vocabulary size", TUNEPAR_SHAPE_FIELD(vocab)},
      {"global_batch", "B", true, false, "sequences per optimizer step (an input, not a knob)",
       TUNEPAR_SHAPE_FIELD(global_batch)},
      {"ffn_hidden", "f", false, false, "MLP width (default 4h)", TUNEPAR_SHAPE_FIELD(ffn_hidden)},
      {"tied_embeddings", "", false, true, "the LM head shares the token-embedding matrix (default true)",
       [](const ModelShape& m) { return m.tied_embeddings ? 1 : 0; },
       [](ModelShape& m, int v) { m.tied_embeddings = v != 0; }},
  };
  return rows;
}

#undef TUNEPAR_SHAPE_FIELD

namespace {

// One field of the shape table from the model file (absent and optional: left as it is).
Status ReadShapeField(TomlFields& f, const ShapeRow& row, ModelShape* m) {
  if (row.is_switch) {
    bool on = row.get(*m) != 0;
    TUNEPAR_RETURN_IF_ERROR(f.Bool(row.name, &on, row.required));
    row.set(*m, on ? 1 : 0);
    return Status::Ok();
  }
  int value = row.get(*m);
  TUNEPAR_RETURN_IF_ERROR(f.PositiveInt(row.name, &value, row.required));
  row.set(*m, value);
  return Status::Ok();
}

}  // namespace

Result<ModelShape> ParseModelShape(std::string_view toml_text, std::string_view source,
                                   std::string_view file_stem) {
  Result<toml::table> doc = ParseToml(toml_text, source);
  if (!doc.ok()) return doc.status();
  TomlFields f(*doc, source);
  ModelShape m;
  TUNEPAR_RETURN_IF_ERROR(f.Name(&m.name, file_stem));
  TUNEPAR_RETURN_IF_ERROR(f.String("description", &m.description, false));
  for (const ShapeRow& row : ShapeRows()) TUNEPAR_RETURN_IF_ERROR(ReadShapeField(f, row, &m));
  TUNEPAR_RETURN_IF_ERROR(f.RejectUnknownKeys());
  if (m.ffn_hidden == 0) m.ffn_hidden = DefaultMlpWidth(m.hidden);
  if (m.hidden % m.heads != 0) {
    return f.Error("heads", fmt::format("must divide hidden (hidden {} is not a multiple of {} heads)",
                                        m.hidden, m.heads));
  }
  return m;
}

}  // namespace tunepar
