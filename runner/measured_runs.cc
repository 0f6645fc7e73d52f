#include "runner/measured_runs.h"

#include <cmath>
#include <charconv>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "base/flops.h"
#include "base/knobs.h"

namespace tunepar::runner {

double RecomputeCountedFlops(const ModelShape& m) {
  const double B = m.global_batch, s = m.seq_len, L = m.layers, h = m.hidden, V = m.vocab;
  return 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
}

double ModelFormulaFlops(const ModelShape& m) {
  const double B = m.global_batch, s = m.seq_len, L = m.layers, h = m.hidden, V = m.vocab;
  return 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L));
}

double LlmFoundryFlops(const ModelShape& m) {
  const double B = m.global_batch, s = m.seq_len, L = m.layers, h = m.hidden;
  return B * (6 * m.Parameters() * s + 12 * L * h * s * s);
}

std::optional<double> FlopsPerStepByFormula(const ModelShape& m, std::string_view formula) {
  if (formula == "recompute-counted") return RecomputeCountedFlops(m);
  if (formula == "model") return ModelFormulaFlops(m);
  if (formula == "megatron-full") return ModelFlopsPerStep(m, ScoreFlops::kFull);
  if (formula == "megatron-causal") return ModelFlopsPerStep(m, ScoreFlops::kCausalHalf);
  if (formula == "llm-foundry") return LlmFoundryFlops(m);
  return std::nullopt;
}

double MeasuredRun::FlopsPerStep() const {
  return FlopsPerStepByFormula(model, tflops_formula).value_or(ModelFormulaFlops(model));
}

namespace {

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.push_back(cell);
      cell.clear();
    } else if (c != '\r') {
      cell += c;
    }
  }
  cells.push_back(cell);
  for (std::string& x : cells) {
    const size_t b = x.find_first_not_of(' '), e = x.find_last_not_of(' ');
    x = b == std::string::npos ? "" : x.substr(b, e - b + 1);
  }
  return cells;
}

class Row {
 public:
  Row(const std::map<std::string, size_t>& columns, std::vector<std::string> cells, std::string where)
      : columns_(columns), cells_(std::move(cells)), where_(std::move(where)) {}

  const std::string& Text(const std::string& name) const {
    static const std::string kEmpty;
    auto it = columns_.find(name);
    return it == columns_.end() || it->second >= cells_.size() ? kEmpty : cells_[it->second];
  }
  Status Error(const std::string& column, const std::string& what) const {
    return ConfigError(fmt::format("{}: column '{}': {}", where_, column, what));
  }
  Status Int(const std::string& name, int* out, int min_value = 1) const {
    const std::string& text = Text(name);
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
      return Error(name, fmt::format("'{}' is not an integer", text));
    if (value < min_value) return Error(name, fmt::format("{} is below {}", value, min_value));
    *out = value;
    return Status::Ok();
  }
  Status Number(const std::string& name, double* out) const {
    const std::string& text = Text(name);
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(value > 0))
      return Error(name, fmt::format("'{}' is not a positive number", text));
    *out = value;
    return Status::Ok();
  }
  Status Flag(const std::string& name, bool* out) const {
    const std::string& text = Text(name);
    if (text.empty() || text == "0" || text == "false")
      *out = false;
    else if (text == "1" || text == "true")
      *out = true;
    else
      return Error(name, fmt::format("'{}' is not 0/1/true/false", text));
    return Status::Ok();
  }

 private:
  const std::map<std::string, size_t>& columns_;
  std::vector<std::string> cells_;
  std::string where_;
};

// The layout's knobs, one column each by the knob's name (base/knobs.h): a knob with a neutral
// value may be left out or empty (it ran with that value); one without (micro_batch, precision)
// is required.
Status ParseKnobs(const Row& r, Layout* l) {
  for (Knob k : Knobs()) {
    const KnobRow& row = RowOf(k);
    const std::string name(row.name);
    const std::string& text = r.Text(name);
    if (text.empty() && row.neutral >= 0) {
      *l = WithKnob(std::move(*l), k, row.neutral);
      continue;
    }
    int code = 0;
    if (row.kind == KnobKind::kSize || row.kind == KnobKind::kStage) {
      TUNEPAR_RETURN_IF_ERROR(r.Int(name, &code, row.min));
      if (row.kind == KnobKind::kStage && code > row.max) return r.Error(name, fmt::format("{} is above {}", code, row.max));
    } else if (row.kind == KnobKind::kSwitch) {
      bool on = false;
      TUNEPAR_RETURN_IF_ERROR(r.Flag(name, &on));
      code = on ? 1 : 0;
    } else {
      Result<int> value = ParseKnobValue(k, text);
      if (!value.ok()) return r.Error(name, value.status().message());
      code = *value;
    }
    *l = WithKnob(std::move(*l), k, code);
  }
  return Status::Ok();
}

