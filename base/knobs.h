// The knob table: one row per layout knob, and every list of knobs in tunepar iterates it.
//
// A row says how the knob is named (space files, --fix, JSON, CSV: its name; --fix and command
// placeholders also take its aliases; `predict` its flag), what its values are (sizes dividing
// something, switches, named choices, a stage number) as small integer codes, its neutral value
// (what a program runs with when it is not told), what a space file lists without it, where it
// nests in the enumeration of a space, how the search encodes it, its fragment of the layout
// key, and where the layout keeps it. The legality rules that involve a knob are named
// predicates in base/layout_rules.h; its physics is in the performance model and the core.
//
// dp and the micro-batch count are not knobs: they follow from tp, pp and micro_batch for a
// fixed world and global batch (Layout::World, Layout::GlobalBatch).
//
// Ids and keys survive new rows: a row added after the nine knobs of 2026-11 (`in_every_key`
// false) enters a layout key only when its value is not neutral, so every layout of a stored
// study keeps its key, its claim files and its indexed row.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/layout.h"
#include "base/status.h"

namespace tunepar {

// The knobs with a field of their own in Layout, in table order. A row added at run time (a
// test-only knob) is the Knob whose value is its index in the table.
enum class Knob : int {
  kTp,
  kPp,
  kMicroBatch,
  kPrecision,
  kZero,
  kRecompute,
  kSeqParallel,
  kVirtualStages,
  kFlashAttention,
  kDpReplicate,
  kCp,
  kUnevenStages,
  kEp
};

enum class KnobKind {
  kSize,    // a positive size: a parallel degree, a batch, a count of chunks
  kSwitch,  // off (0) or on (1)
  kChoice,  // one of named values (precision, recomputation); the code indexes `choices`
  kStage,   // a small stage number from `min` to `max` (ZeRO)
};

// How the search's Gaussian process sees the knob (search/encoding.h).
enum class KnobEncoding {
  kLog2,      // sizes: log2 of the value
  kOrdinal,   // the code, ordered
  kBinary,    // 0 / 1
  kCategory,  // unordered: one coordinate per value (two values: one 0/1 coordinate)
};

// What of the model a space's model-derived candidates follow: its experts and its sequence.
struct ModelExtent {
  int experts = 0;
  int seq_len = 0;
};

// Context parallelism a space offers by default keeps at least this many tokens of a sequence on
// each rank (Llama 3 405B's 131072-token stage ran cp 16: 8192 tokens a rank, Dubey et al. 2024
// section 3.3.2); shorter sequences are not split unless a space lists cp.
inline constexpr int kMinTokensPerContextRank = 8192;

// The candidate values of a knob in a space: an explicit list of codes, or (for sizes that may
// say so) every divisor of the world size, or (ep, when a space omits it) every divisor of the
// model's experts: 1 alone for a dense model, so its space and study are what they were, or (cp,
// when a space omits it) the powers of two that leave each rank kMinTokensPerContextRank tokens
// or more: 1 alone for sequences under 16384 tokens.
struct KnobCandidates {
  bool divisors_of_world = false;
  std::vector<int> codes;  // used when none of the model-derived lists below is asked for
  bool divisors_of_experts = false;
  bool sequence_splits = false;

