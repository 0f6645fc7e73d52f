#include "base/knobs.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include <fmt/format.h>

namespace tunepar {

namespace {

std::vector<int> SequenceSplits(int seq_len) {
  std::vector<int> splits = {1};
  for (int cp = 2; seq_len / cp >= kMinTokensPerContextRank && seq_len % (2 * cp) == 0; cp *= 2) splits.push_back(cp);
  return splits;
}

}  // namespace

std::vector<int> KnobCandidates::For(int world, ModelExtent model) const {
  if (sequence_splits) return SequenceSplits(model.seq_len);
  if (!divisors_of_world && !divisors_of_experts) return codes;
  const int n = divisors_of_world ? world : std::max(1, model.experts);
  std::vector<int> divisors;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) divisors.push_back(d);
  }
  return divisors;
}

namespace {

// The rows of the knobs Layout has fields for. Accessors are captureless lambdas over the field.
#define TUNEPAR_FIELD(field) \
  [](const Layout& l) { return static_cast<int>(l.field); }, [](Layout& l, int v) { l.field = v; }
#define TUNEPAR_ENUM_FIELD(field, type) \
  [](const Layout& l) { return static_cast<int>(l.field); }, [](Layout& l, int v) { l.field = static_cast<type>(v); }
#define TUNEPAR_SWITCH_FIELD(field) \
  [](const Layout& l) { return l.field ? 1 : 0; }, [](Layout& l, int v) { l.field = v != 0; }

std::vector<KnobRow> BuiltInRows() {
  using K = KnobKind;
  using E = KnobEncoding;
  return {
      {"tp", {}, "--tp", "tp", "tp", K::kSize, {}, "", 1, 1 << 24, 1, {true, {}}, false, true, 0, E::kLog2, true,
       "Tensor-parallel size: ranks that split every layer's matrices", TUNEPAR_FIELD(tp)},
      {"pp", {}, "--pp", "pp", "pp", K::kSize, {}, "", 1, 1 << 24, 1, {true, {}}, false, true, 1, E::kLog2, true,
       "Pipeline-parallel size: stages the layers are split into", TUNEPAR_FIELD(pp)},
      {"micro_batch", {"mbs"}, "--mbs", "mbs", "mbs", K::kSize, {}, "", 1, 1 << 20, -1, {false, {1, 2, 4, 8}},
       true, false, 2, E::kLog2, true, "Micro-batch size: sequences per micro-batch", TUNEPAR_FIELD(micro_batch)},
      {"precision", {}, "--precision", "prec", "", K::kChoice, {"fp32", "fp16", "bf16", "fp8"}, "precision", 0, 3,
       -1, {false, {2}}, false, false, 4, E::kCategory, true,
       "Storage and math precision of weights and activations (fp8: bf16 storage, FP8 layer GEMMs)",
       TUNEPAR_ENUM_FIELD(precision, Precision)},
      {"zero", {}, "--zero", "zero", "zero", K::kStage, {}, "", 0, 3, 0, {false, {0}}, false, false, 6, E::kOrdinal,
       true,
       "ZeRO stage: 0 replicates the model states; over dp, 1 shards the optimizer states, 2 the gradients too, "
       "3 the weights too (FSDP)",
       TUNEPAR_FIELD(zero)},
      {"recompute", {}, "--recompute", "recomp", "rc", K::kChoice, {"none", "selective", "full"}, "recomputation",
       0, 2, 0, {false, {0}}, false, false, 7, E::kOrdinal, true,
       "Activation recomputation: none, selective (attention scores) or full (whole layers)",
       TUNEPAR_ENUM_FIELD(recompute, Recompute)},
      {"seq_parallel", {"sp"}, "--seq-parallel", "sp", "sp", K::kSwitch, {}, "", 0, 1, 0, {false, {0}}, false,
       false, 8, E::kBinary, true, "Sequence parallelism: norms and dropout split over the tp ranks",
       TUNEPAR_SWITCH_FIELD(seq_parallel)},
      {"virtual_stages", {"vpp"}, "--vpp", "vpp", "vpp", K::kSize, {}, "", 1, 1024, 1, {false, {1}}, false, false,
       3, E::kLog2, true, "Virtual pipeline stages: model chunks per pipeline rank (interleaving)",
       TUNEPAR_FIELD(virtual_stages)},
      {"flash_attention", {"flash"}, "--flash", "flash", "fa", K::kSwitch, {}, "", 0, 1, 0, {false, {0}}, false,
       false, 5, E::kBinary, true, "Fused (flash) attention: no stored attention scores",
       TUNEPAR_SWITCH_FIELD(flash_attention)},
      {"dp_replicate", {"dpr"}, "--dp-replicate", "dpr", "dpr", K::kSize, {}, "", 1, 1 << 20, 1, {false, {1}}, false,
       false, 9, E::kLog2, false,
       "Hybrid sharding (HSDP): dp splits into this many replicas, ZeRO shards inside each (1: over all of dp)",
       TUNEPAR_FIELD(dp_replicate)},
      // Nested right after tp (the same visit rank, later in the table): dp follows from pp once
      // tp and cp are set.
      {"cp", {"context_parallel"}, "--cp", "cp", "cp", K::kSize, {}, "", 1, 1 << 20, 1, {false, {}, false, true}, false, true,
       0, E::kLog2, false,
       "Context-parallel size: ranks that split every sequence (2 cp chunks, causally balanced), "
       "passing K/V around a ring",
       TUNEPAR_FIELD(cp)},
      // Nested right after pp: whether pp must divide the layers is decided here.
      {"uneven_stages", {}, "--uneven-stages", "uneven", "uneven", K::kSwitch, {}, "", 0, 1, 0, {false, {0}}, false,
       false, 1, E::kBinary, false,
       "Uneven pipeline stages: Megatron-LM's first/last-stage layer counts, balanced against the "
       "embedding and head (base/pipeline_split.h)",
       TUNEPAR_SWITCH_FIELD(uneven_stages)},
      // Nested right after tp and cp (the same visit rank, later in the table), so that a dense
      // model's ep > 1 fails at once; whether ep divides dp x cp is decided at pp.
      {"ep", {"expert_parallel"}, "--ep", "ep", "ep", K::kSize, {}, "", 1, 1 << 20, 1, {false, {}, true}, false,
       false, 0, E::kLog2, false,
       "Expert-parallel size: ranks of the dp x cp group that split a MoE layer's experts (expert "
       "tensor parallelism = tp); a space that omits it offers the divisors of the model's experts",
       TUNEPAR_FIELD(ep)},
  };
}

#undef TUNEPAR_FIELD
#undef TUNEPAR_ENUM_FIELD
#undef TUNEPAR_SWITCH_FIELD

std::vector<KnobRow>& MutableRows() {
  static std::vector<KnobRow> rows = BuiltInRows();
  return rows;
}

std::optional<int> NonNegativeInteger(std::string_view text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v < 0) return std::nullopt;
  return v;
}