// The model's shape, one column per field of the shape table: the required ones must be there,
// the others may be left out or empty (ffn_hidden then 4h, embeddings tied).
Status ParseShape(const Row& r, ModelShape* m) {
  for (const ShapeRow& row : ShapeRows()) {
    const std::string name(row.name);
    if (!row.required && r.Text(name).empty()) continue;
    int value = 0;
    if (!row.choices.empty()) {
      value = ShapeChoiceIndex(row, r.Text(name));
      if (value < 0) return r.Error(name, fmt::format("unknown {} '{}'", name, r.Text(name)));
    } else if (row.is_switch) {
      bool on = false;
      TUNEPAR_RETURN_IF_ERROR(r.Flag(name, &on));
      value = on ? 1 : 0;
    } else if (row.decimals > 0) {  // capacity_factor: 1.25, held in hundredths (0: none)
      double number = 0;
      if (r.Text(name) != "0") TUNEPAR_RETURN_IF_ERROR(r.Number(name, &number));
      value = static_cast<int>(std::lround(number * std::pow(10.0, row.decimals)));
    } else {
      TUNEPAR_RETURN_IF_ERROR(r.Int(name, &value, row.min));
    }
    row.set(*m, value);
  }
  const bool ffn_given = m->ffn_hidden != 0;
  if (m->ffn_hidden == 0) m->ffn_hidden = DefaultMlpWidth(m->hidden);
  if (m->kv_heads == 0) m->kv_heads = m->heads;
  const ShapeRule broken = BrokenShapeRule(*m, ffn_given);
  if (!broken.field.empty()) return r.Error(broken.field, broken.rule);
  return Status::Ok();
}

Status ParseRow(const Row& r, MeasuredRun* run) {
  ModelShape& m = run->model;
  Layout& l = run->layout;
  run->label = r.Text("label");
  run->source = r.Text("source");
  m.name = run->label;
  int gpus = 0;
  TUNEPAR_RETURN_IF_ERROR(ParseShape(r, &m));
  TUNEPAR_RETURN_IF_ERROR(r.Int("gpus", &gpus));
  TUNEPAR_RETURN_IF_ERROR(ParseKnobs(r, &l));
  if (!r.Text("ranks_per_node").empty()) TUNEPAR_RETURN_IF_ERROR(r.Int("ranks_per_node", &run->ranks_per_node, 0));
  if (gpus % (l.tp * l.cp * l.pp) != 0)
    return r.Error("gpus", fmt::format("{} is not a multiple of tp x cp x pp", gpus));
  l.dp = gpus / (l.tp * l.cp * l.pp);
  if (m.global_batch % (l.micro_batch * l.dp) != 0)
    return r.Error("global_batch", fmt::format("{} is not a multiple of micro_batch x dp = {}",
                                               m.global_batch, l.micro_batch * l.dp));
  l.num_micro_batches = m.global_batch / (l.micro_batch * l.dp);

  if (!r.Text("step_time_s").empty()) return r.Number("step_time_s", &run->step_time_s);
  double tflops = 0;
  TUNEPAR_RETURN_IF_ERROR(r.Number("tflops_per_gpu", &tflops));
  const std::string& formula = r.Text("tflops_formula");
  const std::optional<double> flops = FlopsPerStepByFormula(m, formula);
  if (!flops)
    return r.Error("tflops_formula",
                   fmt::format("'{}' is not recompute-counted, model, megatron-full, megatron-causal or llm-foundry", formula));
  run->tflops_formula = formula;
  run->step_time_s = *flops / (tflops * 1e12 * gpus);
  return Status::Ok();
}

}  // namespace

Result<std::vector<MeasuredRun>> ParseMeasuredRuns(std::string_view csv_text, std::string_view source) {
  std::istringstream in{std::string(csv_text)};
  std::string line;
  std::map<std::string, size_t> columns;
  std::vector<MeasuredRun> runs;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty() || line[0] == '#' || line.find_first_not_of(" \r") == std::string::npos) continue;
    std::vector<std::string> cells = SplitCsvLine(line);
    if (columns.empty()) {
      for (size_t i = 0; i < cells.size(); ++i) columns[cells[i]] = i;
      std::vector<std::string> required = {"gpus"};
      for (const ShapeRow& row : ShapeRows()) {
        if (row.required) required.emplace_back(row.name);
      }
      for (Knob k : Knobs()) {
        if (NeutralKnobCode(k) < 0) required.emplace_back(KnobName(k));
      }
      for (const std::string& required : required) {
        if (columns.count(required) == 0)
          return ConfigError(
              fmt::format("{}:{}: header lacks the column '{}'", source, line_number, required));
      }
      if (columns.count("step_time_s") == 0 && columns.count("tflops_per_gpu") == 0)
        return ConfigError(
            fmt::format("{}:{}: header needs step_time_s or tflops_per_gpu", source, line_number));
      continue;
    }
    MeasuredRun run;
    TUNEPAR_RETURN_IF_ERROR(
        ParseRow(Row(columns, std::move(cells), fmt::format("{}:{}", source, line_number)), &run));
    if (run.label.empty()) run.label = fmt::format("row{}", runs.size() + 1);
    runs.push_back(std::move(run));
  }
  if (runs.empty()) return ConfigError(fmt::format("{}: no measured runs", source));
  return runs;
}

}  // namespace tunepar::runner