  std::vector<int> For(int world, ModelExtent model = {}) const;
  bool operator==(const KnobCandidates&) const = default;
};
using SizeCandidates = KnobCandidates;

struct KnobRow {
  std::string_view name;                  // "seq_parallel"
  std::vector<std::string_view> aliases;  // "sp": accepted by --fix, also a command placeholder
  std::string_view flag;                  // predict's option, e.g. "--seq-parallel"
  std::string_view column;                // trial tables' column, e.g. "sp"
  std::string_view key_prefix;            // the key fragment is prefix + value: "sp1", "rcfull", "bf16"
  KnobKind kind = KnobKind::kSize;
  std::vector<std::string_view> choices;  // kChoice: the value texts, by code
  std::string_view choice_noun;           // kChoice: "precision", "recomputation" (messages)
  int min = 1, max = 1 << 24;             // the codes a space file may list
  int neutral = -1;                       // the code a program runs with untold; -1: none
  KnobCandidates space_default;           // what a space file that omits the knob gets
  bool space_requires = false;            // a space file must list the knob
  bool space_divisors = false;            // a space file may say "divisors"
  int visit_rank = 0;                     // the space's enumeration nests knobs by this, outermost first
  KnobEncoding encoding = KnobEncoding::kLog2;
  bool in_every_key = false;              // the knobs of 2026-11; later ones enter keys when not neutral
  std::string_view help;
  // Where the layout keeps the value; a row without them keeps it by name (Layout::more_knobs).
  int (*get)(const Layout&) = nullptr;
  void (*set)(Layout&, int) = nullptr;
};

// Every row, in table order (the order of keys, tables, encodings and Shapley players).
const std::vector<KnobRow>& KnobRows();
const KnobRow& RowOf(Knob knob);
std::vector<Knob> Knobs();             // in table order
std::vector<Knob> KnobsInVisitOrder();  // the enumeration's nesting, outermost first
int NumKnobs();

// Adds a row for the life of this object (a test's own knob; not thread-safe, one at a time).
class ScopedKnobRow {
 public:
  explicit ScopedKnobRow(KnobRow row);
  ~ScopedKnobRow();
  ScopedKnobRow(const ScopedKnobRow&) = delete;
  ScopedKnobRow& operator=(const ScopedKnobRow&) = delete;
  Knob knob() const { return knob_; }

 private:
  Knob knob_;
};

std::string_view KnobName(Knob knob);                    // "tp", "micro_batch", ... (as in space files)
std::string KnobValue(Knob knob, const Layout& layout);  // "8", "bf16", "on", "full", ...
// By name or alias ("micro_batch" or "mbs").
Result<Knob> ParseKnobName(std::string_view name);
// "expected tp, pp, micro_batch, ... or flash_attention": every knob's name, for messages.
std::string KnobNamesExpected();

// A knob's value as an integer: sizes as themselves, choices by their index, switches 0 / 1.
int KnobCode(Knob knob, const Layout& layout);
// `layout` with the knob set to `code` (derived sizes left as they are).
Layout WithKnob(Layout layout, Knob knob, int code);
// The value's text as KnobValue prints it, and its layout-key fragment ("tp4", "bf16", "rcfull").
std::string KnobValueText(Knob knob, int code);
std::string KnobFragment(Knob knob, int code);
// The value as a command placeholder or a CSV cell holds it: switches 1 / 0, choices by name,
// sizes as numbers.
std::string KnobPlaceholderText(Knob knob, int code);
// The value as a space file writes it: 4, "bf16", "full", true.
std::string KnobTomlItem(Knob knob, int code);
// The inverse of KnobFragment: which knob and value a fragment names.
Result<std::pair<Knob, int>> ParseKnobFragment(std::string_view fragment);
// A value as a user writes it ("4", "bf16", "full", "on"/"off"/"true"/"false"/"1"/"0").
Result<int> ParseKnobValue(Knob knob, std::string_view text);

// The value a program runs with when it is not told: 1 for sizes, off, no ZeRO, no
// recomputation; micro_batch and precision have none (-1).
int NeutralKnobCode(Knob knob);
// Values beyond a space's that show whether a program receives the knob at all.
std::vector<int> ProbeCodes(Knob knob);

// The layout's fields as tables, CSV files and JSON list them: every knob in table order, with dp
// after pp and the micro-batch count after micro_batch.
struct LayoutField {
  std::string_view name;    // "tp", "dp", "num_micro_batches", "precision", ...
  std::string_view column;  // a text table's header: "tp", "dp", "nmb", "prec", ...
  int knob = -1;            // the Knob; -1 for dp and the micro-batch count
};
std::vector<LayoutField> LayoutFields();
int LayoutFieldCode(const LayoutField& field, const Layout& layout);
std::string LayoutFieldText(const LayoutField& field, const Layout& layout);  // as KnobValue: "on", "bf16", "4"
std::string LayoutFieldCell(const LayoutField& field, const Layout& layout);  // as a CSV cell: "1", "bf16", "4"

}  // namespace tunepar