// "a, b or c"
std::string Alternatives(const std::vector<std::string_view>& words) {
  std::string text;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) text += i + 1 == words.size() ? " or " : ", ";
    text += words[i];
  }
  return text;
}

Result<int> ParseChoice(const KnobRow& row, std::string_view text) {
  for (size_t i = 0; i < row.choices.size(); ++i) {
    if (row.choices[i] == text) return static_cast<int>(i);
  }
  return InvalidArgument(
      fmt::format("unknown {} '{}' (expected {})", row.choice_noun, text, Alternatives(row.choices)));
}

}  // namespace

const std::vector<KnobRow>& KnobRows() { return MutableRows(); }

const KnobRow& RowOf(Knob knob) { return MutableRows().at(static_cast<size_t>(knob)); }

int NumKnobs() { return static_cast<int>(MutableRows().size()); }

std::vector<Knob> Knobs() {
  std::vector<Knob> knobs;
  for (int i = 0; i < NumKnobs(); ++i) knobs.push_back(static_cast<Knob>(i));
  return knobs;
}

std::vector<Knob> KnobsInVisitOrder() {
  std::vector<Knob> knobs = Knobs();
  std::stable_sort(knobs.begin(), knobs.end(),
                   [](Knob a, Knob b) { return RowOf(a).visit_rank < RowOf(b).visit_rank; });
  return knobs;
}

ScopedKnobRow::ScopedKnobRow(KnobRow row) : knob_(static_cast<Knob>(NumKnobs())) {
  MutableRows().push_back(std::move(row));
}

ScopedKnobRow::~ScopedKnobRow() { MutableRows().pop_back(); }

std::string_view KnobName(Knob knob) { return RowOf(knob).name; }

Result<Knob> ParseKnobName(std::string_view name) {
  for (Knob k : Knobs()) {
    if (KnobName(k) == name) return k;
  }
  for (Knob k : Knobs()) {
    const std::vector<std::string_view>& aliases = RowOf(k).aliases;
    if (std::find(aliases.begin(), aliases.end(), name) != aliases.end()) return k;
  }
  return InvalidArgument(fmt::format("unknown knob '{}' ({})", name, KnobNamesExpected()));
}

std::string KnobNamesExpected() {
  std::vector<std::string_view> names;
  for (const KnobRow& row : KnobRows()) names.push_back(row.name);
  return "expected " + Alternatives(names);
}

int KnobCode(Knob knob, const Layout& l) {
  const KnobRow& row = RowOf(knob);
  if (row.get != nullptr) return row.get(l);
  const auto it = l.more_knobs.find(row.name);
  return it == l.more_knobs.end() ? row.neutral : it->second;
}

Layout WithKnob(Layout l, Knob knob, int code) {
  const KnobRow& row = RowOf(knob);
  if (row.set != nullptr) {
    row.set(l, code);
  } else if (code == row.neutral) {
    l.more_knobs.erase(std::string(row.name));
  } else {
    l.more_knobs[std::string(row.name)] = code;
  }
  return l;
}

std::string KnobValueText(Knob knob, int code) {
  const KnobRow& row = RowOf(knob);
  if (row.kind == KnobKind::kChoice)
    return code >= 0 && code < static_cast<int>(row.choices.size()) ? std::string(row.choices[code]) : "?";
  if (row.kind == KnobKind::kSwitch) return code != 0 ? "on" : "off";
  return std::to_string(code);
}

std::string KnobValue(Knob knob, const Layout& l) { return KnobValueText(knob, KnobCode(knob, l)); }

std::string KnobFragment(Knob knob, int code) {
  const KnobRow& row = RowOf(knob);
  if (row.kind == KnobKind::kChoice) return fmt::format("{}{}", row.key_prefix, KnobValueText(knob, code));
  return fmt::format("{}{}", row.key_prefix, code);
}

std::string KnobPlaceholderText(Knob knob, int code) {
  if (RowOf(knob).kind == KnobKind::kChoice) return KnobValueText(knob, code);
  return std::to_string(code);
}

std::string KnobTomlItem(Knob knob, int code) {
  const KnobKind kind = RowOf(knob).kind;
  if (kind == KnobKind::kChoice) return fmt::format("\"{}\"", KnobValueText(knob, code));
  if (kind == KnobKind::kSwitch) return code != 0 ? "true" : "false";
  return std::to_string(code);
}

Result<std::pair<Knob, int>> ParseKnobFragment(std::string_view fragment) {
  // The longest prefix that fits wins ("vpp2" is virtual_stages, not a "pp" fragment).
  std::optional<std::pair<Knob, int>> best;
  size_t best_prefix = 0;
  for (Knob k : Knobs()) {
    const KnobRow& row = RowOf(k);
    if (fragment.substr(0, row.key_prefix.size()) != row.key_prefix) continue;
    if (best && row.key_prefix.size() < best_prefix) continue;
    const std::string_view rest = fragment.substr(row.key_prefix.size());
    std::optional<int> code;
    if (row.kind == KnobKind::kChoice) {
      if (Result<int> c = ParseChoice(row, rest); c.ok()) code = *c;
    } else if (std::optional<int> v = NonNegativeInteger(rest); v && *v >= row.min &&
                                                                (row.kind == KnobKind::kSize || *v <= row.max)) {
      code = *v;
    }
    if (!code) continue;
    best = std::pair{k, *code};
    best_prefix = row.key_prefix.size();
  }
  if (best) return *best;
  return InvalidArgument(fmt::format(
      "'{}' names no knob value (expected e.g. tp4, mbs2, bf16, zero1, rcfull, sp0, vpp1, fa0)", fragment));
}

Result<int> ParseKnobValue(Knob knob, std::string_view text) {
  const KnobRow& row = RowOf(knob);
  if (row.kind == KnobKind::kChoice) return ParseChoice(row, text);
  if (row.kind == KnobKind::kSwitch) {
    if (text == "on" || text == "true" || text == "1") return 1;
    if (text == "off" || text == "false" || text == "0") return 0;
    return InvalidArgument(fmt::format("{} is on or off, not '{}'", row.name, text));
  }
  std::optional<int> v = NonNegativeInteger(text);
  if (!v || *v < row.min || (row.kind == KnobKind::kStage && *v > row.max)) {
    const std::string expected = row.kind == KnobKind::kStage
                                     ? fmt::format("{} to {}", row.min, row.max)
                                     : std::string(row.min >= 1 ? "a positive integer" : "an integer >= 0");
    return InvalidArgument(fmt::format("{} = '{}': expected {}", row.name, text,
                                       row.kind == KnobKind::kStage && row.max == row.min + 1
                                           ? fmt::format("{} or {}", row.min, row.max)
                                           : expected));
  }
  return *v;
}

int NeutralKnobCode(Knob knob) { return RowOf(knob).neutral; }

std::vector<int> ProbeCodes(Knob knob) {
  const KnobRow& row = RowOf(knob);
  std::vector<int> codes;
  if (row.kind == KnobKind::kSize) return {1, 2, 3, 4};
  for (int code = row.min; code <= row.max; ++code) codes.push_back(code);
  return codes;
}

std::vector<LayoutField> LayoutFields() {
  std::vector<LayoutField> fields;
  for (Knob k : Knobs()) {
    fields.push_back({RowOf(k).name, RowOf(k).column, static_cast<int>(k)});
    if (k == Knob::kPp) fields.push_back({"dp", "dp", -1});
    if (k == Knob::kMicroBatch) fields.push_back({"num_micro_batches", "nmb", -1});
  }
  return fields;
}

int LayoutFieldCode(const LayoutField& f, const Layout& l) {
  if (f.knob >= 0) return KnobCode(static_cast<Knob>(f.knob), l);
  return f.name == "dp" ? l.dp : l.num_micro_batches;
}

std::string LayoutFieldText(const LayoutField& f, const Layout& l) {
  const int code = LayoutFieldCode(f, l);
  return f.knob >= 0 ? KnobValueText(static_cast<Knob>(f.knob), code) : std::to_string(code);
}

std::string LayoutFieldCell(const LayoutField& f, const Layout& l) {
  const int code = LayoutFieldCode(f, l);
  return f.knob >= 0 ? KnobPlaceholderText(static_cast<Knob>(f.knob), code) : std::to_string(code);
}

}  // namespace tunepar
